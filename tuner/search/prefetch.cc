// prefetch_factor (workers only: without them nothing is prefetched).
//
// What it measures: each other value of sweep.prefetch_factors at the
// current setting, each against the current one. Over whole epochs when the
// persistent_workers phase kept its setting before this one (PlanAgainstCurrent:
// the current figure was measured so).
//
// What it keeps: the fastest value that gains by THE RULE
// (tuner/search/rule.cc). The fastest that only rose is a candidate for the
// combined trial (tuner/search/combined.cc).
//
// What the time budget changes: persistent_workers may run before this phase
// (PersistentFirst, tuner/search/persistent.cc). A seeded search does not walk
// it: the seed's prefetch_factor was confirmed with the curve
// (tuner/search/seeded_search.cc).
#include "tuner/search/phases.h"

namespace feedtune::tuner::search_internal {

std::optional<SmallGain> PrefetchPhase(SearchState& state, const TrialPlan& plan) {
  if (state.setup().seed) {
    state.AddPhase("prefetch_factor", false,
                   "not walked: seeded, prefetch_factor " + std::to_string(state.knobs().prefetch_factor) +
                       " as the seed phase left it");
    return std::nullopt;
  }
  const double threshold = state.options().gain_threshold;
  std::optional<size_t> best;
  std::optional<size_t> top;  // the highest median, gain or not
  loader::Knobs best_knobs;
  const int from = state.knobs().prefetch_factor;
  std::string tried;
  for (int pf : state.options().prefetch_factors) {
    if (pf == from) continue;
    loader::Knobs knobs = state.knobs();
    knobs.prefetch_factor = pf;
    const size_t index = state.Measure("prefetch_factor", knobs, plan);
    tried += (tried.empty() ? "" : ", ") + std::to_string(pf);
    const TrialRecord& t = state.trials()[index];
    if (t.status != TrialStatus::kOk) {
      state.DecideFailed(index);
      continue;
    }
    const bool gain = IsGain(t, state.current(), threshold);
    state.Decide(index, (gain ? "gains " : "no gain: ") + Percent(Gain(t, state.current())) + " over prefetch_factor " +
                            std::to_string(from));
    if (!top || t.samples_per_s > state.trials()[*top].samples_per_s) top = index;
    if (gain && (!best || t.samples_per_s > state.trials()[*best].samples_per_s)) {
      best = index;
      best_knobs = knobs;
    }
  }
  if (best) {
    state.AddPhase("prefetch_factor", true,
                   "kept " + std::to_string(best_knobs.prefetch_factor) + ": " +
                       Percent(Gain(state.trials()[*best], state.current())) + " over prefetch_factor " +
                       std::to_string(from));
    state.Keep(*best, best_knobs);
    return std::nullopt;
  }
  if (tried.empty()) {
    state.AddPhase("prefetch_factor", false, "not tried: sweep.prefetch_factors has no other value");
    return std::nullopt;
  }
  state.AddPhase("prefetch_factor", false,
                 "kept " + std::to_string(from) + ": none of " + tried + " gains beyond noise and the threshold");
  if (top && state.trials()[*top].samples_per_s > state.current().samples_per_s) {
    return SmallGain{SmallGainOf::kPrefetchFactor, *top};
  }
  return std::nullopt;
}

}  // namespace feedtune::tuner::search_internal
