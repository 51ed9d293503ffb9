// The search controller: the manual tuning method of DESIGN.md §1, automated.
//
//   baseline        num_workers 0, pin_memory off, non_blocking off
//   pin_memory      turn pinning on
//   num_workers     1, 2, 4, ... doubling; stop when throughput falls below the
//                   best so far by more than gain_threshold, after two doublings
//                   in a row without a gain, at max_workers, or on a failure;
//                   then bisect between the knee and its lower neighbour when
//                   they are more than 2 apart
//   non_blocking    on (with pin_memory, since a pageable copy is synchronous
//                   anyway: if pinning was dropped, both are tried together)
//   prefetch_factor each of sweep.prefetch_factors (workers only)
//   persistent_workers on (workers only)
//
// The rule for keeping a step: its median throughput must exceed the current
// median by more than gain_threshold AND, with 2 or more repeats, the 95%
// intervals must not overlap (new ci_low > current ci_high). Otherwise the
// current setting stays: a change must pay for itself beyond the noise.
//
// The knee: the fewest num_workers whose median is within knee_tolerance of the
// best median on the num_workers curve. Later phases continue from the knee.
// The best: the trial with the highest median of all.
#pragma once

#include <functional>
#include <optional>
#include <vector>

#include "loader/options.h"
#include "results/records.h"
#include "tuner/config.h"
#include "tuner/trial_runner.h"

namespace feedtune::tuner {

struct SearchOutcome {
  std::vector<results::TrialRecord> trials;  // in the order run, decisions filled
  std::optional<size_t> baseline;            // index into trials
  std::optional<size_t> best;
  std::optional<int> knee_workers;
  double knee_samples_per_s = 0;
};

// Called after each trial is measured and its decision written, before the next
// one starts; it may set the record's id (the store does).
using TrialCallback = std::function<void(results::TrialRecord& trial)>;

// Whether `candidate` beats `current` by the rule above.
bool IsGain(const results::TrialRecord& candidate, const results::TrialRecord& current, double gain_threshold);

// Fewest workers within `tolerance` of the best median on (workers, trial) points; nullopt when none is ok.
std::optional<size_t> KneeIndex(const std::vector<std::pair<int, const results::TrialRecord*>>& curve,
                                double tolerance);

// Runs the sequence. `start` gives batch_size and the starting prefetch_factor.
// `max_workers` is the resolved cap (>= 1). Throws Interrupted from the measurer.
SearchOutcome RunSearch(const SweepOptions& options, int max_workers, const loader::Knobs& start,
                        TrialMeasurer& measurer, const TrialCallback& on_trial);

}  // namespace feedtune::tuner
