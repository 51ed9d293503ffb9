// SyntheticDataset: a dataset whose samples cost what the config says, and whose
// bytes are deterministic in (seed, index) so tests can check every byte.
//
// Per sample: fill sample_bytes of content, spend cpu_us_per_sample of this
// thread's CPU time (measured with CLOCK_THREAD_CPUTIME_ID, so that workers
// sharing a core each pay their full cost, as real decode work does), then wait
// io_us_per_sample without using CPU (storage latency). `jitter` scales both
// costs per sample by a factor in [1 - jitter, 1 + jitter], deterministic in the
// index. InitWorker waits worker_init_us (per-worker set-up).
// Immutable after construction; Read() is safe from any thread or process.
#pragma once

#include <cstdint>
#include <span>

#include "loader/dataset.h"
#include "workloads/options.h"

namespace feedtune::workloads {

class SyntheticDataset final : public loader::Dataset {
 public:
  explicit SyntheticDataset(const SyntheticOptions& options);

  int64_t size() const override { return options_.samples; }
  int64_t max_sample_bytes() const override { return options_.sample_bytes; }
  void InitWorker(int worker_id) const override;
  int64_t Read(int64_t index, std::span<std::byte> out) const override;

  // The byte at `offset` of sample `index`: what Read() writes there.
  static std::byte ExpectedByte(uint64_t seed, int64_t index, int64_t offset);
  // The cost factor in [1 - jitter, 1 + jitter] of sample `index`.
  double CostFactor(int64_t index) const;

 private:
  const SyntheticOptions options_;
};

}  // namespace feedtune::workloads
