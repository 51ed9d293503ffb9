// compare across several results files, and merge: identity kept, idempotent.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "results/compare.h"
#include "results/report.h"
#include "results/merge.h"
#include "results/store.h"
#include "results/verdict.h"
#include "results_test_util.h"

namespace feedtune::results {
namespace {

using nlohmann::json;
using testing::Machine;
using testing::SourceDir;
using testing::TempDir;
using testing::WriteSweep;

int64_t Count(const std::string& path, const std::string& table) {
  sqlite3* db = nullptr;
  int64_t value = -1;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
    sqlite3_stmt* stmt = nullptr;
    const std::string sql = "SELECT count(*) FROM " + table;
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt, nullptr) == SQLITE_OK &&
        sqlite3_step(stmt) == SQLITE_ROW) {
      value = sqlite3_column_int64(stmt, 0);
    }
    sqlite3_finalize(stmt);
  }
  sqlite3_close(db);
  return value;
}

// Two boxes, each with its own file, as `feedtune sweep --label` leaves them.
class TwoMachinesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    a_path_ = dir_ / "box-a.db";
    b_path_ = dir_ / "box-b.db";
    Store a = Store::Open(a_path_);
    WriteSweep(a, machine_a_, "quickstart", 1.0, "2024-05-01T10:00:00Z");
    // A later run of the same workload on the same box replaces the first in compare.
    a_latest_ = WriteSweep(a, machine_a_, "quickstart", 1.1, "2024-05-02T10:00:00Z");
    WriteSweep(a, machine_a_, "io-bound", 0.5, "2024-05-02T11:00:00Z");
    Store b = Store::Open(b_path_);
    b_run_ = WriteSweep(b, machine_b_, "quickstart", 2.0, "2024-05-03T10:00:00Z");
  }

  TempDir dir_;
  std::string a_path_, b_path_;
  const Fingerprint machine_a_ = Machine("host-a", "lab-a", 4);
  const Fingerprint machine_b_ = Machine("host-b", "lab-b", 16);
  RunRecord a_latest_, b_run_;
};

TEST_F(TwoMachinesTest, CompareOverTwoFilesGivesOneRowPerMachineAndWorkload) {
  const Store a = Store::OpenReadOnly(a_path_);
  const Store b = Store::OpenReadOnly(b_path_);
  const std::vector<CompareRow> rows = CollectCompareRows({&a, &b}, std::nullopt);
  ASSERT_EQ(rows.size(), 3u);
  // io-bound first (by name), then quickstart's machines, fastest first.
  EXPECT_EQ(rows[0].workload_name, "io-bound");
  EXPECT_EQ(rows[1].workload_name, "quickstart");
  EXPECT_EQ(rows[1].machine.label, "lab-b");
  EXPECT_EQ(rows[1].machine_hash, machine_b_.Hash());
  EXPECT_EQ(rows[1].db_path, b_path_);
  EXPECT_EQ(rows[1].best_samples_per_s, 5600 * 2.0);
  EXPECT_EQ(rows[2].machine.label, "lab-a");
  EXPECT_EQ(rows[2].run_id, a_latest_.id) << "the latest run of the machine";
  EXPECT_EQ(rows[2].runs_seen, 2);
  EXPECT_DOUBLE_EQ(rows[2].best_samples_per_s, 5600 * 1.1);
  EXPECT_EQ(rows[2].knee_workers, 4);
  ASSERT_TRUE(rows[2].best_config.has_value());
  EXPECT_EQ(rows[2].best_config->num_workers, 4);
  EXPECT_TRUE(rows[2].best_config->pin_memory);
  EXPECT_EQ(rows[2].speedup, 7.0);
  EXPECT_EQ(rows[2].best_gpu_idle_frac, 0.02);
  EXPECT_EQ(rows[2].backend, "host-sim");
  EXPECT_EQ(rows[2].date, "2024-05-02T10:05:00Z");

  const std::vector<CompareRow> only = CollectCompareRows({&a, &b}, std::string("io-bound"));
  ASSERT_EQ(only.size(), 1u);
  EXPECT_EQ(only[0].machine.label, "lab-a");
}

