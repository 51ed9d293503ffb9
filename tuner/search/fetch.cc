// fetch_concurrency (remote data only: SearchSetup::remote_reads): requests
// in flight per worker, before the worker doubling.
//
// Why first, and at the current worker count: on an object store the knee is
// set by the round trip, not by CPUs. At 20-100 ms to the first byte a
// process that fetches one sample at a time reads 10-50 samples/s, and only
// worker processes (with their memory) can add requests in flight to torch's
// DataLoader. Requests in flight inside each worker overlap the same waits for
// a few connections' worth of memory. So the phase finds how many a worker
// needs, and the worker doubling after it adds processes only for what they
// bring beyond that (CPU: decode, collate): the fewest processes at the knee.
//
// Where it starts: at the count the current setting's own figures predict,
// by Little's law, as the worker estimate does (tuner/search/worker_estimate.h):
// the rate to aim for (the step's pace, or the CPUs at the CPU per sample)
// times the wait per sample for the data (the round trip and the transfer)
// is what must be in flight, shared by the loading processes. Without an
// estimate (no wait measured), or one under 4, at 2.
//
// What it measures: the current setting with fetch_concurrency doubled from
// the start, up to the batch size (a worker fetches one batch at a time, so
// more in flight than its samples overlaps nothing) or kMaxFetchConcurrency;
// from an estimated start, then half as many below it while the higher
// count gains nothing over the lower (the fewest in flight at the knee), or,
// where the start itself gained nothing, half as many until one gains.
//
// What it keeps: each doubling that gains by THE RULE (tuner/search/rule.cc)
// over the last one kept; the doubling ends at the first that does not, or
// at the cap. A round trip's curve rises until the box's CPUs or the store's
// bandwidth bind, then flattens: one miss ends it (the workers phase's second
// chance is for a curve that CPU contention dents).
#include <algorithm>
#include <limits>
#include <optional>

#include "tuner/search/phases.h"

