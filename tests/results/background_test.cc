// Other processes' CPU in the results (docs/measurement.md, "A busy box"):
// the busy mark from the windows' figures, its words, its rows in the file
// (schema v16) and in an older file, and the quiet run that export,
// loader_kwargs and --seed-from take over a busy one of the same host or class.
#include "results/background.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "results/compare.h"
#include "results/export.h"
#include "results/fleet.h"
#include "results/report.h"
#include "results/store.h"
#include "results_test_util.h"

namespace feedtune::results {
namespace {

using testing::Machine;
using testing::SourceDir;
using testing::TempDir;
using testing::WriteHostRun;

// A window beside a trial whose own tree took `tree` CPUs (by default half
// a CPU: on 2 CPUs the box then has CPU idle beside a neighbour of 1).
RepeatRecord Window(int index, double background, bool remeasured = false, double tree = 0.5) {
  RepeatRecord r;
  r.index = index;
  r.samples_per_s = 1000;
  r.background_cpu = background;
  r.tree_cpu = tree;
  r.disturbed = remeasured;
  r.remeasured = remeasured;
  return r;
}

TrialRecord TrialOf(std::vector<RepeatRecord> windows, TrialStatus status = TrialStatus::kOk) {
  TrialRecord t;
  t.status = status;
  t.repeat_rows = std::move(windows);
  return t;
}

BackgroundFacts Thresholds() {
  BackgroundFacts facts;
  facts.source = "/proc/stat";
  facts.warn_cpu = 0.25;
  facts.disturbed_cpu = 0.25;
  return facts;
}

TEST(SummarizeBackground, TheMedianOfTheWindowsInTheFiguresMarksTheRun) {
  // Beside a one-CPU hog: windows of 1.02, 0.98, 1.01 and 0.99 CPU (the
  // median 1.00); a re-measured window and a failed trial's do not count.
  const std::vector<TrialRecord> trials = {
      TrialOf({Window(0, 1.02), Window(1, 0.98)}),
      TrialOf({Window(0, 0.10, /*remeasured=*/true), Window(1, 1.01), Window(2, 0.99)}),
      TrialOf({Window(0, 0.0)}, TrialStatus::kFailed),
      TrialOf({Window(0, NAN)}),  // a command that reported no figure for it
  };
  const BackgroundFacts busy = SummarizeBackground(Thresholds(), trials, 2);
  EXPECT_EQ(busy.windows, 4);
  EXPECT_EQ(busy.remeasured, 1);
  EXPECT_NEAR(busy.median_cpu, 1.0, 1e-12);
  EXPECT_NEAR(busy.demand_cpu, 1.0, 1e-12) << "every window left CPU idle";
  EXPECT_EQ(busy.demand_windows, 4);
  EXPECT_TRUE(busy.busy);
  EXPECT_EQ(BusyText(busy),
            "other processes wanted 1.00 CPU where the box had CPU idle (median of 4 windows), above "
            "sweep.background.warn_cpu 0.25; over all 4 windows they got 1.00");

  // A quiet box: 0.03, 0.05, 0.40 (one noisy window) -> median 0.05: not busy.
  const BackgroundFacts quiet =
      SummarizeBackground(Thresholds(), {TrialOf({Window(0, 0.03), Window(1, 0.05), Window(2, 0.40)})}, 2);
  EXPECT_DOUBLE_EQ(quiet.median_cpu, 0.05);
  EXPECT_FALSE(quiet.busy);
  EXPECT_EQ(BusyText(quiet), "");

  // No window measured it: not busy, median not measured.
  const BackgroundFacts none = SummarizeBackground(Thresholds(), {TrialOf({Window(0, NAN)})}, 2);
  EXPECT_EQ(none.windows, 0);
  EXPECT_TRUE(std::isnan(none.median_cpu));
  EXPECT_FALSE(none.busy);
}

// A trial at `workers` whose tree took `tree_cpu` CPUs, other processes
// `background` in each of its three windows.
TrialRecord AtWorkers(int workers, double tree_cpu, double background) {
  TrialRecord t = TrialOf({Window(0, background, false, tree_cpu), Window(1, background, false, tree_cpu),
                           Window(2, background, false, tree_cpu)});
  t.knobs.num_workers = workers;
  t.cpu_util = tree_cpu;
  return t;
}

// The busy box of issues 47 and 56 (configs/cpu-bound.yaml beside one `yes`
// on 2 CPUs): the sample before the baseline reads 1.00 CPU; as the trials
// fill the box the scheduler shares it out and the neighbour gets 0.48 beside
// a tree of 1.5 CPUs, 0.30 beside 1.7. Counting windows whose tree left
// usable CPUs less warn_cpu (1.75) free read those starved figures as the
// demand (0.48). Only where tree and neighbour together left CPU idle did
// the neighbour get what it wanted: there, and in the sample, it reads 1 CPU.
TEST(SummarizeBackground, TheMarkRestsOnTheNeighboursDemandWhereTheBoxHadCpuIdle) {
  BackgroundFacts facts = Thresholds();
  facts.start_cpu = 1.00;
  const std::vector<TrialRecord> trials = {AtWorkers(0, 0.8, 0.99), AtWorkers(1, 1.5, 0.48), AtWorkers(1, 1.5, 0.48),
                                           AtWorkers(2, 1.7, 0.30), AtWorkers(8, 1.98, 0.15)};
  const BackgroundFacts busy = SummarizeBackground(facts, trials, 2);
  EXPECT_LT(busy.median_cpu, 0.5) << "over all windows the neighbour reads starved";
  EXPECT_EQ(busy.demand_windows, 3) << "only the 0-worker trial's windows left CPU idle";
  EXPECT_NEAR(busy.demand_cpu, 0.99, 1e-12);
  EXPECT_TRUE(busy.busy);
  EXPECT_NE(BusyText(busy).find("other processes wanted 0.99 CPU where the box had CPU idle (median of the sample "
                                "before the baseline and 3 windows)"),
            std::string::npos)
      << BusyText(busy);
  EXPECT_NE(BusyText(busy).find("; over all 15 windows they got 0.48"), std::string::npos) << BusyText(busy);

  // A quiet box swept the same way is not marked: the sweep's own workers
  // take what they take, and nothing else wants any.
  facts.start_cpu = 0.02;
  const BackgroundFacts quiet = SummarizeBackground(
      facts, {AtWorkers(0, 1.0, 0.02), AtWorkers(1, 1.1, 0.03), AtWorkers(16, 1.99, 0.01)}, 2);
  EXPECT_LT(quiet.demand_cpu, 0.05);
  EXPECT_FALSE(quiet.busy);
  EXPECT_EQ(BusyText(quiet), "");

  // Unknown CPUs: only the sample counts.
  EXPECT_EQ(SummarizeBackground(facts, {AtWorkers(0, 0.5, 0.02), AtWorkers(1, 0.6, 0.03)}, 0).demand_windows, 0);

  // Every window saturated and no sample before the baseline: the demand is
  // not measured, the run not marked, and the words say so rather than give
  // the starved figure as what the neighbour wanted.
  facts.start_cpu = NAN;
  const BackgroundFacts unknown = SummarizeBackground(facts, {AtWorkers(2, 1.5, 0.48), AtWorkers(4, 1.7, 0.3)}, 2);
  EXPECT_TRUE(std::isnan(unknown.demand_cpu));
  EXPECT_FALSE(unknown.busy);
  EXPECT_EQ(QuietText(unknown),
            "other processes took 0.39 CPU (median of 6 windows); what they wanted was not measured: no window left "
            "CPU idle and no sample came before the baseline");
}

TEST(BackgroundWords, TheWarningTheDecisionsAndTheJson) {
  BackgroundFacts facts = Thresholds();
  facts.start_cpu = 1.04;
  facts.sample_s = 1.0;
  facts.top = {{"yes", 4242, 1, 1.0}, {"cc1plus", 77, 3, 0.04}};
  EXPECT_EQ(StartWarning(facts),
            "other processes took 1.04 CPU over 1.0 s before the baseline (above sweep.background.warn_cpu 0.25; "
            "from /proc/stat); the most: yes (pid 4242) 1.00 CPU, cc1plus (3 processes) 0.04 CPU. The sweep goes on, "
            "but its knee and best will describe the contention with them, not this machine alone; sweep on a quiet "
            "box for an answer to keep (docs/measurement.md)");
  facts.start_cpu = 0.25;
  EXPECT_EQ(StartWarning(facts), "") << "at the threshold: quiet";

  TrialRecord t = TrialOf({Window(0, 1.10, true), Window(1, 0.05), Window(2, 0.07)});
  t.remeasured_windows = 1;
  t.background_cpu = 0.06;
  facts.reference_cpu = 0.03;
  EXPECT_EQ(TrialBackgroundNote(t, facts),
            "; re-measured 1 window that other processes disturbed (1.10 CPU against the quiet 0.03)");
  // Busy from the start (no reference): nothing re-measured, the decision names what they took.
  facts.reference_cpu = NAN;
  const TrialRecord busy = [] {
    TrialRecord b = TrialOf({Window(0, 1.0), Window(1, 0.96)});
    b.background_cpu = 0.98;
    return b;
  }();
  EXPECT_EQ(TrialBackgroundNote(busy, facts), "; other processes took 0.98 CPU during it");
  t.remeasured_windows = 0;
  EXPECT_EQ(TrialBackgroundNote(t, facts), "") << "quiet: nothing to add";

  const nlohmann::ordered_json j = BackgroundJson(SummarizeBackground(facts, {busy}, 2));
  EXPECT_EQ(j["busy"], true);
  EXPECT_DOUBLE_EQ(j["median_cpu"].get<double>(), 0.98);
  // The sample before the baseline (0.25) and the two windows at 0 workers.
  EXPECT_DOUBLE_EQ(j["demand_cpu"].get<double>(), 0.96);
  EXPECT_EQ(j["demand_windows"], 2);
  EXPECT_TRUE(j["reference_cpu"].is_null());
  EXPECT_EQ(j["top"][0]["name"], "yes");
  EXPECT_TRUE(BackgroundJson(std::nullopt).is_null());
}

// Marks a stored run: other processes took `cpu` in its windows.
RunRecord SetBackground(Store& store, RunRecord run, double cpu) {
  BackgroundFacts facts = Thresholds();
  facts.start_cpu = cpu;
  facts.sample_s = 1.0;
  facts.top = {{"yes", 4242, 1, cpu}};
  facts.reference_cpu = cpu <= facts.warn_cpu ? cpu : NAN;
  facts.median_cpu = cpu;
  facts.windows = 30;
  facts.demand_cpu = cpu;
  facts.demand_windows = 12;
  facts.busy = cpu > facts.warn_cpu;
  run.facts.background = facts;
  store.FinishRun(run);
  return *store.LoadRun(run.id);
}

HostIdentity BoxHost(const std::string& name) { return {name, name + ".lab", "id-" + name}; }

TEST(BackgroundStore, TheFiguresAndTheMarkRoundTrip) {
  TempDir dir;
  Store store = Store::Open(dir / "bg.db");
  const Fingerprint box = Machine("box", "", 2);
  RunRecord run = WriteHostRun(store, box, BoxHost("box-a"), "cpu-bound", 2000, 1980, 2020, "2026-12-04T17:00:00Z");
  TrialRecord t = testing::Trial("num_workers", {}, 1500, 0.1);
  t.repeat_rows = {Window(0, 1.2, true), Window(1, 0.02), Window(2, 0.04)};
  t.background_cpu = 0.03;
  t.remeasured_windows = 1;
  const int64_t id = store.AddTrial(run.id, t);
  run = SetBackground(store, run, 1.01);

  ASSERT_TRUE(run.facts.background.has_value());
  const BackgroundFacts& bg = *run.facts.background;
  EXPECT_TRUE(bg.busy);
  EXPECT_TRUE(IsBusy(run));
  EXPECT_DOUBLE_EQ(bg.median_cpu, 1.01);
  EXPECT_DOUBLE_EQ(bg.demand_cpu, 1.01);
  EXPECT_EQ(bg.demand_windows, 12);
  EXPECT_TRUE(std::isnan(bg.reference_cpu));
  ASSERT_EQ(bg.top.size(), 1u);
  EXPECT_EQ(bg.top[0].name, "yes");
  EXPECT_EQ(bg.top[0].pid, 4242);
  EXPECT_EQ(bg.windows, 30);
  for (const TrialRecord& stored : Store::OpenReadOnly(dir / "bg.db").LoadTrials(run.id)) {
    if (stored.id != id) {
      EXPECT_TRUE(std::isnan(stored.background_cpu)) << "not measured";
      continue;
    }
    EXPECT_DOUBLE_EQ(stored.background_cpu, 0.03);
    EXPECT_EQ(stored.remeasured_windows, 1);
    ASSERT_EQ(stored.repeat_rows.size(), 3u);
    EXPECT_TRUE(stored.repeat_rows[0].remeasured && stored.repeat_rows[0].disturbed);
    EXPECT_DOUBLE_EQ(stored.repeat_rows[0].background_cpu, 1.2);
    EXPECT_FALSE(stored.repeat_rows[1].remeasured || stored.repeat_rows[1].disturbed);
    EXPECT_DOUBLE_EQ(stored.repeat_rows[2].background_cpu, 0.04);
  }

  // The report: the mark above the table, the column, the JSON.
  const RunView view = LoadRunView(store, run.id);
  const std::string table = RenderTable(view);
  EXPECT_NE(table.find("busy:     other processes wanted 1.01 CPU where the box had CPU idle (median of the "
                       "sample before the baseline and 12 windows), above sweep.background.warn_cpu 0.25; over all 30 "
                       "windows they got 1.01: the knee and the best describe the contention with them\n"),
            std::string::npos)
      << table;
  // A run before schema v18 rested its mark on the median of its windows, and says so.
  BackgroundFacts before_v18 = bg;
  before_v18.demand_cpu = NAN;
  before_v18.demand_windows = 0;
  EXPECT_EQ(BusyText(before_v18),
            "other processes took 1.01 CPU (median of 30 windows), above sweep.background.warn_cpu 0.25");
  EXPECT_NE(table.find("others CPU"), std::string::npos) << table;
  const nlohmann::json report = nlohmann::json::parse(RenderJson(view));
  EXPECT_EQ(report["busy"], true);
  EXPECT_EQ(report["background"]["top"][0]["name"], "yes");
  bool found = false;
  for (const auto& trial : report["trials"]) {
    if (trial["id"] != id) continue;
    found = true;
    EXPECT_DOUBLE_EQ(trial["background_cpu"].get<double>(), 0.03);
    EXPECT_EQ(trial["remeasured_windows"], 1);
  }
  EXPECT_TRUE(found);
  EXPECT_NE(RenderHtml(view).find("<strong>busy</strong>: other processes wanted 1.01 CPU"), std::string::npos);
}

TEST(BackgroundStore, AFileBeforeTheColumnsReadsAsNotMeasuredAndQuiet) {
  const Store v1 = Store::OpenReadOnly(SourceDir() + "/tests/testdata/db/v1.db");
  ASSERT_LT(v1.schema_version(), 16);
  for (const RunRecord& run : v1.LoadRuns()) {
    EXPECT_FALSE(run.facts.background.has_value());
    EXPECT_FALSE(IsBusy(run));
    for (const TrialRecord& t : v1.LoadTrials(run.id)) {
      EXPECT_TRUE(std::isnan(t.background_cpu));
      EXPECT_EQ(t.remeasured_windows, 0);
      for (const RepeatRecord& r : t.repeat_rows) {
        EXPECT_TRUE(std::isnan(r.background_cpu));
        EXPECT_FALSE(r.remeasured);
      }
    }
    const nlohmann::json report = nlohmann::json::parse(RenderJson(LoadRunView(v1, run.id)));
    EXPECT_TRUE(report["busy"].is_null());
    EXPECT_TRUE(report["background"].is_null());
  }
}

// Two runs of one host: a quiet one, then a busy one beside a hog.
class QuietOverBusyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_.emplace(Store::Open(dir_ / "two.db"));
    quiet_ = SetBackground(*store_, WriteHostRun(*store_, box_, BoxHost("box-a"), "cpu-bound", 2000, 1980, 2020,
                                                 "2026-12-04T16:00:00Z", 2),
                           0.04);
    busy_ = SetBackground(*store_, WriteHostRun(*store_, box_, BoxHost("box-a"), "cpu-bound", 1200, 1150, 1250,
                                                "2026-12-04T17:00:00Z", 8),
                          1.01);
  }
  TempDir dir_;
  std::optional<Store> store_;
  Fingerprint box_ = Machine("box", "", 2);
  RunRecord quiet_, busy_;
};

