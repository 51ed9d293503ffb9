// persistent_workers, then num_workers_persistent (workers only).
//
// What it measures: the current setting twice, off and on, each with windows
// of whole epochs (>= kEpochsPerSetting epochs per setting), so the epoch
// boundary, where the setting acts, is inside the figure; the boundary cost
// in ms is reported for both. Not tried when an epoch is so long that this
// would take more than max(kLongestTrialFloorS, kLongestTrialPerWindow x
// repeats x measure_seconds). When it was kept, num_workers_persistent
// measures the counts measured above the knee again, with persistent workers
// and over whole epochs, in order while each gains: the restart that grew with
// the worker count is gone (short epochs).
//
// What it keeps: on by THE RULE (tuner/search/rule.cc), over the off trial;
// a rise that is no gain is a candidate for the combined trial. Each larger
// count that gains by THE RULE. Every later trial compared with a setting
// this phase kept is measured as it was, over whole epochs (PlanAgainstCurrent).
//
// What the time budget changes: the phase (and num_workers_persistent) runs
// before prefetch_factor when the knee's time to its first batch, the restart
// it saves at each epoch, is at least gain_threshold of an epoch at the
// knee's rate (PersistentFirst): on short epochs that restart is the larger
// gain, and its whole-epoch trials the first a budget cuts off. Off and on
// are then weighed in `repeats` interleaved pairs, one window of whole epochs
// each, and on is kept when their median ratio is above kPairsKeepAbove (it
// only removes a cost); the budget ends the pairs between two pairs, never
// inside one, and the pairs measured decide (PersistentInPairs).
//
// Seeded: tried only when the seed kept it, and measured with the curve when
// its epochs were short enough (tuner/search/seeded_search.cc).
#include "results/units.h"
#include "tuner/measure/stats.h"
#include "tuner/search/phases.h"

