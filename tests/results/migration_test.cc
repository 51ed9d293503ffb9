// Schema migrations on a real v1 file (tests/testdata/db/v1.db, written by the
// v1 code): read as it is, upgraded in place, and still refused when foreign.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "results/report.h"
#include "results/store.h"
#include "results/torch_costs.h"

namespace feedtune::results {
namespace {

namespace fs = std::filesystem;

const fs::path kV1Fixture = fs::path(FEEDTUNE_SOURCE_DIR) / "tests/testdata/db/v1.db";

std::string ReadFileBytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

int64_t RawInt(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  int64_t value = -1;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
    sqlite3_stmt* stmt = nullptr;
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt, nullptr) == SQLITE_OK &&
        sqlite3_step(stmt) == SQLITE_ROW) {
      value = sqlite3_column_int64(stmt, 0);
    }
    sqlite3_finalize(stmt);
  }
  sqlite3_close(db);
  return value;
}

class MigrationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(fs::exists(kV1Fixture)) << kV1Fixture;
    std::string pattern = (fs::temp_directory_path() / "feedtune_migration_test.XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
    copy_ = (dir_ / "v1.db").string();
    fs::copy_file(kV1Fixture, copy_);
  }
  void TearDown() override {
    std::error_code error;
    fs::remove_all(dir_, error);
  }

  fs::path dir_;
  std::string copy_;
};

TEST_F(MigrationTest, FixtureIsSchemaV1) {
  EXPECT_EQ(RawInt(kV1Fixture.string(), "PRAGMA user_version"), 1);
  EXPECT_EQ(RawInt(kV1Fixture.string(), "PRAGMA application_id"), Store::kApplicationId);
  EXPECT_EQ(RawInt(kV1Fixture.string(), "SELECT count(*) FROM trials"), 8);
}

TEST_F(MigrationTest, ReadOnlyReadsV1WithoutChangingIt) {
  const std::string before = ReadFileBytes(copy_);
  {
    Store store = Store::OpenReadOnly(copy_);
    EXPECT_EQ(store.schema_version(), 1);
    const auto run = store.LoadRun(std::nullopt);
    ASSERT_TRUE(run.has_value());
    EXPECT_EQ(run->id, 1);
    EXPECT_EQ(run->status, results::RunStatus::kDone);
    EXPECT_EQ(run->workload_name, "tiny-v1");
    EXPECT_FALSE(run->speedup.has_value());
    EXPECT_FALSE(run->knee_kneedle_workers.has_value());
    EXPECT_TRUE(run->calibration_json.empty());
    const auto machine = store.LoadMachine(run->machine_id);
    ASSERT_TRUE(machine.has_value());
    EXPECT_EQ(machine->label, "fixture-v1");
    EXPECT_TRUE(machine->gpus.empty());
    EXPECT_EQ(run->uid, "v1:" + store.LoadMachines().at(0).hash + ":" + run->started_at + ":1");
    const auto trials = store.LoadTrials(run->id);
    ASSERT_EQ(trials.size(), 8u);
    EXPECT_EQ(trials[0].phase, "baseline");
    EXPECT_GT(trials[0].samples_per_s, 0);
    EXPECT_EQ(trials[0].repeat_rows.size(), 2u);
    EXPECT_TRUE(std::isnan(trials[0].time_to_first_batch_s));  // unknown in v1
    EXPECT_TRUE(std::isnan(trials[0].worker_busy_frac));
    EXPECT_TRUE(std::isnan(trials[0].pinned_alloc_s));  // unknown before v4
    EXPECT_FALSE(trials[0].batches_per_epoch.has_value());  // unknown before v5
    EXPECT_TRUE(std::isnan(trials[0].worker_rss_bytes));   // unknown before v6
    EXPECT_TRUE(std::isnan(trials[0].worker_rss_growth_bytes_per_epoch));  // unknown before v13
    EXPECT_TRUE(std::isnan(trials[0].worker_rss_peak_bytes));
    EXPECT_EQ(trials[0].worker_rss_samples, 0);
    // Before hosts were kept apart from classes, the machine's label was the host.
    EXPECT_EQ(run->host.name, "fixture-v1");
    EXPECT_EQ(run->host.hostname, machine->hostname);
    EXPECT_EQ(run->host.machine_id, "");
  }
  EXPECT_EQ(ReadFileBytes(copy_), before);
}