TEST_F(QuietOverBusyTest, ThisHostsQuietRunStandsAndSaysWhichItPassedOver) {
  const auto match = NearestStoredRun(*store_, "cpu-bound", box_, BoxHost("box-a"));
  ASSERT_TRUE(match.has_value());
  EXPECT_EQ(match->run.id, quiet_.id) << "the older quiet run over the newer busy one";
  EXPECT_FALSE(match->busy);
  const std::string why = match->Describe();
  EXPECT_NE(why.find("this host's latest run (run 1 of box-a"), std::string::npos) << why;
  EXPECT_NE(why.find("; quiet, taken over run 2 of box-a, 2026-12-04T17:05:00Z, which ran on a busy box (other "
                     "processes wanted 1.01 CPU where the box had CPU idle (median of the sample before the "
                     "baseline and 12 windows)"),
            std::string::npos)
      << why;

  // Another host of the class: the class's quiet run too.
  const auto other = NearestStoredRun(*store_, "cpu-bound", box_, BoxHost("box-b"));
  ASSERT_TRUE(other.has_value());
  EXPECT_EQ(other->match, RunMatch::kClass);
  EXPECT_EQ(other->run.id, quiet_.id);

  // Export of the run it took: no busy line; of the busy run: it says so.
  const std::string quiet_export = RenderExport(LoadRunView(*store_, quiet_.id), ExportFormat::kEnv);
  EXPECT_EQ(quiet_export.find("busy"), std::string::npos) << quiet_export;
  const std::string busy_export = RenderExport(LoadRunView(*store_, busy_.id), ExportFormat::kEnv);
  EXPECT_NE(busy_export.find("# (busy: other processes wanted 1.01 CPU"), std::string::npos) << busy_export;
}

