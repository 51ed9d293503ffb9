#include "results/store.h"
#include "results/torch_costs.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "results/merge.h"
#include "results/run_owner.h"

namespace feedtune::results {
namespace {

namespace fs = std::filesystem;

class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "feedtune_store_test.XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override {
    std::error_code error;
    fs::remove_all(dir_, error);
  }

  std::string PathIn(const std::string& name) const { return (dir_ / name).string(); }

  fs::path dir_;
};

std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

// Runs SQL on a file through a plain sqlite3 connection, as another tool would.
void RawExec(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  char* message = nullptr;
  const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &message);
  EXPECT_EQ(rc, SQLITE_OK) << (message != nullptr ? message : "");
  sqlite3_free(message);
  sqlite3_close(db);
}

int64_t RawPragma(const std::string& path, const std::string& pragma) {
  sqlite3* db = nullptr;
  int64_t value = -1;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
    sqlite3_stmt* stmt = nullptr;
    if (sqlite3_prepare_v2(db, ("PRAGMA " + pragma).c_str(), -1, &stmt, nullptr) == SQLITE_OK &&
        sqlite3_step(stmt) == SQLITE_ROW) {
      value = sqlite3_column_int64(stmt, 0);
    }
    sqlite3_finalize(stmt);
  }
  sqlite3_close(db);
  return value;
}

Fingerprint TestMachine(const std::string& hostname = "box-a") {
  Fingerprint f;
  f.hostname = hostname;
  f.cpu_model = "Test CPU 'quoted' \"model\"";
  f.logical_cpus = 8;
  f.usable_cpus = 4;
  f.cgroup_cpu_limit = 3.5;
  f.numa_nodes = 2;
  f.mem_total_bytes = int64_t{64} << 30;
  f.cgroup_mem_limit_bytes = int64_t{16} << 30;
  f.shm_bytes = int64_t{32} << 30;
  f.nofile_limit = 1048576;
  f.kernel = "6.1.0-test";
  f.gpu_name = "NVIDIA H100";
  f.gpu_count = 2;
  f.gpu_mem_bytes = int64_t{80} << 30;
  f.gpu_driver = "550.54";
  f.pcie_link = "Gen5 x16";
  f.gpu_runtime = "12.4";
  f.gpus = {{.name = "NVIDIA H100",
             .mem_bytes = int64_t{80} << 30,
             .driver = "550.54",
             .runtime = "12.4",
             .pci_bus_id = "0000:3b:00.0",
             .link = "Gen5 x16"},
            {.name = "NVIDIA H100",
             .mem_bytes = int64_t{80} << 30,
             .driver = "550.54",
             .runtime = "12.4",
             .pci_bus_id = "0000:5e:00.0",
             .link = "Gen4 x8"}};
  return f;
}

RunRecord TestRun(int64_t machine_id, const std::string& name = "quickstart") {
  RunRecord run;
  run.machine_id = machine_id;
  run.workload_name = name;
  run.workload_hash = "abcdef0123456789";
  run.config_yaml = "name: quickstart\nworkload: {kind: synthetic}\n# it's ; DROP TABLE runs;\n";
  run.backend = "host-sim";
  run.version = "0.1.0";
  run.started_at = "2024-05-01T10:00:00Z";
  return run;
}

TrialRecord TestTrial() {
  TrialRecord t;
  t.phase = "num_workers";
  t.knobs = {.batch_size = 32,
             .num_workers = 8,
             .pin_memory = true,
             .non_blocking = true,
             .prefetch_factor = 4,
             .persistent_workers = true};
  t.status = results::TrialStatus::kOk;
  t.samples_per_s = 6420.5;
  t.ci_low = 6300.25;
  t.ci_high = 6500.75;
  t.mb_per_s = 966.5;
  t.gpu_idle_frac = 0.03;
  t.copy_s = 0.125;
  t.wait_p50_us = 950.5;
  t.wait_p99_us = 1400.25;
  t.worker_startup_s = 0.42;
  t.cpu_util = 3.75;
  t.peak_rss_bytes = int64_t{3} << 30;
  t.repeats = 2;
  t.decision = "kept: +12.0% over 4 workers, beyond noise";
  t.time_to_first_batch_s = 0.75;
  t.epoch_boundary_ms = 12.5;
  t.cv = 0.0125;
  t.worker_busy_frac = 0.875;
  t.pinned_alloc_s = 0.03125;
  t.batches_per_epoch = 15;
  t.worker_rss_bytes = 3.0 * (1 << 20);
  t.worker_rss_start_bytes = 96.0 * (1 << 20);
  t.worker_rss_peak_bytes = 480.5 * (1 << 20);
  t.worker_rss_growth_bytes_per_epoch = 180.25 * (1 << 20);
  t.worker_rss_epochs = 2.125;
  t.worker_rss_samples = 37;
  t.worker_rss_in_consumer = true;
  t.repeat_rows = {
      {.index = 0,
       .samples_per_s = 6400,
       .mb_per_s = 960,
       .gpu_idle_frac = 0.04,
       .wait_p50_us = 940,
       .wait_p99_us = 1390,
       .wall_s = 2.01,
       .outlier = false},
      {.index = 1,
       .samples_per_s = 6441,
       .mb_per_s = 973,
       .gpu_idle_frac = 0.02,
       .wait_p50_us = 961,
       .wait_p99_us = 1410.5,
       .wall_s = 2.02,
       .outlier = true},
  };
  return t;
}