TEST_F(MigrationTest, OpenUpgradesV1InPlaceKeepingEveryRow) {
  std::string uid_before;
  std::vector<TrialRecord> trials_before;
  {
    Store reader = Store::OpenReadOnly(copy_);
    uid_before = reader.LoadRun(1)->uid;
    trials_before = reader.LoadTrials(1);
  }
  {
    Store store = Store::Open(copy_);
    EXPECT_EQ(store.schema_version(), Store::kSchemaVersion);
  }
  EXPECT_EQ(RawInt(copy_, "PRAGMA user_version"), Store::kSchemaVersion);
  EXPECT_EQ(RawInt(copy_, "PRAGMA application_id"), Store::kApplicationId);
  EXPECT_EQ(RawInt(copy_, "SELECT count(*) FROM repeats"), 16);

  Store store = Store::Open(copy_);  // a second open has nothing left to do
  const auto run = store.LoadRun(1);
  ASSERT_TRUE(run.has_value());
  EXPECT_EQ(run->uid, uid_before);  // the identity `merge` relies on is unchanged
  EXPECT_EQ(run->host.name, "fixture-v1");  // the 6 -> 7 migration's stand-in, as read-only reads it
  const auto trials = store.LoadTrials(1);
  ASSERT_EQ(trials.size(), trials_before.size());
  for (size_t i = 0; i < trials.size(); ++i) {
    EXPECT_EQ(trials[i].id, trials_before[i].id);
    EXPECT_EQ(trials[i].knobs, trials_before[i].knobs);
    EXPECT_EQ(trials[i].samples_per_s, trials_before[i].samples_per_s);
    EXPECT_EQ(trials[i].decision, trials_before[i].decision);
    EXPECT_TRUE(std::isnan(trials[i].cv));
  }

  // The upgraded file takes v2 rows next to the v1 ones.
  RunRecord next = *run;
  next.uid.clear();
  next.started_at.clear();
  next.calibration_json = R"({"fork_us": 900})";
  next.id = store.BeginRun(next);
  TrialRecord trial = trials[0];
  trial.cv = 0.02;
  trial.time_to_first_batch_s = 0.5;
  const int64_t trial_id = store.AddTrial(next.id, trial);
  next.status = results::RunStatus::kDone;
  next.speedup = 2.5;
  next.safe_max_workers = 12;
  next.calibration_json.clear();  // keeps what BeginRun stored
  store.FinishRun(next);
  const auto loaded = store.LoadRun(next.id);
  EXPECT_EQ(loaded->speedup, 2.5);
  EXPECT_EQ(loaded->safe_max_workers, 12);
  EXPECT_EQ(loaded->calibration_json, R"({"fork_us": 900})");
  EXPECT_NE(loaded->uid, uid_before);
  EXPECT_EQ(store.LoadTrials(next.id).at(0).id, trial_id);
  EXPECT_EQ(store.LoadTrials(next.id).at(0).cv, 0.02);
}

// Schema 10 -> 11: an older file gains the observed table on open,
// keeps its runs, and takes a job's observed run; read-only, it reads none.
ObservedRecord SomeObservedRun(const std::string& workload) {
  ObservedRecord o;
  o.workload_name = workload;
  o.knobs.batch_size = 32;
  o.knobs.num_workers = 2;
  o.samples_per_s = 900;
  o.input_bound_frac = 0.04;
  o.steps = 120;
  o.uid = "watch:test";
  return o;
}

TEST_F(MigrationTest, OpenGivesAV1FileTheObservedTable) {
  {
    Store reader = Store::OpenReadOnly(copy_);
    EXPECT_TRUE(reader.LoadObserved().empty());  // no table there, and none made
  }
  EXPECT_EQ(RawInt(copy_, "SELECT count(*) FROM sqlite_master WHERE name = 'observed'"), 0);
  Fingerprint machine;
  int64_t runs_before = RawInt(copy_, "SELECT count(*) FROM runs");
  {
    Store store = Store::Open(copy_);
    machine = *store.LoadMachine(store.LoadRun(1)->machine_id);
    store.AddObserved(machine, {SomeObservedRun("fixture")});
  }
  EXPECT_EQ(RawInt(copy_, "SELECT count(*) FROM sqlite_master WHERE name = 'observed'"), 1);
  EXPECT_EQ(RawInt(copy_, "SELECT count(*) FROM runs"), runs_before);
  EXPECT_EQ(RawInt(copy_, "SELECT count(*) FROM machines"), 1) << "the job ran on the fixture's machine";
  const std::vector<ObservedRecord> observed = Store::OpenReadOnly(copy_).LoadObserved();
  ASSERT_EQ(observed.size(), 1u);
  EXPECT_EQ(observed[0].workload_name, "fixture");
  EXPECT_EQ(observed[0].host.name, "fixture-v1");  // the machine's label stands in for the host
}

