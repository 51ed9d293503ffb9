// num_workers under a time budget, from the estimate (tuner/search/workers.cc
// starts there): the estimate from the baseline (StartEstimate,
// tuner/search/worker_estimate.h) and, after the doubling up from it, the
// halving down below it to the knee's lower neighbour (HalveDown).
//
// What it measures: from the fewest workers measured, half as many, while
// the knee may lie lower: while that count is within knee_tolerance of the
// best on the curve, or no count with workers has gained over the baseline
// (the estimate overshot). A count whose latency bound lies more than
// kSettledBelow below the best is measured in one window first, and settled
// by it when that window lies so far below too.
//
// What it keeps: nothing itself; the points join the curve, whose knee the
// num_workers phase names by its rule (tuner/search/workers.cc).
#include <algorithm>

#include "results/units.h"
#include "tuner/search/phases.h"

namespace feedtune::tuner::search_internal {

using results::Format;  // results/units.h

// A count whose latency bound lies more than this factor below the best is
// settled in one window when that window does too (HalveDown).
constexpr double kSettledBelow = 1.5;

namespace {

// The fewest workers on `curve` (which holds the baseline at 0), and the index of its best median.
std::pair<size_t, size_t> LowestAndBest(const SearchState& state, const std::vector<CurvePoint>& curve) {
  size_t lowest = 0, best = 0;
  for (size_t i = 0; i < curve.size(); ++i) {
    if (curve[i].first > 0 && (lowest == 0 || curve[i].first < curve[lowest].first)) lowest = i;
    if (state.trials()[curve[i].second].samples_per_s > state.trials()[curve[best].second].samples_per_s) best = i;
  }
  return {lowest, best};
}

}  // namespace

// The latency bound: no worker loads a sample faster than the main process
// did alone, so `workers` load at most workers / wait_s samples/s. A count
// whose bound lies more than kSettledBelow below the best is measured in one
// window, and that window settles it when it reads so far below the best's
// median too; else it is measured again in full.
std::string HalveDown(SearchState& state, std::vector<CurvePoint>& curve, double wait_s) {
  const size_t baseline = curve[0].second;
  const auto trial = [&state](size_t i) -> const TrialRecord& { return state.trials()[i]; };
  const double threshold = state.options().gain_threshold;
  const double tolerance = state.options().knee_tolerance;
  std::string ended = "did not halve below it";
  while (true) {
    const auto [lowest, best_point] = LowestAndBest(state, curve);
    if (lowest == 0 || curve[lowest].first <= 1) break;
    const size_t best = curve[best_point].second;
    bool gained = false;
    for (const auto& [w, i] : curve) gained = gained || (w > 0 && IsGain(trial(i), trial(baseline), threshold));
    const bool within = trial(curve[lowest].second).samples_per_s >= trial(best).samples_per_s * (1 - tolerance);
    if (gained && !within) break;
    const int workers = curve[lowest].first / 2;
    loader::Knobs knobs = state.knobs();
    knobs.num_workers = workers;
    const double bound = wait_s > 0 ? workers / wait_s : 0;
    const double bar = trial(best).samples_per_s;
    std::string settled;
    if (bound > 0 && bound * kSettledBelow < bar) {
      TrialPlan one;
      one.repeats = 1;
      const size_t index = state.Measure("num_workers", knobs, one);
      if (trial(index).status == TrialStatus::kOk && trial(index).samples_per_s * kSettledBelow < bar) {
        settled = Format("settled in one window: its latency bound (%d / %.2f ms = %.0f samples/s) and its window "
                         "both lie more than x%.1f below the best's median, %.1f; ",
                         workers, wait_s * 1e3, bound, kSettledBelow, bar);
        curve.emplace_back(workers, index);
      } else if (trial(index).status == TrialStatus::kOk) {
        state.Decide(index, Format("one window read %.1f samples/s, not more than x%.1f below the best's median, "
                                   "%.1f: measured again in full windows",
                                   trial(index).samples_per_s, kSettledBelow, bar));
      } else {
        state.DecideFailed(index);
        return "stopped at " + WorkersText(workers) + ": the trial failed";
      }
    }
    if (settled.empty()) {
      const size_t index = state.Measure("num_workers", knobs);
      if (trial(index).status != TrialStatus::kOk) {
        state.DecideFailed(index);
        return "stopped at " + WorkersText(workers) + ": the trial failed";
      }
      curve.emplace_back(workers, index);
    }
    const size_t index = curve.back().second;
    const double gain = Gain(trial(index), trial(best));
    const std::string tolerance_text = " knee_tolerance (" + Percent(tolerance).substr(1) + ")";
    if (IsGain(trial(index), trial(best), threshold)) {
      state.Decide(index, settled + Percent(gain) + " over the best so far, below the estimate: halve again");
    } else if (trial(index).samples_per_s >= trial(best).samples_per_s * (1 - tolerance)) {
      state.Decide(index, settled + Percent(gain) + " against the best, within the" + tolerance_text +
                              ": the knee may lie lower, halve again");
    } else {
      const bool any = gained || IsGain(trial(index), trial(baseline), threshold);
      state.Decide(index, settled + Percent(gain) + " against the best, outside the" + tolerance_text +
                              (any ? ": the knee lies above" : ": no count with workers has gained yet, halve again"));
    }
    ended = "halved down to " + WorkersText(workers);
  }
  return ended;
}

double EstimatedWaitS(const TrialRecord& baseline) {
  return baseline.samples_per_s > 0 && baseline.gpu_idle_frac > 0
             ? std::min(1.0, baseline.gpu_idle_frac) / baseline.samples_per_s
             : 0.0;
}

WorkerEstimate StartEstimate(const SearchState& state, int64_t batches) {
  EstimateLimits limits;
  limits.usable_cpus = state.setup().usable_cpus;
  limits.max_workers = state.setup().max_workers;
  limits.batches = batches;
  if (state.setup().fitting_workers) limits.fitting_workers = state.setup().fitting_workers(state.knobs());
  return EstimateWorkers(state.current(), limits);
}

}  // namespace feedtune::tuner::search_internal