TEST_F(StoreTest, CreatesFileAndParentFolderAndMarksIt) {
  const std::string path = PathIn("nested/deeper/feedtune.db");
  { Store store = Store::Open(path); }
  EXPECT_TRUE(fs::exists(path));
  EXPECT_EQ(RawPragma(path, "application_id"), Store::kApplicationId);
  EXPECT_EQ(RawPragma(path, "user_version"), Store::kSchemaVersion);
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  sqlite3_stmt* stmt = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &stmt, nullptr), SQLITE_OK);
  ASSERT_EQ(sqlite3_step(stmt), SQLITE_ROW);
  EXPECT_STREQ(reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0)), "wal");
  sqlite3_finalize(stmt);
  sqlite3_close(db);
}

TEST_F(StoreTest, ReopenKeepsData) {
  const std::string path = PathIn("feedtune.db");
  int64_t run_id = 0;
  {
    Store store = Store::Open(path);
    run_id = store.BeginRun(TestRun(store.UpsertMachine(TestMachine())));
  }
  Store again = Store::Open(path);
  ASSERT_TRUE(again.LoadRun(run_id).has_value());
  EXPECT_EQ(again.LoadRun(run_id)->workload_name, "quickstart");
  EXPECT_EQ(RawPragma(path, "user_version"), Store::kSchemaVersion);
}

TEST_F(StoreTest, UpsertMachineIsIdempotentAndUpdatesLabel) {
  Store store = Store::Open(PathIn("feedtune.db"));
  Fingerprint machine = TestMachine();
  const int64_t id = store.UpsertMachine(machine);
  EXPECT_EQ(store.UpsertMachine(machine), id);
  // No label given: the stored label falls back to the hostname.
  EXPECT_EQ(store.LoadMachine(id)->label, "box-a");

  machine.label = "rack 3, slot 'b'";
  EXPECT_EQ(store.UpsertMachine(machine), id);
  EXPECT_EQ(store.LoadMachine(id)->label, "rack 3, slot 'b'");

  // A later call without a label keeps the one given before.
  machine.label.clear();
  machine.hostname = "renamed-host";  // not part of the hash: same machine
  EXPECT_EQ(store.UpsertMachine(machine), id);
  EXPECT_EQ(store.LoadMachine(id)->label, "rack 3, slot 'b'");

  Fingerprint other = TestMachine();
  other.usable_cpus = 2;
  EXPECT_NE(store.UpsertMachine(other), id);
}

TEST_F(StoreTest, MachineRoundTripsEveryField) {
  Store store = Store::Open(PathIn("feedtune.db"));
  Fingerprint in = TestMachine();
  in.label = "lab box";
  const auto out = store.LoadMachine(store.UpsertMachine(in));
  ASSERT_TRUE(out.has_value());
  EXPECT_EQ(out->hostname, in.hostname);
  EXPECT_EQ(out->label, in.label);
  EXPECT_EQ(out->cpu_model, in.cpu_model);
  EXPECT_EQ(out->logical_cpus, in.logical_cpus);
  EXPECT_EQ(out->usable_cpus, in.usable_cpus);
  EXPECT_DOUBLE_EQ(out->cgroup_cpu_limit, in.cgroup_cpu_limit);
  EXPECT_EQ(out->numa_nodes, in.numa_nodes);
  EXPECT_EQ(out->mem_total_bytes, in.mem_total_bytes);
  EXPECT_EQ(out->cgroup_mem_limit_bytes, in.cgroup_mem_limit_bytes);
  EXPECT_EQ(out->shm_bytes, in.shm_bytes);
  EXPECT_EQ(out->nofile_limit, in.nofile_limit);
  EXPECT_EQ(out->kernel, in.kernel);
  EXPECT_EQ(out->gpu_name, in.gpu_name);
  EXPECT_EQ(out->gpu_count, in.gpu_count);
  EXPECT_EQ(out->gpu_mem_bytes, in.gpu_mem_bytes);
  EXPECT_EQ(out->gpu_driver, in.gpu_driver);
  EXPECT_EQ(out->pcie_link, in.pcie_link);
  EXPECT_EQ(out->gpu_runtime, in.gpu_runtime);
  EXPECT_EQ(out->gpus, in.gpus);
  EXPECT_EQ(out->Hash(), in.Hash());
  EXPECT_FALSE(store.LoadMachine(9999).has_value());
}