// Runs `sql` on the file at `path` (a file made older by hand).
void RawExecSql(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  char* error = nullptr;
  const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &error);
  const std::string message = error != nullptr ? error : "";
  sqlite3_free(error);
  sqlite3_close(db);
  ASSERT_EQ(rc, SQLITE_OK) << message;
}

// Schema 12 -> 13: a v12 file (the fixture upgraded, then its v13
// columns dropped, as a v12 feedtune left it) reads read-only with the worker
// memory unmeasured, then upgrades and takes a trial with the series' figures.
// What schema v19 added (a run's owner and end note), dropped again to make
// a v18 file out of a fresh one.
// What schema v20 added: each window's own CPU, each trial's end on the
// search's clock, the torch costs' fixed stop and not-measured figures.
// What schema v23 added: each trial's figures of a remote store.
std::string DropSinceV23() { return "ALTER TABLE trials DROP COLUMN store_json;"; }

// What schema v22 added: the kind of run and a layout run's answer.
std::string DropSinceV22() {
  return DropSinceV23() + "ALTER TABLE runs DROP COLUMN kind; ALTER TABLE runs DROP COLUMN answer_json;";
}

// run_facts: whether that table is still there to drop a column of (a
// file older than v14 has none).
std::string DropSinceV21(bool run_facts = true) {
  return DropSinceV22() + (run_facts ? "ALTER TABLE run_facts DROP COLUMN store_probe_json;" : "");
}

std::string DropSinceV20(bool run_facts = true) {
  return DropSinceV21(run_facts) + "ALTER TABLE repeats DROP COLUMN tree_cpu; ALTER TABLE trials DROP COLUMN elapsed_s; "
         "ALTER TABLE trials DROP COLUMN fetch_concurrency; "
         "ALTER TABLE torch_costs DROP COLUMN main_stop_fixed_s; "
         "ALTER TABLE torch_costs DROP COLUMN not_measured_json;";
}

std::string DropSinceV19(bool run_facts = true) {
  std::string sql = DropSinceV20(run_facts);
  for (const char* column : {"owner_hostname", "owner_boot_id", "owner_pid_namespace", "owner_pid",
                             "owner_start_ticks", "end_note"}) {
    sql += std::string("ALTER TABLE runs DROP COLUMN ") + column + ";";
  }
  return sql;
}

// What schemas v16 (other processes' CPU), v17 (torch costs), v18 (the
// neighbours' demand) and v19 (a run's owner) added, dropped again to make
// an older file out of a fresh one; the run_facts columns too when that
// table stays.
std::string DropSinceV16(bool run_facts) {
  std::string sql = DropSinceV19(run_facts) + "DROP TABLE torch_costs;";
  if (run_facts) {
    sql += "ALTER TABLE run_facts DROP COLUMN torch_costs_json;";
    for (const char* column : {"background_demand_cpu", "background_demand_windows"}) {
      sql += std::string("ALTER TABLE run_facts DROP COLUMN ") + column + ";";
    }
  }
  for (const char* column : {"background_cpu", "remeasured_windows"}) {
    sql += std::string("ALTER TABLE trials DROP COLUMN ") + column + ";";
  }
  for (const char* column : {"background_cpu", "disturbed", "remeasured"}) {
    sql += std::string("ALTER TABLE repeats DROP COLUMN ") + column + ";";
  }
  if (!run_facts) return sql;
  for (const char* column : {"has_background", "background_source", "background_start_cpu", "background_sample_s",
                             "background_top_json", "background_reference_cpu", "background_warn_cpu",
                             "background_disturbed_cpu", "background_median_cpu", "background_windows",
                             "background_remeasured", "busy"}) {
    sql += std::string("ALTER TABLE run_facts DROP COLUMN ") + column + ";";
  }
  return sql;
}

