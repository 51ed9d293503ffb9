// The cold doubling `feedtune layout` measures each candidate layout over
// (tuner/cli/layout_command.cc): num_workers 0, 1, 2, 4, ... up to
// max_workers, one trial per count, each read cold. A cold trial costs a
// pass over the sample, so this doubling stops at its first miss, where the
// sweep's waits for a second (tuner/search/workers.cc): the first step from
// 1 or more workers that is no gain by THE RULE's cold form (IsColdGain,
// tuner/search/rule.cc). 0 -> 1 worker moves the one reader into a process,
// without parallelism, so that step is never the end (a cold LMDB gains
// nothing at 1 worker and 3x at 4). It also ends at a trial that fails or
// that a budget refused.
#pragma once

#include <atomic>
#include <cstddef>
#include <functional>
#include <optional>
#include <vector>

#include "results/records.h"

namespace feedtune::tuner {

// Measures num_workers = `workers` cold: a record of status ok with its
// figures, or failed or skipped (refused by a budget) with its error.
using MeasureColdCount = std::function<results::TrialRecord(int workers)>;

struct ColdCurve {
  std::vector<results::TrialRecord> points;  // every count measured, in order
  std::optional<size_t> best;                // into points; none: nothing measured (the last point says why)
  bool interrupted = false;                  // `stop` was raised before a count
};

// The doubling over `measure`, comparing each count with the best so far by
// IsColdGain at `gain_threshold` (the sweep's: SweepOptions::gain_threshold).
ColdCurve ColdDoubling(int max_workers, double gain_threshold, const MeasureColdCount& measure,
                       const std::atomic<bool>& stop);

// Measures loader.fetch_concurrency = `in_flight` cold, as MeasureColdCount.
using MeasureColdInFlight = std::function<results::TrialRecord(int in_flight)>;

// The requests-in-flight doubling `feedtune layout` runs on an object store
// before the cold doubling, for a layout read one GET per sample:
// fetch_concurrency 1, 2, 4, ... up to `most`, each compared with the best
// so far by IsColdGain; the first miss ends it, as a trial that fails or
// that a budget refused does. It is the sweep's fetch_concurrency phase
// (tuner/search/fetch.cc) in THE RULE's cold form: on a store the knee is
// set by the round trip, and requests in flight inside a worker overlap the
// waits for a connection's memory where a worker process costs its own RSS,
// so the worker doubling that follows adds processes only for what they add
// beyond that. A round trip's curve rises until the store or this box's CPUs
// bind, then flattens: one miss ends it.
ColdCurve ColdInFlightDoubling(int most, double gain_threshold, const MeasureColdInFlight& measure,
                               const std::atomic<bool>& stop);

}  // namespace feedtune::tuner