TEST_F(StoreTest, RunTrialsAndRepeatsRoundTripEveryField) {
  Store store = Store::Open(PathIn("feedtune.db"));
  const int64_t machine_id = store.UpsertMachine(TestMachine());
  const RunRecord run_in = TestRun(machine_id);
  const int64_t run_id = store.BeginRun(run_in);

  const RunRecord running = *store.LoadRun(run_id);
  EXPECT_EQ(running.status, results::RunStatus::kRunning);
  EXPECT_EQ(running.ended_at, "");
  EXPECT_FALSE(running.knee_workers.has_value());
  EXPECT_FALSE(running.best_trial_id.has_value());

  TrialRecord baseline;
  baseline.phase = "baseline";
  baseline.samples_per_s = 812.0;
  baseline.repeats = 1;
  const int64_t baseline_id = store.AddTrial(run_id, baseline);

  const TrialRecord trial_in = TestTrial();
  const int64_t trial_id = store.AddTrial(run_id, trial_in);

  TrialRecord failed;
  failed.phase = "num_workers";
  failed.knobs.num_workers = 16;
  failed.status = results::TrialStatus::kFailed;
  failed.error = "worker 3 (pid 1234) killed by SIGKILL; check memory";
  failed.samples_per_s = std::nan("");
  const int64_t failed_id = store.AddTrial(run_id, failed);

  RunRecord finish = run_in;
  finish.id = run_id;
  finish.status = results::RunStatus::kDone;
  finish.ended_at = "2024-05-01T10:05:00Z";
  finish.knee_workers = 8;
  finish.knee_samples_per_s = 6311.0;
  finish.best_trial_id = trial_id;
  finish.baseline_trial_id = baseline_id;
  finish.knee_kneedle_workers = 4;
  finish.safe_max_workers = 24;
  finish.speedup = 7.5;
  finish.speedup_ci_low = 7.25;
  finish.speedup_ci_high = 7.75;
  finish.calibration_json = R"({"fork_us": 850.5})";
  // The facts of schema v15, through the one writer and the one reader.
  finish.facts.cpu = CpuCalibrationFacts{"CLOCK_THREAD_CPUTIME_ID", 24.5, 1.5e9, 4096, 2.75, 0.01, 1000, 1002.5, 0.04};
  finish.facts.preflight = {"/dev/shm is 64 MiB", "CPU mask: feedtune may use 1 of the 2 CPUs"};
  finish.facts.phases = {{"pin_memory", false, "within the noise"}, {"num_workers", true, "knee at 8"}};
  finish.facts.timelines_json = R"({"best":{"knobs":"nw=8","ms":200,"rows":[]}})";
  store.FinishRun(finish);

  const auto run = store.LoadRun(run_id);
  ASSERT_TRUE(run.has_value());
  EXPECT_EQ(run->id, run_id);
  EXPECT_EQ(run->machine_id, machine_id);
  EXPECT_EQ(run->workload_name, run_in.workload_name);
  EXPECT_EQ(run->workload_hash, run_in.workload_hash);
  EXPECT_EQ(run->config_yaml, run_in.config_yaml);
  EXPECT_EQ(run->backend, run_in.backend);
  EXPECT_EQ(run->version, run_in.version);
  EXPECT_EQ(run->started_at, run_in.started_at);
  EXPECT_EQ(run->ended_at, "2024-05-01T10:05:00Z");
  EXPECT_EQ(run->status, results::RunStatus::kDone);
  EXPECT_EQ(run->knee_workers, 8);
  EXPECT_EQ(run->knee_samples_per_s, 6311.0);
  EXPECT_EQ(run->best_trial_id, trial_id);
  EXPECT_EQ(run->baseline_trial_id, baseline_id);
  EXPECT_EQ(run->knee_kneedle_workers, 4);
  EXPECT_EQ(run->safe_max_workers, 24);
  EXPECT_EQ(run->speedup, 7.5);
  EXPECT_EQ(run->speedup_ci_low, 7.25);
  EXPECT_EQ(run->speedup_ci_high, 7.75);
  EXPECT_EQ(run->calibration_json, finish.calibration_json);
  EXPECT_EQ(run->facts, finish.facts);
  EXPECT_EQ(run->uid, running.uid);
  EXPECT_TRUE(run->uid.starts_with(TestMachine().Hash() + ":" + run_in.started_at + ":"))
      << run->uid;

  const auto trials = store.LoadTrials(run_id);
  ASSERT_EQ(trials.size(), 3u);
  EXPECT_EQ(trials[0].id, baseline_id);
  EXPECT_EQ(trials[2].id, failed_id);
  const TrialRecord& t = trials[1];
  EXPECT_EQ(t.id, trial_id);
  EXPECT_EQ(t.run_id, run_id);
  EXPECT_EQ(t.phase, trial_in.phase);
  EXPECT_EQ(t.knobs, trial_in.knobs);
  EXPECT_EQ(t.status, trial_in.status);
  EXPECT_FALSE(t.error.has_value());
  EXPECT_EQ(t.samples_per_s, trial_in.samples_per_s);
  EXPECT_EQ(t.ci_low, trial_in.ci_low);
  EXPECT_EQ(t.ci_high, trial_in.ci_high);
  EXPECT_EQ(t.mb_per_s, trial_in.mb_per_s);
  EXPECT_EQ(t.gpu_idle_frac, trial_in.gpu_idle_frac);
  EXPECT_EQ(t.copy_s, trial_in.copy_s);
  EXPECT_EQ(t.wait_p50_us, trial_in.wait_p50_us);
  EXPECT_EQ(t.wait_p99_us, trial_in.wait_p99_us);
  EXPECT_EQ(t.worker_startup_s, trial_in.worker_startup_s);
  EXPECT_EQ(t.cpu_util, trial_in.cpu_util);
  EXPECT_EQ(t.peak_rss_bytes, trial_in.peak_rss_bytes);
  EXPECT_EQ(t.repeats, trial_in.repeats);
  EXPECT_EQ(t.decision, trial_in.decision);
  EXPECT_EQ(t.time_to_first_batch_s, trial_in.time_to_first_batch_s);
  EXPECT_EQ(t.epoch_boundary_ms, trial_in.epoch_boundary_ms);
  EXPECT_EQ(t.cv, trial_in.cv);
  EXPECT_EQ(t.worker_busy_frac, trial_in.worker_busy_frac);
  EXPECT_EQ(t.pinned_alloc_s, trial_in.pinned_alloc_s);
  EXPECT_EQ(t.batches_per_epoch, trial_in.batches_per_epoch);
  EXPECT_EQ(t.worker_rss_bytes, trial_in.worker_rss_bytes);
  EXPECT_EQ(t.worker_rss_start_bytes, trial_in.worker_rss_start_bytes);
  EXPECT_EQ(t.worker_rss_peak_bytes, trial_in.worker_rss_peak_bytes);
  EXPECT_EQ(t.worker_rss_growth_bytes_per_epoch, trial_in.worker_rss_growth_bytes_per_epoch);
  EXPECT_EQ(t.worker_rss_epochs, trial_in.worker_rss_epochs);
  EXPECT_EQ(t.worker_rss_samples, trial_in.worker_rss_samples);
  EXPECT_EQ(t.worker_rss_in_consumer, trial_in.worker_rss_in_consumer);
  ASSERT_EQ(t.repeat_rows.size(), trial_in.repeat_rows.size());
  for (size_t i = 0; i < t.repeat_rows.size(); ++i) {
    const RepeatRecord& a = t.repeat_rows[i];
    const RepeatRecord& b = trial_in.repeat_rows[i];
    EXPECT_EQ(a.index, b.index);
    EXPECT_EQ(a.samples_per_s, b.samples_per_s);
    EXPECT_EQ(a.mb_per_s, b.mb_per_s);
    EXPECT_EQ(a.gpu_idle_frac, b.gpu_idle_frac);
    EXPECT_EQ(a.wait_p50_us, b.wait_p50_us);
    EXPECT_EQ(a.wait_p99_us, b.wait_p99_us);
    EXPECT_EQ(a.wall_s, b.wall_s);
    EXPECT_EQ(a.outlier, b.outlier);
  }
  EXPECT_TRUE(trials[0].repeat_rows.empty());

  EXPECT_EQ(trials[2].status, results::TrialStatus::kFailed);
  EXPECT_EQ(trials[2].error, failed.error);
  EXPECT_EQ(trials[2].knobs.num_workers, 16);
  EXPECT_TRUE(std::isnan(trials[2].samples_per_s));  // NaN is stored as NULL
  EXPECT_TRUE(std::isnan(trials[2].worker_rss_growth_bytes_per_epoch));  // not measured stays so
  EXPECT_EQ(trials[2].worker_rss_samples, 0);
}