namespace feedtune::tuner::search_internal {

using results::Format;  // results/units.h

// Whole epochs per setting, at least: one epoch boundary inside the windows
// is one restart, and two show that it recurs.
constexpr int kEpochsPerSetting = 2;
// The warm-up runs on to an epoch's end before whole-epoch windows start
// (tuner/measure/trial_runner.cc): about one epoch more per trial.
constexpr int kWarmupEpochs = 1;
// The longest a setting's whole-epoch trial may take: max(this floor, this
// many times the time windows' total, repeats x measure_seconds). Past it
// the epoch is long, and the restart the setting saves once per epoch is too
// small a share of it to pay for the measurement.
constexpr double kLongestTrialFloorS = 30.0;
constexpr double kLongestTrialPerWindow = 5.0;
// Under a time budget, whole-epoch windows per setting: two, the fewest an
// interval is drawn from, since each is a whole epoch and the budget is short.
constexpr int kBudgetWindows = 2;
// Under a time budget, the pairs' median ratio above which persistent
// workers are kept: any gain. The setting only removes a cost (the workers'
// restart at each epoch), and a budget leaves no combined phase to take up a
// small gain.
constexpr double kPairsKeepAbove = 1.0;

int PersistentWindowEpochs(const SearchState& state, std::string* why, int windows) {
  const int n = windows > 0 ? windows : state.repeats();
  const int epochs = std::max(1, (kEpochsPerSetting + n - 1) / n);
  const int64_t samples_per_epoch = state.SamplesPerEpoch();
  if (samples_per_epoch > 0 && state.current().samples_per_s > 0) {
    const double epoch_s = static_cast<double>(samples_per_epoch) / state.current().samples_per_s;
    const double trial_s = epoch_s * (n * epochs + kWarmupEpochs);
    const double limit_s =
        std::max(kLongestTrialFloorS, kLongestTrialPerWindow * state.repeats() * state.options().measure_seconds);
    if (trial_s > limit_s) {
      *why = "not tried: an epoch takes about " + Format("%.0f s", epoch_s) + " here, so measuring " +
             std::to_string(n * epochs) + " epochs per setting would take " + Format("%.0f s", trial_s) +
             " (limit " + Format("%.0f s", limit_s) + "); the setting only saves the worker restart once per epoch";
      return 0;
    }
  }
  return epochs;
}

// Over whole epochs once the persistent_workers phase kept it (measured so,
// the current setting pays the refill at each epoch that time windows
// miss), else in time windows.
TrialPlan PlanAgainstCurrent(const SearchState& state, const PersistentFound& persistent) {
  return persistent.kept && state.knobs().persistent_workers ? persistent.plan : TrialPlan{};
}

// Under a time budget the sequence may end before its last phases, and this
// phase, which measures whole epochs, is the costliest. Without a budget, or
// seeded, the order is tuner/search/sequence.cc's.
bool PersistentFirst(const SearchState& state, double* share) {
  if (!state.under_time_budget() || state.setup().seed) return false;
  *share = RestartShare(state);
  return *share >= state.options().gain_threshold;
}

double RestartShare(const SearchState& state) {
  const TrialRecord& knee = state.current();
  const int64_t samples_per_epoch = state.SamplesPerEpoch();
  if (knee.status != TrialStatus::kOk || knee.samples_per_s <= 0 || knee.time_to_first_batch_s <= 0 ||
      samples_per_epoch <= 0 || knee.knobs.num_workers == 0 || knee.knobs.persistent_workers) {
    return 0;
  }
  // What persistence gains: the restart over an epoch without it (a
  // charged figure has the restart in it; ChargeRestart).
  double epoch_s = static_cast<double>(samples_per_epoch) / knee.samples_per_s;
  if (state.Charged(state.current_index())) epoch_s -= knee.time_to_first_batch_s;
  return epoch_s > 0 ? knee.time_to_first_batch_s / epoch_s : 0;
}

namespace {

// Under a time budget persistent_workers off and on run in interleaved
// pairs, each trial one window of `window_epochs` whole epochs, so that
// both sides are measured alike and a step whose speed moves within its
// process moves both sides of a pair. Measured one after the other, the
// reference was the knee's figure from short time windows with its restart
// charged (ChargeRestart), against whole epochs with persistent workers; on
// a CPU-trained CNN an epoch's mean read 8-13% under the windows' median
// (slow phases of the step that most short windows miss), about what
// persistent workers save, so they were rarely kept where they gained. On
// the CNN it gained 4% at 1 worker where the next count with it gained 3%
// more: two steps under the threshold, 6% of regret together
// (kPairsKeepAbove). The budget may end the pairs between two pairs, never
// inside one; the pairs measured decide, and the sequence ends after the
// phase (PersistentFound::budget_spent).
void PersistentInPairs(SearchState& state, int window_epochs, PersistentFound& found) {
  const loader::Knobs off = state.knobs();
  loader::Knobs on = state.knobs();
  on.persistent_workers = true;
  PairsPlan how;
  how.window_epochs = window_epochs;
  bool budget_ended = false;
  how.budget_ended = &budget_ended;
  how.over = "the pair's trial without";
  const size_t first = state.trials().size();
  const std::vector<double> ratios = MeasurePairs(state, "persistent_workers", off, on, "without persistent_workers",
                                                  "with persistent_workers", how);
  found.budget_from = state.trials().size();  // single epochs, judged here: not weighed again at the budget
  if (ratios.empty()) {  // the first pair's trial failed (a budget ends the pairs only after one)
    state.AddPhase("persistent_workers", false, state.trials().back().decision);
    return;
  }
  // The last complete pair: its trials are the phase's figures from here on.
  const size_t on_index = first + 2 * ratios.size() - 1, off_index = on_index - 1;
  const Summary s = Summarize(ratios);
  const bool gain = s.median > kPairsKeepAbove;
  std::string why = Format("x%.2f [%.2f, %.2f]", s.median, s.ci_low, s.ci_high) + " with over without, " +
                    std::to_string(ratios.size()) + " interleaved pair" + (ratios.size() == 1 ? "" : "s") + " of " +
                    std::to_string(window_epochs) + " whole epoch" + (window_epochs == 1 ? "" : "s") + " each" +
                    (gain ? "" : ", not above x1.00") + "; epoch boundary " +
                    BoundaryMs(state.trials()[off_index]) + " without, " + BoundaryMs(state.trials()[on_index]) +
                    " with" + (budget_ended ? "; the time budget ended the pairs" : "");
  if (gain) {
    state.Keep(on_index, on);
    found.kept = true;
  }
  state.AddPhase("persistent_workers", gain, (gain ? "kept: " : "not kept: ") + why);
  found.budget_spent = budget_ended;
}

PersistentFound Persistent(SearchState& state, const TrialPlan& seeded_plan) {
  PersistentFound found;
  const std::optional<SearchSeed>& seed = state.setup().seed;
  if (seed && !seed->best.persistent_workers) {
    state.AddPhase("persistent_workers", false, "not tried: seeded, and " + seed->source + " did not keep it");
    return found;
  }
  if (seed && seeded_plan.window_epochs > 0) {
    // The curve and the seed phase measured it already (tuner/search/seeded_search.cc).
    state.AddPhase("persistent_workers", state.knobs().persistent_workers,
                   std::string(state.knobs().persistent_workers ? "kept" : "dropped") +
                       " with the seed phase: the seeded curve was measured with persistent workers over whole epochs");
    return found;
  }
  const double threshold = state.options().gain_threshold;
  TrialPlan plan;
  if (state.under_time_budget()) plan.repeats = std::min(state.repeats(), kBudgetWindows);
  std::string why;
  plan.window_epochs = PersistentWindowEpochs(state, &why, plan.repeats);
  if (plan.window_epochs == 0) {
    state.AddPhase("persistent_workers", false, why);
    return found;
  }
  found.plan = plan;
  if (state.under_time_budget()) {
    PersistentInPairs(state, plan.window_epochs, found);
    return found;
  }
  const std::optional<size_t> off = MeasureOrEndPhase(state, "persistent_workers", state.knobs(), plan);
  if (!off) return found;
  state.Decide(*off, "reference over whole epochs: epoch boundary " + BoundaryMs(state.trials()[*off]));

  loader::Knobs knobs = state.knobs();
  knobs.persistent_workers = true;
  const std::optional<size_t> on = MeasureOrEndPhase(state, "persistent_workers", knobs, plan);
  if (!on) return found;
  const TrialRecord& t_on = state.trials()[*on];
  const TrialRecord& ref = state.trials()[*off];
  const bool gain = IsGain(t_on, ref, threshold);
  const std::string boundary = "; epoch boundary " + BoundaryMs(ref) + " without, " + BoundaryMs(t_on) + " with";
  const std::string figure = Percent(Gain(t_on, ref));
  if (gain) {
    state.Decide(*on, "kept: " + figure + boundary);
    state.Keep(*on, knobs);
    found.kept = true;
  } else {
    state.Decide(*on, NotKept(t_on, ref, threshold) + boundary);
    if (t_on.samples_per_s > ref.samples_per_s) {
      found.small_gain = SmallGain{SmallGainOf::kPersistentWorkers, *on};
      found.reference = *off;
    }
  }
  state.AddPhase("persistent_workers", gain, state.trials()[*on].decision);
  return found;
}

}  // namespace

// With persistent_workers kept, the worker restart at each epoch, a cost
// that grew with the worker count while the curve was measured, is gone, so
// counts above the knee may now gain. Short epochs above all: restarting 8
// workers every 16-batch epoch can lose to 6, yet with persistent workers 8
// take 2 rounds per epoch against 3.

void WorkersWithPersistent(SearchState& state, const std::vector<CurvePoint>& curve, const TrialPlan& plan) {
  const char* phase = "num_workers_persistent";
  const double threshold = state.options().gain_threshold;
  const int from = state.knobs().num_workers;
  std::string why;
  bool kept = false;
  for (const auto& [workers, curve_index] : curve) {
    if (workers <= state.knobs().num_workers || state.trials()[curve_index].status != TrialStatus::kOk) continue;
    loader::Knobs knobs = state.knobs();
    knobs.num_workers = workers;
    const size_t index = state.Measure(phase, knobs, plan);
    const TrialRecord& t = state.trials()[index];
    if (t.status != TrialStatus::kOk) {
      state.DecideFailed(index);
      why = t.decision;
      break;
    }
    const std::string over = " over " + WorkersText(state.knobs().num_workers) + " with persistent_workers";
    if (IsGain(t, state.current(), threshold)) {
      state.Decide(index, "kept: " + Percent(Gain(t, state.current())) + over);
      state.Keep(index, knobs);
      kept = true;
      continue;
    }
    state.Decide(index, NotKept(t, state.current(), threshold) + over);
    break;
  }
  if (state.knobs().num_workers == from && why.empty()) {
    why = curve.back().first <= from ? "not tried: no worker count above the knee was measured"
                                     : "kept " + WorkersText(from) + ": no larger count gains with persistent_workers";
  } else if (why.empty()) {
    why = "kept " + WorkersText(state.knobs().num_workers) + " with persistent_workers (the knee without it: " +
          std::to_string(from) + ")";
  }
  state.AddPhase(phase, kept, why);
}

PersistentFound PersistentPhase(SearchState& state, const TrialPlan& seeded_plan,
                                std::optional<double> first_share) {
  const auto say_why_first = [&state, first_share] {
    std::vector<PhaseDecision>& phases = state.outcome().phases;
    if (first_share && !phases.empty() && phases.back().phase == "persistent_workers") {
      phases.back().why += Format(
          "; tried before prefetch_factor, as the time budget may end the search: the workers' restart at each "
          "epoch was %.0f%% of one at the knee",
          100.0 * *first_share);
    }
  };
  try {
    PersistentFound found = Persistent(state, seeded_plan);
    say_why_first();
    return found;
  } catch (const TimeBudgetSpent&) {  // the budget ended its first pair (MeasurePairs)
    say_why_first();
    throw;
  }
}

}  // namespace feedtune::tuner::search_internal
