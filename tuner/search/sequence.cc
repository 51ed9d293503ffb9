// The search controller: the manual tuning method (docs/architecture.md, "The
// method the search automates"), automated. One knob at a time, each step
// from the setting the ones before arrived at, each kept only by THE RULE
// (tuner/search/rule.cc):
//
//   baseline           num_workers 0, pin_memory off, non_blocking off
//   pin_memory         turn pinning on (tuner/search/copy.cc)
//   fetch_concurrency  remote data only: requests in flight per worker,
//                      doubling while it gains (tuner/search/fetch.cc)
//   num_workers        1, 2, 4, ... doubling to the knee, then bisecting
//                      below it (tuner/search/workers.cc; under a time budget
//                      from the baseline's estimate up and down,
//                      tuner/search/worker_estimate.h, and a knee at 0
//                      workers is checked in pairs: tuner/search/paired_knee.cc)
//   non_blocking       on, with pin_memory (tuner/search/copy.cc)
//   prefetch_factor    each other value (tuner/search/prefetch.cc)
//   persistent_workers off and on over whole epochs, then the worker counts
//                      above the knee with it (tuner/search/persistent.cc)
//   multiprocessing_context  the workers' start method (tuner/search/start_method.cc)
//   cpu_binding, worker_threads  around the loader (tuner/search/node.cc)
//   combined           the small gains together (tuner/search/combined.cc)
//   final check        baseline and best in interleaved pairs
//                      (tuner/search/final_check.cc)
//
// The phases with workers run only when the knee has workers; the node
// phases run with or without them (the rank's own threads and CPUs matter
// then). The start method runs before the node phases, and those before
// combined, which keeps what they kept; none of the three is a candidate for
// it (each is kept or not on its own).
//
// Seeded (SearchSetup::seed, `sweep --seed-from`, docs/fleets.md): a stored
// run of the nearest machine gives the start, and only what it found is
// confirmed (tuner/search/seeded_search.cc): its knobs stand in for
// pin_memory, the doubling starts at its knee, and one trial confirms its
// knobs in place of non_blocking; prefetch_factor and persistent_workers are
// not walked.
// SearchSetup::check_seed checks the stored setting once instead of searching.
//
// The time budget (tuner/search/time_budget.cc) ends the sequence wherever it
// is, at the best setting so far; under a budget persistent_workers may run
// before prefetch_factor (PersistentFirst).
//
// The knee: the fewest num_workers whose median is within knee_tolerance of
// the best median on the num_workers curve; later phases continue from it.
// The best: the setting the sequence arrives at (the knee and every kept step,
// the combined one included), which is the recommendation; `fastest` is the
// highest median of all, which may use more workers for a difference within
// knee_tolerance or the noise.
//
// Determinism: every decision is a function of the options, the setup and the
// records the measurer returned, in order. A resumed run that replays its
// stored records (ReplayMeasurer) therefore takes the decisions the
// uninterrupted run would have. One thread runs a search.
#include "tuner/search/phases.h"

namespace feedtune::tuner {
namespace search_internal {
namespace {

// Everything after the baseline, up to the final check.
void Sequence(SearchState& state) {
  state.tally.at = SequenceAt::kPin;
  if (state.setup().seed) {
    SeedStart(state);
  } else {
    PinMemoryPhase(state);
  }
  state.tally.at = SequenceAt::kWorkers;
  FetchPhase(state);
  WorkersPhase(state);
  state.tally.at = SequenceAt::kNonBlocking;
  if (state.setup().seed) {
    ConfirmSeed(state);
  } else {
    NonBlockingPhase(state);
  }
  if (state.knobs().num_workers > 0) {
    state.handed.persistent_first = PersistentFirst(state);
    if (state.handed.persistent_first) PersistentPhases(state);
    state.tally.at = SequenceAt::kPrefetch;
    PrefetchPhase(state);
    if (!state.handed.persistent_first) PersistentPhases(state);
    state.tally.at = SequenceAt::kStartMethod;
    StartMethodPhase(state);
    NodePhases(state);
    state.tally.at = SequenceAt::kCombined;
    CombinedPhase(state);
  } else {
    state.AddPhase("prefetch_factor", false, "not tried: without workers there is nothing to prefetch");
    state.AddPhase("persistent_workers", false, "not tried: without workers there is nothing to keep alive");
    if (state.setup().python_workload) {
      state.AddPhase("multiprocessing_context", false, "not tried: without workers no process is started");
    }
    NodePhases(state);  // the rank's own threads and CPUs still matter without workers
  }
  state.outcome().best = state.current_index();
  state.tally.at = SequenceAt::kFinal;
  FinalCheck(state);
  state.tally.at = SequenceAt::kDone;
}

// The fastest trial: single windows (the pairs) are no figure to rank.
SearchOutcome Finish(SearchState& state) {
  SearchOutcome& outcome = state.outcome();
  for (size_t i = 0; i < outcome.trials.size(); ++i) {
    const TrialRecord& t = outcome.trials[i];
    if (t.status == TrialStatus::kOk && t.phase != "final_check" && t.phase != "num_workers_pairs" &&
        (!outcome.fastest || t.samples_per_s > outcome.trials[*outcome.fastest].samples_per_s)) {
      outcome.fastest = i;
    }
  }
  return std::move(outcome);
}

SearchOutcome Run(SearchState& state, loader::Knobs start) {
  start.num_workers = 0;
  start.pin_memory = false;
  start.non_blocking = false;
  start.persistent_workers = false;
  start.cpu_binding = StartBinding(state.options().cpu_binding);
  state.SetKnobs(start);

  state.tally.at = SequenceAt::kBaseline;
  const size_t base = state.Measure("baseline", state.knobs());
  state.outcome().baseline = base;
  if (state.trials()[base].status != TrialStatus::kOk) {
    state.Decide(base, "the baseline did not run; nothing to compare against");
    state.AddPhase("baseline", false, state.trials()[base].decision);
    return Finish(state);
  }
  state.Decide(base, "reference");
  state.Keep(base, state.knobs());
  try {
    if (state.setup().seed && state.setup().check_seed && CheckSeed(state)) return Finish(state);
    Sequence(state);
  } catch (const TimeBudgetSpent&) {
    KeepBestAtBudget(state);
  }
  return Finish(state);
}

}  // namespace
}  // namespace search_internal

SearchOutcome RunSearch(const SweepOptions& options, const SearchSetup& setup, const loader::Knobs& start,
                        TrialMeasurer& measurer, const SearchEvents& events) {
  search_internal::SearchState state(options, setup, measurer, events);
  return search_internal::Run(state, start);
}

}  // namespace feedtune::tuner
