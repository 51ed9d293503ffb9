// The final check: how much faster the best setting is.
//
// What it measures: the baseline and the best re-measured interleaved, A B A
// B ..., `repeats` pairs of one window each (tuner/search/pairs.cc), so drift
// of the machine during the sweep hits both alike. With
// SearchSetup::reference the reference setting (the job's own) stands in for
// the baseline.
//
// What it keeps: nothing changes the best; the speedup is the median of the
// pair ratios with a 95% bootstrap interval, and the phase reads "kept" when
// the interval lies wholly above x1.00. Wholly below it, the best is slower
// than the reference beyond the noise (SlowerBeyondTheNoise): the seed check
// drops a stored setting by that, and the job keeps its own.
//
// What the time budget changes: nothing once begun, the check runs to its
// end (SearchState::Measure), so the speedup is known or not measured.
#include "results/units.h"
#include "tuner/measure/stats.h"
#include "tuner/search/phases.h"

namespace feedtune::tuner {
namespace {
// The ratio of no speedup: the check reads "kept" only when the whole
// interval of the pairs' median lies above it, and slower beyond the noise
// when it lies wholly below.
constexpr double kNoSpeedup = 1.0;
}  // namespace

bool SlowerBeyondTheNoise(const SearchOutcome& outcome) {
  return outcome.speedup_ci_high && *outcome.speedup_ci_high < kNoSpeedup;
}

namespace search_internal {

using results::Format;  // results/units.h

void FinalCheck(SearchState& state, const char* phase_name) {
  const SearchSetup& setup = state.setup();
  const TrialRecord& base = state.trials()[*state.outcome().baseline];
  const TrialRecord& best = state.current();
  const loader::Knobs a = setup.reference.value_or(base.knobs), b = best.knobs;
  const char* reference = setup.reference ? "the job's own setting" : "the baseline";
  state.outcome().best_is_reference = a == b;  // this check's, whatever an earlier one found
  if (a == b) {
    state.outcome().speedup = kNoSpeedup;
    state.AddPhase(phase_name, false, std::string("not run: the best setting is ") + reference);
    return;
  }
  const std::vector<double> ratios = MeasurePairs(state, "final_check", a, b,
                                                  setup.reference ? "the job's own setting" : "baseline", "best");
  if (ratios.empty()) {
    state.AddPhase(phase_name, false, "no pair measured; the speedup is not known");
    return;
  }
  const Summary s = Summarize(ratios);
  SearchOutcome& outcome = state.outcome();
  outcome.speedup = s.median;
  outcome.speedup_ci_low = s.ci_low;
  outcome.speedup_ci_high = s.ci_high;
  state.AddPhase(phase_name, s.ci_low > kNoSpeedup,
                 "speedup " + Format("x%.2f", s.median) + " [" + Format("%.2f", s.ci_low) + ", " +
                     Format("%.2f", s.ci_high) + "] over " + reference + ", " + std::to_string(ratios.size()) +
                     " interleaved pairs" + (s.ci_low > kNoSpeedup ? "" : "; the interval includes no gain"));
}

}  // namespace search_internal
}  // namespace feedtune::tuner
