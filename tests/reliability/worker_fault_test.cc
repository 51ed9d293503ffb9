// Every way a worker process can fail, driven through the tuner's TrialRunner
// and stored in a real results file, as `feedtune sweep` does: the trial with
// the failing worker is recorded as failed with the right cause, the trials
// after it (same runner, same device) succeed, no worker outlives its trial, and
// the whole sequence stays within a fixed time.
#include <dirent.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <new>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "loader/dataset.h"
#include "loader/device/device.h"
#include "results/fingerprint.h"
#include "results/store.h"
#include "tests/common/process_tree.h"
#include "tests/reliability/harness.h"
#include "tuner/config/config.h"
#include "tuner/measure/trial_runner.h"

namespace feedtune::reliability {
namespace {

enum class Fault { kThrow, kExit, kAbort, kSegv, kHang, kSigkillFromOutside, kMemoryGrowth };

const char* FaultName(Fault f) {
  switch (f) {
    case Fault::kThrow:
      return "throw";
    case Fault::kExit:
      return "exit";
    case Fault::kAbort:
      return "abort";
    case Fault::kSegv:
      return "segv";
    case Fault::kHang:
      return "hang";
    case Fault::kSigkillFromOutside:
      return "sigkill_from_outside";
    case Fault::kMemoryGrowth:
      return "memory_growth";
  }
  return "?";
}

// What the stored error must say for each fault.
const char* ExpectedCause(Fault f) {
  switch (f) {
    case Fault::kThrow:
      return R"(worker 1 \(pid \d+\) failed on batch \d+ \(sample \d+\): injected decode error)";
    case Fault::kExit:
      return R"(worker 1 \(pid \d+\) exited with code 3 while loading batch \d+)";
    case Fault::kAbort:
      return R"(worker 1 \(pid \d+\) was killed by signal 6 \(SIGABRT\) while loading batch \d+)";
    case Fault::kSegv:
      return R"(worker 1 \(pid \d+\) was killed by signal 11 \(SIGSEGV\) while loading batch \d+)";
    case Fault::kHang:
      return R"(batch \d+ of epoch \d+ timed out after 1\.0+ s \(loader\.timeout_s\); a worker may hang)";
    case Fault::kSigkillFromOutside:
      return R"(worker 1 \(pid \d+\) was killed by signal 9 \(SIGKILL\) while loading batch \d+)";
    case Fault::kMemoryGrowth:
      return R"(worker 1 \(pid \d+\) failed on batch \d+ \(sample \d+\): std::bad_alloc)";
  }
  return "";
}

constexpr size_t kGrowthLimitBytes = size_t{256} << 20;

// Virtual size of this process, from /proc/self/status.
size_t VmSizeBytes() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmSize:", 0) == 0) return std::stoull(line.substr(7)) * 1024;
  }
  return 0;
}

// Samples cost a little sleep, so that workers matter. Worker 1 (so any trial
// with 2 or more workers) fails on its third sample in the way `fault` says;
// worker 0 and the consumer never fail. Each worker process has its own copy of
// the mutable counters (fork), so they need no sharing.
class FaultyDataset final : public loader::Dataset {
 public:
  FaultyDataset(Fault fault, std::string pid_dir) : fault_(fault), pid_dir_(std::move(pid_dir)) {}

  int64_t size() const override { return 256; }
  int64_t max_sample_bytes() const override { return 1024; }

  void InitWorker(int worker_id) const override {
    worker_ = worker_id;
    reads_ = 0;
    if (worker_id == 1 && fault_ == Fault::kMemoryGrowth) {
      // Relative to the current size, so it also works under sanitizers, which
      // reserve terabytes of address space up front.
      const rlim_t limit = VmSizeBytes() + kGrowthLimitBytes;
      const rlimit as{limit, limit};
      setrlimit(RLIMIT_AS, &as);
    }
  }