TEST_F(MigrationTest, AV12FileReadsAndUpgradesToTheWorkerMemoryColumns) {
  { Store store = Store::Open(copy_); }
  RawExecSql(copy_,
          "ALTER TABLE trials DROP COLUMN worker_rss_start_bytes; "
          "ALTER TABLE trials DROP COLUMN worker_rss_peak_bytes; "
          "ALTER TABLE trials DROP COLUMN worker_rss_growth_bytes_per_epoch; "
          "ALTER TABLE trials DROP COLUMN worker_rss_epochs; "
          "ALTER TABLE trials DROP COLUMN worker_rss_samples; "
          "ALTER TABLE trials DROP COLUMN worker_rss_in_consumer; "
          "DROP TABLE run_facts; " +
              DropSinceV16(false) + "PRAGMA user_version = 12;");
  {
    Store reader = Store::OpenReadOnly(copy_);
    EXPECT_EQ(reader.schema_version(), 12);
    const auto trials = reader.LoadTrials(1);
    ASSERT_EQ(trials.size(), 8u);
    EXPECT_TRUE(std::isnan(trials[0].worker_rss_start_bytes));
    EXPECT_TRUE(std::isnan(trials[0].worker_rss_growth_bytes_per_epoch));
    EXPECT_FALSE(trials[0].worker_rss_in_consumer);
  }
  Store store = Store::Open(copy_);
  EXPECT_EQ(RawInt(copy_, "PRAGMA user_version"), Store::kSchemaVersion);
  auto trials = store.LoadTrials(1);
  ASSERT_EQ(trials.size(), 8u);
  EXPECT_TRUE(std::isnan(trials[0].worker_rss_peak_bytes));
  EXPECT_EQ(trials[0].worker_rss_samples, 0);
  TrialRecord trial = trials[0];
  trial.worker_rss_start_bytes = 64.0 * (1 << 20);
  trial.worker_rss_peak_bytes = 300.0 * (1 << 20);
  trial.worker_rss_growth_bytes_per_epoch = 120.0 * (1 << 20);
  trial.worker_rss_epochs = 2;
  trial.worker_rss_samples = 12;
  const int64_t id = store.AddTrial(1, trial);
  trials = store.LoadTrials(1);
  ASSERT_EQ(trials.back().id, id);
  EXPECT_EQ(trials.back().worker_rss_growth_bytes_per_epoch, 120.0 * (1 << 20));
  EXPECT_EQ(trials.back().worker_rss_samples, 12);
}

// A v13 file: the run's facts are keys of runs.calibration_json, beside the
// workload's CPU calibration (as sweep_command.cc wrote them before v14).
constexpr const char* kV13RunJson =
    R"j({"budget_facts":{"batch_bytes":1048576,"fds_open":12,"mem_available_bytes":8000000000,)j"
    R"j("nofile_limit":1024,"shm_free_bytes":4000000000,"usable_cpus":2.0},"cpu":{"fork_us":900},)j"
    R"j("max_workers":8,"phases":[{"kept":true,"phase":"baseline","why":"first"}],)j"
    R"j("safe_limit":{"basis":"measured worker RSS of trial 2 (200 MiB)","growth_bytes":null,"trial":2,)j"
    R"j("worker_rss_bytes":209715200,"workers":12},"seed":{"best":{"batch_size":32,"non_blocking":true,)j"
    R"j("num_workers":4,"persistent_workers":false,"pin_memory":true,"prefetch_factor":4},"db":"fleet.db",)j"
    R"j("knee_workers":4,"match":"class","run":7,"run_class":"1f0c","run_host":"box-a","run_uid":"u7",)j"
    R"j("source":"run 7 of box-a","why":"the latest run of its class"}})j";

void ExpectV13Facts(const RunFacts& facts) {
  ASSERT_TRUE(facts.budget.has_value());
  EXPECT_EQ(facts.budget->mem_available_bytes, 8000000000);
  EXPECT_EQ(facts.budget->usable_cpus, 2.0);
  EXPECT_EQ(facts.budget->stream_buffer_bytes, 0);  // absent in runs older than the streaming formats
  EXPECT_EQ(facts.max_workers, 8);
  ASSERT_TRUE(facts.seed.has_value());
  EXPECT_EQ(facts.seed->db_path, "fleet.db");
  EXPECT_EQ(facts.seed->run_id, 7);
  EXPECT_EQ(facts.seed->knee_workers, 4);
  EXPECT_TRUE(facts.seed->best.pin_memory);
  EXPECT_TRUE(facts.seed->best.non_blocking);
  EXPECT_EQ(facts.seed->best.num_workers, 4);
  EXPECT_EQ(facts.seed->best.prefetch_factor, 4);
  ASSERT_TRUE(facts.safe_limit.has_value());
  EXPECT_EQ(facts.safe_limit->workers, 12);
  EXPECT_EQ(facts.safe_limit->basis_trial, 2);
  EXPECT_EQ(facts.safe_limit->worker_rss_bytes, 209715200);
  EXPECT_FALSE(facts.safe_limit->growth_bytes.has_value());
  // v15: the phases too; the "cpu" object holds no calibration, only an older figure.
  ASSERT_EQ(facts.phases.size(), 1u);
  EXPECT_EQ(facts.phases[0], (PhaseFact{"baseline", true, "first"}));
  EXPECT_FALSE(facts.cpu.has_value());
}

