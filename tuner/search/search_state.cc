// The shared state's plumbing: measuring a trial, writing its decision, the
// clock and the epoch. No rule is decided here: each phase's is in its own
// file (tuner/search/phases.h), and the order and the estimate of trials left
// are the phase table's (tuner/search/sequence.cc).
#include "tuner/search/search_state.h"

#include <cmath>

#include "results/units.h"
#include "tuner/search/phases.h"

namespace feedtune::tuner::search_internal {

using results::Format;  // results/units.h

size_t SearchState::Measure(const char* phase, const loader::Knobs& knobs, TrialPlan plan, bool budget_may_end) {
  // The baseline always runs, and so do the seed check and a final check once begun (BudgetMayEnd).
  if (budget_may_end && options_.time_budget_s > 0 && BudgetMayEnd(progress_.at) &&
      ElapsedS() >= options_.time_budget_s) {
    throw TimeBudgetSpent{};
  }
  plan.phase = phase;
  if (events_.on_start) events_.on_start(plan, knobs, {static_cast<int>(outcome_.trials.size()), TrialsLeft(*this)});
  TrialRecord trial = measurer_.MeasurePlanned(knobs, plan);
  trial.phase = phase;
  trial.knobs = knobs;
  trial.elapsed_s = ElapsedS();
  trials().push_back(std::move(trial));
  ++progress_.done;
  const size_t index = trials().size() - 1;
  // Whole-epoch windows hold their restarts already.
  if (plan.window_epochs == 0 && options_.time_budget_s > 0) {
    if (std::optional<std::string> charged = ChargeRestart(trials()[index], SamplesPerEpoch())) {
      charged_[index] = std::move(*charged);
    }
  }
  return index;
}

void SearchState::DecideFailed(size_t index) {
  const TrialRecord& t = trials()[index];
  Decide(index, t.status == TrialStatus::kSkipped ? "skipped: " + t.error.value_or("over a budget")
                                                  : "failed: " + t.error.value_or("unknown error"));
}

void SearchState::Decide(size_t index, std::string decision) {
  TrialRecord& t = trials()[index];
  if (const auto it = charged_.find(index); it != charged_.end()) {
    decision += (decision.empty() ? "" : "; ") + it->second;
  }
  t.decision = std::move(decision);
  if (events_.on_trial) events_.on_trial(t, Progress());
}

void SearchState::AddPhase(std::string phase, bool kept, std::string why) {
  outcome_.phases.push_back({std::move(phase), kept, std::move(why)});
}

double SearchState::ElapsedS() const {
  if (setup_.elapsed_s) return setup_.elapsed_s();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
}

double SearchState::WindowsRate(size_t index) const {
  const TrialRecord& t = trials()[index];
  if (!charged_.count(index)) return t.samples_per_s;
  const double windows =
      UnchargedRate(t.samples_per_s, static_cast<double>(SamplesPerEpoch()), t.time_to_first_batch_s);
  return windows > 0 ? windows : t.samples_per_s;
}

// Native workloads know their dataset; a command may say its batches in the
// baseline's record.
int64_t SearchState::BatchesPerEpoch() const {
  if (setup_.batches_per_epoch > 0) return setup_.batches_per_epoch;
  if (outcome_.baseline) return trials()[*outcome_.baseline].batches_per_epoch.value_or(0);
  return 0;
}

// A command may not say its epoch length; the batches it reported do.
int64_t SearchState::SamplesPerEpoch() const {
  return setup_.samples_per_epoch > 0 ? setup_.samples_per_epoch : BatchesPerEpoch() * current_.batch_size;
}

SearchProgress SearchState::Progress() const {
  return {static_cast<int>(outcome_.trials.size()), TrialsLeft(*this)};
}

std::optional<size_t> MeasureOrEndPhase(SearchState& state, const char* phase, const loader::Knobs& knobs,
                                        const TrialPlan& plan) {
  const size_t index = state.Measure(phase, knobs, plan);
  if (state.trials()[index].status == TrialStatus::kOk) return index;
  state.DecideFailed(index);
  state.AddPhase(phase, false, state.trials()[index].decision);
  return std::nullopt;
}

std::string WorkersText(int n) { return std::to_string(n) + (n == 1 ? " worker" : " workers"); }

std::string BoundaryMs(const TrialRecord& t) {
  return std::isfinite(t.epoch_boundary_ms) ? Format("%.1f ms", t.epoch_boundary_ms) : std::string("not measured");
}

}  // namespace feedtune::tuner::search_internal
