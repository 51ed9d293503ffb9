// The search: the manual tuning method (docs/architecture.md, "The method the
// search automates"), automated, one knob at a time. This header is its API.
// The method reads in tuner/search/sequence.cc: the order of the phases and
// why, with a pointer to each phase's file, whose top comment gives its rule
// (what it measures, what it keeps, what the time budget changes). THE RULE
// for keeping a step is tuner/search/rule.cc's (IsGain below).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "loader/options.h"
#include "results/records.h"
#include "tuner/config/config.h"
#include "tuner/measure/measurer.h"

namespace feedtune::tuner {

// Where a seeded search starts (`sweep --seed-from`, tuner/search/seed.h): a stored
// run's knee and best setting, and which run it was, for the decisions' text.
struct SearchSeed {
  int knee_workers = 1;  // the stored run's knee; < 1 starts at 1
  loader::Knobs best;    // its best setting: pin_memory, non_blocking, prefetch_factor, persistent_workers
  std::string source;    // "run 7 of box-a"
};

// What the search needs beyond the sweep options.
struct SearchSetup {
  int max_workers = 64;           // the resolved cap, >= 1
  // Why max_workers is below the config's, said where the doubling stops
  // there (a stream of few shards); empty otherwise.
  std::string max_workers_cap_why;
  int64_t samples_per_epoch = 0;  // 0 = unknown; used to size the persistent_workers check
  // 0 = unknown (then the baseline record's batches_per_epoch, if the
  // workload reported one). Caps the doubling at one round per epoch and, on
  // short epochs, limits the refinement to worker counts that can differ.
  int64_t batches_per_epoch = 0;
  double usable_cpus = 0;         // 0 = unknown; below it, any rise keeps the doubling going
  // A node sweep's ranks (tuner/measure/node_measurer.h); the cpu_binding phase runs with 2 or more.
  int ranks = 1;
  // Whether the NUMA node of every rank's GPU is known (node::GpuNumaNodes, tuner/measure/cpu_affinity.h):
  // only then is numa tried, since elsewhere it binds as split.
  bool numa_known = false;
  // The intra-op threads a worker uses while Knobs::worker_threads is 0: a
  // native workload's workload.cpu_threads; a command's, torch's default of a
  // thread per usable CPU. 0 = the workload has none to set: no phase.
  int default_worker_threads = 0;
  // A Python command workload (its preflight ran: tuner/measure/python_preflight.h):
  // the multiprocessing_context phase may run. default_start_method is what
  // StartMethod::kDefault means there (the interpreter's; kDefault = unknown).
  bool python_workload = false;
  loader::StartMethod default_start_method = loader::StartMethod::kDefault;
  // The dataset reads concurrently (loader::Dataset::reads_concurrently: an
  // object store): the fetch_concurrency phase runs (tuner/search/fetch.cc).
  bool remote_reads = false;
  // The seeded sequence (tuner/search/seeded_search.cc); nullopt = unseeded.
  std::optional<SearchSeed> seed;
  // With a seed, check it instead of searching around it (feedtune.autotune
  // reusing a stored answer): the seed's setting measured once (phase
  // seed_check), then paired with the reference as in the final check. It is
  // kept unless the pairs' interval lies wholly below x1.00; then the search
  // runs from the baseline, unseeded, and the seed_check phase says why.
  bool check_seed = false;
  // The final check's reference instead of the baseline: the setting the job
  // ran before (feedtune.autotune: the user's own DataLoader), so the speedup
  // is over what the job would have done. nullopt: the baseline.
  std::optional<loader::Knobs> reference;
  // The most workers the memory, /dev/shm and open-file budgets let run with
  // these knobs (tuner/search/budget.h), bounding the estimate a search under
  // a time budget starts from (tuner/search/worker_estimate.h); empty: no bound.
  std::function<int(const loader::Knobs&)> fitting_workers;
  // Seconds since the search began, read against sweep.time_budget_s; empty:
  // the steady clock (tests give a scripted one).
  std::function<double()> elapsed_s;
};

// One phase's outcome in words: "kept" or "not kept", and why (stored with
// the run as it is: results::RunFacts::phases).
using PhaseDecision = results::PhaseFact;

struct SearchOutcome {
  std::vector<results::TrialRecord> trials;  // in the order run, decisions filled
  std::optional<size_t> baseline;            // indices into trials
  std::optional<size_t> best;                // the recommended setting's trial
  std::optional<size_t> fastest;             // the highest median, of no pair but the best (tuner/search/sequence.cc)
  std::optional<int> knee_workers;
  double knee_samples_per_s = 0;
  std::optional<int> kneedle_workers;        // Kneedle (S=1) on the same curve
  // Under a time budget: where the baseline's figures put the workers
  // (tuner/search/worker_estimate.h), and how; unset without an estimate.
  std::optional<int> estimate_workers;
  std::string estimate_how;
  std::optional<double> speedup;             // best over baseline, from the final check
  std::optional<double> speedup_ci_low;
  std::optional<double> speedup_ci_high;
  // The final check found nothing to check: the best setting is the
  // reference itself (the job's own setting, or the baseline).
  bool best_is_reference = false;
  std::vector<PhaseDecision> phases;
};

// Whether the check's pairs put the best setting slower than the reference
// beyond the noise: the speedup's interval wholly below x1.00. The seed
// check drops a stored setting by it, and the job (feedtune.autotune) keeps
// its own setting by it (tuner/search/final_check.cc).
bool SlowerBeyondTheNoise(const SearchOutcome& outcome);

// Where the sequence stands, for progress output.
struct SearchProgress {
  int trials_done = 0;  // including the one being reported
  int trials_left = 0;  // an estimate
};

struct SearchEvents {
  // Before a trial is measured.
  std::function<void(const TrialPlan& plan, const loader::Knobs& knobs, const SearchProgress& progress)> on_start;
  // After a trial is measured and its decision written, before the next one
  // starts; it may set the record's id (the store does).
  std::function<void(results::TrialRecord& trial, const SearchProgress& progress)> on_trial;
};

// Whether `candidate` beats `current` by THE RULE (tuner/search/rule.cc).
bool IsGain(const results::TrialRecord& candidate, const results::TrialRecord& current, double gain_threshold);
// Its cold form, for one cold window against another (tuner/search/cold_doubling.h).
bool IsColdGain(const results::TrialRecord& candidate, const results::TrialRecord& current, double gain_threshold);

// Fewest workers within `tolerance` of the best median on (workers, trial) points; nullopt when none is ok.
std::optional<size_t> KneeIndex(const std::vector<std::pair<int, const results::TrialRecord*>>& curve,
                                double tolerance);

// Runs the sequence. `start` gives batch_size and the starting prefetch_factor.
// Throws Interrupted from the measurer (and whatever else the measurer or the
// events throw, e.g. a replay mismatch).
SearchOutcome RunSearch(const SweepOptions& options, const SearchSetup& setup, const loader::Knobs& start,
                        TrialMeasurer& measurer, const SearchEvents& events);

}  // namespace feedtune::tuner