  int64_t Read(int64_t index, std::span<std::byte> out) const override {
    std::memset(out.data(), static_cast<int>(index & 0xff), out.size());
    std::this_thread::sleep_for(std::chrono::microseconds(200));
    if (worker_ == 1 && getpid() != owner_ && ++reads_ == 3) Fail();
    return static_cast<int64_t>(out.size());
  }

 private:
  void Fail() const {
    switch (fault_) {
      case Fault::kThrow:
        throw std::runtime_error("injected decode error");
      case Fault::kExit:
        _exit(3);
      case Fault::kAbort:
        // Sanitizers report an abort and exit instead; let it die by the signal.
        std::signal(SIGABRT, SIG_DFL);
        std::abort();
      case Fault::kSegv: {
        // A real invalid access, not raise(): a write to a page with no access.
        // Sanitizers catch SIGSEGV and exit instead; restore the default first.
        std::signal(SIGSEGV, SIG_DFL);
        void* page = mmap(nullptr, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        *static_cast<volatile int*>(page) = 1;
        _exit(99);
      }
      case Fault::kHang:
        std::this_thread::sleep_for(std::chrono::hours(1));
        return;
      case Fault::kSigkillFromOutside: {
        // Say who we are, then wait to be killed by the test's killer thread.
        std::ofstream(pid_dir_ + "/" + std::to_string(getpid())) << getpid();
        std::this_thread::sleep_for(std::chrono::hours(1));
        return;
      }
      case Fault::kMemoryGrowth: {
        // Grow in touched 8 MiB chunks until the rlimit says no, as a leaking
        // decoder would; then unwind as a failed operator new does: what was
        // taken is given back (RAII), and std::bad_alloc is thrown. Giving back
        // first matters: throwing needs a little memory too (and a sanitizer's
        // runtime, when it cannot map a page, ends the process instead).
        constexpr size_t kChunk = size_t{8} << 20;
        std::vector<void*> chunks;
        chunks.reserve(4096);
        for (;;) {
          void* p = mmap(nullptr, kChunk, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
          if (p == MAP_FAILED || chunks.size() == chunks.capacity()) {
            if (p != MAP_FAILED) munmap(p, kChunk);
            for (void* chunk : chunks) munmap(chunk, kChunk);
            throw std::bad_alloc();
          }
          std::memset(p, 1, kChunk);
          chunks.push_back(p);
        }
      }
    }
  }

  const Fault fault_;
  const std::string pid_dir_;
  const pid_t owner_ = getpid();
  mutable int worker_ = -1;
  mutable int reads_ = 0;
};

// Kills, with SIGKILL, every process that announces itself in `dir`.
class Killer {
 public:
  explicit Killer(std::string dir) : dir_(std::move(dir)), thread_([this] { Loop(); }) {}
  ~Killer() {
    stop_ = true;
    thread_.join();
  }
  int kills() const { return kills_; }

 private:
  void Loop() {
    while (!stop_) {
      std::error_code error;
      for (const auto& e : fs::directory_iterator(dir_, error)) {
        const pid_t pid = static_cast<pid_t>(std::atoi(e.path().filename().c_str()));
        fs::remove(e.path(), error);
        if (pid > 0 && kill(pid, SIGKILL) == 0) ++kills_;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }

  const std::string dir_;
  std::atomic<bool> stop_{false};
  std::atomic<int> kills_{0};
  std::thread thread_;
};

class WorkerFault : public testing::TestWithParam<Fault> {};

TEST_P(WorkerFault, TrialFailsWithItsCauseAndTheSweepGoesOn) {
  const Fault fault = GetParam();
  const TempDir dir(std::string("fault-") + FaultName(fault));
  const std::string pid_dir = dir / "pids";
  fs::create_directories(pid_dir);

  tuner::SweepConfig config;
  config.name = "faults";
  config.loader.knobs.batch_size = 8;
  config.loader.shuffle = false;
  config.loader.timeout_s = fault == Fault::kHang ? 1.0 : 0;
  config.device.backend = device::BackendChoice::kHostSim;
  config.device.step_us = 1000;
  config.sweep.repeats = 2;
  config.sweep.warmup_batches = 2;
  config.sweep.measure_seconds = 0.2;
  std::string note;
  const std::unique_ptr<device::Device> device = device::CreateDevice(config.device, &note);
  // As the CLI does: one fork server for every trial, started before any thread
  // (the killer below, the pin stage) exists.
  const auto dataset = std::make_shared<FaultyDataset>(fault, pid_dir);
  tuner::TrialRunner runner(config, *device, dataset, nullptr, std::make_shared<loader::ForkServer>(dataset));

  results::Store store = results::Store::Open(dir / "r.db");
  results::RunRecord run;
  run.machine_id = store.UpsertMachine(results::ReadFingerprint());
  run.workload_name = config.name;
  run.workload_hash = tuner::WorkloadHash(config);
  run.config_yaml = tuner::ToYaml(config);
  run.backend = device->backend_name();
  run.version = "test";
  run.id = store.BeginRun(run);

  // The sequence a sweep would take around the failure: the trial with two
  // workers fails, and the phases after it go on with one.
  struct Step {
    const char* phase;
    int workers;
    int prefetch;
    bool persistent;
  };
  const std::vector<Step> steps = {{"baseline", 0, 2, false},        {"num_workers", 1, 2, false},
                                   {"num_workers", 2, 2, false},     {"prefetch_factor", 1, 4, false},
                                   {"persistent_workers", 1, 2, true}};
  std::unique_ptr<Killer> killer;
  if (fault == Fault::kSigkillFromOutside) killer = std::make_unique<Killer>(pid_dir);
  const auto start = std::chrono::steady_clock::now();
  for (const Step& step : steps) {
    loader::Knobs knobs = config.loader.knobs;
    knobs.num_workers = step.workers;
    knobs.prefetch_factor = step.prefetch;
    knobs.persistent_workers = step.persistent;
    results::TrialRecord trial = runner.Measure(knobs);
    trial.phase = step.phase;
    trial.decision = "test";
    store.AddTrial(run.id, trial);
    EXPECT_EQ(testing_util::CountWorkerProcesses(), 0)
        << "a worker outlived trial " << step.phase << " nw=" << step.workers;
  }
  const double elapsed = Seconds(std::chrono::steady_clock::now() - start).count();
  killer.reset();
  run.status = results::RunStatus::kDone;
  run.ended_at = "2026-01-01T00:00:00Z";
  store.FinishRun(run);

  const std::string db = dir / "r.db";
  ASSERT_EQ(IntegrityCheck(db), "ok");
  const auto statuses = QueryColumn(db, "SELECT status || ' ' || num_workers FROM trials ORDER BY id");
  ASSERT_EQ(statuses, (std::vector<std::string>{"ok 0", "ok 1", "failed 2", "ok 1", "ok 1"}));
  const std::string error = QueryColumn(db, "SELECT error FROM trials WHERE status = 'failed'")[0];
  EXPECT_TRUE(std::regex_search(error, std::regex(ExpectedCause(fault)))) << error;
  // Five short trials plus at most a timeout and a stop grace period each.
  EXPECT_LT(elapsed, Generous(Seconds(30)).count());
  std::printf("[ figures  ] fault %s injected and survived in %.1f s: %s\n", FaultName(fault), elapsed,
              error.c_str());
}

INSTANTIATE_TEST_SUITE_P(AllKinds, WorkerFault,
                         testing::Values(Fault::kThrow, Fault::kExit, Fault::kAbort, Fault::kSegv, Fault::kHang,
                                         Fault::kSigkillFromOutside, Fault::kMemoryGrowth),
                         [](const auto& p) { return std::string(FaultName(p.param)); });

}  // namespace
}  // namespace feedtune::reliability

namespace feedtune::reliability {
namespace {

// The same faults through the `workload.fault` config key and the feedtune
// binary: `feedtune trial` with two process workers fails with exit 1 and the
// cause, in bounded time, leaving no process behind.
struct CliFault {
  const char* kind;
  const char* cause;  // regex on the error line
};

class CliWorkerFault : public testing::TestWithParam<CliFault> {
 protected:
  void SetUp() override { BecomeSubreaper(); }
};

TEST_P(CliWorkerFault, TrialFailsWithTheCause) {
  const CliFault& fault = GetParam();
  const TempDir dir(std::string("clifault-") + fault.kind);
  const std::string config = dir.Write("c.yaml", TinySweepConfig("clifault"));
  std::vector<std::string> args = {"trial", config, "--set", "loader.num_workers=2", "--set", "loader.shuffle=false",
                                   "--set", std::string("workload.fault={kind: ") + fault.kind + ", at_sample: 37}"};
  if (std::string(fault.kind) == "hang") {
    args.push_back("--set");
    args.push_back("loader.timeout_s=1");
  }
  Child trial(args);
  const ChildResult r = trial.Wait(Generous(Seconds(60)));
  ASSERT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_TRUE(std::regex_search(r.err, std::regex(std::string("feedtune: trial failed: ") + fault.cause))) << r.err;
  EXPECT_TRUE(WaitGroupGone(trial.pid(), Seconds(5)).empty()) << "a worker outlived feedtune";
  EXPECT_LT(r.wall_s, Generous(Seconds(30)).count());
  std::printf("[ figures  ] workload.fault %s through feedtune trial: exit %d in %.1f s\n", fault.kind, r.exit_code,
              r.wall_s);
}

INSTANTIATE_TEST_SUITE_P(
    AllKinds, CliWorkerFault,
    testing::Values(
        CliFault{"throw", R"(worker \d \(pid \d+\) failed on batch 2 \(sample 37\): injected fault at sample 37)"},
        CliFault{"exit", R"(worker \d \(pid \d+\) exited with code 3 while loading batch 2)"},
        CliFault{"abort", R"(worker \d \(pid \d+\) was killed by signal 6 \(SIGABRT\) while loading batch 2)"},
        CliFault{"segv", R"(worker \d \(pid \d+\) was killed by signal 11 \(SIGSEGV\) while loading batch 2)"},
        CliFault{"hang", R"(batch 2 of epoch 0 timed out after 1\.0+ s \(loader\.timeout_s\); a worker may hang)"}),
    [](const auto& p) { return std::string(p.param.kind); });

// A sweep whose every trial meets the fault: each is recorded as failed with its
// cause, the run ends as failed (exit 1), not as a crash or a hang.
TEST(CliWorkerFaultSweep, EveryTrialFailingEndsTheRunAsFailed) {
  BecomeSubreaper();
  const TempDir dir("clifaultsweep");
  std::string yaml = TinySweepConfig("faultsweep");
  yaml.replace(yaml.find("  jitter: 0\n"), 11, "  jitter: 0\n  fault: {kind: segv, at_sample: 3}\n");
  const std::string config = dir.Write("c.yaml", yaml);
  const std::string db = dir / "r.db";
  Child sweep({"sweep", config, "--db", db});
  const ChildResult r = sweep.Wait(Generous(Seconds(120)));
  ASSERT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_TRUE(WaitGroupGone(sweep.pid(), Seconds(5)).empty());
  ASSERT_EQ(IntegrityCheck(db), "ok");
  EXPECT_EQ(QueryColumn(db, "SELECT status FROM runs")[0], "failed");
  const auto errors = QueryColumn(db, "SELECT error FROM trials ORDER BY id");
  ASSERT_FALSE(errors.empty());
  // The baseline has no worker process: the fault is an exception there, saying so.
  EXPECT_NE(errors[0].find("injected fault at sample 3"), std::string::npos) << errors[0];
  EXPECT_EQ(QueryInt(db, "SELECT count(*) FROM trials WHERE status != 'failed'"), 0);
}

}  // namespace
}  // namespace feedtune::reliability
