// The PyTorch probe (workloads/python/feedtune_probe.py) run through the
// command workload, as `feedtune sweep configs/torch-probe.yaml` runs it: user
// datasets plug in by factory, the probe measures its workers' figures, and a
// worker that leaks is flagged as a native one is. Where the real DataLoader's
// knee lies on this machine is a bench, not a test (bench/probe_knee_bench.cc).
//
// These tests need /usr/bin/python3 with torch (scripts/setup-deps installs
// python3-torch).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "results/memory_growth.h"
#include "tuner/measure/command_measurer.h"

#ifndef FEEDTUNE_SOURCE_DIR
#define FEEDTUNE_SOURCE_DIR "."
#endif

namespace feedtune::tuner {
namespace {

namespace fs = std::filesystem;

const std::string kProbe = FEEDTUNE_SOURCE_DIR "/workloads/python/feedtune_probe.py";

std::string Python() { return fs::exists("/usr/bin/python3") ? "/usr/bin/python3" : "python3"; }

class ProbeTest : public testing::Test {
 protected:
  void SetUp() override {
    const std::string check = Python() + " -c 'import torch.utils.data' 2>/dev/null";
    ASSERT_EQ(std::system(check.c_str()), 0)
        << "python3 cannot import torch: install python3-torch (scripts/setup-deps does)";
  }

  // A config that runs the probe on the CPU with a short window.
  static SweepConfig ProbeConfig(const std::vector<std::string>& dataset_args) {
    SweepConfig config;
    config.workload.kind = workloads::WorkloadKind::kCommand;
    config.workload.command.argv = {Python(), kProbe, "--device", "cpu",
                                    "--batch-size", "{batch_size}", "--num-workers", "{num_workers}",
                                    "--pin-memory", "{pin_memory}", "--prefetch-factor", "{prefetch_factor}",
                                    "--persistent-workers", "{persistent_workers}",
                                    "--seconds", "{measure_seconds}", "--warmup-batches", "{warmup_batches}",
                                    "--step-us", "{step_us}"};
    config.workload.command.argv.insert(config.workload.command.argv.end(), dataset_args.begin(), dataset_args.end());
    config.workload.command.timeout_s = 120;
    config.loader.knobs.batch_size = 16;
    config.device.step_us = 0;  // the loader alone is measured
    config.sweep.repeats = 1;
    config.sweep.warmup_batches = 4;
    config.sweep.measure_seconds = 1.5;
    return config;
  }
};

class UserDatasetTest : public ProbeTest {
 protected:
  void SetUp() override {
    ProbeTest::SetUp();
    dir_ = fs::temp_directory_path() / ("feedtune-probe-" + std::to_string(getpid()));
    fs::create_directories(dir_ / "mypkg");
    std::ofstream(dir_ / "mypkg" / "__init__.py") << "";
    std::ofstream(dir_ / "mypkg" / "data.py") << R"(import torch

class Pairs(torch.utils.data.Dataset):
    """A map-style dataset of (image, label) dicts, as real ones return."""
    def __init__(self, n, size, broken_at=-1):
        self.n, self.size, self.broken_at = n, size, broken_at
    def __len__(self):
        return self.n
    def __getitem__(self, i):
        if i == self.broken_at:
            raise ValueError("bad sample %d" % i)
        return {"image": torch.full((self.size,), i % 251, dtype=torch.uint8), "label": i % 10}

class Stream(torch.utils.data.IterableDataset):
    def __init__(self, n):
        self.n = n
    def __iter__(self):
        info = torch.utils.data.get_worker_info()
        start, step = (0, 1) if info is None else (info.id, info.num_workers)
        for i in range(start, self.n, step):
            yield torch.zeros(64), i

def make_pairs(n, size, broken_at=-1):
    return Pairs(n, size, broken_at)

_held = []

class Costly(torch.utils.data.Dataset):
    """Known costs: each sample sleeps sleep_ms; each worker holds alloc_mib of
    memory it has written (resident), made at its first sample."""
    def __init__(self, n, sleep_ms, alloc_mib):
        self.n, self.sleep_s, self.alloc = n, sleep_ms / 1000.0, alloc_mib << 20
    def __len__(self):
        return self.n
    def __getitem__(self, i):
        import time
        if self.alloc and not _held and torch.utils.data.get_worker_info() is not None:
            _held.append(bytearray(b"\x01") * self.alloc)
        time.sleep(self.sleep_s)
        return torch.zeros(16)
)";
  }
  void TearDown() override { fs::remove_all(dir_); }

