// The search controller: the manual tuning method (docs/architecture.md, "The method the search automates"), automated.
//
//   baseline        num_workers 0, pin_memory off, non_blocking off
//   pin_memory      turn pinning on
//   num_workers     1, 2, 4, ... doubling. Stops after two doublings in a row
//                   without a gain, or two falls below the best so far (by the
//                   rule below, reversed): a single fall is a miss that the next
//                   doubling confirms or not. 1 worker is never a stop nor a
//                   miss (it moves the loading out of the main process without
//                   parallelism: a dip there is the usual shape). Below the
//                   usable CPU count any rise of the median keeps it going;
//                   above it, a rise beyond gain_threshold within the noise is
//                   no gain and no miss. Also stops at max_workers, at one round
//                   per epoch (as many workers as batches, when the epoch
//                   length is known), when a trial is skipped by the budget, or
//                   on a failure. Then bisects between the knee and its lower
//                   neighbour while the knee gains over it by more than
//                   gain_threshold and a point between can differ: more than
//                   2 apart, or, on a stepped curve (non-persistent workers
//                   seeing fewer than 4 batches each per epoch), a count that
//                   changes the epoch's rounds, ceil(batches / workers).
//   non_blocking    on (with pin_memory, since a pageable copy is synchronous
//                   anyway: if pinning was dropped, both are tried together)
//   prefetch_factor each other value of sweep.prefetch_factors (workers only);
//                   the best one that gains is kept
//   persistent_workers (workers only) measured twice, off and on, each with
//                   windows of whole epochs (>= 2 epochs per setting) so the
//                   epoch boundary, where the setting acts, is inside the
//                   figure; the boundary cost in ms is reported for both
//   num_workers_persistent (when persistent_workers was kept) the counts
//                   measured above the knee, again with persistent workers and
//                   over whole epochs, in order while each gains: the restart
//                   that grew with the worker count is gone (short epochs)
//   cpu_binding     (node sweeps, sweep.cpu_binding auto) each rank and its
//                   workers bound to an equal, disjoint share of the usable
//                   CPUs (split), and, where every rank's GPU has a known NUMA
//                   node, to its share on that node (numa), each against the
//                   inherited mask (none); the best that gains is kept. A
//                   named sweep.cpu_binding is every trial's, not searched
//   worker_threads  (when the workload has intra-op threads to set: a native
//                   workload's workload.cpu_threads > 1, or a command, whose
//                   torch runs a thread per core by default) fewer threads per
//                   worker and rank: 1, and the usable CPUs per worker (one
//                   rank's share / max(1, num_workers)) when between; the best
//                   that gains is kept. Single-loader sweeps too: workers x
//                   threads oversubscribe one loader's CPUs as well.
//                   Both run after persistent_workers, with or without
//                   workers (the rank's own threads and mask matter then), and
//                   before combined, which keeps what they kept; they are no
//                   candidates for it (each is kept or not on its own)
//   multiprocessing_context (a Python command with workers; before the two
//                   above) the workers' start method: when the interpreter's
//                   default is not fork (Python 3.14+) with sweep.start_methods
//                   auto, or the methods sweep.start_methods lists. The current
//                   method is measured again as the phase's reference, then
//                   each other method, all with the same windows: whole
//                   epochs when workers restart at each epoch (as the
//                   persistent_workers phase sizes them), so the epoch
//                   boundary is inside the figure; every trial reports its
//                   worker start-up. The best that gains by THE RULE is kept;
//                   not a candidate for combined
//   combined        (workers only) the changes whose median gained but that
//                   were not kept (more workers than the knee with a higher
//                   median, non_blocking, the best prefetch_factor,
//                   persistent_workers), tried together once when there are
//                   two or more, kept by the same rule: small gains, each
//                   within the noise alone, can add up to one worth keeping
//   final check     baseline and best re-measured interleaved, A B A B ...,
//                   `repeats` pairs of one window each; the speedup is the
//                   median of the pair ratios with a 95% bootstrap interval.
//                   With SearchSetup::reference the reference setting stands
//                   in for the baseline (the job's own)
//
// Seeded (SearchSetup::seed, `sweep --seed-from`, docs/fleets.md): a stored
// run of the nearest machine gives the start, and only what it found is
// confirmed; what it did not keep is not re-walked.
//   baseline        as above
//   pin_memory      not a phase: the seed's pin_memory, non_blocking,
//                   prefetch_factor and persistent_workers are set for the
//                   doubling, so the curve is measured in the regime the seed
//                   ended in; with persistent_workers every seeded trial spans
//                   whole epochs (as the persistent_workers phase's do), unless
//                   an epoch here is too long for that: then it is left off
//   num_workers     starts at the seed's knee k, or at its best's worker
//                   count when that is higher (clamped to max_workers and
//                   one round per epoch), then doubles up (2k, 4k, ...) while
//                   each doubling rises by the unseeded rule (a gain over the
//                   best so far; below the usable CPU count any rise), then
//                   halves down (k/2, k/4, ..., 1) while each halving is within
//                   knee_tolerance of the best median; a failed or skipped
//                   trial ends that direction. Then the knee as above, and the
//                   bisection unless the knee is k (the seed's run bisected
//                   below its knee already). A right seed costs 3 trials (k/2, k, 2k)
//   seed            the seed's pin_memory/non_blocking/prefetch_factor/
//                   persistent_workers confirmed at the knee by THE RULE
//                   against the same count without them (one trial, none when
//                   the seed changed none of them); not kept: they are
//                   dropped. No other value is tried (non_blocking,
//                   prefetch_factor, persistent_workers and
//                   num_workers_persistent are not phases: the curve was
//                   measured with them). persistent_workers as above only
//                   when the seed kept it but its epochs were too long here.
//                   Combined and the final check as above
// The seed is stored with the run, so a resumed run re-seeds identically.
//
// The time budget (sweep.time_budget_s > 0, feedtune.autotune's budget_s):
// once it has passed, no new trial starts and the sequence ends at the best
// setting so far, with a "time_budget" phase saying so. The baseline always
// runs, and a final check once begun runs to its end. The budget is the one
// input not in the records: a resumed run may stop elsewhere. A num_workers
// phase that the budget cuts short names its knee from the curve measured so
// far, as it would have at its end. Under a budget, above the usable CPU
// count, the first doubling without a gain (or one fall) ends the doubling:
// each doubling there starts twice the workers of the last, and the phases
// after the knee need the time more. Under a budget a knee at 0 workers is
// checked in pairs: the best worker count and the baseline, `repeats`
// interleaved pairs of one window each (phase num_workers_pairs); the count
// is the knee when the pairs' median puts the baseline outside knee_tolerance
// of it (sequential trials of a step whose speed drifts can hide a gain).
// Under a budget the persistent_workers phase (and num_workers_persistent) runs before
// prefetch_factor when the knee's time to its first batch, the restart it
// saves at each epoch, is at least gain_threshold of an epoch at the knee's
// rate: on short epochs that restart is the larger gain, and its whole-epoch
// trials the first a budget cuts off. Under a budget persistent_workers is
// weighed in `repeats` interleaved pairs, off then on, one whole epoch each,
// and kept when their median ratio is above 1 (it only removes a cost); the budget
// ends the pairs between two pairs, never inside one, and the pairs measured
// decide. Every trial compared with a setting the persistent_workers phase
// kept is measured as it was, over whole epochs.
//
// THE RULE for keeping a step: its median throughput must exceed the current
// median by more than gain_threshold AND, when both trials have 2 or more
// repeats, their 95% intervals must not overlap (new ci_low > current
// ci_high). Otherwise the current setting stays: a change must pay for itself
// beyond the noise. (IsGain below; the doubling compares with the best so far.)
//
// The knee: the fewest num_workers whose median is within knee_tolerance of the
// best median on the num_workers curve; later phases continue from it. The
// Kneedle knee (S=1) of the same curve is reported beside it.
// The best: the setting the sequence arrives at (the knee and every kept step,
// the combined one included), which is the recommendation; `fastest` is the
// highest median of all, which may use more workers for a difference within
// knee_tolerance or the noise.
//
// Determinism: every decision is a function of the options, the setup and the
// records the measurer returned, in order. A resumed run that replays its
// stored records (ReplayMeasurer) therefore takes the decisions the
// uninterrupted run would have. One thread runs a search.
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
  // Whether the NUMA node of every rank's GPU is known (node::GpuNumaNodes):
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
  std::optional<SearchSeed> seed;  // the seeded sequence above; nullopt = unseeded
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
  std::optional<size_t> fastest;             // the highest median outside the final check
  std::optional<int> knee_workers;
  double knee_samples_per_s = 0;
  std::optional<int> kneedle_workers;        // Kneedle (S=1) on the same curve
  std::optional<double> speedup;             // best over baseline, from the final check
  std::optional<double> speedup_ci_low;
  std::optional<double> speedup_ci_high;
  std::vector<PhaseDecision> phases;
};

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

// Whether `candidate` beats `current` by the rule above.
bool IsGain(const results::TrialRecord& candidate, const results::TrialRecord& current, double gain_threshold);

// Fewest workers within `tolerance` of the best median on (workers, trial) points; nullopt when none is ok.
std::optional<size_t> KneeIndex(const std::vector<std::pair<int, const results::TrialRecord*>>& curve,
                                double tolerance);

// Runs the sequence. `start` gives batch_size and the starting prefetch_factor.
// Throws Interrupted from the measurer (and whatever else the measurer or the
// events throw, e.g. a replay mismatch).
SearchOutcome RunSearch(const SweepOptions& options, const SearchSetup& setup, const loader::Knobs& start,
                        TrialMeasurer& measurer, const SearchEvents& events);

}  // namespace feedtune::tuner
