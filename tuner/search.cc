#include "tuner/search.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

namespace feedtune::tuner {
namespace {

using results::TrialRecord;

std::string Percent(double fraction) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%+.1f%%", fraction * 100.0);
  return buf;
}

double Gain(const TrialRecord& candidate, const TrialRecord& current) {
  return current.samples_per_s > 0 ? candidate.samples_per_s / current.samples_per_s - 1.0 : 0.0;
}

class Search {
 public:
  Search(const SweepOptions& options, int max_workers, TrialMeasurer& measurer, const TrialCallback& on_trial)
      : options_(options), max_workers_(max_workers), measurer_(measurer), on_trial_(on_trial) {}

  SearchOutcome Run(loader::Knobs start) {
    current_ = start;
    current_.num_workers = 0;
    current_.pin_memory = false;
    current_.non_blocking = false;
    current_.persistent_workers = false;

    const size_t base = Measure("baseline", current_);
    outcome_.baseline = base;
    if (trials()[base].status != "ok") {
      Decide(base, "the baseline failed; nothing to compare against");
      return Finish();
    }
    Decide(base, "reference");
    current_index_ = base;

    TryStep("pin_memory", [](loader::Knobs& k) { k.pin_memory = true; });
    Workers();
    if (current_.pin_memory) {
      TryStep("non_blocking", [](loader::Knobs& k) { k.non_blocking = true; });
    } else {
      TryStep("non_blocking", [](loader::Knobs& k) { k.pin_memory = k.non_blocking = true; },
              " (with pin_memory: a pageable copy is synchronous anyway)");
    }
    if (current_.num_workers > 0) {
      PrefetchFactors();
      TryStep("persistent_workers", [](loader::Knobs& k) { k.persistent_workers = true; });
    }
    return Finish();
  }

 private:
  std::vector<TrialRecord>& trials() { return outcome_.trials; }
  const TrialRecord& current() { return trials()[current_index_]; }

  size_t Measure(const char* phase, const loader::Knobs& knobs) {
    TrialRecord trial = measurer_.Measure(knobs);
    trial.phase = phase;
    trial.knobs = knobs;
    trials().push_back(std::move(trial));
    return trials().size() - 1;
  }

  // Writes the decision and hands the trial on. Every trial passes here once.
  void Decide(size_t index, std::string decision) {
    TrialRecord& t = trials()[index];
    if (t.status == "failed" && t.error) decision = "failed: " + *t.error;
    t.decision = std::move(decision);
    if (on_trial_) on_trial_(t);
  }

  // Measures one change to the current setting and keeps it when it gains.
  template <typename Change>
  void TryStep(const char* phase, Change change, const std::string& note = "") {
    loader::Knobs knobs = current_;
    change(knobs);
    const size_t index = Measure(phase, knobs);
    const TrialRecord& t = trials()[index];
    if (t.status != "ok") {
      Decide(index, "");
      return;
    }
    if (IsGain(t, current(), options_.gain_threshold)) {
      Decide(index, "kept: " + Percent(Gain(t, current())) + note);
      current_ = knobs;
      current_index_ = index;
    } else {
      Decide(index, "not kept: " + Percent(Gain(t, current())) + " is within noise or below the " +
                        Percent(options_.gain_threshold).substr(1) + " threshold" + note);
    }
  }

  void Workers() {
    std::vector<std::pair<int, size_t>> curve = {{0, current_index_}};
    size_t best = current_index_;
    int misses = 0;
    int workers = 1;
    while (workers <= max_workers_) {
      loader::Knobs knobs = current_;
      knobs.num_workers = workers;
      const size_t index = Measure("num_workers", knobs);
      const TrialRecord& t = trials()[index];
      if (t.status != "ok") {
        Decide(index, "");
        break;
      }
      curve.emplace_back(workers, index);
      const double gain = Gain(t, trials()[best]);
      if (IsGain(t, trials()[best], options_.gain_threshold)) {
        Decide(index, Percent(gain) + " over the best so far");
        best = index;
        misses = 0;
      } else if (gain < -options_.gain_threshold) {
        Decide(index, Percent(gain) + " below the best: throughput falls, stop doubling");
        break;
      } else if (++misses >= 2) {
        Decide(index, Percent(gain) + ": two doublings without a gain, stop doubling");
        break;
      } else {
        Decide(index, Percent(gain) + ": no gain beyond noise");
      }
      workers *= 2;
    }
    Refine(curve);
    const auto knee = Knee(curve);
    current_.num_workers = curve[knee].first;
    current_index_ = curve[knee].second;
    outcome_.knee_workers = curve[knee].first;
    outcome_.knee_samples_per_s = trials()[curve[knee].second].samples_per_s;
  }