namespace feedtune::tuner::search_internal {
namespace {

// The most requests in flight per worker the phase tries: libcurl's
// connections (and their sockets) per process stay well under an open-file
// limit of 1024 with the workers' other descriptors.
constexpr int kMaxFetchConcurrency = 256;

// The requests in flight per loading process that the current setting's
// figures predict (0: none), and the arithmetic in words.
struct InFlightEstimate {
  int per_process = 0;
  std::string how;
};

InFlightEstimate EstimateInFlight(const SearchState& state, int cap) {
  EstimateLimits limits;
  limits.usable_cpus = state.setup().usable_cpus;
  limits.max_workers = std::numeric_limits<int>::max();  // the cap is per process, below
  const WorkerEstimate total = EstimateWorkers(state.current(), limits);
  if (total.workers == 0) return {};
  const int processes = std::max(1, state.knobs().num_workers);
  const int per_process = std::min(cap, (total.workers + processes - 1) / processes);
  return {per_process, total.how + (processes > 1 ? ", over " + std::to_string(processes) + " workers" : "") +
                           (per_process == cap && total.workers > cap * processes ? "; capped at " + std::to_string(cap)
                                                                                 : "")};
}

// Below an estimate of this many the phase doubles from 2: a start there
// saves no trial.
constexpr int kLowestEstimatedStart = 4;

}  // namespace

void FetchPhase(SearchState& state) {
  if (!state.setup().remote_reads) return;
  const int cap = std::min(kMaxFetchConcurrency, state.knobs().batch_size);
  const double threshold = state.options().gain_threshold;
  const int from = state.knobs().fetch_concurrency;
  const InFlightEstimate estimate = EstimateInFlight(state, cap);
  // The start: the largest doubling of `from` that the estimate reaches.
  int start = from * 2;
  while (estimate.per_process >= kLowestEstimatedStart && start * 2 <= std::min(cap, estimate.per_process)) start *= 2;
  const bool estimated = start > from * 2;

  // Measures `c` in flight; the trial's index, or nullopt when it failed (decided so).
  std::string stopped = "the batch size, " + std::to_string(cap) + ", the most a worker's batch overlaps";
  const auto measure = [&](int c) -> std::optional<size_t> {
    loader::Knobs knobs = state.knobs();
    knobs.fetch_concurrency = c;
    const size_t index = state.Measure("fetch_concurrency", knobs);
    if (state.trials()[index].status != TrialStatus::kOk) {
      state.DecideFailed(index);
      stopped = std::to_string(c) + " in flight, which failed";
      return std::nullopt;
    }
    return index;
  };
  const auto keep = [&](size_t index, int c, const std::string& why) {
    loader::Knobs knobs = state.knobs();
    knobs.fetch_concurrency = c;
    state.Decide(index, why);
    state.Keep(index, knobs);
  };

  // Up: doubling from the start while each gains over the last kept.
  bool start_gained = false;
  for (int c = start; c <= cap; c *= 2) {
    const std::optional<size_t> index = measure(c);
    if (!index) break;
    const TrialRecord& t = state.trials()[*index];
    const int kept = state.knobs().fetch_concurrency;
    if (!IsGain(t, state.current(), threshold)) {
      state.Decide(*index, NotKept(t, state.current(), threshold, std::to_string(c) + " in flight over " +
                                                                      std::to_string(kept)));
      stopped = std::to_string(c) + " in flight, no gain over " + std::to_string(kept);
      break;
    }
    start_gained = start_gained || c == start;
    keep(*index, c, "gains " + Percent(Gain(t, state.current())) + " over " + std::to_string(kept) + " in flight");
  }
  // Down, from an estimated start: the fewest in flight that the kept count
  // does not beat; or, where the start gained nothing, the first below it that gains.
  // (A count above the start that gained over it already says the start is below the knee.)
  std::string below;
  const bool halve = estimated && (!start_gained || state.knobs().fetch_concurrency == start);
  for (int c = start / 2; halve && c > from; c /= 2) {
    const int kept = state.knobs().fetch_concurrency;
    const std::optional<size_t> index = measure(c);
    if (!index) break;
    const TrialRecord& t = state.trials()[*index];
    if (start_gained) {
      const TrialRecord& higher = state.current();
      if (IsGain(higher, t, threshold)) {
        state.Decide(*index, std::to_string(kept) + " in flight gains " + Percent(Gain(higher, t)) + " over " +
                                 std::to_string(c));
        below = "; " + std::to_string(kept) + " gains over " + std::to_string(c);
        break;
      }
      keep(*index, c, std::to_string(kept) + " in flight gains nothing beyond the noise over " + std::to_string(c) +
                          ": fewer in flight, the same rate");
      below = "; " + std::to_string(c) + " reads as fast as " + std::to_string(kept);
      continue;
    }
    if (IsGain(t, state.current(), threshold)) {
      keep(*index, c, "gains " + Percent(Gain(t, state.current())) + " over " + std::to_string(from) + " in flight");
      below = "; " + std::to_string(c) + " gained where the start did not";
      break;
    }
    state.Decide(*index, NotKept(t, state.current(), threshold, std::to_string(c) + " in flight over " +
                                                                    std::to_string(from)));
  }
  const int kept = state.knobs().fetch_concurrency;
  const std::string began = estimated ? "started at the estimate of " + std::to_string(start) + " in flight (" +
                                            std::to_string(estimate.per_process) + " predicted: " + estimate.how +
                                            "); "
                                      : "";
  state.AddPhase("fetch_concurrency", kept != from,
                 began +
                     (kept != from ? "kept " + std::to_string(kept) + " requests in flight per worker"
                                   : "kept " + std::to_string(from) + " in flight: none more gains") +
                     "; the doubling stopped at " + stopped + below +
                     " (one process holds them: more in flight cost a connection's memory, a worker process "
                     "its own RSS)");
}

std::string FetchInsteadOfWorkers(const SearchState& state, const TrialRecord& skipped) {
  if (!state.setup().remote_reads) return "";
  const int in_flight = state.knobs().fetch_concurrency;
  const int cap = std::min(kMaxFetchConcurrency, state.knobs().batch_size);
  // The skip's own words say what the workers would need ("memory budget: needs about ...").
  std::string text = " (" + skipped.error.value_or("a budget") + ")";
  text += "; on remote data the workers' requests in flight are what the round trip needs, and requests in flight "
          "per worker give them without a process each: a connection's buffers, not a worker's RSS";
  bool more_tried = false;  // the fetch phase measured more in flight and kept none of it
  for (const TrialRecord& t : state.trials()) {
    more_tried = more_tried || (t.phase == "fetch_concurrency" && t.knobs.fetch_concurrency > in_flight);
  }
  if (more_tried) {
    return text + " (fetch_concurrency " + std::to_string(in_flight) +
           ": more in flight gained nothing, so the store or this box's CPUs bind before the requests do)";
  }
  if (in_flight < cap) {
    return text + " (fetch_concurrency " + std::to_string(in_flight) + " now; up to " + std::to_string(cap) +
           ", the batch size, overlap a worker's batch)";
  }
  return text + " (fetch_concurrency is at the batch size, " + std::to_string(cap) +
         ", already: a larger batch holds more in flight per worker)";
}

}  // namespace feedtune::tuner::search_internal
