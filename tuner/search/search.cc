// The search's phases not yet in files of their own, in the order of
// their files-to-be (tuner/search/phases.h).
#include "tuner/search/search.h"

// ---- sequence ----

// The search controller: the manual tuning method (docs/architecture.md, "The
// method the search automates"), automated. One knob at a time, each step
// from the setting the ones before arrived at, each kept only by THE RULE
// (tuner/search/rule.cc):
//
//   baseline           num_workers 0, pin_memory off, non_blocking off
//   pin_memory         turn pinning on (tuner/search/copy.cc)
//   num_workers        1, 2, 4, ... doubling to the knee, then bisecting
//                      below it (tuner/search/workers.cc; under a time budget
//                      a knee at 0 workers is checked in pairs:
//                      tuner/search/paired_knee.cc)
//   non_blocking       on, with pin_memory (tuner/search/copy.cc)
//   prefetch_factor    each other value (tuner/search/prefetch.cc)
//   persistent_workers off and on over whole epochs, then the worker counts
//                      above the knee with it (tuner/search/persistent.cc)
//   multiprocessing_context  the workers' start method (tuner/search/start_method.cc)
//   cpu_binding, worker_threads  around the loader (tuner/search/node.cc)
//   combined           the small gains together (tuner/search/search.cc)
//   final check        baseline and best in interleaved pairs
//                      (tuner/search/search.cc)
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
// The time budget (tuner/search/search.cc) ends the sequence wherever it
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

// ---- combined ----

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

// ---- pairs ----

// Interleaved pairs, the measurement the final check, the paired knee and
// persistent_workers under a time budget share (MeasurePairs).
//
// What it measures: `repeats` pairs of one window each, a (the baseline, or
// the setting standing in for it) then b, interleaved, so that a step whose
// speed moves between trials moves both of a pair alike; the ratio of b's
// figure over a's for each pair measured (a failed trial ends them).
//
// What it keeps: nothing; the phase that asked decides from the ratios.
//
// What the time budget changes: with PairsPlan::budget_ended set, the budget
// ends the pairs between two pairs, never inside one; with
// PairsPlan::settle_bar set, more pairs settle a bar still inside the
// median's interval, while the budget holds one more, up to
// kMostPairsPerRepeat x repeats.
#include "results/units.h"
#include "tuner/measure/stats.h"
#include "tuner/search/phases.h"

namespace feedtune::tuner::search_internal {

using results::Format;  // results/units.h

// The cap on PairsPlan::settle_bar's pairs, as a multiple of `repeats` (9
// pairs at the default 3): it keeps time for the worker phases that follow
// where the pairs do find a knee. Uncapped pairs of three windows a trial
// settled 1 worker after 50 s of a 60 s budget, and the budget ended the
// search before persistent_workers (docs/search.md, "A time budget").
constexpr int kMostPairsPerRepeat = 3;

namespace {

// Whether pair number `pair` is one more to settle `how.settle_bar`: every
// pair so far measured, the bar inside their median's interval, time left
// in the budget for one more pair as long as the last (`pair_s`), and the
// cap not passed. A decision against a bar that the pairs cannot yet place
// is settled with the time the user granted, not left to three pairs and
// the rest of it unused.
bool Unsettled(const SearchState& state, const std::vector<double>& ratios, const PairsPlan& how, int pair,
               double pair_s) {
  if (how.settle_bar <= 0 || !state.under_time_budget() || ratios.size() + 1 != static_cast<size_t>(pair) ||
      pair > kMostPairsPerRepeat * state.repeats() || !state.BudgetHolds(pair_s)) {
    return false;
  }
  const Summary s = Summarize(ratios);
  return s.ci_low <= how.settle_bar && how.settle_bar <= s.ci_high;
}

}  // namespace

// `done` counts the trials, for progress. a and b must not refer into
// trials(), which measuring grows.
std::vector<double> MeasurePairs(SearchState& state, const char* phase, const loader::Knobs& a,
                                 const loader::Knobs& b, const std::string& a_name, const std::string& b_name,
                                 int* done, const PairsPlan& how) {
  TrialPlan plan;
  plan.repeats = 1;
  plan.window_epochs = how.window_epochs;
  const bool in_windows = how.in_windows;
  const int repeats = state.repeats();
  std::vector<double> ratios;
  double pair_s = 0;  // the last pair's time, for whether the budget holds one more
  for (int pair = 1; pair <= repeats || Unsettled(state, ratios, how, pair, pair_s); ++pair) {
    // A pair past `repeats` begins only where the budget holds it
    // (Unsettled), and then runs whole, as the second trial of every pair does.
    const bool settling = pair > repeats;
    if (how.budget_ended && pair > 1 && !state.BudgetHolds(pair_s)) {
      *how.budget_ended = true;
      break;
    }
    const double pair_start = state.ElapsedS();
    size_t ia = 0;
    try {
      ia = state.Measure(phase, a, plan, /*budget_may_end=*/!settling);
    } catch (const TimeBudgetSpent&) {
      if (!how.budget_ended || pair == 1) throw;
      *how.budget_ended = true;
      break;
    }
    ++*done;
    if (state.trials()[ia].status != TrialStatus::kOk) {
      state.Decide(ia, "");
      break;
    }
    state.Decide(ia, "pair " + std::to_string(pair) + ": " + a_name);
    const size_t ib = state.Measure(phase, b, plan, /*budget_may_end=*/how.budget_ended == nullptr && !settling);
    ++*done;
    if (state.trials()[ib].status != TrialStatus::kOk) {
      state.Decide(ib, "");
      break;
    }
    const auto rate = [&](size_t i) { return in_windows ? state.WindowsRate(i) : state.trials()[i].samples_per_s; };
    const double ratio = rate(ia) > 0 ? rate(ib) / rate(ia) : 0.0;
    ratios.push_back(ratio);
    state.Decide(ib, "pair " + std::to_string(pair) + ": " + b_name + ", " + Format("x%.2f", ratio) + " over " +
                         how.over + (in_windows ? " in their windows" : ""));
    pair_s = state.ElapsedS() - pair_start;
  }
  return ratios;
}

}  // namespace feedtune::tuner::search_internal

