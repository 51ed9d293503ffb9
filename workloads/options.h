// WorkloadOptions: what a trial loads. The synthetic kind is a dataset whose
// per-sample size and cost are configured; other kinds come with their own
// fields. Plain values, no behaviour.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace feedtune::workloads {

enum class WorkloadKind { kSynthetic };

struct SyntheticOptions {
  int64_t samples = 4096;            // per epoch
  int64_t sample_bytes = 150528;     // 3x224x224 uint8
  int64_t cpu_us_per_sample = 200;   // real CPU work per sample
  int64_t io_us_per_sample = 0;      // waiting per sample, no CPU
  double jitter = 0.1;               // relative spread of per-sample cost, in [0, 1]
  int64_t worker_init_us = 0;        // per-worker set-up cost, paid at each worker start
  uint64_t seed = 0;                 // content and cost are deterministic in (seed, index)
};

struct WorkloadOptions {
  WorkloadKind kind = WorkloadKind::kSynthetic;
  SyntheticOptions synthetic;
};

const char* WorkloadKindName(WorkloadKind kind);

}  // namespace feedtune::workloads
