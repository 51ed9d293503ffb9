// feedtune_epoch_bench: how long a huge map-style epoch takes to its first
// batch, and what its sampler holds (targets: < 1 s and
// < 16 MiB at 1e9 samples). Prints one line per loader mode, then the cost
// per index of the on-demand permutation. Not a Google Benchmark: the figure
// wanted is one cold start, not a steady-state rate.
//
//   feedtune_epoch_bench [samples (default 1e9)] [batch_size (default 256)]
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>

#include "loader/data_loader.h"
#include "loader/sampler.h"
#include "workloads/synthetic_dataset.h"

namespace {

using Clock = std::chrono::steady_clock;
using feedtune::loader::BatchPlan;
using feedtune::loader::DataLoader;
using feedtune::loader::EpochPermutation;
using feedtune::loader::EpochSampler;
using feedtune::loader::LoaderOptions;
using feedtune::loader::WorkerMode;

// A field of /proc/self/status in KiB (VmRSS: now; VmHWM: peak).
int64_t StatusKiB(const char* field) {
  std::ifstream in("/proc/self/status");
  std::string key;
  int64_t value = 0;
  while (in >> key) {
    if (key == field) {
      in >> value;
      return value;
    }
    in.ignore(1 << 12, '\n');
  }
  return -1;
}

double MiB(int64_t bytes) { return static_cast<double>(bytes) / (1 << 20); }

void Run(const char* name, int64_t samples, int batch_size, int workers, WorkerMode mode) {
  feedtune::workloads::SyntheticOptions so;
  so.samples = samples;
  so.sample_bytes = 4096;
  so.cpu_us_per_sample = 0;
  so.jitter = 0;
  auto dataset = std::make_shared<feedtune::workloads::SyntheticDataset>(so);
  LoaderOptions options;
  options.knobs.batch_size = batch_size;
  options.knobs.num_workers = workers;
  options.knobs.prefetch_factor = 2;
  options.worker_mode = mode;
  options.shuffle = true;
  options.seed = 1;
  DataLoader loader(dataset, options);  // slots and workers' pool: not the sampler's
  const int64_t rss_before = StatusKiB("VmRSS:");
  const auto start = Clock::now();
  loader.StartEpoch(0);
  const auto batch = loader.Next();
  const double first_s = std::chrono::duration<double>(Clock::now() - start).count();
  const int64_t rss_after = StatusKiB("VmRSS:");
  // What the sampler holds: the plan (O(1)) plus the loader's per-slot index
  // buffers (slots x batch_size x 8 bytes, independent of the dataset size).
  const int slots = workers == 0 ? 1 : 2 * workers + 1;
  const int64_t sampler_bytes = static_cast<int64_t>(sizeof(BatchPlan)) +
                                int64_t{slots} * batch_size * static_cast<int64_t>(sizeof(int64_t));
  std::printf("%-18s samples=%lld batch=%d first_batch_s=%.6f (stats: %.6f) sampler_bytes=%lld (%.3f MiB) "
              "rss_growth_over_start_MiB=%.2f peak_rss_MiB=%.1f first_index=%lld\n",
              name, static_cast<long long>(samples), batch_size, first_s, loader.stats().time_to_first_batch_s,
              static_cast<long long>(sampler_bytes), MiB(sampler_bytes), MiB((rss_after - rss_before) * 1024),
              MiB(StatusKiB("VmHWM:") * 1024), batch ? static_cast<long long>(batch->sample_indices[0]) : -1LL);
}

}  // namespace

int main(int argc, char** argv) {
  const int64_t samples = argc > 1 ? static_cast<int64_t>(std::strtod(argv[1], nullptr)) : 1'000'000'000;
  const int batch_size = argc > 2 ? std::atoi(argv[2]) : 256;
  Run("workers=0", samples, batch_size, 0, WorkerMode::kThread);
  Run("workers=2 thread", samples, batch_size, 2, WorkerMode::kThread);
  Run("workers=2 process", samples, batch_size, 2, WorkerMode::kProcess);

  // Cost per index: 1e7 consecutive positions of the shuffled epoch.
  const EpochPermutation perm(samples, true, 1, 0);
  constexpr int64_t kIndices = 10'000'000;
  uint64_t sink = 0;
  const auto start = Clock::now();
  for (int64_t i = 0; i < kIndices && i < samples; ++i) sink += static_cast<uint64_t>(perm.at(i));
  const double s = std::chrono::duration<double>(Clock::now() - start).count();
  std::printf("permutation: %.1f ns per index over %lld positions (checksum %llu); sizeof(EpochSampler)=%zu "
              "sizeof(BatchPlan)=%zu\n",
              s * 1e9 / static_cast<double>(std::min(kIndices, samples)),
              static_cast<long long>(std::min(kIndices, samples)), static_cast<unsigned long long>(sink),
              sizeof(EpochSampler), sizeof(BatchPlan));
  return 0;
}