// ---- final_check ----

// The final check: how much faster the best setting is.
//
// What it measures: the baseline and the best re-measured interleaved, A B A
// B ..., `repeats` pairs of one window each (tuner/search/search.cc), so drift
// of the machine during the sweep hits both alike. With
// SearchSetup::reference the reference setting (the job's own) stands in for
// the baseline.
//
// What it keeps: nothing changes the best; the speedup is the median of the
// pair ratios with a 95% bootstrap interval, and the phase reads "kept" when
// the interval lies wholly above x1.00.
//
// What the time budget changes: nothing once begun, the check runs to its
// end (SearchState::Measure), so the speedup is known or not measured.
#include "results/units.h"
#include "tuner/measure/stats.h"
#include "tuner/search/phases.h"

namespace feedtune::tuner::search_internal {

using results::Format;  // results/units.h

// The ratio of no speedup: the check reads "kept" only when the whole
// interval of the pairs' median lies above it.
constexpr double kNoSpeedup = 1.0;

void FinalCheck(SearchState& state, const char* phase_name) {
  const SearchSetup& setup = state.setup();
  const TrialRecord& base = state.trials()[*state.outcome().baseline];
  const TrialRecord& best = state.current();
  const loader::Knobs a = setup.reference.value_or(base.knobs), b = best.knobs;
  const char* reference = setup.reference ? "the job's own setting" : "the baseline";
  if (a == b) {
    state.outcome().speedup = kNoSpeedup;
    state.AddPhase(phase_name, false, std::string("not run: the best setting is ") + reference);
    return;
  }
  state.tally.final_done = 0;
  const std::vector<double> ratios = MeasurePairs(state, "final_check", a, b,
                                                  setup.reference ? "the job's own setting" : "baseline", "best",
                                                  &state.tally.final_done);
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

}  // namespace feedtune::tuner::search_internal

// ---- time_budget ----

// The time budget (sweep.time_budget_s > 0, feedtune.autotune's budget_s).
//
// What it measures: nothing of its own. Once the budget has passed, no new
// trial starts (SearchState::Measure throws TimeBudgetSpent) and the sequence
// ends at the best setting so far, with a "time_budget" phase saying so
// (KeepBestAtBudget). The baseline always runs, and a final check once begun
// runs to its end. The budget is the one input not in the records: a resumed
// run may stop elsewhere.
//
// What it keeps: the setting kept so far, or a trial measured since that
// gains over it by THE RULE (tuner/search/rule.cc). A num_workers phase that
// the budget cuts short names its knee from the curve measured so far, as it
// would have at its end (tuner/search/workers.cc).
//
// What else the budget changes, each told in its phase's file: the doubling
// ends on one miss above the CPU count (tuner/search/workers.cc); a knee at 0
// workers is checked in pairs (tuner/search/paired_knee.cc); persistent_workers
// may run before prefetch_factor, and is weighed in pairs
// (tuner/search/persistent.cc); and a worker trial measured in time windows is
// charged its restart once per epoch (ChargeRestart, below).
#include "results/units.h"
#include "tuner/search/phases.h"

namespace feedtune::tuner::search_internal {

using results::Format;  // results/units.h

// Under a time budget the sequence may end before persistent_workers, and
// the job then keeps what it has: workers restarted at every epoch. Time
// windows rarely cross an epoch's end, so they miss that restart, and with
// short epochs it outweighs what more workers gain (a job of 3 s epochs:
// 16 workers, 0.84 s to restart, ran 8% faster than 8 in windows and 11%
// slower per epoch). So under a budget a trial measured in time windows,
// with workers that do not persist, is judged by the rate of a whole epoch:
// its windows' rate with the restart it paid before its first batch (its
// time to first batch) charged once per epoch. The interval is charged
// alike. Whole-epoch windows hold their restarts already (the caller, SearchState::Measure, charges
// only time windows under a budget).
std::optional<std::string> ChargeRestart(TrialRecord& t, int64_t samples_per_epoch) {
  if (t.status != TrialStatus::kOk || t.knobs.num_workers == 0 || t.knobs.persistent_workers ||
      !(t.time_to_first_batch_s > 0) || samples_per_epoch <= 0 || !(t.samples_per_s > 0)) {
    return std::nullopt;
  }
  const double epoch_samples = static_cast<double>(samples_per_epoch);
  const double restart_s = t.time_to_first_batch_s;
  double windows = t.samples_per_s;
  if (t.id != 0) {
    // Replayed (a resumed run's stored trial): charged when it was measured.
    windows = UnchargedRate(t.samples_per_s, epoch_samples, restart_s);
    if (!(windows > 0)) return std::nullopt;
  } else {
    const auto per_epoch = [&](double rate) {
      return rate > 0 ? epoch_samples / (epoch_samples / rate + restart_s) : rate;
    };
    t.samples_per_s = per_epoch(windows);
    t.ci_low = per_epoch(t.ci_low);
    t.ci_high = per_epoch(t.ci_high);
    t.mb_per_s *= t.samples_per_s / windows;
  }
  return Format("%.1f samples/s per epoch: %.1f in its windows, its restart (%.0f ms to the first batch) "
                "charged once per epoch of %lld samples, as a job without persistent workers pays it",
                t.samples_per_s, windows, restart_s * 1e3, static_cast<long long>(samples_per_epoch));
}

double UnchargedRate(double charged, double epoch_samples, double restart_s) {
  const double epoch_s = charged > 0 ? epoch_samples / charged - restart_s : 0.0;
  return epoch_s > 0 ? epoch_samples / epoch_s : 0.0;
}

// The final check, once begun, is not cut short (SearchState::Measure), so
// the speedup is known or not run.
//
// Only trials measured after the kept one: an earlier trial lost to it, or
// was measured another way (time windows against a later phase's whole
// epochs, where the restart persistent workers save is paid), and comparing
// across that would undo a kept step. Nor a curve the knee rule judged, nor
// pairs judged by their own rule (HandOn::budget_from).
void KeepBestAtBudget(SearchState& state) {
  for (size_t i = std::max(state.current_index() + 1, state.handed.budget_from); i < state.trials().size(); ++i) {
    const TrialRecord& t = state.trials()[i];
    if (t.status == TrialStatus::kOk && t.phase != "final_check" &&
        IsGain(t, state.current(), state.options().gain_threshold)) {
      state.Keep(i, t.knobs);
    }
  }
  state.outcome().best = state.current_index();
  state.AddPhase("time_budget", false,
                 Format("the time budget of %g s ended the search after %d trials (%.1f s); kept the best setting so "
                        "far",
                        state.options().time_budget_s, static_cast<int>(state.trials().size()), state.ElapsedS()));
  state.tally.at = SequenceAt::kDone;
}

}  // namespace feedtune::tuner::search_internal
