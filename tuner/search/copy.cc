// The copy phases: pin_memory, then non_blocking.
//
// pin_memory (right after the baseline, without workers): one trial with
// pinning on, kept by THE RULE (tuner/search/rule.cc). Measured in a regime
// the later steps leave, so a small gain is forgotten.
//
// non_blocking (at the knee, after tuner/search/workers.cc): one trial with
// it on, and with pin_memory too when pinning was dropped, since a pageable
// copy is synchronous anyway. Kept by THE RULE; a small gain is a candidate
// for the combined trial (tuner/search/combined.cc).
//
// sweep.copy_phases false (a job that trains on the CPU) skips both. A
// seeded search runs neither (tuner/search/seeded_search.cc). The time budget
// changes nothing here but may end the sequence before either.
#include <string>

#include "tuner/search/phases.h"

namespace feedtune::tuner::search_internal {
namespace {

// The pin_memory and non_blocking phases' text when sweep.copy_phases is false.
constexpr const char* kNoCopy =
    "not tried: sweep.copy_phases is false (the job trains on the CPU: no batch is copied to a device)";

// Measures one change to the current setting and keeps it when it gains.
// A step that gains within the noise or the threshold is returned for the
// combined trial to measure again, as `revisit_as`; without one, forgotten.
template <typename Change>
std::optional<SmallGain> TryStep(SearchState& state, const char* phase, Change change,
                                 std::optional<SmallGainOf> revisit_as, const std::string& note = "") {
  loader::Knobs knobs = state.knobs();
  change(knobs);
  const std::optional<size_t> measured = MeasureOrEndPhase(state, phase, knobs);
  if (!measured) return std::nullopt;
  const size_t index = *measured;
  const TrialRecord& t = state.trials()[index];
  std::optional<SmallGain> found;
  const double threshold = state.options().gain_threshold;
  const bool gain = IsGain(t, state.current(), threshold);
  const std::string figure = Percent(Gain(t, state.current()));
  if (gain) {
    state.Decide(index, "kept: " + figure + note);
    state.Keep(index, knobs);
  } else {
    if (revisit_as && t.samples_per_s > state.current().samples_per_s) found = SmallGain{*revisit_as, index};
    state.Decide(index, NotKept(t, state.current(), threshold) + note);
  }
  state.AddPhase(phase, gain, state.trials()[index].decision);
  return found;
}

}  // namespace

void PinMemoryPhase(SearchState& state) {
  if (!state.options().copy_phases) {
    state.AddPhase("pin_memory", false, kNoCopy);
    return;
  }
  // Measured without workers, a regime the later steps leave: a small
  // gain here says nothing about the knee, so it is not revisited.
  TryStep(state, "pin_memory", [](loader::Knobs& k) { k.pin_memory = true; }, std::nullopt);
}

std::optional<SmallGain> NonBlockingPhase(SearchState& state) {
  if (!state.options().copy_phases) {
    state.AddPhase("non_blocking", false, kNoCopy);
    return std::nullopt;
  }
  // Measured at the knee: a small gain is revisited with the others (combined).
  if (state.knobs().pin_memory) {
    return TryStep(state, "non_blocking", [](loader::Knobs& k) { k.non_blocking = true; },
                   SmallGainOf::kNonBlocking);
  }
  return TryStep(state, "non_blocking", [](loader::Knobs& k) { k.pin_memory = k.non_blocking = true; },
                 SmallGainOf::kNonBlocking, " (with pin_memory: a pageable copy is synchronous anyway)");
}

}  // namespace feedtune::tuner::search_internal
