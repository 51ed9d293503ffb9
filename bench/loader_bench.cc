// Microbenchmarks of the loader core: is the loader ever what a trial measures?
// Each reports samples_per_s (and bytes_per_s where bytes matter) as counters.
#include <benchmark/benchmark.h>

#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "loader/data_loader.h"
#include "workloads/synthetic_dataset.h"

namespace feedtune {
namespace {

using loader::DataLoader;
using loader::LoaderOptions;
using loader::WorkerMode;

// Samples that cost nothing but writing their bytes.
class FreeDataset final : public loader::Dataset {
 public:
  explicit FreeDataset(int64_t bytes, int64_t n = 1 << 20) : bytes_(bytes), n_(n) {}
  int64_t size() const override { return n_; }
  int64_t max_sample_bytes() const override { return bytes_; }
  int64_t Read(int64_t index, std::span<std::byte> out) const override {
    std::memset(out.data(), static_cast<int>(index & 0xff), static_cast<size_t>(bytes_));
    return bytes_;
  }

 private:
  int64_t bytes_, n_;
};

void RunLoader(benchmark::State& state, WorkerMode mode, int64_t sample_bytes, int batch_size, int workers) {
  LoaderOptions options;
  options.knobs.batch_size = batch_size;
  options.knobs.num_workers = workers;
  options.knobs.persistent_workers = true;
  options.worker_mode = mode;
  DataLoader data_loader(std::make_shared<FreeDataset>(sample_bytes), options);
  int64_t epoch = 0;
  data_loader.StartEpoch(epoch);
  int64_t samples = 0;
  for (auto _ : state) {
    auto batch = data_loader.Next();
    if (!batch) {
      data_loader.StartEpoch(++epoch);
      batch = data_loader.Next();
    }
    benchmark::DoNotOptimize(batch->data.data());
    samples += static_cast<int64_t>(batch->sample_indices.size());
  }
  state.counters["samples_per_s"] = benchmark::Counter(static_cast<double>(samples), benchmark::Counter::kIsRate);
  state.counters["bytes_per_s"] =
      benchmark::Counter(static_cast<double>(samples * sample_bytes), benchmark::Counter::kIsRate);
}

void BM_LoaderTiny(benchmark::State& state, WorkerMode mode) { RunLoader(state, mode, 64, 256, 2); }
BENCHMARK_CAPTURE(BM_LoaderTiny, thread, WorkerMode::kThread)->UseRealTime();
BENCHMARK_CAPTURE(BM_LoaderTiny, process, WorkerMode::kProcess)->UseRealTime();

void BM_LoaderBandwidth(benchmark::State& state, WorkerMode mode) { RunLoader(state, mode, 150528, 64, 2); }
BENCHMARK_CAPTURE(BM_LoaderBandwidth, process, WorkerMode::kProcess)->UseRealTime();
BENCHMARK_CAPTURE(BM_LoaderBandwidth, thread, WorkerMode::kThread)->UseRealTime();

// Plain memset of the same bytes on the same number of threads: the ceiling
// for BM_LoaderBandwidth (a sample is written once, as the loader's workers do).
void BM_Memcpy(benchmark::State& state) {
  constexpr size_t kBatch = 64 * 150528;
  constexpr int kThreads = 2;
  std::vector<std::vector<std::byte>> src(kThreads, std::vector<std::byte>(kBatch, std::byte{1}));
  std::vector<std::vector<std::byte>> dst(kThreads, std::vector<std::byte>(kBatch));
  int64_t bytes = 0;
  for (auto _ : state) {
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] { std::memcpy(dst[t].data(), src[t].data(), kBatch); });
    }
    for (auto& th : threads) th.join();
    bytes += static_cast<int64_t>(kBatch) * kThreads;
    benchmark::DoNotOptimize(dst[0].data());
  }
  state.counters["bytes_per_s"] = benchmark::Counter(static_cast<double>(bytes), benchmark::Counter::kIsRate);
  state.counters["samples_per_s"] = benchmark::Counter(static_cast<double>(bytes) / 150528, benchmark::Counter::kIsRate);
}
BENCHMARK(BM_Memcpy)->UseRealTime();

// Time to the first batch with 8 non-persistent workers: fork + start-up.
void BM_EpochStart(benchmark::State& state, WorkerMode mode) {
  LoaderOptions options;
  options.knobs.batch_size = 64;
  options.knobs.num_workers = 8;
  options.worker_mode = mode;
  DataLoader data_loader(std::make_shared<FreeDataset>(4096, 64 * 8), options);
  int64_t epoch = 0;
  for (auto _ : state) {
    data_loader.StartEpoch(epoch++);
    benchmark::DoNotOptimize(data_loader.Next());
    state.PauseTiming();
    while (data_loader.Next()) {
    }
    state.ResumeTiming();
  }
}
BENCHMARK_CAPTURE(BM_EpochStart, process, WorkerMode::kProcess)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace feedtune

BENCHMARK_MAIN();
