// Seeded (SearchSetup::seed, `sweep --seed-from`, docs/fleets.md): a stored
// run of the nearest machine gives the start, and only what it found is
// confirmed; what it did not keep is not re-walked. The seed is stored with
// the run, so a resumed run re-seeds identically.
//
// What it measures, in place of the unseeded phases:
//   pin_memory  not a phase: the seed's pin_memory, non_blocking,
//               prefetch_factor and persistent_workers are set for the
//               doubling, so the curve is measured in the regime the seed
//               ended in; with persistent_workers every seeded trial spans
//               whole epochs (as the persistent_workers phase's do), unless an
//               epoch here is too long for that: then it is left off (SeedStart)
//   num_workers starts at the seed's knee k, or at its best's worker count
//               when that is higher (clamped to max_workers and one round per
//               epoch), then doubles up (2k, 4k, ...) while each doubling
//               rises by the unseeded rule (tuner/search/workers.cc), then
//               halves down (k/2, k/4, ..., 1) while each halving is within
//               knee_tolerance of the best median; a failed or skipped trial
//               ends that direction. Then the knee as unseeded, and the
//               bisection unless the knee is k (the seed's run bisected below
//               its knee already). A right seed costs 3 trials (k/2, k, 2k)
//               (SeededDoubling)
//   seed        the seed's knobs confirmed at the knee by THE RULE
//               (tuner/search/rule.cc) against the same count without them:
//               one trial, none when the seed changed none of them
//               (ConfirmSeed). No other value is tried: non_blocking,
//               prefetch_factor, persistent_workers and num_workers_persistent
//               are not phases (the curve was measured with them);
//               persistent_workers runs only when the seed kept it but its
//               epochs were too long here. Combined and the final check run
//               as unseeded.
//
// What it keeps: the knee, and the seed's knobs when they gain at it; else
// they are dropped.
//
// SearchSetup::check_seed (feedtune.autotune reusing a stored answer) checks
// the stored setting instead of searching around it (CheckSeedTrial, then
// SeedCheckKept after the pairs, tuner/search/sequence.cc runs both): measured
// once, then paired with the reference as in the final check; kept unless
// the pairs' interval lies wholly below x1.00 (SlowerBeyondTheNoise, final_check.cc), else the
// search runs from the baseline, unseeded.
//
// What the time budget changes: nothing of its own; the seed check, like the
// final check, is not cut short.
#include <algorithm>

#include "results/units.h"
#include "tuner/search/phases.h"