TEST_F(StoreTest, BeginRunFillsStartTimeWhenEmpty) {
  Store store = Store::Open(PathIn("feedtune.db"));
  RunRecord run = TestRun(store.UpsertMachine(TestMachine()));
  run.started_at.clear();
  const auto loaded = store.LoadRun(store.BeginRun(run));
  ASSERT_TRUE(loaded.has_value());
  ASSERT_EQ(loaded->started_at.size(), 20u) << loaded->started_at;  // 2024-05-01T10:00:00Z
  EXPECT_EQ(loaded->started_at.back(), 'Z');
}

// A child process that begins a run in `path`, so the run's owner is the
// child, stores one trial, and waits to be killed, as a sweep or an in-job
// controller that is SIGKILLed mid-run. The parent holds no connection across
// the fork.
class RunningChild {
 public:
  explicit RunningChild(const std::string& path) {
    int fds[2];
    if (pipe(fds) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      close(fds[0]);
      int64_t id = 0;
      try {
        Store store = Store::Open(path);
        id = store.BeginRun(TestRun(store.UpsertMachine(TestMachine())));
        TrialRecord trial;
        trial.phase = "baseline";
        trial.samples_per_s = 100;
        trial.repeats = 1;
        store.AddTrial(id, trial);
      } catch (const std::exception&) {
        _exit(3);
      }
      if (write(fds[1], &id, sizeof id) != static_cast<ssize_t>(sizeof id)) _exit(4);
      for (;;) pause();
    }
    close(fds[1]);
    if (pid_ > 0 && read(fds[0], &run_id_, sizeof run_id_) != static_cast<ssize_t>(sizeof run_id_)) run_id_ = 0;
    close(fds[0]);
  }
  ~RunningChild() {
    if (pid_ > 0) Kill(/*reap=*/true);
  }
  // SIGKILL; reaped, its pid is gone; not reaped, it stays a zombie (ended all the same).
  void Kill(bool reap) {
    kill(pid_, SIGKILL);
    siginfo_t info{};
    waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | (reap ? 0 : WNOWAIT));
    if (reap) pid_ = -pid_;
  }
  void Reap() {
    waitpid(pid_, nullptr, 0);
    pid_ = -pid_;
  }
  pid_t pid() const { return pid_ < 0 ? -pid_ : pid_; }
  int64_t run_id() const { return run_id_; }

 private:
  pid_t pid_ = -1;
  int64_t run_id_ = 0;
};

// The pid of a child that has exited and been reaped: no process has it.
int64_t GonePid() {
  const pid_t pid = fork();
  if (pid == 0) _exit(0);
  waitpid(pid, nullptr, 0);
  return pid;
}

TEST_F(StoreTest, ARunWhoseProcessWasKilledIsMarkedInterruptedAtTheNextOpen) {
  for (const bool reap : {true, false}) {
    SCOPED_TRACE(reap ? "its pid reaped" : "a zombie, not yet reaped");
    const std::string path = PathIn(reap ? "reaped.db" : "zombie.db");
    RunningChild child(path);
    ASSERT_GT(child.run_id(), 0);
    {
      // While the child runs, its run is left as it is.
      Store store = Store::Open(path);
      EXPECT_TRUE(store.stale_runs().empty());
      const auto run = store.LoadRun(child.run_id());
      EXPECT_EQ(run->status, RunStatus::kRunning);
      EXPECT_EQ(run->owner.pid, child.pid());
      EXPECT_EQ(run->owner, [&] {
        RunOwner owner = ThisProcess();
        owner.pid = child.pid();
        owner.start_ticks = run->owner.start_ticks;
        return owner;
      }());
    }
    child.Kill(reap);
    Store store = Store::Open(path);
    ASSERT_EQ(store.stale_runs().size(), 1u);
    const StaleRun& stale = store.stale_runs()[0];
    EXPECT_EQ(stale.run_id, child.run_id());
    EXPECT_EQ(stale.owner.pid, child.pid());
    EXPECT_EQ(stale.trials, 1);
    EXPECT_EQ(StaleRunText(stale), "run " + std::to_string(child.run_id()) + " was left running by pid " +
                                       std::to_string(child.pid()) +
                                       ", which has ended; marked interrupted, its 1 trial kept");
    const auto run = store.LoadRun(child.run_id());
    EXPECT_EQ(run->status, RunStatus::kInterrupted);
    EXPECT_FALSE(run->ended_at.empty());
    EXPECT_EQ(run->end_note, "left running by pid " + std::to_string(child.pid()) + " on " + ThisProcess().hostname +
                                 ", which has ended; marked interrupted by pid " + std::to_string(getpid()) +
                                 ", the next to open the file for writing");
    EXPECT_EQ(store.LoadTrials(child.run_id()).size(), 1u);  // its trials are kept
    EXPECT_TRUE(Store::Open(path).stale_runs().empty());    // marked once
    if (!reap) child.Reap();
  }
}

