// num_workers_pairs: under a time budget, a knee at 0 workers checked in pairs.
//
// What it measures: the worker count the knee rule picks among the counts
// measured (the fewest within knee_tolerance of the best of them) and the
// baseline, in `repeats` interleaved pairs of one window each, as the final
// check pairs them (tuner/search/pairs.cc), compared by their windows' rates.
//
// What it keeps: the count becomes the knee when the pairs' median puts the
// baseline outside knee_tolerance of it (above x 1 / (1 - knee_tolerance)):
// the knee rule, on figures the drift moved alike. Else the knee stays at 0.
//
// What the time budget changes: the phase runs only under one (without, the
// doubling confirms its misses and no restart is charged). While the bar is
// still inside the pairs' interval, more pairs take the budget's time left,
// up to kMostPairsPerRepeat x repeats in all (tuner/search/pairs.cc). Not
// seeded searches, which start at a stored knee.
#include "results/units.h"
#include "tuner/measure/stats.h"
#include "tuner/search/phases.h"

namespace feedtune::tuner::search_internal {

using results::Format;  // results/units.h

// Under a time budget the doubling ends on one miss above the CPU count,
// and a worker count without persistent workers pays its restart per epoch
// (ChargeRestart): a knee at 0 workers rests on few sequential trials, and
// where the step's own speed moves between trials (a CPU-trained model on a
// shared VM), those can put a real gain below the baseline. So before the
// workers are dropped, the worker count the knee rule picks among the
// counts measured (two counts that read within the noise of each other
// leave the CPUs to the step with the fewer; an in-job CNN's doubling read 1
// worker -3.4% and 2 workers -3.0% of the baseline, and its truth ran 1 with
// persistent workers x1.18 of 0 and 2 x1.06) and the baseline run in pairs.
// While the bar is still inside their interval, more pairs take the budget's
// time left (PairsPlan::settle_bar): a knee at 0 workers leaves no worker
// phase after it, so that time would go unused, and a CPU-trained step moves
// one pair's ratio by 10-20% (an in-job CNN's read x0.84, x1.03, x1.09,
// median under the bar, where its truth ran 1 worker x1.09 and 2 with
// persistent workers x1.19 of 0). Returns its index on `curve`, or nullopt;
// `why` says what the pairs measured.
std::optional<size_t> PairedKnee(SearchState& state, const std::vector<CurvePoint>& curve, std::string* why,
                                 std::optional<size_t>* budget_from) {
  if (!state.under_time_budget() || state.setup().seed) return std::nullopt;
  const double tolerance = state.options().knee_tolerance;
  std::vector<std::pair<int, const TrialRecord*>> counts;  // the worker counts measured
  std::vector<size_t> on_curve;                             // each one's index on `curve`
  for (size_t i = 0; i < curve.size(); ++i) {
    if (curve[i].first == 0) continue;
    counts.emplace_back(curve[i].first, &state.trials()[curve[i].second]);
    on_curve.push_back(i);
  }
  const std::optional<size_t> knee = KneeIndex(counts, tolerance);
  if (!knee) return std::nullopt;
  const size_t candidate = on_curve[*knee];
  const std::string count = WorkersText(curve[candidate].first);
  // Copies: measuring grows trials(), which may move its records.
  const loader::Knobs baseline = state.trials()[curve.front().second].knobs;
  const loader::Knobs workers = state.trials()[curve[candidate].second].knobs;
  // In their windows: whether the workers feed the step faster is the
  // question here; the restart a charged figure holds is persistent_workers'
  // to remove, and the final check weighs the answer per epoch.
  const double bar = 1.0 / (1.0 - tolerance);
  const std::vector<double> ratios = MeasurePairs(state, "num_workers_pairs", baseline, workers, "baseline", count,
                                                  PairsPlan{.in_windows = true, .settle_bar = bar});
  *budget_from = state.trials().size();  // single windows, judged here: not weighed again at the budget
  if (ratios.empty()) {
    *why = "no pair of " + count + " with the baseline was measured; the knee stays at 0 workers";
    return std::nullopt;
  }
  const Summary s = Summarize(ratios);
  const int repeats = state.repeats();
  const bool more_pairs = static_cast<int>(ratios.size()) > repeats;
  const std::string measured = Format("x%.2f [%.2f, %.2f]", s.median, s.ci_low, s.ci_high) +
                               " over the baseline in their windows, " + std::to_string(ratios.size()) +
                               " interleaved pairs" +
                               (more_pairs ? " (" + std::to_string(repeats) +
                                                 ", then more while their interval held x" + Format("%.3f", bar) +
                                                 " and the budget had time)"
                                           : "");
  if (s.median > bar) {
    *why = "the knee at 0 workers was checked in pairs: " + count + " ran " + measured + ", the baseline outside " +
           Percent(tolerance).substr(1) + " of it (above x" + Format("%.3f", bar) + "): " + count + " is the knee";
    return candidate;
  }
  *why = "the knee at 0 workers was checked in pairs: " + count + " ran " + measured + ", not above x" +
         Format("%.3f", bar) + " (the baseline within " + Percent(tolerance).substr(1) +
         " of it): the knee stays at 0 workers";
  return std::nullopt;
}

}  // namespace feedtune::tuner::search_internal