TEST_F(MigrationTest, AV13FileMovesTheRunFactsOutOfTheJsonIntoTypedColumns) {
  { Store store = Store::Open(copy_); }
  RawExecSql(copy_, std::string("UPDATE runs SET calibration_json = '") + kV13RunJson +
                     "' WHERE id = 1; DROP TABLE run_facts; " + DropSinceV16(false) + "PRAGMA user_version = 13;");
  std::string report_before;
  {
    Store reader = Store::OpenReadOnly(copy_);
    EXPECT_EQ(reader.schema_version(), 13);
    const auto run = reader.LoadRun(1);
    ASSERT_TRUE(run.has_value());
    ExpectV13Facts(run->facts);
    report_before = CalibrationJson(*run).dump();
    // Read as the migration will leave it: the typed facts out of the JSON.
    EXPECT_EQ(run->calibration_json.find("budget_facts"), std::string::npos) << run->calibration_json;
    EXPECT_NE(run->calibration_json.find("fork_us"), std::string::npos) << run->calibration_json;
    EXPECT_FALSE(reader.LoadRuns().empty());
  }
  Store store = Store::Open(copy_);
  EXPECT_EQ(RawInt(copy_, "PRAGMA user_version"), Store::kSchemaVersion);
  EXPECT_EQ(RawInt(copy_, "SELECT count(*) FROM run_facts"), RawInt(copy_, "SELECT count(*) FROM runs"));
  // The typed facts left the JSON; what is not typed yet stays there.
  EXPECT_EQ(RawInt(copy_, "SELECT json_type(calibration_json, '$.seed') IS NULL FROM runs WHERE id = 1"), 1);
  EXPECT_EQ(RawInt(copy_, "SELECT json_extract(calibration_json, '$.cpu.fork_us') FROM runs WHERE id = 1"), 900);
  auto run = store.LoadRun(1);
  ASSERT_TRUE(run.has_value());
  ExpectV13Facts(run->facts);
  // The JSON report's "calibration" object reads as before the migration.
  EXPECT_EQ(CalibrationJson(*run).dump(), report_before);
  // Written back through the one writer, read back through the one reader.
  run->facts.max_workers = 6;
  run->facts.seed.reset();
  store.FinishRun(*run);
  const auto again = store.LoadRun(1);
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->facts, run->facts);
}

// A v14 file: the budget, seed and safe limit are run_facts columns; the CPU
// calibration, the preflight warnings, the phases and the trace excerpts are
// still keys of runs.calibration_json (as sweep_command.cc wrote them before
// v15), beside an older figure in "cpu" that no field holds.
constexpr const char* kV14RunJson =
    R"j({"cpu":{"calibration_s":0.05,"check_requested_us":1000.0,"check_spent_us":1003.5,)j"
    R"j("chunk_bytes":4096,"chunk_us":2.5,"clock":"CLOCK_THREAD_CPUTIME_ID","clock_overhead":0.01,)j"
    R"j("clock_read_ns":25.0,"fork_us":900,"work_bytes_per_s":1638400000.0},)j"
    R"j("phases":[{"kept":false,"phase":"pin_memory","why":"within the noise"},)j"
    R"j({"kept":true,"phase":"num_workers","why":"knee at 4"}],)j"
    R"j("preflight":["/dev/shm is 64 MiB: at most 3 workers fit"],)j"
    R"j("timelines":{"baseline":{"knobs":"nw=0","ms":200,"rows":[]}}})j";

