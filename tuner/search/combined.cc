// combined (workers only): the small gains together.
//
// What it measures: the changes whose median gained but that were not kept,
// each within the noise or the threshold alone (more workers than the knee
// with a higher median, non_blocking, the best prefetch_factor,
// persistent_workers), applied together to the current setting in one trial,
// only when there are kFewestSmallGains or more of them, so no single change
// gets a second chance. With persistent_workers among them, over whole
// epochs against the persistent_workers phase's off trial, measured so.
//
// What it keeps: the combination, by THE RULE (tuner/search/rule.cc): small
// gains, each within the noise alone, can add up to one worth keeping.
//
// What the time budget changes: nothing here; it may end the sequence first.
#include "tuner/search/phases.h"

namespace feedtune::tuner::search_internal {

// Fewer small gains than this are not combined: a single one would only get
// a second chance at the rule it failed.
constexpr size_t kFewestSmallGains = 2;

void CombinedPhase(SearchState& state) {
  const std::vector<SmallGain>& small_gains = state.handed.small_gains;
  if (small_gains.size() < kFewestSmallGains) {
    state.AddPhase("combined", false,
                   small_gains.empty() ? "not tried: no change gained even within the noise"
                                       : "not tried: only " + small_gains[0].phase + " gained within the noise");
    return;
  }
  const double threshold = state.options().gain_threshold;
  loader::Knobs knobs = state.knobs();
  std::string what;
  TrialPlan plan = PlanAgainstCurrent(state);
  for (const auto& [phase, index] : small_gains) {
    const loader::Knobs& k = state.trials()[index].knobs;
    if (phase == "num_workers") {
      knobs.num_workers = k.num_workers;
      what += ", num_workers " + std::to_string(k.num_workers);
    } else if (phase == "non_blocking") {
      knobs.pin_memory = k.pin_memory;
      knobs.non_blocking = k.non_blocking;
      what += ", non_blocking";
    } else if (phase == "prefetch_factor") {
      knobs.prefetch_factor = k.prefetch_factor;
      what += ", prefetch_factor " + std::to_string(k.prefetch_factor);
    } else if (phase == "persistent_workers") {
      knobs.persistent_workers = true;
      what += ", persistent_workers";
    }
  }
  what = what.substr(2);
  // With persistent_workers, over whole epochs against the epoch-window reference.
  size_t reference = state.current_index();
  if (knobs.persistent_workers && !state.knobs().persistent_workers && state.handed.persistent_reference) {
    plan = state.handed.persistent_plan;
    reference = *state.handed.persistent_reference;
  }
  const size_t index = state.Measure("combined", knobs, plan);
  const TrialRecord& t = state.trials()[index];
  if (t.status != TrialStatus::kOk) {
    state.Decide(index, "");
    state.AddPhase("combined", false, state.trials()[index].decision);
    return;
  }
  const TrialRecord& ref = state.trials()[reference];
  const bool gain = IsGain(t, ref, threshold);
  const std::string figure = Percent(Gain(t, ref));
  if (gain) {
    state.Decide(index, "kept: " + figure + " for " + what + " together");
    state.Keep(index, knobs);
  } else {
    state.Decide(index, NotKept(t, ref, threshold, " for " + what + " together"));
  }
  state.AddPhase("combined", gain, state.trials()[index].decision);
}

}  // namespace feedtune::tuner::search_internal
