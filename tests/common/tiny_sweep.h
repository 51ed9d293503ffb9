// The sweep config of seconds that the end-to-end tests run: a synthetic
// dataset whose samples each wait a few hundred microseconds (no CPU), on the
// host-sim device with a 2 ms step, a few short windows a setting. What a
// test varies is a field; `sweep_extra` adds lines under `sweep:`, each
// "  key: value\n". The sample of other processes' CPU before the baseline
// takes 0.2 s instead of the default 1 s (sweep.background.sample_seconds): a
// sweep here lasts seconds, hundreds of them run in the suite, and the tests
// of that sample give their own `background`.
#pragma once

#include <string>

namespace feedtune::testing_util {

struct TinySweep {
  std::string name = "tiny";
  int samples = 256;
  int sample_bytes = 4096;
  int io_us_per_sample = 300;
  int cpu_us_per_sample = 0;
  int batch_size = 16;
  int max_workers = 4;
  std::string prefetch_factors = "[1, 4]";
  int repeats = 2;
  std::string measure_seconds = "0.25";
  std::string background = "{sample_seconds: 0.2}";  // the sweep.background section
  std::string sweep_extra;
};

inline std::string TinySweepYaml(const TinySweep& c) {
  return "name: " + c.name + "\nworkload:\n  kind: synthetic\n  samples: " + std::to_string(c.samples) +
         "\n  sample_bytes: " + std::to_string(c.sample_bytes) +
         "\n  cpu_us_per_sample: " + std::to_string(c.cpu_us_per_sample) +
         "\n  io_us_per_sample: " + std::to_string(c.io_us_per_sample) +
         "\n  jitter: 0\nloader:\n  batch_size: " + std::to_string(c.batch_size) +
         "\ndevice:\n  backend: host-sim\n  step_us: 2000\nsweep:\n  max_workers: " + std::to_string(c.max_workers) +
         "\n  prefetch_factors: " + c.prefetch_factors + "\n  repeats: " + std::to_string(c.repeats) +
         "\n  warmup_batches: 2\n  measure_seconds: " + c.measure_seconds + "\n  background: " + c.background + "\n" +
         c.sweep_extra;
}

}  // namespace feedtune::testing_util