// Hosts measured by different feedtune builds: compare names the build of
// each host (a difference may be the build's, not the machine's); one build
// for all adds nothing.
TEST_F(TwoMachinesTest, CompareNamesTheBuildsWhenHostsDifferInThem) {
  const Store a = Store::OpenReadOnly(a_path_);
  const Store b = Store::OpenReadOnly(b_path_);
  std::vector<CompareRow> rows = CollectCompareRows({&a, &b}, std::string("quickstart"));
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].version, "0.1.0") << "runs.version, as the sweep stored it";
  EXPECT_EQ(rows[1].version, "0.1.0");
  EXPECT_EQ(RenderCompareTable(rows).find("builds differ"), std::string::npos) << RenderCompareTable(rows);

  rows[0].version = "0.2.0 (git 0123456789ab, GNU 12.2.0, CUDA 12.4)";
  rows[1].version = "0.1.0 (git ba9876543210-dirty, GNU 12.2.0, CUDA off)";
  const std::string table = RenderCompareTable(rows);
  EXPECT_NE(table.find("\nbuilds differ: measured by\n"), std::string::npos) << table;
  EXPECT_NE(table.find("  feedtune 0.1.0 (git ba9876543210-dirty, GNU 12.2.0, CUDA off): " + rows[1].host.name + "\n"),
            std::string::npos)
      << table;
  EXPECT_NE(table.find("  feedtune 0.2.0 (git 0123456789ab, GNU 12.2.0, CUDA 12.4): " + rows[0].host.name + "\n"),
            std::string::npos)
      << table;
  const json out = json::parse(RenderCompareJson(rows));
  EXPECT_EQ(out["workloads"][0]["machines"][0]["version"], rows[0].version);
  rows[0].version.clear();
  EXPECT_TRUE(json::parse(RenderCompareJson(rows))["workloads"][0]["machines"][0]["version"].is_null());
}

TEST_F(TwoMachinesTest, CompareRenderings) {
  const Store a = Store::OpenReadOnly(a_path_);
  const Store b = Store::OpenReadOnly(b_path_);
  const std::vector<CompareRow> rows = CollectCompareRows({&a, &b}, std::string("quickstart"));

  const std::string table = RenderCompareTable(rows);
  EXPECT_NE(table.find("workload quickstart (hash hash-of-quickstart): 2 hosts in 2 classes"),
            std::string::npos)
      << table;
  for (const char* header : {"host", "class", "vs class median", "knee workers", "best config", "best samples/s", "speedup",
                             "GPU idle % at best", "backend", "date (UTC)"}) {
    EXPECT_NE(table.find(header), std::string::npos) << header;
  }
  const size_t b_line = table.find("lab-b");
  const size_t a_line = table.find("lab-a");
  ASSERT_NE(b_line, std::string::npos);
  ASSERT_NE(a_line, std::string::npos);
  EXPECT_LT(b_line, a_line) << "fastest first\n" << table;
  EXPECT_NE(table.find("nw=4 pin=1 nb=1 pf=2 pers=0 bs=32"), std::string::npos) << table;
  EXPECT_NE(table.find("11200.0"), std::string::npos) << table;
  EXPECT_NE(table.find("x7.00"), std::string::npos) << table;

  const json out = json::parse(RenderCompareJson(rows));
  ASSERT_EQ(out["workloads"].size(), 1u);
  const json& machines = out["workloads"][0]["machines"];
  ASSERT_EQ(machines.size(), 2u);
  EXPECT_EQ(machines[0]["label"], "lab-b");
  EXPECT_EQ(machines[0]["hash"], machine_b_.Hash());
  EXPECT_EQ(machines[0]["best"]["samples_per_s"], 11200.0);
  EXPECT_EQ(machines[0]["best"]["config"]["num_workers"], 4);
  EXPECT_EQ(machines[0]["knee_workers"], 4);
  EXPECT_EQ(machines[0]["speedup"], 7.0);
  EXPECT_EQ(machines[0]["run"]["db"], b_path_);
  EXPECT_EQ(machines[1]["label"], "lab-a");

  const std::string html = RenderCompareHtml(rows);
  EXPECT_NE(html.find("data-machine-hash=\"" + machine_b_.Hash() + "\" data-best-samples-per-s=\"11200\""),
            std::string::npos)
      << html;
  EXPECT_EQ(html.find("<script"), std::string::npos);
}