  size_t Knee(const std::vector<std::pair<int, size_t>>& curve) {
    std::vector<std::pair<int, const TrialRecord*>> points;
    for (const auto& [w, i] : curve) points.emplace_back(w, &trials()[i]);
    return *KneeIndex(points, options_.knee_tolerance);
  }

  // Bisects between the knee and its lower neighbour while they are more than
  // 2 apart: the fewest workers that reach the plateau is what users want.
  void Refine(std::vector<std::pair<int, size_t>>& curve) {
    while (true) {
      std::sort(curve.begin(), curve.end());
      const size_t k = Knee(curve);
      if (k == 0) return;
      const int lo = curve[k - 1].first;
      const int hi = curve[k].first;
      if (hi - lo <= 2) return;
      loader::Knobs knobs = current_;
      knobs.num_workers = (lo + hi) / 2;
      const size_t index = Measure("num_workers", knobs);
      if (trials()[index].status != "ok") {
        Decide(index, "");
        return;
      }
      Decide(index, "refining the knee between " + std::to_string(lo) + " and " + std::to_string(hi) + " workers");
      curve.emplace_back(knobs.num_workers, index);
    }
  }

  void PrefetchFactors() {
    std::optional<size_t> best;
    loader::Knobs best_knobs;
    for (int pf : options_.prefetch_factors) {
      if (pf == current_.prefetch_factor) continue;
      loader::Knobs knobs = current_;
      knobs.prefetch_factor = pf;
      const size_t index = Measure("prefetch_factor", knobs);
      const TrialRecord& t = trials()[index];
      if (t.status != "ok") {
        Decide(index, "");
        continue;
      }
      const bool gain = IsGain(t, current(), options_.gain_threshold);
      Decide(index, (gain ? "gains " : "no gain: ") + Percent(Gain(t, current())) + " over prefetch_factor " +
                        std::to_string(current_.prefetch_factor));
      if (gain && (!best || t.samples_per_s > trials()[*best].samples_per_s)) {
        best = index;
        best_knobs = knobs;
      }
    }
    if (best) {
      current_ = best_knobs;
      current_index_ = *best;
    }
  }

  SearchOutcome Finish() {
    for (size_t i = 0; i < trials().size(); ++i) {
      const TrialRecord& t = trials()[i];
      if (t.status == "ok" && (!outcome_.best || t.samples_per_s > trials()[*outcome_.best].samples_per_s)) {
        outcome_.best = i;
      }
    }
    return std::move(outcome_);
  }

  const SweepOptions& options_;
  const int max_workers_;
  TrialMeasurer& measurer_;
  const TrialCallback& on_trial_;

  SearchOutcome outcome_;
  loader::Knobs current_;
  size_t current_index_ = 0;
};

}  // namespace

bool IsGain(const TrialRecord& candidate, const TrialRecord& current, double gain_threshold) {
  if (candidate.status != "ok" || current.status != "ok") return false;
  if (candidate.samples_per_s <= current.samples_per_s * (1.0 + gain_threshold)) return false;
  const bool have_intervals = candidate.repeats >= 2 && current.repeats >= 2;
  return !have_intervals || candidate.ci_low > current.ci_high;
}

std::optional<size_t> KneeIndex(const std::vector<std::pair<int, const TrialRecord*>>& curve, double tolerance) {
  double best = -1;
  for (const auto& [w, t] : curve) {
    if (t->status == "ok") best = std::max(best, t->samples_per_s);
  }
  if (best < 0) return std::nullopt;
  std::optional<size_t> knee;
  for (size_t i = 0; i < curve.size(); ++i) {
    const auto& [w, t] = curve[i];
    if (t->status == "ok" && t->samples_per_s >= best * (1.0 - tolerance) && (!knee || w < curve[*knee].first)) {
      knee = i;
    }
  }
  return knee;
}

SearchOutcome RunSearch(const SweepOptions& options, int max_workers, const loader::Knobs& start,
                        TrialMeasurer& measurer, const TrialCallback& on_trial) {
  return Search(options, max_workers, measurer, on_trial).Run(start);
}

}  // namespace feedtune::tuner
