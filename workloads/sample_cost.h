// SampleCost: what every native dataset adds around its real read, from the
// workload's cost keys (cpu_us_per_sample, cpu_threads, jitter,
// worker_init_us, seed, fault): the fault fires before the read, the
// per-sample CPU work (a decode stand-in, workloads/cpu_work.h) runs over the
// bytes after it, split over the intra-op threads as OpenMP or OpenCV inside a
// transform would (the trial's worker_threads, else workload.cpu_threads),
// and each worker pays worker_init_us once. Immutable; safe from any thread or
// process.
#pragma once

#include <chrono>
#include <cstdint>
#include <span>
#include <thread>

#include "workloads/cpu_work.h"
#include "workloads/fault.h"
#include "workloads/options.h"
#include "workloads/synthetic_dataset.h"

namespace feedtune::workloads {

class SampleCost {
 public:
  SampleCost(const SyntheticOptions& cost, const CpuCalibration& calibration)
      : cost_(cost), calibration_(calibration), fault_(cost.fault) {
    IntraOpThreads();  // makes the shared setting now, before the dataset's fork server exists (cpu_work.h)
  }

  void InitWorker() const {
    if (cost_.worker_init_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(cost_.worker_init_us));
  }
  void BeforeRead(int64_t index) const { fault_.OnRead(index); }
  void AfterRead(int64_t index, std::span<const std::byte> sample) const {
    if (cost_.cpu_us_per_sample <= 0) return;
    const double factor = SyntheticDataset::JitterFactor(cost_.jitter, cost_.seed, index);
    BurnCpuThreads(static_cast<int64_t>(static_cast<double>(cost_.cpu_us_per_sample) * 1000.0 * factor), sample,
                   calibration_, IntraOpThreadsOr(cost_.cpu_threads));
  }
  uint64_t seed() const { return cost_.seed; }

 private:
  const SyntheticOptions cost_;
  const CpuCalibration calibration_;
  const FaultInjector fault_;
};

}  // namespace feedtune::workloads