// A node run (sweep.ranks 2) beside one-loader runs: compare says how many
// ranks each machine ran and that its knee is workers per rank.
TEST_F(TwoMachinesTest, CompareShowsRanksAndThePerRankKnee) {
  const std::string node_path = dir_ / "node.db";
  {
    Store store = Store::Open(node_path);
    const Fingerprint machine = Machine("host-n", "lab-n", 8);
    RunRecord run;
    run.machine_id = store.UpsertMachine(machine);
    run.workload_name = "quickstart";
    run.workload_hash = "hash-of-quickstart";
    run.config_yaml = "name: quickstart\nsweep: {ranks: 2}\n";
    run.backend = "host-sim";
    run.version = "0.1.0";
    run.started_at = "2024-05-04T10:00:00Z";
    run.id = store.BeginRun(run);
    loader::Knobs knobs{.batch_size = 32, .num_workers = 0};
    const int64_t baseline = store.AddTrial(run.id, testing::Trial("baseline", knobs, 1000, 0.7, ""));
    for (int workers : {1, 2, 4}) {
      knobs.num_workers = workers;
      TrialRecord t = testing::Trial("num_workers", knobs, 1000.0 * (workers == 1 ? 2 : 3), 0.1);
      NodeFigures node;
      node.ranks = 2;
      node.slowest_rank_samples_per_s = t.samples_per_s / 2;
      for (int r = 0; r < 2; ++r) {
        RankRecord row;
        row.rank = r;
        row.pid = 100 + r;
        row.samples_per_s = t.samples_per_s / 2;
        node.rank_rows.push_back(row);
      }
      t.node = node;
      const int64_t id = store.AddTrial(run.id, t);
      if (workers == 2) run.best_trial_id = id;
    }
    run.baseline_trial_id = baseline;
    run.status = results::RunStatus::kDone;
    run.ended_at = "2024-05-04T10:05:00Z";
    run.knee_workers = 2;
    store.FinishRun(run);
  }
  const Store a = Store::OpenReadOnly(a_path_);
  const Store node = Store::OpenReadOnly(node_path);
  const std::vector<CompareRow> rows = CollectCompareRows({&a, &node}, std::string("quickstart"));
  ASSERT_EQ(rows.size(), 2u);
  const CompareRow& lab_n = rows[0].machine.label == "lab-n" ? rows[0] : rows[1];
  const CompareRow& lab_a = rows[0].machine.label == "lab-n" ? rows[1] : rows[0];
  EXPECT_EQ(lab_n.ranks, 2);
  EXPECT_EQ(lab_n.knee_workers, 2);
  EXPECT_EQ(lab_a.ranks, 1);

  const std::string table = RenderCompareTable(rows);
  const auto line_of = [&](const std::string& label) {
    const size_t at = table.find(label);
    return at == std::string::npos ? std::string() : table.substr(at, table.find('\n', at) - at);
  };
  EXPECT_NE(line_of("lab-n").find("2 ranks"), std::string::npos) << table;
  EXPECT_NE(line_of("lab-n").find("2 per rank"), std::string::npos) << table;
  EXPECT_NE(line_of("lab-a").find("1 rank "), std::string::npos) << table;
  EXPECT_EQ(line_of("lab-a").find("per rank"), std::string::npos) << table;
  EXPECT_NE(table.find("ranks"), std::string::npos) << table;

  const json out = json::parse(RenderCompareJson(rows));
  for (const json& m : out["workloads"][0]["machines"]) {
    const bool is_node = m["label"] == "lab-n";
    EXPECT_EQ(m["ranks"], is_node ? 2 : 1) << m.dump();
    EXPECT_EQ(m["knee_workers_per_rank"], is_node ? 2 : 4) << m.dump();
  }

  const std::string html = RenderCompareHtml(rows);
  EXPECT_NE(html.find("data-host=\"lab-n\" data-ranks=\"2\""), std::string::npos) << html;
  EXPECT_NE(html.find("<td class=\"n\">2 ranks</td><td class=\"n\">2 per rank</td>"), std::string::npos) << html;
  EXPECT_NE(html.find("<td class=\"n\">1 rank</td><td class=\"n\">4</td>"), std::string::npos) << html;
}

