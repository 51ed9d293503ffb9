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
// One table (kPhases, below) holds these phases in this order, a row each:
// how it runs with what the phases before it found (each phase returns what
// it found, and the sequence hands that on), its trials for the estimate of
// trials left (TrialsLeft), and whether the time budget may stop one of its
// trials. The phases with workers run only when the knee has workers; the
// node phases run with or without them (the rank's own threads and CPUs
// matter then). The start method runs before the node phases, and those
// before combined, which keeps what they kept; none of the three is a
// candidate for it (each is kept or not on its own).
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
// Determinism: without a time budget every decision is a function of the
// options, the setup and the records the measurer returned, in order. A
// resumed run that replays its stored records (ReplayMeasurer) therefore
// takes the decisions the uninterrupted run would have. Under a time budget
// the clock decides too: whether a trial starts (SearchState::Measure) and
// how many pairs are measured (tuner/search/pairs.cc), so a resumed run may
// stop elsewhere (tuner/search/time_budget.cc). One thread runs a search.
#include <algorithm>
#include <array>
#include <vector>

#include "tuner/search/phases.h"

namespace feedtune::tuner {
namespace search_internal {
namespace {

// What the phases found, handed on by the sequence to the phases that need it.
struct HandOn {
  TrialPlan seeded_plan;  // SeedStart's: the seeded curve's windows
  WorkersFound workers;
  PersistentFound persistent;
  bool with_workers = false;           // the knee has workers: the phases with workers run
  std::optional<double> first_share;   // persistent_workers runs first (PersistentFirst): the restart's share
  std::vector<SmallGain> small_gains;  // in the order found, for combined
  size_t budget_from = 0;              // the first trial the time budget weighs (KeepBestAtBudget)