  results::TrialRecord Run(const std::vector<std::string>& dataset_args, int workers) {
    SweepConfig config = ProbeConfig(dataset_args);
    config.sweep.measure_seconds = 0.3;
    config.device.step_us = 1000;
    CommandMeasurer measurer(config, nullptr);
    loader::Knobs knobs = config.loader.knobs;
    knobs.num_workers = workers;
    knobs.persistent_workers = workers > 0;
    knobs.prefetch_factor = 4;
    return measurer.Measure(knobs);
  }

  fs::path dir_;
};

TEST_F(UserDatasetTest, FactoryFunctionAndClassWithArguments) {
  results::TrialRecord t = Run({"--dataset", "mypkg.data:make_pairs", "--dataset-args", R"({"n": 512, "size": 1024})",
                                "--pythonpath", dir_.string()},
                               2);
  ASSERT_EQ(t.status, results::TrialStatus::kOk) << t.error.value_or("");
  EXPECT_GT(t.samples_per_s, 0);
  EXPECT_GT(t.mb_per_s, 0);
  EXPECT_GT(t.gpu_idle_frac, 0);  // a 1 ms step against a fast loader: the "device" waits sometimes
  EXPECT_GT(t.worker_startup_s, 0);
  EXPECT_GT(t.peak_rss_bytes, 0);
  EXPECT_EQ(t.batches_per_epoch, 512 / 16);  // len(loader), drop_last

  // The class itself, positional arguments, no workers; an iterable dataset,
  // which has no len(): its epoch length stays unknown.
  t = Run({"--dataset", "mypkg.data:Pairs", "--dataset-args", "[256, 64]", "--pythonpath", dir_.string()}, 0);
  ASSERT_EQ(t.status, results::TrialStatus::kOk) << t.error.value_or("");
  EXPECT_EQ(t.batches_per_epoch, 256 / 16);
  t = Run({"--dataset", "mypkg.data:Stream", "--dataset-args", "[100000]", "--pythonpath", dir_.string()}, 2);
  ASSERT_EQ(t.status, results::TrialStatus::kOk) << t.error.value_or("");
  EXPECT_FALSE(t.batches_per_epoch.has_value());
}

// The figures the probe measures about its workers, against a dataset whose
// costs are known: 2 ms of sleep per sample (32 ms per batch of 16) and 64 MiB
// written by each worker (or none).
TEST_F(UserDatasetTest, WorkerFiguresFromKnownCosts) {
  const auto measure = [&](int workers, double step_us, int alloc_mib = 64) {
    SweepConfig config = ProbeConfig({"--dataset", "mypkg.data:Costly", "--dataset-args",
                                      "[256, 2, " + std::to_string(alloc_mib) + "]", "--pythonpath", dir_.string()});
    config.sweep.measure_seconds = 1.5;
    config.device.step_us = step_us;
    CommandMeasurer measurer(config, nullptr);
    loader::Knobs knobs = config.loader.knobs;
    knobs.num_workers = workers;
    knobs.persistent_workers = workers > 0;
    return measurer.Measure(knobs);
  };
  constexpr double kMiB = 1 << 20;

  // No model step: the consumer takes each batch at once, so the two workers
  // never rest (bar the epoch ends).
  results::TrialRecord t = measure(2, 0);
  ASSERT_EQ(t.status, results::TrialStatus::kOk) << t.error.value_or("");
  const double rss_with_allocation = t.worker_rss_bytes;
  EXPECT_GT(t.worker_busy_frac, 0.75) << "2 workers fed a consumer that never waits";
  EXPECT_LE(t.worker_busy_frac, 1.0);
  EXPECT_GE(t.worker_rss_bytes, 64 * kMiB);
  EXPECT_GE(t.time_to_first_batch_s, 0.032);  // the first batch alone sleeps 32 ms
  EXPECT_GT(t.worker_startup_s, 0);
  EXPECT_TRUE(std::isfinite(t.epoch_boundary_ms)) << "16 batches per epoch: the window crosses epoch starts";

  // A 32 ms step per batch: the consumer takes 31 batches/s of the 62 the two
  // workers could make, so each is busy about half the time. These workers
  // allocate nothing: what they inherit from the probe is the same, so the
  // difference is the 64 MiB each wrote above.
  t = measure(2, 32000, 0);
  ASSERT_EQ(t.status, results::TrialStatus::kOk) << t.error.value_or("");
  EXPECT_GT(t.worker_busy_frac, 0.3);
  EXPECT_LT(t.worker_busy_frac, 0.75);
  EXPECT_GT(t.worker_rss_bytes, 0);
  EXPECT_GE(rss_with_allocation - t.worker_rss_bytes, 56 * kMiB)
      << rss_with_allocation / kMiB << " MiB with 64 MiB written, " << t.worker_rss_bytes / kMiB << " MiB without";
  EXPECT_LE(rss_with_allocation - t.worker_rss_bytes, 96 * kMiB);

  // Without workers there is nothing of theirs to measure.
  t = measure(0, 0);
  ASSERT_EQ(t.status, results::TrialStatus::kOk) << t.error.value_or("");
  EXPECT_TRUE(std::isnan(t.worker_busy_frac));
  EXPECT_TRUE(std::isnan(t.worker_rss_bytes));
  EXPECT_TRUE(std::isnan(t.worker_startup_s));
  EXPECT_GE(t.time_to_first_batch_s, 0.032);
}

TEST_F(UserDatasetTest, FailuresCarryTheCause) {
  // The dataset raises: the trial fails with the worker's traceback.
  results::TrialRecord t = Run({"--dataset", "mypkg.data:make_pairs", "--dataset-args",
                                R"({"n": 512, "size": 64, "broken_at": 3})", "--pythonpath", dir_.string(),
                                "--shuffle", "false"},
                               2);
  ASSERT_EQ(t.status, results::TrialStatus::kFailed);
  EXPECT_NE(t.error->find("the command exited with code 1"), std::string::npos) << *t.error;
  EXPECT_NE(t.error->find("ValueError: bad sample 3"), std::string::npos) << *t.error;

  // A dataset that cannot be imported: a usage error of the probe (exit 2).
  t = Run({"--dataset", "nosuchpkg.data:make", "--pythonpath", dir_.string()}, 0);
  ASSERT_EQ(t.status, results::TrialStatus::kFailed);
  EXPECT_NE(t.error->find("the command exited with code 2"), std::string::npos) << *t.error;
  EXPECT_NE(t.error->find("feedtune_probe: --dataset: cannot import 'nosuchpkg.data'"), std::string::npos)
      << *t.error;
}

// The probe with --serve (workload.protocol serve): a whole sweep, through the
// feedtune binary, runs in one probe process that calls the dataset factory
// once; a dataset that fails one trial is reported with {"error": ...} and
// the probe serves the next one.
TEST_F(UserDatasetTest, ServeBuildsTheDatasetOncePerSweep) {
  const std::string count = (dir_ / "factory-calls").string();
  const std::string config_path = (dir_ / "serve.yaml").string();
  std::ofstream(config_path) << "name: probe-serve\n"
                                "workload:\n"
                                "  kind: command\n"
                                "  protocol: serve\n"
                                "  argv: [" + Python() + ", " + kProbe + ", --serve, --device, cpu,\n"
                                "         --dataset, 'counting_dataset:make_dataset',\n"
                                "         --dataset-args, '{\"count_file\": \"" + count + "\"}',\n"
                                "         --pythonpath, " FEEDTUNE_SOURCE_DIR "/tests/testdata/serve]\n"
                                "  timeout_s: 120\n"
                                "loader:\n"
                                "  batch_size: 16\n"
                                "device:\n"
                                "  step_us: 1000\n"
                                "sweep:\n"
                                "  max_workers: 2\n"
                                "  prefetch_factors: [2]\n"
                                "  repeats: 2\n"
                                "  warmup_batches: 2\n"
                                "  measure_seconds: 0.2\n"
                                "  diagnose: false\n";
  const std::string db = (dir_ / "r.db").string();
  const std::string out = (dir_ / "out").string(), err = (dir_ / "err").string();
  const std::string command = std::string(FEEDTUNE_BINARY) + " sweep " + config_path + " --db " + db + " --json >" +
                              out + " 2>" + err;
  ASSERT_EQ(std::system(command.c_str()), 0) << std::ifstream(err).rdbuf();
  int trials = 0, ok = 0;
  std::ifstream events(out);
  for (std::string line; std::getline(events, line);) {
    const nlohmann::json event = nlohmann::json::parse(line);
    if (event["event"] != "trial") continue;
    ++trials;
    ok += event["status"] == "ok" ? 1 : 0;
  }
  EXPECT_GE(trials, 5);  // baseline, pin_memory, workers, ..., the final check
  EXPECT_EQ(ok, trials);
  std::ifstream calls(count);
  int factory_calls = 0;
  for (std::string line; std::getline(calls, line);) ++factory_calls;
  EXPECT_EQ(factory_calls, 1) << "the dataset factory ran once per trial, not once per sweep";

  // A failing dataset fails its trial and leaves the probe serving: the
  // measurer gets {"error": ...} and the next trial runs in the same process.
  SweepConfig config = ProbeConfig({"--dataset", "mypkg.data:make_pairs", "--dataset-args",
                                    R"({"n": 512, "size": 64, "broken_at": 3})", "--pythonpath", dir_.string(),
                                    "--shuffle", "false"});
  config.workload.command.protocol = workloads::CommandProtocol::kServe;
  config.workload.command.argv = {Python(), kProbe, "--serve", "--device", "cpu", "--dataset", "mypkg.data:make_pairs",
                                  "--dataset-args", R"({"n": 512, "size": 64, "broken_at": 3})", "--pythonpath",
                                  dir_.string(), "--shuffle", "false"};
  config.sweep.measure_seconds = 0.2;
  CommandMeasurer measurer(config, nullptr);
  loader::Knobs knobs = config.loader.knobs;
  knobs.num_workers = 1;
  results::TrialRecord t = measurer.Measure(knobs);
  ASSERT_EQ(t.status, results::TrialStatus::kFailed);
  EXPECT_NE(t.error->find("the serving command reported an error in trial 1 after 0 of 1 window: ValueError"),
            std::string::npos)
      << *t.error;
  EXPECT_NE(t.error->find("bad sample 3"), std::string::npos) << *t.error;
  const pid_t server = measurer.server_pid();
  EXPECT_GT(server, 0);
  t = measurer.Measure(knobs);
  EXPECT_EQ(t.status, results::TrialStatus::kFailed);
  EXPECT_EQ(measurer.server_pid(), server);
  EXPECT_EQ(measurer.servers_started(), 1);
}

// The workers' memory over a command trial: the probe samples its
// workers as a native trial does (python/feedtune/memory.py), and its
// synthetic dataset's --leak-bytes-per-sample keeps that much of every read
// in the worker, as the native LeakTrial's workload.leak_bytes_per_sample
// does (tests/tuner/worker_memory_test.cc): a leak is flagged with its growth
// per epoch, a flat worker is not. One persistent worker over 16 tiny samples
// per epoch (4 batches of 4) and a 20 ms step; writing the leak (page faults)
// may set the pace instead on a slow box (about 16 ms per 6 MiB here), so the
// served windows are whole epochs, whatever the speed.
class ProbeWorkerMemory : public ProbeTest {
 protected:
  static constexpr double kMiB = 1 << 20;