TEST_F(TwoMachinesTest, MergeKeepsIdentityAndIsIdempotent) {
  const std::string fleet = dir_ / "fleet.db";
  {
    Store out = Store::Open(fleet);
    const MergeStats first_a = MergeInto(out, Store::OpenReadOnly(a_path_));
    EXPECT_EQ(first_a.machines_added, 1);
    EXPECT_EQ(first_a.runs_added, 3);
    EXPECT_EQ(first_a.trials_added, 30);
    const MergeStats first_b = MergeInto(out, Store::OpenReadOnly(b_path_));
    EXPECT_EQ(first_b.machines_added, 1);
    EXPECT_EQ(first_b.runs_added, 1);
  }
  const int64_t runs = Count(fleet, "runs");
  const int64_t trials = Count(fleet, "trials");
  const int64_t repeats = Count(fleet, "repeats");
  EXPECT_EQ(runs, 4);
  EXPECT_EQ(trials, 40);
  EXPECT_EQ(repeats, 72);  // 9 ok trials of 2 repeats per run; the failed one has none
  {
    Store out = Store::Open(fleet);
    for (const std::string& path : {a_path_, b_path_, a_path_}) {
      const MergeStats again = MergeInto(out, Store::OpenReadOnly(path));
      EXPECT_EQ(again.runs_added, 0);
      EXPECT_EQ(again.machines_added, 0);
      EXPECT_EQ(again.trials_added, 0);
      EXPECT_GT(again.runs_skipped, 0);
    }
  }
  EXPECT_EQ(Count(fleet, "runs"), runs);
  EXPECT_EQ(Count(fleet, "trials"), trials);
  EXPECT_EQ(Count(fleet, "repeats"), repeats);
  EXPECT_EQ(Count(fleet, "machines"), 2);

  // Identity: the machines keep their hash and label; a run reads back whole,
  // its best and baseline pointing at the copied trials.
  const Store merged = Store::OpenReadOnly(fleet);
  const std::vector<StoredMachine> machines = merged.LoadMachines();
  ASSERT_EQ(machines.size(), 2u);
  EXPECT_EQ(machines[0].hash, machine_a_.Hash());
  EXPECT_EQ(machines[0].fingerprint.label, "lab-a");
  EXPECT_EQ(machines[1].hash, machine_b_.Hash());
  EXPECT_EQ(machines[1].fingerprint.label, "lab-b");
  const Store source_b = Store::OpenReadOnly(b_path_);
  const RunView original = LoadRunView(source_b, b_run_.id);
  const RunView copy = LoadRunView(merged, 4);
  EXPECT_EQ(copy.run.uid, original.run.uid);
  EXPECT_EQ(copy.machine->label, "lab-b");
  EXPECT_EQ(json::parse(RenderJson(copy))["best"], json::parse(RenderJson(original))["best"]);
  EXPECT_EQ(json::parse(RenderJson(copy))["trials"].size(), 10u);
  EXPECT_EQ(copy.run.speedup_ci_high, 7.2);
  EXPECT_EQ(copy.trials.back().repeat_rows.size(), 2u);

  // compare over the merged file agrees with compare over the two sources,
  // and over all three at once (runs seen twice count once).
  const Store a = Store::OpenReadOnly(a_path_);
  const auto from_sources = CollectCompareRows({&a, &source_b}, std::nullopt);
  const auto from_all = CollectCompareRows({&merged, &a, &source_b}, std::nullopt);
  const auto from_merged = CollectCompareRows({&merged}, std::nullopt);
  ASSERT_EQ(from_merged.size(), from_sources.size());
  ASSERT_EQ(from_all.size(), from_sources.size());
  for (size_t i = 0; i < from_merged.size(); ++i) {
    EXPECT_EQ(from_merged[i].run_uid, from_sources[i].run_uid);
    EXPECT_EQ(from_merged[i].best_samples_per_s, from_sources[i].best_samples_per_s);
    EXPECT_EQ(from_all[i].runs_seen, from_sources[i].runs_seen);
  }
}

