// The phases of the search, each a function of the shared state
// (tuner/search/search_state.h), grouped by the file that holds it and its
// rule. tuner/search/sequence.cc runs them in order. Internal to tuner/search/.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tuner/search/search_state.h"
#include "tuner/search/worker_estimate.h"

namespace feedtune::tuner::search_internal {

// tuner/search/copy.cc: pin_memory, then non_blocking after the knee.
void PinMemoryPhase(SearchState& state);
void NonBlockingPhase(SearchState& state);

// tuner/search/workers.cc: the doubling, the knee, the refinement.
// Doublings without a gain in a row that end the doubling: one alone can be
// the machine's, not the curve's. Under a time budget, above the CPU count, one.
constexpr int kMissesToStop = 2;
void WorkersPhase(SearchState& state);
// The next worker count of a doubling from `workers`, or 0 when it ends there.
int NextDoubling(const SearchState& state, int workers, int64_t batches);
// The knee rule's index on `curve`.
size_t Knee(const SearchState& state, const std::vector<CurvePoint>& curve);

// tuner/search/estimate_start.cc: under a time budget, the num_workers phase from the estimate.
// The estimate from the baseline (the current trial when the phase starts:
// pin_memory may have been kept on it), within the search's caps.
WorkerEstimate StartEstimate(const SearchState& state, int64_t batches);
// The baseline's wait per sample, seconds (tuner/search/worker_estimate.h's L); 0 when unknown.
double EstimatedWaitS(const TrialRecord& baseline);
// Halves down from the fewest workers on `curve` while the knee may lie
// lower, adding the points to `curve`, down to the first count outside
// knee_tolerance of a best with workers: the knee's lower neighbour, which
// the knee rule and the refinement need. `wait_s`: EstimatedWaitS of the
// baseline. Returns how it ended, for the phase's text.
std::string HalveDown(SearchState& state, std::vector<CurvePoint>& curve, double wait_s);

// tuner/search/paired_knee.cc: under a time budget, a knee at 0 workers checked in pairs.
std::optional<size_t> PairedKnee(SearchState& state, const std::vector<CurvePoint>& curve, std::string* why);

// tuner/search/seeded_search.cc: a search from a stored run (SearchSetup::seed).
bool CheckSeed(SearchState& state);  // true: the stored setting kept after one check
void SeedStart(SearchState& state);  // in place of the pin_memory phase
std::string SeededDoubling(SearchState& state, std::vector<CurvePoint>& curve, int64_t batches);
void ConfirmSeed(SearchState& state);  // in place of the non_blocking phase

// tuner/search/prefetch.cc
void PrefetchPhase(SearchState& state);

// tuner/search/persistent.cc: persistent_workers, and the worker counts with it.
bool PersistentFirst(SearchState& state);  // under a time budget: before prefetch_factor
// The current setting's restart (its time to the first batch) as a share of
// an epoch without it; 0 when it has none (no workers, or persistent ones).
double RestartShare(const SearchState& state);
void PersistentPhases(SearchState& state);
// Whole epochs per window for a persistent_workers comparison; 0 (with
// `why`) when an epoch is too long to measure so.
int PersistentWindowEpochs(const SearchState& state, std::string* why, int windows = 0);
// How a trial compared with the current setting is measured.
TrialPlan PlanAgainstCurrent(const SearchState& state);

// tuner/search/start_method.cc: multiprocessing_context.
void StartMethodPhase(SearchState& state);
// The methods measured besides the current one; empty (with `why`) when the phase does not run.
std::vector<loader::StartMethod> StartMethodCandidates(const SearchState& state, std::string* why = nullptr);

// tuner/search/node.cc: cpu_binding, then worker_threads.
void NodePhases(SearchState& state);

// tuner/search/combined.cc
void CombinedPhase(SearchState& state);

// tuner/search/pairs.cc: interleaved pairs, as the final check measures them.
struct PairsPlan {
  bool in_windows = false;  // ratios of the windows' rates, without a restart charged (WindowsRate)
  int window_epochs = 0;    // each trial's one window: this many whole epochs (0: a time window)
  // Set: the budget ends the pairs between two pairs (never inside one, and
  // not before the first), and this says that it did: a pair after the first
  // begins only where the budget's time left holds one more as long as the
  // last (a pair of whole epochs is seconds long, and one begun at the
  // budget's edge ran a 60 s budget to 73 s). Unset: Measure's
  // TimeBudgetSpent goes up from wherever it is thrown.
  bool* budget_ended = nullptr;
  const char* over = "the pair's baseline";  // what b's ratio is over, in b's decision
  // Set (> 0), under a time budget: after `repeats` pairs, while this bar is
  // still inside the 95% interval of their median and the budget's time left
  // holds one more pair as long as the last, one more pair, up to
  // kMostPairsPerRepeat x repeats in all (tuner/search/pairs.cc).
  double settle_bar = 0;
};
std::vector<double> MeasurePairs(SearchState& state, const char* phase, const loader::Knobs& a,
                                 const loader::Knobs& b, const std::string& a_name, const std::string& b_name,
                                 int* done, const PairsPlan& how = {});

// tuner/search/final_check.cc
void FinalCheck(SearchState& state, const char* phase_name = "final_check");

// tuner/search/time_budget.cc: the sequence ended by the time budget.
void KeepBestAtBudget(SearchState& state);

// tuner/search/search_state.cc: the trials left after the current one, an estimate.
int TrialsLeft(const SearchState& state);

}  // namespace feedtune::tuner::search_internal