TEST_F(MigrationTest, AV14FileMovesTheRestOfTheRunFactsIntoTypedColumns) {
  { Store store = Store::Open(copy_); }
  std::string v14 = std::string("UPDATE runs SET calibration_json = '") + kV14RunJson + "' WHERE id = 1;";
  for (const char* column : {"has_cpu", "cpu_clock", "cpu_clock_read_ns", "cpu_work_bytes_per_s", "cpu_chunk_bytes",
                             "cpu_chunk_us", "cpu_clock_overhead", "cpu_check_requested_us", "cpu_check_spent_us",
                             "cpu_calibration_s", "preflight_json", "phases_json", "timelines_json"}) {
    v14 += std::string("ALTER TABLE run_facts DROP COLUMN ") + column + ";";
  }
  RawExecSql(copy_, v14 + DropSinceV16(true) + "PRAGMA user_version = 14;");
  const auto expect_facts = [](const RunFacts& facts) {
    ASSERT_TRUE(facts.cpu.has_value());
    EXPECT_EQ(facts.cpu->clock, "CLOCK_THREAD_CPUTIME_ID");
    EXPECT_EQ(facts.cpu->work_bytes_per_s, 1638400000.0);
    EXPECT_EQ(facts.cpu->chunk_bytes, 4096);
    EXPECT_EQ(facts.cpu->check_spent_us, 1003.5);
    EXPECT_EQ(facts.preflight, std::vector<std::string>{"/dev/shm is 64 MiB: at most 3 workers fit"});
    ASSERT_EQ(facts.phases.size(), 2u);
    EXPECT_EQ(facts.phases[1], (PhaseFact{"num_workers", true, "knee at 4"}));
    EXPECT_EQ(facts.timelines_json, R"({"baseline":{"knobs":"nw=0","ms":200,"rows":[]}})");
  };
  std::string report_before;
  {
    Store reader = Store::OpenReadOnly(copy_);
    EXPECT_EQ(reader.schema_version(), 14);
    const auto run = reader.LoadRun(1);
    ASSERT_TRUE(run.has_value());
    expect_facts(run->facts);
    report_before = CalibrationJson(*run).dump();
    // Read as the migration will leave it: only the older figure stays in the JSON.
    EXPECT_EQ(run->calibration_json, R"({"cpu":{"fork_us":900}})");
  }
  Store store = Store::Open(copy_);
  EXPECT_EQ(RawInt(copy_, "PRAGMA user_version"), Store::kSchemaVersion);
  EXPECT_EQ(RawInt(copy_, "SELECT json_extract(calibration_json, '$.cpu.fork_us') FROM runs WHERE id = 1"), 900);
  EXPECT_EQ(RawInt(copy_, "SELECT json_type(calibration_json, '$.phases') IS NULL FROM runs WHERE id = 1"), 1);
  EXPECT_EQ(RawInt(copy_, "SELECT cpu_chunk_bytes FROM run_facts WHERE run_id = 1"), 4096);
  auto run = store.LoadRun(1);
  ASSERT_TRUE(run.has_value());
  expect_facts(run->facts);
  EXPECT_EQ(run->calibration_json, R"({"cpu":{"fork_us":900}})");
  // The JSON report's "calibration" object reads as before the migration.
  EXPECT_EQ(CalibrationJson(*run).dump(), report_before);
  EXPECT_NE(report_before.find(R"("fork_us":900)"), std::string::npos) << report_before;
  // Written back through the one writer, read back through the one reader.
  run->facts.phases.push_back({"persistent_workers", false, "no gain"});
  run->facts.cpu.reset();
  run->facts.timelines_json.clear();
  store.FinishRun(*run);
  const auto again = store.LoadRun(1);
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->facts, run->facts);
}

// Schema 18 -> 19: a v18 file (the fixture upgraded, then its v19 columns
// dropped) with a run left "running" by an older feedtune: read-only, it
// reads no owner; upgraded, the run stays running, since nothing says which
// process ran it (a run is marked interrupted only when its process is known
// to have ended), and a new run records its owner.
TEST_F(MigrationTest, AV18FileGainsRunOwnersAndLeavesItsRunningRunsAlone) {
  { Store store = Store::Open(copy_); }
  RawExecSql(copy_, "UPDATE runs SET status = 'running', ended_at = NULL WHERE id = 1;" + DropSinceV19() +
                        "PRAGMA user_version = 18;");
  {
    Store reader = Store::OpenReadOnly(copy_);
    EXPECT_EQ(reader.schema_version(), 18);
    const auto run = reader.LoadRun(1);
    ASSERT_TRUE(run.has_value());
    EXPECT_EQ(run->owner, RunOwner{});
    EXPECT_EQ(run->end_note, "");
    EXPECT_EQ(run->status, RunStatus::kRunning);
  }
  Store store = Store::Open(copy_);
  EXPECT_EQ(RawInt(copy_, "PRAGMA user_version"), Store::kSchemaVersion);
  EXPECT_TRUE(store.stale_runs().empty());
  EXPECT_EQ(RawInt(copy_, "SELECT owner_pid IS NULL AND end_note IS NULL FROM runs WHERE id = 1"), 1);
  auto run = store.LoadRun(1);
  ASSERT_TRUE(run.has_value());
  EXPECT_EQ(run->status, RunStatus::kRunning);
  EXPECT_EQ(run->owner.pid, 0);

  RunRecord next = *run;
  next.uid.clear();
  next.id = store.BeginRun(next);
  EXPECT_EQ(RawInt(copy_, "SELECT owner_pid FROM runs WHERE id = " + std::to_string(next.id)), getpid());
  EXPECT_GT(RawInt(copy_, "SELECT owner_start_ticks FROM runs WHERE id = " + std::to_string(next.id)), 0);
}

