// SyntheticDataset: a dataset whose samples cost what the config says, and whose
// bytes are deterministic in (seed, index) so tests can check every byte.
//
// Per sample: fill SampleBytes(index) bytes of content (a fixed size, or drawn
// from the configured distribution), spend cpu_us_per_sample of this thread's
// CPU time doing work over those bytes (workloads/cpu_work.h: measured with
// CLOCK_THREAD_CPUTIME_ID, so workers sharing a core each pay their full cost,
// as real decode work does; split over cpu_threads threads, or over the
// tuner's IntraOpThreads() when set: cpu_work.h), then wait io_us_per_sample without using CPU
// (storage latency). `jitter` scales both costs per sample by a factor in
// [1 - jitter, 1 + jitter], deterministic in the index. InitWorker waits
// worker_init_us (per-worker set-up). The configured fault, if any, fires when
// its sample is read (workloads/fault.h).
//
// Immutable after construction; Read() is safe from any thread or process.
#pragma once

#include <cstdint>
#include <span>

#include "loader/dataset.h"
#include "workloads/cpu_work.h"
#include "workloads/fault.h"
#include "workloads/options.h"

namespace feedtune::workloads {

class SyntheticDataset final : public loader::Dataset {
 public:
  // `calibration` comes from Calibrate(), measured once per process at start-up.
  SyntheticDataset(const SyntheticOptions& options, const CpuCalibration& calibration);
  // Calibrates on the spot (about 50 ms); for tests and one-off uses.
  explicit SyntheticDataset(const SyntheticOptions& options);

  int64_t size() const override { return options_.samples; }
  int64_t max_sample_bytes() const override { return options_.sample_bytes; }
  void InitWorker(int worker_id) const override;
  int64_t Read(int64_t index, std::span<std::byte> out) const override;

  // The size of sample `index`: sample_bytes, or a draw from the distribution.
  int64_t SampleBytes(int64_t index) const;
  // The cost factor in [1 - jitter, 1 + jitter] of sample `index`.
  double CostFactor(int64_t index) const;
  const CpuCalibration& calibration() const { return calibration_; }

  // The byte at `offset` of sample `index`: what Read() writes there.
  static std::byte ExpectedByte(uint64_t seed, int64_t index, int64_t offset);
  // Writes the content of sample `index` into all of `out`.
  static void FillContent(uint64_t seed, int64_t index, std::span<std::byte> out);
  // The size of sample `index` under `size` (dist kFixed: `fixed_bytes`).
  static int64_t DrawSize(const SampleSize& size, int64_t fixed_bytes, uint64_t seed, int64_t index);
  // The jitter factor of sample `index`, shared with the files dataset.
  static double JitterFactor(double jitter, uint64_t seed, int64_t index);

 private:
  const SyntheticOptions options_;
  const CpuCalibration calibration_;
  const FaultInjector fault_;
};

}  // namespace feedtune::workloads
