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
#include <algorithm>
#include <cmath>

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
// pairs judged by their own rule (`budget_from`: WorkersFound's, PersistentFound's).
void KeepBestAtBudget(SearchState& state, size_t budget_from, const std::string& still_rising) {
  for (size_t i = std::max(state.current_index() + 1, budget_from); i < state.trials().size(); ++i) {
    const TrialRecord& t = state.trials()[i];
    if (t.status == TrialStatus::kOk && t.phase != "final_check" &&
        IsGain(t, state.current(), state.options().gain_threshold)) {
      state.Keep(i, t.knobs);
    }
  }
  state.outcome().best = state.current_index();
  // What the budget left out that the figures say would pay: the workers'
  // restart at every epoch, when persistent_workers was never measured.
  std::string unreached;
  const bool persistent_tried = std::any_of(state.trials().begin(), state.trials().end(), [](const TrialRecord& t) {
    return t.phase == "persistent_workers";
  });
  if (!persistent_tried && !state.setup().seed) {
    const double share = RestartShare(state);
    if (share >= state.options().gain_threshold) {
      // The time to the first batch bounds the restart from above where a
      // worker's batch takes long to load: persistent workers load their
      // epoch's first round too (50 ms a sample: 3.9 s to the first batch,
      // 0.8 s saved).
      const double first_batch_s = state.current().time_to_first_batch_s;
      unreached = Format("; it ended before persistent_workers: at %d workers each epoch's first batch waits %.1f s "
                         "(the workers' restart and their first batch), in an epoch of %.1f s; budget_s=%g would "
                         "reach it",
                         state.knobs().num_workers, first_batch_s, first_batch_s + first_batch_s / share,
                         std::ceil(2 * state.options().time_budget_s / 10) * 10);
    }
  }
  state.AddPhase("time_budget", false,
                 Format("the time budget of %g s ended the search after %d trials (%.1f s); kept the best setting so "
                        "far",
                        state.options().time_budget_s, static_cast<int>(state.trials().size()), state.ElapsedS()) +
                     (still_rising.empty() ? "" : "; " + still_rising) + unreached);
}

}  // namespace feedtune::tuner::search_internal