namespace feedtune::tuner::search_internal {

using results::Format;  // results/units.h

std::string CheckSeedTrial(SearchState& state) {
  const SearchSetup& setup = state.setup();
  const size_t index = state.Measure("seed_check", setup.seed->best);
  if (state.trials()[index].status != TrialStatus::kOk) {
    state.DecideFailed(index);
    return "the stored setting did not run (" + state.trials()[index].decision + ")";
  }
  state.Decide(index, "the stored setting of " + setup.seed->source + ", checked against " +
                          (setup.reference ? "the job's own setting" : "the baseline"));
  state.Keep(index, state.trials()[index].knobs);
  return "";
}

// `failed`: CheckSeedTrial's; else the pairs decide.
bool SeedCheckKept(SearchState& state, std::string failed) {
  const SearchSetup& setup = state.setup();
  const std::string source = setup.seed->source;
  SearchOutcome& outcome = state.outcome();
  if (failed.empty()) {
    if (!outcome.speedup) {
      failed = "no pair of the check was measured";
    } else if (SlowerBeyondTheNoise(outcome)) {
      failed = Format("the stored setting ran x%.2f [%.2f, %.2f] of ", *outcome.speedup,
                      outcome.speedup_ci_low.value_or(0), *outcome.speedup_ci_high) +
               (setup.reference ? "the job's own setting" : "the baseline") + ", slower beyond the noise";
    }
  }
  if (failed.empty()) {
    outcome.best = state.current_index();
    state.AddPhase("seed_check", true, "kept the stored setting of " + source + " (" +
                                           loader::KnobsShort(state.knobs()) +
                                           ") after one check instead of the search");
    return true;
  }
  state.AddPhase("seed_check", false, failed + "; the search runs from the baseline, unseeded");
  state.DropSeed();
  state.Keep(*outcome.baseline, state.trials()[*outcome.baseline].knobs);
  outcome.speedup.reset();
  outcome.speedup_ci_low.reset();
  outcome.speedup_ci_high.reset();
  outcome.best_is_reference = false;
  return false;
}

// The seed's pin_memory, non_blocking and prefetch_factor for the doubling,
// in place of the pin_memory phase; ConfirmSeed checks them at the knee.
TrialPlan SeedStart(SearchState& state) {
  const SearchSeed& seed = *state.setup().seed;
  const loader::Knobs& best = seed.best;
  loader::Knobs knobs = state.knobs();
  knobs.pin_memory = best.pin_memory || best.non_blocking;
  knobs.non_blocking = best.non_blocking;
  if (best.prefetch_factor > 0) knobs.prefetch_factor = best.prefetch_factor;
  state.SetKnobs(knobs);
  // Its persistent_workers too, when the epochs here are short enough to
  // measure it: then every seeded trial spans whole epochs, where it acts.
  // Judged at the baseline's rate, the only one known yet: the workers'
  // curve is faster, so the check errs towards the unseeded phase.
  std::string persistent = "";
  TrialPlan plan;
  if (best.persistent_workers) {
    std::string why;
    plan.window_epochs = PersistentWindowEpochs(state, &why);
    if (plan.window_epochs > 0) {
      knobs.persistent_workers = true;
      state.SetKnobs(knobs);
      persistent = ", persistent_workers on (windows of " + std::to_string(plan.window_epochs) + " whole epochs)";
    }
  }
  state.AddPhase("pin_memory", false,
                 "not a phase: seeded from " + seed.source + ", the curve is measured with its pin_memory " +
                     (knobs.pin_memory ? "on" : "off") + ", non_blocking " + (knobs.non_blocking ? "on" : "off") +
                     ", prefetch_factor " + std::to_string(knobs.prefetch_factor) + persistent +
                     " (confirmed at the knee)");
  return plan;
}

// From the seed's knee k up while each doubling rises by the unseeded rule,
// then down from k/2 while each halving is within knee_tolerance of the best
// median. Adds the points to `curve` (which holds the baseline); returns how
// it ended, for the phase's text.
std::string SeededDoubling(SearchState& state, std::vector<CurvePoint>& curve, int64_t batches,
                           const TrialPlan& seeded_plan, int* knee) {
  const SearchSetup& setup = state.setup();
  const SearchSeed& seed = *setup.seed;
  const double threshold = state.options().gain_threshold;
  // The curve is measured in the seed's final regime, so it starts at the
  // worker count of the seed's best (more than its knee when, e.g., more
  // workers paid once persistent), else at its knee.
  const bool from_best = seed.best.num_workers > seed.knee_workers;
  const std::string start_of =
      std::string(from_best ? "the best setting's worker count of " : "the knee of ") + seed.source;
  int k = std::clamp(from_best ? seed.best.num_workers : seed.knee_workers, 1, std::max(1, setup.max_workers));
  if (batches > 0 && k > batches) k = static_cast<int>(batches);
  *knee = k;
  // Measures one count; nullopt (decided) when the trial did not run.
  const auto measure = [&](int workers, std::string* why) -> std::optional<size_t> {
    loader::Knobs knobs = state.knobs();
    knobs.num_workers = workers;
    const size_t index = state.Measure("num_workers", knobs, seeded_plan);
    if (state.trials()[index].status != TrialStatus::kOk) {
      const bool skipped = state.trials()[index].status == TrialStatus::kSkipped;
      *why = WorkersText(workers) + (skipped ? ": over a budget" : ": the trial failed");
      state.DecideFailed(index);
      return std::nullopt;
    }
    curve.emplace_back(workers, index);
    return index;
  };
  size_t best = curve.front().second;  // the baseline, as in the unseeded doubling
  std::string up;
  if (const auto at_k = measure(k, &up)) {
    const TrialRecord& t = state.trials()[*at_k];
    state.Decide(*at_k, Percent(Gain(t, state.trials()[best])) + " over the baseline: " + start_of +
                            ", where the seeded doubling starts");
    if (IsGain(t, state.trials()[best], threshold)) best = *at_k;
    int last = k;
    for (int workers = NextDoubling(state, k, batches); up.empty(); workers = NextDoubling(state, workers, batches)) {
      if (workers == 0) {
        up = WorkersText(last) + (last >= setup.max_workers ? ": max_workers" : ": one round per epoch");
        break;
      }
      const auto index = measure(workers, &up);
      if (!index) break;
      const TrialRecord& u = state.trials()[*index];
      const double gain = Gain(u, state.trials()[best]);
      const bool below_cpus = BelowCpus(state, workers);
      if (IsGain(u, state.trials()[best], threshold)) {
        state.Decide(*index, Percent(gain) + " over the best so far; keep doubling");
        best = *index;
      } else if (gain > (below_cpus ? 0.0 : threshold)) {
        state.Decide(*index, Percent(gain) + (below_cpus ? ": rising below the usable CPU count; keep doubling"
                                                         : ": rising, but within noise; keep doubling"));
      } else {
        state.Decide(*index, Percent(gain) + ": no gain over the best so far, stop doubling up");
        up = WorkersText(workers) + ": no gain";
      }
      last = workers;
    }
  }
  std::string down;
  for (int workers = k / 2; workers >= 1 && down.empty(); workers /= 2) {
    const auto index = measure(workers, &down);
    if (!index) break;
    double top = 0;
    for (const auto& [w, i] : curve) top = std::max(top, state.trials()[i].samples_per_s);
    const TrialRecord& t = state.trials()[*index];
    const std::string figure = Percent(top > 0 ? t.samples_per_s / top - 1.0 : 0.0) + " against the best median";
    if (t.samples_per_s >= top * (1.0 - state.options().knee_tolerance)) {
      state.Decide(*index, figure + ", within the knee tolerance" + (workers > 1 ? "; halve again" : ""));
    } else {
      state.Decide(*index, figure + ", beyond the knee tolerance: stop halving");
      down = WorkersText(workers) + ": below the knee tolerance";
    }
  }
  if (down.empty()) down = k > 1 ? "1 worker" : "nothing below 1 worker";
  return "seeded at " + WorkersText(k) + ", " + start_of + "; doubled up to " + up + "; halved down to " + down;
}

// The curve was measured with the seed's pin_memory, non_blocking,
// prefetch_factor and persistent_workers; the knee without them is measured
// once (in the curve's windows), and they are kept by THE RULE or dropped.
void ConfirmSeed(SearchState& state, const TrialPlan& seeded_plan) {
  const double threshold = state.options().gain_threshold;
  const loader::Knobs& current = state.knobs();
  loader::Knobs plain = state.trials()[*state.outcome().baseline].knobs;
  plain.num_workers = current.num_workers;
  if (current.num_workers == 0) {
    state.SetKnobs(plain);  // the current trial is the baseline's
    state.AddPhase("seed", false, "not confirmed: the knee is the baseline (0 workers); nothing of the seed is kept");
    return;
  }
  std::string what;
  if (current.pin_memory != plain.pin_memory) what += ", pin_memory";
  if (current.non_blocking != plain.non_blocking) what += ", non_blocking";
  if (current.prefetch_factor != plain.prefetch_factor) {
    what += ", prefetch_factor " + std::to_string(current.prefetch_factor);
  }
  if (current.persistent_workers != plain.persistent_workers) what += ", persistent_workers";
  if (what.empty()) {
    state.AddPhase("seed", false,
                   "nothing to confirm: " + state.setup().seed->source +
                       " kept none of pin_memory, non_blocking, persistent_workers or another prefetch_factor, so "
                       "neither does this sweep");
    return;
  }
  what = what.substr(2);
  const size_t seeded = state.current_index();
  const size_t index = state.Measure("seed", plain, seeded_plan);
  const TrialRecord& t = state.trials()[index];
  if (t.status != TrialStatus::kOk) {
    state.DecideFailed(index);
    state.AddPhase("seed", true, "kept the seed's " + what + " unconfirmed: the knee without them did not run");
    return;
  }
  const TrialRecord& with = state.trials()[seeded];
  if (IsGain(with, t, threshold)) {
    state.Decide(index, "the knee without the seed's " + what + ": they gain " + Percent(Gain(with, t)) + ", kept");
    state.AddPhase("seed", true, "kept the seed's " + what + ": " + Percent(Gain(with, t)) + " at the knee");
  } else {
    state.Decide(index, "the seed's " + what + " dropped: " + NotKept(with, t, threshold));
    state.Keep(index, plain);
    state.AddPhase("seed", false, "dropped the seed's " + what + ": " + NotKept(with, t, threshold));
  }
}

}  // namespace feedtune::tuner::search_internal