TEST_F(StoreTest, RunsStillRunningOrOfAnotherHostOrNamespaceAreLeftRunning) {
  const std::string path = PathIn("feedtune.db");
  const int64_t gone = GonePid();
  std::vector<int64_t> ids;
  {
    Store store = Store::Open(path);
    const int64_t machine = store.UpsertMachine(TestMachine());
    ids.push_back(store.BeginRun(TestRun(machine, "this process's")));
    // A file on shared storage: another host's pids are not this host's.
    RunRecord other_host = TestRun(machine, "another host's");
    other_host.owner = ThisProcess();
    other_host.owner.hostname = "another-host";
    other_host.owner.pid = gone;
    ids.push_back(store.BeginRun(other_host));
    // Another container of this boot with the same hostname: its pids are its own.
    RunRecord other_namespace = TestRun(machine, "another pid namespace's");
    other_namespace.owner = ThisProcess();
    other_namespace.owner.pid_namespace = "pid:[1]";
    other_namespace.owner.pid = gone;
    ids.push_back(store.BeginRun(other_namespace));
  }
  RunningChild child(path);  // a sweep in another process, running
  ids.push_back(child.run_id());
  Store store = Store::Open(path);
  EXPECT_TRUE(store.stale_runs().empty());
  for (const int64_t id : ids) {
    const auto run = store.LoadRun(id);
    EXPECT_EQ(run->status, RunStatus::kRunning) << run->workload_name;
    EXPECT_EQ(run->end_note, "") << run->workload_name;
  }
}

TEST_F(StoreTest, AReusedPidOrAnEarlierBootMeansTheProcessHasEnded) {
  const std::string path = PathIn("feedtune.db");
  int64_t reused = 0, rebooted = 0;
  {
    Store store = Store::Open(path);
    const int64_t machine = store.UpsertMachine(TestMachine());
    RunRecord run = TestRun(machine);
    run.owner = ThisProcess();
    run.owner.start_ticks += 1;  // this pid, but another process that had it before
    reused = store.BeginRun(run);
    run.owner = ThisProcess();
    run.owner.boot_id = "a1b2c3d4-0000-4000-8000-000000000000";
    rebooted = store.BeginRun(run);
  }
  Store store = Store::Open(path);
  ASSERT_EQ(store.stale_runs().size(), 2u);
  EXPECT_EQ(store.stale_runs()[0].how, ", which has ended (its pid now names a later process)");
  EXPECT_EQ(store.stale_runs()[1].how, " before the host restarted");
  EXPECT_EQ(store.LoadRun(reused)->status, RunStatus::kInterrupted);
  EXPECT_EQ(store.LoadRun(rebooted)->end_note, "left running by pid " + std::to_string(getpid()) + " on " +
                                                   ThisProcess().hostname +
                                                   " before the host restarted; marked interrupted by pid " +
                                                   std::to_string(getpid()) + ", the next to open the file for "
                                                   "writing");
}

TEST(RunOwnerTest, ThisProcessAndItsStartTime) {
  const RunOwner here = ThisProcess();
  EXPECT_EQ(here.pid, getpid());
  EXPECT_FALSE(here.hostname.empty());
  EXPECT_EQ(here.boot_id.size(), 36u) << here.boot_id;  // a UUID
  EXPECT_EQ(here.pid_namespace.rfind("pid:[", 0), 0u) << here.pid_namespace;
  EXPECT_EQ(ProcessStartTicks(getpid()), here.start_ticks);
  EXPECT_EQ(ProcessStartTicks(GonePid()), std::nullopt);
  EXPECT_EQ(OwnerEnded(here, here), "");
  EXPECT_EQ(OwnerEnded(RunOwner{}, here), "");  // not recorded: never judged
}

TEST_F(StoreTest, LoadRunWithoutIdGivesNewest) {
  Store store = Store::Open(PathIn("feedtune.db"));
  EXPECT_FALSE(store.LoadRun(std::nullopt).has_value());
  const int64_t machine_id = store.UpsertMachine(TestMachine());
  const int64_t first = store.BeginRun(TestRun(machine_id, "first"));
  const int64_t second = store.BeginRun(TestRun(machine_id, "second"));
  ASSERT_GT(second, first);
  EXPECT_EQ(store.LoadRun(std::nullopt)->id, second);
  EXPECT_EQ(store.LoadRun(std::nullopt)->workload_name, "second");
  EXPECT_EQ(store.LoadRun(first)->workload_name, "first");
  EXPECT_FALSE(store.LoadRun(second + 100).has_value());
  const auto runs = store.LoadRuns();
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].id, first);
  EXPECT_EQ(runs[1].id, second);
}

