// The phases of the search, each a function of the shared state
// (tuner/search/search_state.h) and of what the phases before it found, which
// it takes as arguments; what it finds for the later ones it returns. Grouped
// by the file that holds each and its rule. tuner/search/sequence.cc runs
// them from its phase table and hands on what they found. Internal to
// tuner/search/.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tuner/search/search_state.h"
#include "tuner/search/worker_estimate.h"

namespace feedtune::tuner::search_internal {

// What a phase hands on.

// A change whose median gained but within the noise or the threshold: the
// combined phase (tuner/search/combined.cc) tries these together.
enum class SmallGainOf { kNumWorkers, kNonBlocking, kPrefetchFactor, kPersistentWorkers };
struct SmallGain {
  SmallGainOf what;
  size_t index;  // its trial
};
// Its phase's name: "num_workers", "non_blocking", ...
const char* SmallGainName(SmallGainOf what);

// What the num_workers phase found (WorkersPhase).
struct WorkersFound {
  std::vector<CurvePoint> curve;        // ascending, after the refinement
  std::optional<SmallGain> small_gain;  // more workers than the knee with a higher median
  // The time budget weighs the trials from here on (KeepBestAtBudget): the
  // curve's, or the paired knee's pairs, were judged by a rule of their own.
  std::optional<size_t> budget_from;
  // The budget ended the phase on a curve still rising (its words, for the time_budget phase).
  std::string still_rising;
  bool budget_spent = false;  // the time budget ended the phase: the sequence ends after it
};

// What the persistent_workers phase found (PersistentPhase).
struct PersistentFound {
  // Its windows (whole epochs), for every later trial compared with one of its trials.
  TrialPlan plan = [] {
    TrialPlan p;
    p.window_epochs = 1;
    return p;
  }();
  bool kept = false;
  std::optional<SmallGain> small_gain;
  std::optional<size_t> reference;    // with small_gain: the off trial over whole epochs
  std::optional<size_t> budget_from;  // its pairs were judged by their own rule (as WorkersFound's)
  bool budget_spent = false;          // the time budget ended its pairs: the sequence ends after it
};

// tuner/search/copy.cc: pin_memory, then non_blocking after the knee (which
// returns its small gain).
void PinMemoryPhase(SearchState& state);
std::optional<SmallGain> NonBlockingPhase(SearchState& state);

// tuner/search/workers.cc: the doubling, the knee, the refinement.
// Doublings without a gain in a row that end the doubling: one alone can be
// the machine's, not the curve's. Under a time budget, above the CPU count, one.
constexpr int kMissesToStop = 2;
// Whether `workers` is below the usable CPU count, where any rise of the
// median keeps a doubling going.
bool BelowCpus(const SearchState& state, int workers);
// The doublings without a gain in a row that end a doubling at `workers`:
// kMissesToStop, or one under a time budget at or above the usable CPU count.
int MissesToStop(const SearchState& state, int workers);
// `seeded_plan`: a seeded search's windows (SeedStart).
WorkersFound WorkersPhase(SearchState& state, const TrialPlan& seeded_plan);
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

// tuner/search/paired_knee.cc: under a time budget, a knee at 0 workers
// checked in pairs. Its index on `curve`, or nullopt; `why` says what the
// pairs measured, and `budget_from` is set after them.
std::optional<size_t> PairedKnee(SearchState& state, const std::vector<CurvePoint>& curve, std::string* why,
                                 std::optional<size_t>* budget_from);

// tuner/search/seeded_search.cc: a search from a stored run (SearchSetup::seed).
// The seed check (SearchSetup::check_seed), in two steps around its pairs:
// the stored setting measured (CheckSeedTrial: "" when it ran, and it is then
// the current setting, else why not), then, after the pairs
// (FinalCheck(state, "seed_check_pairs")) when it ran, kept or dropped
// (SeedCheckKept: true, kept after one check; false, the search runs unseeded).
std::string CheckSeedTrial(SearchState& state);
bool SeedCheckKept(SearchState& state, std::string failed);
// In place of the pin_memory phase; returns the seeded curve's windows.
TrialPlan SeedStart(SearchState& state);
// Adds its points to `curve`; `*knee` is the count it started at (the
// seed's knee), which the refinement leaves alone.
std::string SeededDoubling(SearchState& state, std::vector<CurvePoint>& curve, int64_t batches,
                           const TrialPlan& seeded_plan, int* knee);
void ConfirmSeed(SearchState& state, const TrialPlan& seeded_plan);  // in place of the non_blocking phase

// tuner/search/fetch.cc: requests in flight per worker, for remote data.
void FetchPhase(SearchState& state);
// Remote data whose worker doubling a budget stopped (memory): what more
// workers would have cost and what requests in flight give instead, for the
// workers phase's text; "" for local data (tuner/search/fetch.cc).
std::string FetchInsteadOfWorkers(const SearchState& state, const TrialRecord& skipped);

// tuner/search/prefetch.cc: `plan` is PlanAgainstCurrent's; returns its small gain.
std::optional<SmallGain> PrefetchPhase(SearchState& state, const TrialPlan& plan);

// tuner/search/persistent.cc: persistent_workers, and the worker counts with it.
// Under a time budget: whether it runs before prefetch_factor, as the
// knee's restart share of an epoch (RestartShare) says; `*share` is that share.
bool PersistentFirst(const SearchState& state, double* share);
// The current setting's restart (its time to the first batch) as a share of
// an epoch without it; 0 when it has none (no workers, or persistent ones).
double RestartShare(const SearchState& state);
// `seeded_plan`: SeedStart's; `first_share`: set when it runs first
// (PersistentFirst), the restart share its phase text gives.
PersistentFound PersistentPhase(SearchState& state, const TrialPlan& seeded_plan,
                                std::optional<double> first_share);
// num_workers_persistent: the counts of `curve` above the knee again, with
// persistent workers, in `plan`'s windows (PersistentFound::plan).
void WorkersWithPersistent(SearchState& state, const std::vector<CurvePoint>& curve, const TrialPlan& plan);
// Whole epochs per window for a persistent_workers comparison; 0 (with
// `why`) when an epoch is too long to measure so.
int PersistentWindowEpochs(const SearchState& state, std::string* why, int windows = 0);
// How a trial compared with the current setting is measured, after
// `persistent` (the persistent_workers phase's, or a default when it has not run).
TrialPlan PlanAgainstCurrent(const SearchState& state, const PersistentFound& persistent);

// tuner/search/start_method.cc: multiprocessing_context.
void StartMethodPhase(SearchState& state);
// The methods measured besides the current one; empty (with `why`) when the phase does not run.
std::vector<loader::StartMethod> StartMethodCandidates(const SearchState& state, std::string* why = nullptr);

// tuner/search/node.cc: cpu_binding, then worker_threads.
void CpuBindingPhase(SearchState& state);
void WorkerThreadsPhase(SearchState& state);

// tuner/search/combined.cc: the small gains handed on, after `persistent`.
void CombinedPhase(SearchState& state, const std::vector<SmallGain>& small_gains, const PersistentFound& persistent);

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
                                 const PairsPlan& how = {});

// tuner/search/final_check.cc
void FinalCheck(SearchState& state, const char* phase_name = "final_check");

// tuner/search/time_budget.cc: the sequence ended by the time budget.
// `budget_from`: the first trial it weighs (WorkersFound's, PersistentFound's);
// `still_rising`: WorkersFound's.
void KeepBestAtBudget(SearchState& state, size_t budget_from, const std::string& still_rising);

// tuner/search/sequence.cc, from the phase table: the trials left after the
// current one, an estimate; and whether the time budget may stop a trial of
// row `at` (not the baseline's, the seed check's nor the final check's).
int TrialsLeft(const SearchState& state);
bool BudgetMayEnd(SequenceAt at);

// tuner/search/search_state.cc: a trial measured for `phase` that did not run
// is decided so (DecideFailed) and ends the phase with that decision, not
// kept; returns nullopt then, else its index.
std::optional<size_t> MeasureOrEndPhase(SearchState& state, const char* phase, const loader::Knobs& knobs,
                                        const TrialPlan& plan = {});

}  // namespace feedtune::tuner::search_internal