// Schema 19 -> 20: a v19 file with a calibration: read-only, its costs read
// with the fixed stop not measured and its windows without their tree's CPU;
// upgraded, the stored row says the fixed stop was measured before
// calibrate measured it, and a trial stores its tree's CPU and its clock.
TEST_F(MigrationTest, AV19FileGainsTheWindowsTreeAndTheCostsNotMeasured) {
  {
    Store store = Store::Open(copy_);
    TorchCosts costs;
    costs.measured_at = "2026-12-06T10:00:00Z";
    costs.worker_start_s = 0.02;
    costs.main_worker_stop_s = 0.015;
    store.SetTorchCosts("box/abc", costs);
  }
  RawExecSql(copy_, DropSinceV20() + "PRAGMA user_version = 19;");
  {
    Store reader = Store::OpenReadOnly(copy_);
    EXPECT_EQ(reader.schema_version(), 19);
    const auto costs = reader.LoadTorchCosts("box/abc");
    ASSERT_TRUE(costs.has_value());
    EXPECT_DOUBLE_EQ(costs->main_worker_stop_s, 0.015);
    EXPECT_EQ(costs->not_measured.count("main_stop_fixed_s"), 1u);
    const auto trials = reader.LoadTrials(1);
    ASSERT_FALSE(trials.empty());
    EXPECT_TRUE(std::isnan(trials[0].elapsed_s));
    ASSERT_FALSE(trials[0].repeat_rows.empty());
    EXPECT_TRUE(std::isnan(trials[0].repeat_rows[0].tree_cpu));
  }
  Store store = Store::Open(copy_);
  EXPECT_EQ(RawInt(copy_, "PRAGMA user_version"), Store::kSchemaVersion);
  const auto costs = store.LoadTorchCosts("box/abc");
  ASSERT_TRUE(costs.has_value());
  EXPECT_EQ(costs->not_measured.at("main_stop_fixed_s"), kMeasuredBeforeIt);
  TrialRecord trial = store.LoadTrials(1)[0];
  trial.elapsed_s = 12.5;
  trial.repeat_rows[0].tree_cpu = 1.25;
  const int64_t id = store.AddTrial(1, trial);
  for (const TrialRecord& t : store.LoadTrials(1)) {
    if (t.id != id) continue;
    EXPECT_DOUBLE_EQ(t.elapsed_s, 12.5);
    EXPECT_DOUBLE_EQ(t.repeat_rows[0].tree_cpu, 1.25);
  }
}

// Schema 20 -> 21: a v20 file: read-only, its runs read without a store
// probe; upgraded, a run of remote data keeps its probe's JSON as written.
TEST_F(MigrationTest, AV20FileGainsTheStoreProbe) {
  { Store store = Store::Open(copy_); }
  RawExecSql(copy_, DropSinceV21() + "PRAGMA user_version = 20;");
  {
    Store reader = Store::OpenReadOnly(copy_);
    EXPECT_EQ(reader.schema_version(), 20);
    const auto run = reader.LoadRun(1);
    ASSERT_TRUE(run.has_value());
    EXPECT_EQ(run->facts.store_probe_json, "");
  }
  Store store = Store::Open(copy_);
  EXPECT_EQ(RawInt(copy_, "PRAGMA user_version"), Store::kSchemaVersion);
  auto run = store.LoadRun(1);
  ASSERT_TRUE(run.has_value());
  EXPECT_EQ(run->facts.store_probe_json, "");
  RunRecord next = *run;
  next.uid.clear();
  next.facts.store_probe_json = R"({"source":"s3://b/p/","first_byte_p50_s":0.021,"retries":0})";
  next.id = store.BeginRun(next);
  const auto again = store.LoadRun(next.id);
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->facts.store_probe_json, next.facts.store_probe_json);
}

// Schema 21 -> 22: a v21 file kept a layout run's answer in config_yaml and
// told it by its workload's name. Read-only, and upgraded in place, that run
// is a layout run with its answer in answer_json and no config; a sweep
// whose name starts "layout " but whose config is YAML stays a sweep.
TEST_F(MigrationTest, AV21FileTellsItsLayoutRunsByTheirAnswer) {
  const std::string answer = R"({"candidates": [], "named": null, "why": "no candidate could be measured"})";
  int64_t layout_id = 0, sweep_id = 0;
  {
    Store store = Store::Open(copy_);
    RunRecord run = *store.LoadRun(1);
    run.uid.clear();
    run.workload_name = "layout data.npy";
    run.config_yaml = answer;  // as a v21 feedtune layout stored it
    layout_id = store.BeginRun(run);
    run.uid.clear();
    run.workload_name = "layout of the week";
    run.config_yaml = "name: layout of the week\nloader: {batch_size: 32}\n";
    sweep_id = store.BeginRun(run);
  }
  RawExecSql(copy_, DropSinceV22() + "PRAGMA user_version = 21;");
  const auto check = [&](const Store& store) {
    const auto layout = store.LoadRun(layout_id);
    ASSERT_TRUE(layout.has_value());
    EXPECT_EQ(layout->kind, RunKind::kLayout);
    EXPECT_EQ(layout->answer_json, answer);
    EXPECT_EQ(layout->config_yaml, "");
    const auto sweep = store.LoadRun(sweep_id);
    ASSERT_TRUE(sweep.has_value());
    EXPECT_EQ(sweep->kind, RunKind::kSweep);
    EXPECT_EQ(sweep->answer_json, "");
    EXPECT_EQ(sweep->config_yaml, "name: layout of the week\nloader: {batch_size: 32}\n");
    EXPECT_EQ(store.LoadRun(1)->kind, RunKind::kSweep);
  };
  {
    Store reader = Store::OpenReadOnly(copy_);
    EXPECT_EQ(reader.schema_version(), 21);
    check(reader);
  }
  Store store = Store::Open(copy_);
  EXPECT_EQ(RawInt(copy_, "PRAGMA user_version"), Store::kSchemaVersion);
  EXPECT_EQ(RawInt(copy_, "SELECT count(*) FROM runs WHERE kind = 'layout' AND config_yaml = ''"), 1);
  check(store);
}