TEST_F(StoreTest, WritesThatBreakConstraintsFailWithPathAndRollBack) {
  const std::string path = PathIn("feedtune.db");
  Store store = Store::Open(path);
  const int64_t run_id = store.BeginRun(TestRun(store.UpsertMachine(TestMachine())));
  TrialRecord bad = TestTrial();
  bad.status = static_cast<TrialStatus>(99);  // no enumerator: its name is "unknown", which the CHECK refuses
  try {
    store.AddTrial(run_id, bad);
    FAIL() << "expected StoreError";
  } catch (const StoreError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find(path), std::string::npos) << message;
    EXPECT_NE(message.find("record trial"), std::string::npos) << message;
    EXPECT_NE(message.find("CHECK constraint failed"), std::string::npos) << message;
  }
  EXPECT_TRUE(store.LoadTrials(run_id).empty());

  // A trial for a run that does not exist breaks the foreign key.
  EXPECT_THROW(store.AddTrial(run_id + 100, TestTrial()), StoreError);
  // The failed writes left no transaction open.
  EXPECT_GT(store.AddTrial(run_id, TestTrial()), 0);

  RunRecord missing = TestRun(1);
  missing.id = run_id + 100;
  EXPECT_THROW(store.FinishRun(missing), StoreError);
}

TEST(TrialStatusTest, EachStatusHasOneStringFormAndParsesBack) {
  for (TrialStatus s : {TrialStatus::kOk, TrialStatus::kFailed, TrialStatus::kSkipped}) {
    EXPECT_EQ(ParseTrialStatus(TrialStatusName(s)), s);
  }
  for (RunStatus s : {RunStatus::kRunning, RunStatus::kDone, RunStatus::kInterrupted, RunStatus::kFailed}) {
    EXPECT_EQ(ParseRunStatus(RunStatusName(s)), s);
  }
  // The strings the store's columns and the JSON report hold (docs/json-report.md).
  EXPECT_EQ(TrialStatusName(TrialStatus::kSkipped), "skipped");
  EXPECT_EQ(RunStatusName(RunStatus::kInterrupted), "interrupted");
}

TEST(TrialStatusTest, UnknownStringsAreRefusedNamingTheKnownOnes) {
  try {
    ParseTrialStatus("OK");
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("unknown trial status 'OK'"), std::string::npos) << message;
    EXPECT_NE(message.find("ok, failed, skipped"), std::string::npos) << message;
  }
  EXPECT_THROW(ParseRunStatus("ok"), std::invalid_argument);
  EXPECT_THROW(ParseRunStatus(""), std::invalid_argument);
}

TEST_F(StoreTest, MovedStoreKeepsWorking) {
  Store first = Store::Open(PathIn("a.db"));
  Store second = std::move(first);
  EXPECT_GT(second.UpsertMachine(TestMachine()), 0);
  Store third = Store::Open(PathIn("b.db"));
  third = std::move(second);
  EXPECT_EQ(third.path(), PathIn("a.db"));
  EXPECT_TRUE(third.LoadMachine(1).has_value());
}