  void Add(const std::optional<SmallGain>& gain) {
    if (gain) small_gains.push_back(*gain);
  }
  void WeighFrom(const std::optional<size_t>& from) {
    if (from) budget_from = *from;
  }
};

// fetch_concurrency's doublings (2 to 32 in flight), as the estimate counts them.
constexpr int kEstimatedFetchDoublings = 5;

// The trials of the phases, as the estimate of trials left counts them.
struct Counts {
  int step = 0;  // the pin_memory and non_blocking trials (or a seeded search's seed trial)
  int fetch = 0;  // remote data: the fetch_concurrency doublings
  int prefetch = 0;
  int persistent = 0;
  int start_method = 0;
  int binding = 0;
  int threads = 0;
  int final_check = 0;
};

// A seeded search walks neither prefetch_factor nor persistent_workers (its
// seed phase is one trial); the node phases count when they will run.
Counts CountsOf(const SearchState& state) {
  const SweepOptions& options = state.options();
  const SearchSetup& setup = state.setup();
  const int repeats = state.repeats();
  const bool seeded = setup.seed.has_value();
  Counts c;
  c.step = seeded || options.copy_phases ? 1 : 0;
  c.fetch = setup.remote_reads ? kEstimatedFetchDoublings : 0;
  c.prefetch = seeded ? 0 : std::max(0, static_cast<int>(options.prefetch_factors.size()) - 1);
  // Under a budget persistent_workers is measured in pairs (tuner/search/persistent.cc).
  c.persistent = seeded ? 0 : options.time_budget_s > 0 ? 2 * repeats : 2;
  const int methods = static_cast<int>(StartMethodCandidates(state).size());
  c.start_method = methods > 0 ? 1 + methods : 0;
  c.binding =
      setup.ranks > 1 && options.cpu_binding == BindingChoice::kAuto ? 1 + (setup.numa_known ? 1 : 0) : 0;
  c.threads = setup.default_worker_threads > 1 ? 1 : 0;
  c.final_check = 2 * repeats;
  return c;
}

// The doubling's trials before its knee, as the estimate counts them.
constexpr int kEstimatedDoublings = 4;

// One row of the phase table.
struct Phase {
  SequenceAt at;
  // Runs it with what the phases before it found, and keeps what it found
  // in `handed`. The baseline's and the seed check's rows are Run's.
  void (*run)(SearchState& state, HandOn& handed);
  // Its trials, as the estimate counts them while an earlier phase runs.
  int (*trials)(const Counts& c);
  // While it runs: its trials left after the one measured now.
  int (*left)(const SearchState& state, const Counts& c);
  // Whether the time budget may stop one of its trials: not the baseline's,
  // nor the seed check's or the final check's once begun, so that a speedup
  // is known or not measured.
  bool budget_may_end;
};

int None(const Counts&) { return 0; }
int NoneLeft(const SearchState&, const Counts&) { return 0; }

// A phase the time budget ended makes the sequence end after it.
void EndIfSpent(bool budget_spent) {
  if (budget_spent) throw TimeBudgetSpent{};
}

// The phase table, in SequenceAt's order. Where a phase runs only with
// workers, its row says what it records without them.
constexpr std::array<Phase, 14> kPhases = {{
    {SequenceAt::kBaseline, nullptr, None, NoneLeft, false},
    {SequenceAt::kSeedCheck, nullptr, [](const Counts&) { return 1; }, NoneLeft, false},
    {SequenceAt::kPin,
     [](SearchState& state, HandOn& handed) {
       if (state.setup().seed) {
         handed.seeded_plan = SeedStart(state);
       } else {
         PinMemoryPhase(state);
       }
     },
     [](const Counts& c) { return c.step; }, NoneLeft, true},
    {SequenceAt::kFetch, [](SearchState& state, HandOn&) { FetchPhase(state); },
     [](const Counts& c) { return c.fetch; },
     [](const SearchState& state, const Counts& c) { return std::max(0, c.fetch - state.progress().done); }, true},
    {SequenceAt::kWorkers,
     [](SearchState& state, HandOn& handed) {
       handed.workers = WorkersPhase(state, handed.seeded_plan);
       handed.Add(handed.workers.small_gain);
       handed.WeighFrom(handed.workers.budget_from);
       EndIfSpent(handed.workers.budget_spent);
     },
     [](const Counts&) { return kEstimatedDoublings; },
     // The misses left before the doubling stops (tuner/search/workers.cc), and the knee's.
     [](const SearchState& state, const Counts&) {
       const SequenceProgress& p = state.progress();
       return p.refining ? 1 : std::max(0, MissesToStop(state, p.doubling_workers) - p.misses) + 1;
     },
     true},
    {SequenceAt::kNonBlocking,
     [](SearchState& state, HandOn& handed) {
       if (state.setup().seed) {
         ConfirmSeed(state, handed.seeded_plan);
       } else {
         handed.Add(NonBlockingPhase(state));
       }
       // The knee and its copy step are known: whether the phases with
       // workers run, and under a time budget in which order (PersistentFirst).
       handed.with_workers = state.knobs().num_workers > 0;
       double share = 0;
       if (handed.with_workers && PersistentFirst(state, &share)) {
         handed.first_share = share;
         state.SetPersistentFirst(true);
       }
     },
     [](const Counts& c) { return c.step; }, NoneLeft, true},
    {SequenceAt::kPrefetch,
     [](SearchState& state, HandOn& handed) {
       if (!handed.with_workers) {
         state.AddPhase("prefetch_factor", false, "not tried: without workers there is nothing to prefetch");
         return;
       }
       handed.Add(PrefetchPhase(state, PlanAgainstCurrent(state, handed.persistent)));
     },
     [](const Counts& c) { return c.prefetch; },
     [](const SearchState& state, const Counts& c) { return std::max(0, c.prefetch - state.progress().done); },
     true},
    {SequenceAt::kPersistent,
     [](SearchState& state, HandOn& handed) {
       if (!handed.with_workers) {
         state.AddPhase("persistent_workers", false, "not tried: without workers there is nothing to keep alive");
         return;
       }
       handed.persistent = PersistentPhase(state, handed.seeded_plan, handed.first_share);
       handed.Add(handed.persistent.small_gain);
       handed.WeighFrom(handed.persistent.budget_from);
       EndIfSpent(handed.persistent.budget_spent);
     },
     [](const Counts& c) { return c.persistent; },
     [](const SearchState& state, const Counts& c) { return std::max(0, c.persistent - state.progress().done); },
     true},
    {SequenceAt::kRevisit,
     [](SearchState& state, HandOn& handed) {
       if (!handed.with_workers || !state.knobs().persistent_workers) return;
       if (state.setup().seed && handed.seeded_plan.window_epochs > 0) {
         state.AddPhase("num_workers_persistent", false,
                        "not walked: seeded, the curve itself was measured with persistent workers over whole epochs");
       } else {
         WorkersWithPersistent(state, handed.workers.curve, handed.persistent.plan);
       }
     },
     None, [](const SearchState&, const Counts&) { return 2; }, true},
    {SequenceAt::kStartMethod,
     [](SearchState& state, HandOn& handed) {
       if (handed.with_workers) {
         StartMethodPhase(state);
       } else if (state.setup().python_workload) {
         state.AddPhase("multiprocessing_context", false, "not tried: without workers no process is started");
       }
     },
     [](const Counts& c) { return c.start_method; },
     [](const SearchState& state, const Counts& c) { return std::max(0, c.start_method - state.progress().done); },
     true},
    // The node phases run with or without workers: the rank's own threads and CPUs still matter.
    {SequenceAt::kBinding, [](SearchState& state, HandOn&) { CpuBindingPhase(state); },
     [](const Counts& c) { return c.binding; }, [](const SearchState&, const Counts& c) { return c.binding; }, true},
    {SequenceAt::kThreads, [](SearchState& state, HandOn&) { WorkerThreadsPhase(state); },
     [](const Counts& c) { return c.threads; }, [](const SearchState&, const Counts& c) { return c.threads; }, true},
    {SequenceAt::kCombined,
     [](SearchState& state, HandOn& handed) {
       if (handed.with_workers) CombinedPhase(state, handed.small_gains, handed.persistent);
     },
     None, NoneLeft, true},
    {SequenceAt::kFinal,
     [](SearchState& state, HandOn&) {
       state.outcome().best = state.current_index();
       FinalCheck(state);
     },
     [](const Counts& c) { return c.final_check; },
     [](const SearchState& state, const Counts& c) { return std::max(0, c.final_check - state.progress().done); },
     false},
}};

static_assert(
    [] {
      for (size_t i = 0; i < kPhases.size(); ++i) {
        if (static_cast<size_t>(kPhases[i].at) != i) return false;
      }
      return kPhases.size() == static_cast<size_t>(SequenceAt::kDone);
    }(),
    "kPhases has a row per SequenceAt, in its order");

const Phase& PhaseAt(SequenceAt at) { return kPhases[static_cast<size_t>(at)]; }

// The order of the rows: the table's, with persistent_workers (and the
// worker counts with it) before prefetch_factor when PersistentFirst said
// so; a seed check (SearchSetup::check_seed) measures the stored setting and
// its pairs instead, and runs the table only when it drops the seed.
std::vector<SequenceAt> Order(const SearchState& state) {
  using enum SequenceAt;
  if (state.setup().seed && state.setup().check_seed) return {kBaseline, kSeedCheck, kFinal};
  std::vector<SequenceAt> order = {kBaseline, kPin, kFetch, kWorkers, kNonBlocking};
  if (state.progress().persistent_first) {
    order.insert(order.end(), {kPersistent, kRevisit, kPrefetch});
  } else {
    order.insert(order.end(), {kPrefetch, kPersistent, kRevisit});
  }
  order.insert(order.end(), {kStartMethod, kBinding, kThreads, kCombined, kFinal});
  return order;
}

// The row after `at` in the order, kDone after the last.
SequenceAt Next(const SearchState& state, SequenceAt at) {
  const std::vector<SequenceAt> order = Order(state);
  const auto it = std::find(order.begin(), order.end(), at);
  return it == order.end() || it + 1 == order.end() ? SequenceAt::kDone : *(it + 1);
}

// Everything after the baseline, up to the final check, row by row (the
// order is read again after each: the non_blocking row settles it).
void Sequence(SearchState& state, HandOn& handed) {
  for (SequenceAt at = Next(state, SequenceAt::kBaseline); at != SequenceAt::kDone; at = Next(state, at)) {
    state.EnterPhase(at);
    PhaseAt(at).run(state, handed);
  }
  state.EnterPhase(SequenceAt::kDone);
}

// The fastest trial: the highest median of the trials that have one to
// rank. A trial measured in a pair (MeasurePairs: the final check, the
// paired knee, persistent_workers under a time budget) is one window, a
// figure for its pair's ratio: the highest of many single windows reads
// high by chance, so none is ranked, except the best when it is one
// (persistent_workers kept in pairs), which stands for its setting.
SearchOutcome Finish(SearchState& state) {
  SearchOutcome& outcome = state.outcome();
  for (size_t i = 0; i < outcome.trials.size(); ++i) {
    const TrialRecord& t = outcome.trials[i];
    if (t.status == TrialStatus::kOk && (!state.Paired(i) || i == outcome.best) &&
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

  state.EnterPhase(SequenceAt::kBaseline);
  const size_t base = state.Measure("baseline", state.knobs());
  state.outcome().baseline = base;
  if (state.trials()[base].status != TrialStatus::kOk) {  // nothing to compare against
    state.DecideFailed(base);
    state.AddPhase("baseline", false, state.trials()[base].decision);
    return Finish(state);
  }
  state.Decide(base, "reference");
  state.Keep(base, state.knobs());
  HandOn handed;
  try {
    if (state.setup().seed && state.setup().check_seed) {
      state.EnterPhase(SequenceAt::kSeedCheck);
      const std::string failed = CheckSeedTrial(state);
      if (failed.empty()) {
        state.EnterPhase(SequenceAt::kFinal);
        FinalCheck(state, "seed_check_pairs");
      }
      if (SeedCheckKept(state, failed)) {
        state.EnterPhase(SequenceAt::kDone);
        return Finish(state);
      }
    }
    Sequence(state, handed);
  } catch (const TimeBudgetSpent&) {
    KeepBestAtBudget(state, handed.budget_from, handed.workers.still_rising);
    state.EnterPhase(SequenceAt::kDone);
  }
  return Finish(state);
}

}  // namespace

int TrialsLeft(const SearchState& state) {
  const SequenceProgress& progress = state.progress();
  if (progress.at == SequenceAt::kDone) return 0;
  const Counts c = CountsOf(state);
  int left = PhaseAt(progress.at).left(state, c);
  for (SequenceAt at = Next(state, progress.at); at != SequenceAt::kDone; at = Next(state, at)) {
    left += PhaseAt(at).trials(c);
  }
  return left;
}

bool BudgetMayEnd(SequenceAt at) { return at == SequenceAt::kDone || PhaseAt(at).budget_may_end; }

}  // namespace search_internal

SearchOutcome RunSearch(const SweepOptions& options, const SearchSetup& setup, const loader::Knobs& start,
                        TrialMeasurer& measurer, const SearchEvents& events) {
  search_internal::SearchState state(options, setup, measurer, events);
  return search_internal::Run(state, start);
}

}  // namespace feedtune::tuner