// Schema 22 -> 23: a v22 file's trials read without store figures,
// read-only and upgraded; upgraded, a remote trial keeps its figures, and
// the file's column holds them as the report's JSON prints them.
TEST_F(MigrationTest, AV22FileGainsEachTrialsStoreFigures) {
  { Store store = Store::Open(copy_); }
  RawExecSql(copy_, DropSinceV23() + "PRAGMA user_version = 22;");
  {
    Store reader = Store::OpenReadOnly(copy_);
    EXPECT_EQ(reader.schema_version(), 22);
    const auto trials = reader.LoadTrials(1);
    ASSERT_FALSE(trials.empty());
    EXPECT_FALSE(trials[0].store.has_value());
  }
  Store store = Store::Open(copy_);
  EXPECT_EQ(RawInt(copy_, "PRAGMA user_version"), Store::kSchemaVersion);
  EXPECT_FALSE(store.LoadTrials(1)[0].store.has_value());
  EXPECT_EQ(RawInt(copy_, "SELECT count(*) FROM trials WHERE store_json IS NOT NULL"), 0);
  TrialRecord trial = store.LoadTrials(1)[0];
  StoreFigures figures;
  figures.requests = 40;
  figures.retries_slowdown = 3;
  figures.retries_server_error = 1;
  figures.objects = 36;
  figures.bytes = 36 * 4096;
  figures.first_byte_p50_s = 0.021;
  figures.first_byte_p99_s = 0.035;  // MB/s per connection not measured: NaN
  trial.store = figures;
  const int64_t id = store.AddTrial(1, trial);
  EXPECT_EQ(RawInt(copy_, "SELECT json_extract(store_json, '$.retries') FROM trials WHERE id = " +
                              std::to_string(id)),
            4);
  bool found = false;
  for (const TrialRecord& t : store.LoadTrials(1)) {
    if (t.id != id) continue;
    found = true;
    ASSERT_TRUE(t.store.has_value());
    EXPECT_EQ(t.store->requests, 40);
    EXPECT_EQ(t.store->retries_slowdown, 3);
    EXPECT_EQ(t.store->retries_server_error, 1);
    EXPECT_EQ(t.store->retries_connection, 0);
    EXPECT_EQ(t.store->objects, 36);
    EXPECT_EQ(t.store->bytes, 36 * 4096);
    EXPECT_DOUBLE_EQ(t.store->first_byte_p50_s, 0.021);
    EXPECT_DOUBLE_EQ(t.store->first_byte_p99_s, 0.035);
    EXPECT_TRUE(std::isnan(t.store->mb_per_s_per_connection));
  }
  EXPECT_TRUE(found);
}

TEST_F(MigrationTest, ForeignApplicationIdIsRefusedAndUntouched) {
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(copy_.c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db, "PRAGMA application_id = 1234", nullptr, nullptr, nullptr),
              SQLITE_OK);
    sqlite3_close(db);
  }
  const std::string before = ReadFileBytes(copy_);
  for (const bool read_only : {false, true}) {
    try {
      read_only ? Store::OpenReadOnly(copy_) : Store::Open(copy_);
      FAIL() << "expected StoreError";
    } catch (const StoreError& e) {
      EXPECT_EQ(std::string(e.what()),
                copy_ + ": not a feedtune results file (application_id 0x000004d2); refusing to "
                        "modify it");
    }
  }
  EXPECT_EQ(ReadFileBytes(copy_), before);
  EXPECT_EQ(RawInt(copy_, "PRAGMA user_version"), 1);
}

}  // namespace
}  // namespace feedtune::results
