#include "loader/batch_read.h"

#include <stdexcept>
#include <string>
#include <vector>

namespace feedtune::loader {

int64_t ReadBatchSamples(const Dataset& dataset, std::span<const int64_t> indices, std::span<std::byte> slot,
                         int64_t stride, int concurrency, TraceBuffer* trace, int track, int32_t pid, int32_t tid) {
  const auto piece = [&](size_t i) { return slot.subspan(i * static_cast<size_t>(stride), static_cast<size_t>(stride)); };
  int64_t bytes = 0;
  if (concurrency > 1 && indices.size() > 1 && dataset.reads_concurrently()) {
    const int64_t start = trace ? TraceNowNs() : 0;
    std::vector<int64_t> sizes(indices.size());
    try {
      dataset.ReadMany(indices, slot.first(indices.size() * static_cast<size_t>(stride)), stride, concurrency, sizes);
    } catch (const std::exception& e) {
      throw std::runtime_error(std::string("(samples ") + std::to_string(indices.front()) + ".. of " +
                               std::to_string(indices.size()) + ", " + std::to_string(concurrency) +
                               " in flight): " + e.what());
    }
    if (trace) trace->Record(track, TraceKind::kSample, start, TraceNowNs(), indices.front(), pid, tid);
    for (const int64_t n : sizes) bytes += n;
    return bytes;
  }
  for (size_t i = 0; i < indices.size(); ++i) {
    try {
      const int64_t start = trace ? TraceNowNs() : 0;
      bytes += dataset.Read(indices[i], piece(i));
      if (trace) trace->Record(track, TraceKind::kSample, start, TraceNowNs(), indices[i], pid, tid);
    } catch (const std::exception& e) {
      throw std::runtime_error("(sample " + std::to_string(indices[i]) + "): " + e.what());
    }
  }
  return bytes;
}

}  // namespace feedtune::loader