TEST_F(QuietOverBusyTest, OnlyBusyRunsStandSaidSo) {
  // A class with a busy run alone: it stands, and the words say it was busy.
  const Fingerprint other_box = Machine("other", "", 4);
  SetBackground(*store_, WriteHostRun(*store_, other_box, BoxHost("box-c"), "cpu-bound", 3000, 2950, 3050,
                                      "2026-12-04T17:20:00Z"),
                0.9);
  const auto match = NearestStoredRun(*store_, "cpu-bound", other_box, BoxHost("box-c"));
  ASSERT_TRUE(match.has_value());
  EXPECT_EQ(match->run.host.name, "box-c");
  EXPECT_TRUE(match->busy);
  EXPECT_NE(match->Describe().find("; busy: other processes wanted 0.90 CPU where the box had CPU idle (median "
                                   "of the sample before the baseline and 12 windows), above "
                                   "sweep.background.warn_cpu 0.25; over all 30 windows they got 0.90, and no quiet "
                                   "run of this host or class"),
            std::string::npos)
      << match->Describe();
}

TEST_F(QuietOverBusyTest, CheckListsTheBusyRunAndCompareMarksIt) {
  const std::vector<BusyRun> busy = BusyRuns(*store_, std::nullopt);
  ASSERT_EQ(busy.size(), 1u);
  EXPECT_EQ(busy[0].run_id, busy_.id);
  ASSERT_TRUE(busy[0].instead.has_value());
  EXPECT_EQ(*busy[0].instead, quiet_.id);
  EXPECT_EQ(busy[0].text,
            "box-a: cpu-bound run 2 (2026-12-04T17:05:00Z): other processes wanted 1.01 CPU where the box had CPU "
            "idle (median of the sample before the baseline and 12 windows), above sweep.background.warn_cpu 0.25; "
            "over all 30 windows they got 1.01; export, loader_kwargs and --seed-from take run 1 instead");
  EXPECT_TRUE(BusyRuns(*store_, std::string("other-workload")).empty());

  // compare shows the host's latest run (the busy one) with its mark.
  const std::vector<CompareRow> rows = CollectCompareRows({&*store_}, std::nullopt);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_TRUE(rows[0].busy);
  EXPECT_DOUBLE_EQ(rows[0].background_cpu, 1.01);
  const std::string table = RenderCompareTable(rows);
  EXPECT_NE(table.find("2 BUSY"), std::string::npos) << table;
  EXPECT_NE(table.find("box-a (run 2): other processes wanted 1.01 CPU where the box had CPU idle"),
            std::string::npos)
      << table;
  EXPECT_EQ(nlohmann::json::parse(RenderCompareJson(rows))["workloads"][0]["machines"][0]["busy"], true);
}

}  // namespace
}  // namespace feedtune::results
