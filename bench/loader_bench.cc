// Microbenchmarks of the loader core: is the loader ever what a trial measures?
// Each reports samples_per_s (and bytes_per_s where bytes matter) as counters;
// BM_TrialOverhead reports what the trial loop adds to the bare loader.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "loader/data_loader.h"
#include "loader/device/device.h"
#include "loader/fork_server.h"
#include "loader/sampler.h"
#include "tuner/config/config.h"
#include "tuner/measure/trial_runner.h"
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

// An epoch's shuffled order, per index: drawn (the permutation made for an
// epoch) and read in batches of 256 as the DataLoader fills them. Arg: the
// epoch's samples. Up to EpochPermutation::kTableMaxSamples it is a table
// (Fisher-Yates, drawn once per epoch); above, the Feistel network on demand.
void BM_EpochOrder(benchmark::State& state) {
  const int64_t n = state.range(0);
  std::vector<int64_t> out(256);
  int64_t epoch = 0;
  for (auto _ : state) {
    const loader::BatchPlan plan(loader::EpochSampler(n, true, 1, epoch++), 256, false);
    for (int64_t k = 0; k < plan.num_batches(); ++k) benchmark::DoNotOptimize(plan.FillBatch(k, out).data());
  }
  state.SetItemsProcessed(state.iterations() * n);
  state.SetLabel(loader::EpochPermutation(n, true, 1, 0).tabled() ? "table" : "on demand");
}
BENCHMARK(BM_EpochOrder)
    ->Arg(20'000)
    ->Arg(1 << 20)  // the tiny trial's epoch (docs/performance.md): a 4 MiB table, past the caches
    ->Arg(loader::EpochPermutation::kTableMaxSamples)
    ->Arg(loader::EpochPermutation::kTableMaxSamples + 1)
    ->Unit(benchmark::kMillisecond);

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

// What the trial loop (TrialRunner: loader wait, copy, step, sync, per-batch
// accounting, on host-sim) costs per batch beyond the bare loader loop and the
// modelled device time, on the tiny workload (64 B samples, batch 256, no work,
// step_us 0, a sync after every step, default host-sim bandwidths). Target:
// overhead_us_per_batch <= 5. Each iteration measures one trial
// window and one bare window of the same length, back to back, so both see the
// same machine; the counters are medians over the iterations. Arg: num_workers
// (process workers, persistent).
void BM_TrialOverhead(benchmark::State& state) {
  constexpr int kBatch = 256;
  constexpr int64_t kSampleBytes = 64;
  constexpr double kWindowS = 0.2;
  auto dataset = std::make_shared<FreeDataset>(kSampleBytes);
  // Workers come from a fork server made while this process has one thread, as
  // in `feedtune trial`.
  auto fork_server = std::make_shared<loader::ForkServer>(dataset);

  tuner::SweepConfig config;
  config.loader.knobs.batch_size = kBatch;
  config.loader.knobs.num_workers = static_cast<int>(state.range(0));
  config.loader.knobs.persistent_workers = state.range(0) > 0;
  config.loader.worker_mode = WorkerMode::kProcess;
  config.device.backend = device::BackendChoice::kHostSim;
  config.device.step_us = 0;
  config.sweep.repeats = 1;
  config.sweep.warmup_batches = 8;
  config.sweep.measure_seconds = kWindowS;
  auto device = device::MakeHostSimDevice(config.device);
  tuner::TrialRunner runner(config, *device, dataset, nullptr, fork_server);
  // A pageable copy of one batch; the step is 0 us and the sync waits for nothing more.
  const double modelled_us = kBatch * kSampleBytes / (config.device.host_sim.h2d_gbps_pageable * 1e9) * 1e6;

  DataLoader bare(dataset, config.loader, nullptr, fork_server);
  int64_t epoch = 0;
  bare.StartEpoch(epoch);
  const auto bare_us_per_batch = [&] {
    using Clock = std::chrono::steady_clock;
    const auto start = Clock::now();
    const auto until = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(kWindowS));
    int64_t batches = 0;
    // The clock is read every 64 batches: the bare loop is the loader alone.
    for (Clock::time_point now = start; now < until; now = Clock::now()) {
      for (int i = 0; i < 64; ++i, ++batches) {
        auto batch = bare.Next();
        if (!batch) {
          bare.StartEpoch(++epoch);
          batch = bare.Next();
        }
        benchmark::DoNotOptimize(batch->data.data());
      }
    }
    return std::chrono::duration<double, std::micro>(Clock::now() - start).count() / static_cast<double>(batches);
  };

  std::vector<double> overheads, trial_rates, bare_rates;
  for (auto _ : state) {
    const results::TrialRecord trial = runner.Measure(config.loader.knobs);
    if (trial.status != results::TrialStatus::kOk) {
      state.SkipWithError(("trial failed: " + trial.error.value_or("?")).c_str());
      break;
    }
    const double bare_us = bare_us_per_batch();
    const double trial_us = kBatch / trial.samples_per_s * 1e6;
    overheads.push_back(trial_us - bare_us - modelled_us);
    trial_rates.push_back(trial.samples_per_s);
    bare_rates.push_back(kBatch / bare_us * 1e6);
  }
  if (overheads.empty()) return;
  const auto median = [](std::vector<double> v) {
    std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
    return v[v.size() / 2];
  };
  state.counters["overhead_us_per_batch"] = median(overheads);
  state.counters["modelled_us_per_batch"] = modelled_us;
  state.counters["trial_samples_per_s"] = median(trial_rates);
  state.counters["bare_samples_per_s"] = median(bare_rates);
}
// Each iteration is about 2 x kWindowS plus the trial's loader set-up.
BENCHMARK(BM_TrialOverhead)->Arg(0)->Arg(2)->Iterations(5)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace feedtune

BENCHMARK_MAIN();