TEST_F(TwoMachinesTest, ARunCopiedWhileRunningIsReplacedOnceFinished) {
  const std::string fleet = dir_ / "fleet.db";
  RunRecord running;
  {
    Store b = Store::Open(b_path_);
    running.machine_id = b.UpsertMachine(machine_b_);
    running.workload_name = "late";
    running.workload_hash = "h";
    running.backend = "host-sim";
    running.started_at = "2024-06-01T00:00:00Z";
    running.id = b.BeginRun(running);
    b.AddTrial(running.id, testing::Trial("baseline", {}, 100, 0.5));
  }
  {
    Store out = Store::Open(fleet);
    EXPECT_EQ(MergeInto(out, Store::OpenReadOnly(b_path_)).runs_added, 2);
  }
  {
    Store b = Store::Open(b_path_);
    const int64_t best = b.AddTrial(running.id, testing::Trial("num_workers", {.num_workers = 2}, 300, 0.1));
    running.status = results::RunStatus::kDone;
    running.best_trial_id = best;
    b.FinishRun(running);
  }
  Store out = Store::Open(fleet);
  const MergeStats stats = MergeInto(out, Store::OpenReadOnly(b_path_));
  EXPECT_EQ(stats.runs_updated, 1);
  EXPECT_EQ(stats.runs_added, 0);
  EXPECT_EQ(stats.runs_skipped, 1);
  EXPECT_EQ(Count(fleet, "runs"), 2);
  const RunView late = LoadRunView(out, std::nullopt);
  EXPECT_EQ(late.run.status, results::RunStatus::kDone);
  EXPECT_EQ(late.trials.size(), 2u);
  ASSERT_NE(BestTrial(late), nullptr);
  EXPECT_EQ(BestTrial(late)->samples_per_s, 300);
  EXPECT_EQ(MergeInto(out, Store::OpenReadOnly(b_path_)).runs_updated, 0);
}

// The bottleneck verdict is part of the run: a fleet file keeps each host's.
TEST_F(TwoMachinesTest, MergeCarriesEachRunsVerdict) {
  Verdict verdict;
  for (const auto& [stage, rate] : {std::pair{"step", 900.0}, std::pair{"prep", 300.0}}) {
    StageRate r;
    r.stage = stage;
    r.measured = true;
    r.trial_samples_per_s = r.samples_per_s = rate;
    r.ci_low = rate * 0.98;
    r.ci_high = rate * 1.02;
    verdict.stages.push_back(r);
  }
  verdict.bottleneck = "prep";
  verdict.runner_up = "step";
  verdict.headroom = 3.0;
  verdict.input_bound_frac = 0.66;
  verdict.advice = "prep: 3.3 ms of CPU per sample on 2 CPUs";
  Store::Open(b_path_).SaveVerdict(b_run_.id, verdict);
  const std::string fleet = dir_ / "fleet.db";
  Store out = Store::Open(fleet);
  MergeInto(out, Store::OpenReadOnly(a_path_));
  MergeInto(out, Store::OpenReadOnly(b_path_));
  EXPECT_EQ(Count(fleet, "verdicts"), 1) << "box-a's runs have none; box-b's one run has one";
  for (const RunRecord& run : out.LoadRuns()) {
    const std::optional<Verdict> merged = out.LoadVerdict(run.id);
    if (run.uid != b_run_.uid) {
      EXPECT_FALSE(merged) << run.workload_name;
      continue;
    }
    ASSERT_TRUE(merged);
    EXPECT_EQ(VerdictToJson(*merged), VerdictToJson(verdict));
  }
  MergeInto(out, Store::OpenReadOnly(b_path_));  // again: skipped, nothing doubled
  EXPECT_EQ(Count(fleet, "verdicts"), 1);
}