  static std::vector<std::string> SyntheticArgs(int64_t leak) {
    return {"--samples", "16", "--sample-bytes", "64", "--cpu-us-per-sample", "0", "--jitter", "0",
            "--leak-bytes-per-sample", std::to_string(leak)};
  }

  // Served: a warm-up of 2 batches, then three one-epoch windows.
  static results::TrialRecord ServedTrial(int64_t leak) {
    SweepConfig config;
    config.workload.kind = workloads::WorkloadKind::kCommand;
    config.workload.command.protocol = workloads::CommandProtocol::kServe;
    config.workload.command.argv = {Python(), kProbe, "--serve", "--device", "cpu"};
    for (const std::string& a : SyntheticArgs(leak)) config.workload.command.argv.push_back(a);
    config.workload.command.timeout_s = 60;
    config.loader.knobs.batch_size = 4;
    config.device.step_us = 20000;
    config.sweep.warmup_batches = 2;
    CommandMeasurer measurer(config, nullptr);
    loader::Knobs knobs = config.loader.knobs;
    knobs.num_workers = 1;
    knobs.persistent_workers = true;
    TrialPlan plan;
    plan.repeats = 3;
    plan.window_epochs = 1;
    return measurer.MeasurePlanned(knobs, plan);
  }
};

TEST_F(ProbeWorkerMemory, ALeakingWorkerIsFlaggedWithItsGrowth) {
  // 16 samples x 6 MiB: 96 MiB per epoch for the one worker.
  const results::TrialRecord t = ServedTrial(6 << 20);
  ASSERT_EQ(t.status, results::TrialStatus::kOk) << t.error.value_or("");
  EXPECT_FALSE(t.worker_rss_in_consumer);
  EXPECT_GE(t.worker_rss_samples, 6);  // each window's start and its epoch's two edges
  EXPECT_GE(t.worker_rss_epochs, 2.0);
  // The worker reads up to two batches ahead of the loop, but not past its
  // epoch's end: a saw-tooth around the line, a little under 96 MiB.
  EXPECT_GE(t.worker_rss_growth_bytes_per_epoch, 72 * kMiB) << t.worker_rss_growth_bytes_per_epoch / kMiB;
  EXPECT_LE(t.worker_rss_growth_bytes_per_epoch, 120 * kMiB) << t.worker_rss_growth_bytes_per_epoch / kMiB;
  EXPECT_GT(t.worker_rss_peak_bytes, t.worker_rss_start_bytes + 2 * 96 * kMiB);
  ASSERT_TRUE(results::GrowthFlagged(t));
  const std::string text = results::GrowthText(t);
  EXPECT_EQ(text.find("memory grows "), 0u) << text;
  EXPECT_NE(text.find(" MiB per epoch per worker: a cache or a leak; persistent_workers: false frees it at each epoch"),
            std::string::npos)
      << text;
  // The summary's and the report's line (results/memory_growth.h), as for a native trial.
  const std::string line = results::GrowthFlagsText({t}, "  ");
  EXPECT_EQ(line.find("  trial 0 (1 worker, persistent): memory grows "), 0u) << line;
}

TEST_F(ProbeWorkerMemory, AFlatWorkerIsNotFlagged) {
  const results::TrialRecord t = ServedTrial(0);
  ASSERT_EQ(t.status, results::TrialStatus::kOk) << t.error.value_or("");
  EXPECT_GE(t.worker_rss_samples, 6);
  EXPECT_GT(t.worker_rss_peak_bytes, 0);
  EXPECT_GT(t.worker_rss_start_bytes, 0);
  ASSERT_TRUE(std::isfinite(t.worker_rss_growth_bytes_per_epoch));
  EXPECT_LT(std::abs(t.worker_rss_growth_bytes_per_epoch), 16 * kMiB) << t.worker_rss_growth_bytes_per_epoch / kMiB;
  EXPECT_FALSE(results::GrowthFlagged(t));
}

// The run protocol through `feedtune trial --json`: one process, one window
// of 3 s (up to 37 epochs of 4 steps of 20 ms; 6 to 8 where the worker's
// page faults set the pace, one at load 9 beside two CPU hogs: 1.5 s saw
// 0.75 there, too few for a growth per epoch); the trial's JSON carries the
// figures and the flag as a native trial's does.
TEST_F(ProbeWorkerMemory, FeedtuneTrialFlagsARunProtocolLeak) {
  const fs::path dir = fs::temp_directory_path() / ("feedtune-probe-memory-" + std::to_string(getpid()));
  fs::create_directories(dir);
  std::string argv = Python() + ", " + kProbe +
                     ", --device, cpu, --batch-size, '{batch_size}', --num-workers, '{num_workers}', "
                     "--persistent-workers, '{persistent_workers}', --prefetch-factor, '{prefetch_factor}', "
                     "--seconds, '{measure_seconds}', --warmup-batches, '{warmup_batches}', --step-us, '{step_us}'";
  for (const std::string& a : SyntheticArgs(6 << 20)) argv += ", '" + a + "'";
  const std::string config_path = (dir / "leak.yaml").string();
  std::ofstream(config_path) << "name: probe-leak\n"
                                "workload:\n"
                                "  kind: command\n"
                                "  argv: [" + argv + "]\n"
                                "  timeout_s: 60\n"
                                "loader:\n"
                                "  batch_size: 4\n"
                                "  num_workers: 1\n"
                                "  persistent_workers: true\n"
                                "device:\n"
                                "  step_us: 20000\n"
                                "sweep:\n"
                                "  repeats: 1\n"
                                "  warmup_batches: 2\n"
                                "  measure_seconds: 3\n";
  const std::string out = (dir / "out").string(), err = (dir / "err").string();
  const std::string command = std::string(FEEDTUNE_BINARY) + " trial " + config_path + " --json >" + out + " 2>" + err;
  const int status = std::system(command.c_str());
  std::stringstream printed, errors;
  printed << std::ifstream(out).rdbuf();
  errors << std::ifstream(err).rdbuf();
  fs::remove_all(dir);
  ASSERT_EQ(status, 0) << errors.str();
  const nlohmann::json j = nlohmann::json::parse(printed.str());
  ASSERT_TRUE(j["worker_rss_growth_bytes_per_epoch"].is_number()) << j.dump();
  const double growth = j["worker_rss_growth_bytes_per_epoch"].get<double>();
  EXPECT_GE(growth, 72 * kMiB) << j.dump();
  EXPECT_LE(growth, 120 * kMiB) << j.dump();
  // At least the window's start and one epoch's two edges, and the share of
  // an epoch the flag needs (at load 9 beside two CPU hogs the 3 s held one
  // epoch and 5 samples).
  EXPECT_GE(j["worker_rss_samples"].get<int>(), 3) << j.dump();
  EXPECT_GE(j["worker_rss_epochs"].get<double>(), results::kGrowthFlagMinEpochs) << j.dump();
  ASSERT_TRUE(j["worker_rss_flag"].is_string()) << j.dump();
  EXPECT_EQ(j["worker_rss_flag"].get<std::string>().find("memory grows "), 0u) << j.dump();
}

}  // namespace
}  // namespace feedtune::tuner
