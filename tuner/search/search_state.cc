// The shared state's plumbing: measuring a trial, writing its decision, the
// clock, the epoch, and the estimate of trials left for progress output. No
// rule is decided here: each phase's is in its own file (tuner/search/phases.h).
#include "tuner/search/search_state.h"

#include <cmath>

#include "results/units.h"
#include "tuner/search/phases.h"

namespace feedtune::tuner::search_internal {

using results::Format;  // results/units.h

size_t SearchState::Measure(const char* phase, const loader::Knobs& knobs, TrialPlan plan, bool budget_may_end) {
  // The baseline always runs, and so do the seed check and a final check once begun.
  if (budget_may_end && options_.time_budget_s > 0 && tally.at != SequenceAt::kBaseline &&
      tally.at != SequenceAt::kSeedCheck && tally.at != SequenceAt::kFinal && ElapsedS() >= options_.time_budget_s) {
    throw TimeBudgetSpent{};
  }
  plan.phase = phase;
  if (events_.on_start) events_.on_start(plan, knobs, {static_cast<int>(outcome_.trials.size()), TrialsLeft(*this)});
  TrialRecord trial = measurer_.MeasurePlanned(knobs, plan);
  trial.phase = phase;
  trial.knobs = knobs;
  trial.elapsed_s = ElapsedS();
  trials().push_back(std::move(trial));
  const size_t index = trials().size() - 1;
  // Whole-epoch windows hold their restarts already.
  if (plan.window_epochs == 0 && options_.time_budget_s > 0) {
    if (std::optional<std::string> charged = ChargeRestart(trials()[index], SamplesPerEpoch())) {
      charged_[index] = std::move(*charged);
    }
  }
  return index;
}

void SearchState::Decide(size_t index, std::string decision) {
  TrialRecord& t = trials()[index];
  if (t.status == TrialStatus::kFailed) decision = "failed: " + t.error.value_or("unknown error");
  if (t.status == TrialStatus::kSkipped) decision = "skipped: " + t.error.value_or("over a budget");
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

// The doubling's trials before its knee, as the estimate counts them.
constexpr int kEstimatedDoublings = 4;

// A seeded search walks neither prefetch_factor nor persistent_workers (its
// seed phase is one trial); the node phases count when they will run.
int TrialsLeft(const SearchState& state) {
  const SweepOptions& options = state.options();
  const SearchSetup& setup = state.setup();
  const Tally& tally = state.tally;
  const bool persistent_first = state.handed.persistent_first;
  const int repeats = state.repeats();
  const bool seeded = setup.seed.has_value();
  const int prefetch = seeded ? 0 : std::max(0, static_cast<int>(options.prefetch_factors.size()) - 1);
  // Under a budget persistent_workers is measured in pairs (tuner/search/persistent.cc).
  const int persistent = seeded ? 0 : options.time_budget_s > 0 ? 2 * repeats : 2;
  const int binding = setup.ranks > 1 && options.cpu_binding == BindingChoice::kAuto
                          ? 1 + (setup.numa_known ? 1 : 0)
                          : 0;
  const int threads = setup.default_worker_threads > 1 ? 1 : 0;
  const int methods = static_cast<int>(StartMethodCandidates(state).size());
  const int start_method = methods > 0 ? 1 + methods : 0;
  const int final_check = 2 * repeats;
  // After the doubling: the non_blocking trial, or the seed phase's.
  const int step = seeded || options.copy_phases ? 1 : 0;
  const int after_workers = step + prefetch + persistent + start_method + binding + threads + final_check;
  switch (tally.at) {
    case SequenceAt::kBaseline:
      return setup.check_seed && seeded ? 1 + 2 * repeats : step + kEstimatedDoublings + after_workers;
    case SequenceAt::kSeedCheck: return 2 * repeats;
    case SequenceAt::kPin: return kEstimatedDoublings + after_workers;
    case SequenceAt::kWorkers:
      // The misses left before the doubling stops (tuner/search/workers.cc), and the knee's.
      return (tally.refining ? 1 : std::max(0, (options.time_budget_s > 0 ? 1 : kMissesToStop) - tally.misses) + 1) +
             after_workers;
    case SequenceAt::kNonBlocking: return after_workers - step;
    // PersistentFirst swaps the two phases.
    case SequenceAt::kPrefetch:
      return std::max(0, prefetch - tally.prefetch_done) + (persistent_first ? 0 : persistent) + start_method +
             binding + threads + final_check;
    case SequenceAt::kPersistent:
      return std::max(0, persistent - tally.persistent_done) + (persistent_first ? prefetch : 0) + start_method +
             binding + threads + final_check;
    case SequenceAt::kRevisit:
      return 2 + (persistent_first ? prefetch : 0) + start_method + binding + threads + final_check;
    case SequenceAt::kStartMethod:
      return std::max(0, start_method - tally.start_method_done) + binding + threads + final_check;
    case SequenceAt::kBinding: return binding + threads + final_check;
    case SequenceAt::kThreads: return threads + final_check;
    case SequenceAt::kCombined: return 2 * repeats;
    case SequenceAt::kFinal: return std::max(0, 2 * repeats - tally.final_done);
    case SequenceAt::kDone: return 0;
  }
  return 0;
}

std::string WorkersText(int n) { return std::to_string(n) + (n == 1 ? " worker" : " workers"); }

std::string BoundaryMs(const TrialRecord& t) {
  return std::isfinite(t.epoch_boundary_ms) ? Format("%.1f ms", t.epoch_boundary_ms) : std::string("not measured");
}

}  // namespace feedtune::tuner::search_internal
