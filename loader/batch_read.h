// ReadBatchSamples: how a map-style batch's samples are read, in a worker
// (process or thread) and in the consumer without workers: one place, so the
// three read alike. Any thread; the dataset's own rules apply.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "loader/dataset.h"
#include "loader/trace.h"

namespace feedtune::loader {

// Reads samples `indices` into `slot` (sample i at i * stride) and returns
// their bytes together. A dataset that reads concurrently
// (Dataset::reads_concurrently) with `concurrency` > 1 reads them with
// ReadMany, up to `concurrency` requests in flight, traced as one span;
// otherwise one Read per sample, one after another, each a span on `trace`
// (null: not tracing) on track `track` as pid/tid. Throws
// std::runtime_error whose message starts "(sample N): " for the sample that
// failed, so callers prefix where it happened.
int64_t ReadBatchSamples(const Dataset& dataset, std::span<const int64_t> indices, std::span<std::byte> slot,
                         int64_t stride, int concurrency, TraceBuffer* trace, int track, int32_t pid, int32_t tid);

}  // namespace feedtune::loader