// A remote run's trials keep their figures of the store (trials.store_json,
// schema v23) through a merge, and compare shows the best trial's retries.
TEST_F(TwoMachinesTest, MergeCarriesEachTrialsStoreFigures) {
  StoreFigures figures;
  figures.requests = 12;
  figures.retries_slowdown = 2;
  figures.objects = 10;
  figures.bytes = 10000;
  figures.first_byte_p50_s = 0.021;
  figures.first_byte_p99_s = 0.034;
  figures.mb_per_s_per_connection = 40;
  {
    Store b = Store::Open(b_path_);
    TrialRecord remote = b.LoadTrials(b_run_.id).front();
    remote.store = figures;
    b.AddTrial(b_run_.id, remote);
  }
  const std::string fleet = dir_ / "fleet.db";
  {
    Store out = Store::Open(fleet);
    MergeInto(out, Store::OpenReadOnly(a_path_));
    MergeInto(out, Store::OpenReadOnly(b_path_));
  }
  const Store merged = Store::OpenReadOnly(fleet);
  const Store source_b = Store::OpenReadOnly(b_path_);
  // The trials as the source has them, but for the ids the merged file gave them.
  const auto trials = [](const Store& store, int64_t run_id) {
    json list = json::parse(RenderJson(LoadRunView(store, run_id)))["trials"];
    for (json& trial : list) trial.erase("id");
    return list;
  };
  const json copy = trials(merged, 4);
  EXPECT_EQ(copy, trials(source_b, b_run_.id));
  int with_store = 0;
  for (const json& trial : copy) {
    if (!trial.contains("store")) continue;
    ++with_store;
    EXPECT_EQ(trial["store"]["retries_slowdown"], 2);
    EXPECT_EQ(trial["store"]["first_byte_p50_s"], 0.021);
  }
  EXPECT_EQ(with_store, 1);
}

// compare's store line per host: the probe's figures, then the best trial's
// own retries; the JSON's best has the trial's figures under "store".
TEST(CompareStoreTest, TheBestTrialsRetriesFollowTheProbe) {
  CompareRow row;
  row.workload_name = "remote";
  row.host.name = "box-a";
  row.run_id = 7;
  row.best_config = loader::Knobs{};
  row.store_probe_json = R"({"first_byte_p50_s": 0.021, "mb_per_s_per_connection": 48.2, "knee_in_flight": 16})";
  StoreFigures figures;
  figures.requests = 50;
  figures.retries_slowdown = 2;
  row.best_store = figures;
  const std::string text = RenderCompareTable({row});
  EXPECT_NE(text.find("  box-a (run 7): first byte 21.0 ms, 48.2 MB/s per connection, knee 16 in flight; "
                      "its best trial 2 retries (2 SlowDown)\n"),
            std::string::npos)
      << text;
  const json j = json::parse(RenderCompareJson({row}));
  EXPECT_EQ(j["workloads"][0]["machines"][0]["best"]["store"]["retries"], 2) << j.dump(2);
  row.best_store.reset();  // local data, or a run before schema v23
  EXPECT_FALSE(json::parse(RenderCompareJson({row}))["workloads"][0]["machines"][0]["best"].contains("store"));
  EXPECT_EQ(RenderCompareTable({row}).find("its best trial"), std::string::npos);
}

TEST(MergeV1Test, AV1FileMergesTheSameBeforeAndAfterItsMigration) {
  TempDir dir;
  const std::string v1 = dir / "v1.db";
  std::filesystem::copy_file(SourceDir() + "/tests/testdata/db/v1.db", v1);
  const std::string fleet = dir / "fleet.db";
  Store out = Store::Open(fleet);
  EXPECT_EQ(MergeInto(out, Store::OpenReadOnly(v1)).runs_added, 1);  // read as v1
  { Store migrate = Store::Open(v1); }
  const MergeStats again = MergeInto(out, Store::OpenReadOnly(v1));  // read as v2
  EXPECT_EQ(again.runs_added, 0);
  EXPECT_EQ(again.runs_skipped, 1);
  EXPECT_EQ(Count(fleet, "trials"), 8);
}

TEST(MergeV1Test, AForeignFileIsRefusedAndUntouched) {
  TempDir dir;
  const std::string foreign = dir / "other.db";
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(foreign.c_str(), &db), SQLITE_OK);
    sqlite3_exec(db, "CREATE TABLE notes (text TEXT); INSERT INTO notes VALUES ('mine')", nullptr,
                 nullptr, nullptr);
    sqlite3_close(db);
  }
  const std::string before = testing::ReadFile(foreign);
  EXPECT_THROW(Store::OpenReadOnly(foreign), StoreError);
  EXPECT_THROW(Store::Open(foreign), StoreError);
  EXPECT_EQ(testing::ReadFile(foreign), before);
}

}  // namespace
}  // namespace feedtune::results