TEST_F(StoreTest, ConcurrentFirstOpensAgreeOnOneSchema) {
  // Several sweeps started at once on a fresh --db path: each migrates under
  // BEGIN IMMEDIATE and re-reads the version, so only one creates the tables.
  const std::string path = PathIn("shared.db");
  std::vector<std::string> errors(4);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < errors.size(); ++i) {
    threads.emplace_back([&path, &errors, i] {
      try {
        Store store = Store::Open(path);
        store.UpsertMachine(TestMachine());
      } catch (const StoreError& e) {
        errors[i] = e.what();
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (const std::string& error : errors) EXPECT_EQ(error, "");
  Store store = Store::OpenReadOnly(path);
  EXPECT_TRUE(store.LoadMachine(1).has_value());
  EXPECT_FALSE(store.LoadMachine(2).has_value());
}

TEST_F(StoreTest, RefusesNonSqliteFileAndLeavesItUntouched) {
  const std::string path = PathIn("notes.txt");
  const std::string bytes = "my precious notes\nline two\n";
  std::ofstream(path, std::ios::binary) << bytes;
  for (const bool read_only : {false, true}) {
    try {
      read_only ? Store::OpenReadOnly(path) : Store::Open(path);
      FAIL() << "expected StoreError";
    } catch (const StoreError& e) {
      EXPECT_EQ(std::string(e.what()),
                path +
                    ": not a feedtune results file (not an SQLite database); choose another "
                    "--db path");
    }
  }
  EXPECT_EQ(ReadBytes(path), bytes);
  EXPECT_FALSE(fs::exists(path + "-wal"));
  EXPECT_FALSE(fs::exists(path + "-journal"));
}

TEST_F(StoreTest, RefusesForeignSqliteFileAndLeavesItUntouched) {
  const std::string path = PathIn("other.db");
  RawExec(path, "CREATE TABLE inventory (item TEXT); INSERT INTO inventory VALUES ('bolts');");
  const std::string bytes = ReadBytes(path);
  ASSERT_FALSE(bytes.empty());
  for (const bool read_only : {false, true}) {
    try {
      read_only ? Store::OpenReadOnly(path) : Store::Open(path);
      FAIL() << "expected StoreError";
    } catch (const StoreError& e) {
      EXPECT_EQ(std::string(e.what()),
                path +
                    ": not a feedtune results file (application_id 0x00000000); refusing to "
                    "modify it");
    }
  }
  EXPECT_EQ(ReadBytes(path), bytes);
  EXPECT_EQ(RawPragma(path, "application_id"), 0);
  EXPECT_EQ(RawPragma(path, "user_version"), 0);
  EXPECT_FALSE(fs::exists(path + "-wal"));
}

TEST_F(StoreTest, RefusesNewerSchemaVersion) {
  const std::string path = PathIn("future.db");
  { Store store = Store::Open(path); }
  RawExec(path, "PRAGMA user_version = 99");
  const std::string bytes = ReadBytes(path);
  for (const bool read_only : {false, true}) {
    try {
      read_only ? Store::OpenReadOnly(path) : Store::Open(path);
      FAIL() << "expected StoreError";
    } catch (const StoreError& e) {
      EXPECT_EQ(std::string(e.what()),
                path +
                    ": results file has schema version 99, this feedtune understands up to " +
                    std::to_string(Store::kSchemaVersion) + "; upgrade feedtune");
    }
  }
  EXPECT_EQ(RawPragma(path, "user_version"), 99);
  EXPECT_EQ(ReadBytes(path), bytes);
}

TEST_F(StoreTest, AdoptsEmptySqliteFile) {
  // An empty database (no tables, application_id 0), e.g. made by `sqlite3 f.db VACUUM`.
  const std::string path = PathIn("empty.db");
  RawExec(path, "VACUUM");
  { Store store = Store::Open(path); }
  EXPECT_EQ(RawPragma(path, "application_id"), Store::kApplicationId);
  EXPECT_EQ(RawPragma(path, "user_version"), Store::kSchemaVersion);

  // So is a zero-byte file.
  const std::string zero = PathIn("zero.db");
  std::ofstream(zero).close();
  { Store store = Store::Open(zero); }
  EXPECT_EQ(RawPragma(zero, "user_version"), Store::kSchemaVersion);
}

TEST_F(StoreTest, ReadOnlyOpenOfMissingFileErrors) {
  const std::string path = PathIn("missing/feedtune.db");
  try {
    Store::OpenReadOnly(path);
    FAIL() << "expected StoreError";
  } catch (const StoreError& e) {
    EXPECT_EQ(std::string(e.what()),
              path + ": no results file; run `feedtune sweep CONFIG --db " + path + "` first");
  }
  EXPECT_FALSE(fs::exists(PathIn("missing")));
}

TEST_F(StoreTest, ReadOnlyOpenReadsButDoesNotWrite) {
  const std::string path = PathIn("feedtune.db");
  int64_t run_id = 0;
  {
    Store store = Store::Open(path);
    run_id = store.BeginRun(TestRun(store.UpsertMachine(TestMachine())));
    store.AddTrial(run_id, TestTrial());
  }
  Store reader = Store::OpenReadOnly(path);
  EXPECT_EQ(reader.LoadRun(std::nullopt)->id, run_id);
  EXPECT_EQ(reader.LoadTrials(run_id).size(), 1u);
  try {
    reader.AddTrial(run_id, TestTrial());
    FAIL() << "expected StoreError";
  } catch (const StoreError& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
}

TEST_F(StoreTest, ReaderSeesWritesOfAnotherConnection) {
  const std::string path = PathIn("feedtune.db");
  Store writer = Store::Open(path);
  const int64_t run_id = writer.BeginRun(TestRun(writer.UpsertMachine(TestMachine())));
  Store reader = Store::OpenReadOnly(path);
  EXPECT_TRUE(reader.LoadTrials(run_id).empty());
  writer.AddTrial(run_id, TestTrial());
  EXPECT_EQ(reader.LoadTrials(run_id).size(), 1u);
}

// `feedtune calibrate`'s torch costs: one row per host, every field back as
// stored, the newest replacing the old, other hosts apart.
TEST(TorchCostsStoreTest, RoundTripsPerHostAndTheNewestReplaces) {
  const std::string path =
      (std::filesystem::temp_directory_path() / ("feedtune-tc-" + std::to_string(getpid()) + ".db")).string();
  std::filesystem::remove(path);
  {
    Store store = Store::Open(path);
    EXPECT_FALSE(store.LoadTorchCosts("box/abc").has_value());
    TorchCosts c;
    c.measured_at = "2026-12-04T17:00:00Z";
    c.python_version = "3.11.2";
    c.torch_version = "1.13.0";
    c.start_method = "fork";
    double v = 1e-6;
    for (const TorchCostField& f : TorchCostFields()) c.*f.member = (v *= 2);  // each field its own value
    store.SetTorchCosts("box/abc", c);
    ASSERT_TRUE(store.LoadTorchCosts("box/abc").has_value());
    EXPECT_EQ(*store.LoadTorchCosts("box/abc"), c);
    EXPECT_FALSE(store.LoadTorchCosts("other/def").has_value());
    TorchCosts newer = c;
    newer.worker_start_s = 0.5;
    newer.measured_at = "2026-12-05T09:00:00Z";
    store.SetTorchCosts("box/abc", newer);
    EXPECT_EQ(*store.LoadTorchCosts("box/abc"), newer);
  }
  std::filesystem::remove(path);
  std::filesystem::remove(path + "-wal");
  std::filesystem::remove(path + "-shm");
}

// The probe's answer: every number required and non-negative, named when not.
TEST(TorchCostsStoreTest, TheProbesAnswerIsReadOrRefusedNamingTheKey) {
  nlohmann::json answer = {{"python_version", "3.11.2"}, {"torch_version", "1.13.0"}, {"start_method", "fork"}};
  for (const TorchCostField& f : TorchCostFields()) answer[f.name] = 2e-6;
  const TorchCosts c = TorchCostsFromProbe(answer);
  EXPECT_EQ(c.torch_version, "1.13.0");
  EXPECT_DOUBLE_EQ(c.main_byte_s, 2e-6);
  EXPECT_DOUBLE_EQ(c.SampleSeconds(/*in_worker=*/true, 1000, 16), 2e-6 / 16 + 2e-6 + 2e-6 * 1000);
  answer["worker_sample_s"] = -1;
  try {
    TorchCostsFromProbe(answer);
    FAIL() << "a negative cost was accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "the torch probe's answer has no non-negative number \"worker_sample_s\"");
  }
}

}  // namespace
}  // namespace feedtune::results

namespace feedtune::results {
namespace {

ObservedRecord Observed(const std::string& uid, double samples_per_s, const std::string& ended_at) {
  ObservedRecord o;
  o.uid = uid;
  o.workload_name = "resnet";
  o.knobs.batch_size = 64;
  o.knobs.num_workers = 4;
  o.knobs.pin_memory = true;
  o.knobs.prefetch_factor = 3;
  o.knobs.persistent_workers = true;
  o.non_blocking = true;
  o.samples_per_s = samples_per_s;
  o.input_bound_frac = 0.12;
  o.step_s = 0.05;
  o.wait_s = 0.006;
  o.steps = 400;
  o.started_at = "2026-12-02T10:00:00Z";
  o.ended_at = ended_at;
  o.sweep_run_id = 7;
  o.source = "feedtune.watch";
  return o;
}

TEST_F(StoreTest, ObservedRunsRoundTripAndAJobReplacesItsOwnRow) {
  const std::string path = PathIn("observed.db");
  Store store = Store::Open(path);
  Fingerprint machine;  // fields set one by one: designated initializers warn (-Wmissing-field-initializers)
  machine.hostname = "gpu-3";
  machine.label = "gpu-3";
  machine.cpu_model = "cpu";
  machine.machine_id = "m3";
  store.AddObserved(machine, {Observed("job-a", 900, "2026-12-02T10:05:00Z")});
  store.AddObserved(machine, {Observed("job-a", 950, "2026-12-02T10:10:00Z"),  // the same job, later
                              Observed("job-b", 700, "2026-12-02T10:10:00Z")});
  const std::vector<ObservedRecord> rows = Store::OpenReadOnly(path).LoadObserved();
  ASSERT_EQ(rows.size(), 2u);
  const ObservedRecord& a = rows[0].uid == "job-a" ? rows[0] : rows[1];
  EXPECT_EQ(a.samples_per_s, 950);
  EXPECT_EQ(a.ended_at, "2026-12-02T10:10:00Z");
  EXPECT_EQ(a.host.name, "gpu-3");
  EXPECT_EQ(a.host.machine_id, "m3");
  EXPECT_EQ(a.knobs.num_workers, 4);
  EXPECT_EQ(a.knobs.prefetch_factor, 3);
  EXPECT_TRUE(a.knobs.persistent_workers);
  EXPECT_EQ(a.non_blocking, std::optional<bool>(true));
  EXPECT_EQ(a.input_bound_frac, 0.12);
  EXPECT_EQ(a.steps, 400);
  EXPECT_EQ(a.sweep_run_id, std::optional<int64_t>(7));
  EXPECT_EQ(a.source, "feedtune.watch");
  EXPECT_EQ(store.LoadMachines().size(), 1u);
}

TEST_F(StoreTest, MergeCopiesObservedRunsOnceAndTheLaterWriteWins) {
  const std::string job_path = PathIn("job.db");
  const std::string fleet_path = PathIn("fleet.db");
  Fingerprint machine;
  machine.hostname = "gpu-3";
  machine.cpu_model = "cpu";
  Store::Open(job_path).AddObserved(machine, {Observed("job-a", 900, "2026-12-02T10:05:00Z")});
  Store fleet = Store::Open(fleet_path);
  EXPECT_EQ(MergeInto(fleet, Store::OpenReadOnly(job_path)).observed_added, 1);
  EXPECT_EQ(MergeInto(fleet, Store::OpenReadOnly(job_path)).observed_added, 0);
  Store::Open(job_path).AddObserved(machine, {Observed("job-a", 990, "2026-12-02T11:00:00Z")});
  EXPECT_EQ(MergeInto(fleet, Store::OpenReadOnly(job_path)).observed_added, 1);
  const std::vector<ObservedRecord> rows = fleet.LoadObserved();
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].samples_per_s, 990);
}

TEST(StoreBandwidth, SetReplacesTheMatrixAndLoadReadsItBack) {
  const std::string path =
      (std::filesystem::temp_directory_path() / ("feedtune-bw-" + std::to_string(getpid()) + ".db")).string();
  std::filesystem::remove(path);
  {
    Store store = Store::Open(path);
    Fingerprint fp;
    fp.hostname = "gpu-box";
    fp.cpu_model = "test";
    const int64_t machine = store.UpsertMachine(fp);
    EXPECT_TRUE(store.LoadBandwidth(machine).empty());
    store.SetBandwidth(machine, {{65536, true, false, 12.5}, {268435456, false, true, 9.75}}, 0.31);
    store.SetBandwidth(machine, {{4194304, true, true, 51.0}}, 0.29);  // a new measurement replaces the old
    const auto points = store.LoadBandwidth(machine);
    ASSERT_EQ(points.size(), 1u);
    EXPECT_EQ(points[0].bytes, 4194304);
    EXPECT_TRUE(points[0].pinned);
    EXPECT_TRUE(points[0].non_blocking);
    EXPECT_DOUBLE_EQ(points[0].gb_per_s, 51.0);
  }
  std::filesystem::remove(path);
  std::filesystem::remove(path + "-wal");
  std::filesystem::remove(path + "-shm");
}

}  // namespace
}  // namespace feedtune::results
