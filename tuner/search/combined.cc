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

const char* SmallGainName(SmallGainOf what) {
  switch (what) {
    case SmallGainOf::kNumWorkers: return "num_workers";
    case SmallGainOf::kNonBlocking: return "non_blocking";
    case SmallGainOf::kPrefetchFactor: return "prefetch_factor";
    case SmallGainOf::kPersistentWorkers: return "persistent_workers";
  }
  return "?";
}

void CombinedPhase(SearchState& state, const std::vector<SmallGain>& small_gains, const PersistentFound& persistent) {
  if (small_gains.size() < kFewestSmallGains) {
    state.AddPhase("combined", false,
                   small_gains.empty()
                       ? "not tried: no change gained even within the noise"
                       : "not tried: only " + std::string(SmallGainName(small_gains[0].what)) +
                             " gained within the noise");
    return;
  }
  const double threshold = state.options().gain_threshold;
  loader::Knobs knobs = state.knobs();
  std::string what;
  TrialPlan plan = PlanAgainstCurrent(state, persistent);
  for (const SmallGain& gain : small_gains) {
    const loader::Knobs& k = state.trials()[gain.index].knobs;
    switch (gain.what) {
      case SmallGainOf::kNumWorkers:
        knobs.num_workers = k.num_workers;
        what += ", num_workers " + std::to_string(k.num_workers);
        break;
      case SmallGainOf::kNonBlocking:
        knobs.pin_memory = k.pin_memory;
        knobs.non_blocking = k.non_blocking;
        what += ", non_blocking";
        break;
      case SmallGainOf::kPrefetchFactor:
        knobs.prefetch_factor = k.prefetch_factor;
        what += ", prefetch_factor " + std::to_string(k.prefetch_factor);
        break;
      case SmallGainOf::kPersistentWorkers:
        knobs.persistent_workers = true;
        what += ", persistent_workers";
        break;
    }
  }
  what = what.substr(2);
  // With persistent_workers, over whole epochs against the epoch-window reference.
  size_t reference = state.current_index();
  if (knobs.persistent_workers && !state.knobs().persistent_workers && persistent.reference) {
    plan = persistent.plan;
    reference = *persistent.reference;
  }
  const std::optional<size_t> measured = MeasureOrEndPhase(state, "combined", knobs, plan);
  if (!measured) return;
  const size_t index = *measured;
  const TrialRecord& t = state.trials()[index];
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
