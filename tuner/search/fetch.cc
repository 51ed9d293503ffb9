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
// What it measures: the current setting with fetch_concurrency doubled, 2,
// 4, 8, ..., up to the batch size (a worker fetches one batch at a time, so
// more in flight than its samples overlaps nothing) or kMaxFetchConcurrency.
//
// What it keeps: each doubling that gains by THE RULE (tuner/search/rule.cc)
// over the last one kept; the doubling ends at the first that does not, or
// at the cap. A round trip's curve rises until the box's CPUs or the store's
// bandwidth bind, then flattens: one miss ends it (the workers phase's second
// chance is for a curve that CPU contention dents).
#include "tuner/search/phases.h"

namespace feedtune::tuner::search_internal {
namespace {

// The most requests in flight per worker the phase tries: libcurl's
// connections (and their sockets) per process stay well under an open-file
// limit of 1024 with the workers' other descriptors.
constexpr int kMaxFetchConcurrency = 256;

}  // namespace

void FetchPhase(SearchState& state) {
  if (!state.setup().remote_reads) return;
  const int cap = std::min(kMaxFetchConcurrency, state.knobs().batch_size);
  const double threshold = state.options().gain_threshold;
  const int from = state.knobs().fetch_concurrency;
  std::string stopped = "the batch size, " + std::to_string(cap) + ", the most a worker's batch overlaps";
  for (int c = from * 2; c <= cap; c *= 2) {
    loader::Knobs knobs = state.knobs();
    knobs.fetch_concurrency = c;
    const size_t index = state.Measure("fetch_concurrency", knobs);
    const TrialRecord& t = state.trials()[index];
    if (t.status != TrialStatus::kOk) {
      state.DecideFailed(index);
      stopped = std::to_string(c) + " in flight, which failed";
      break;
    }
    const int kept = state.knobs().fetch_concurrency;
    if (!IsGain(t, state.current(), threshold)) {
      state.Decide(index, NotKept(t, state.current(), threshold, std::to_string(c) + " in flight over " +
                                                                     std::to_string(kept)));
      stopped = std::to_string(c) + " in flight, no gain over " + std::to_string(kept);
      break;
    }
    state.Decide(index, "gains " + Percent(Gain(t, state.current())) + " over " + std::to_string(kept) +
                            " in flight");
    state.Keep(index, knobs);
  }
  const int kept = state.knobs().fetch_concurrency;
  state.AddPhase("fetch_concurrency", kept != from,
                 (kept != from ? "kept " + std::to_string(kept) + " requests in flight per worker"
                               : "kept " + std::to_string(from) + " in flight: none more gains") +
                     "; the doubling stopped at " + stopped +
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
