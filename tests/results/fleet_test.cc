// Fleets: hosts apart from their hardware class, the class's spread, outliers.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "results/compare.h"
#include "results/export.h"
#include "results/fingerprint.h"
#include "results/fleet.h"
#include "results/report.h"
#include "results/merge.h"
#include "results/store.h"
#include "results_test_util.h"

namespace feedtune::results {
namespace {

using nlohmann::json;
using testing::Machine;
using testing::TempDir;
using testing::WriteHostRun;
using testing::WriteSweep;

HostIdentity Host(const std::string& name, const std::string& machine_id = "") {
  return HostIdentity{.name = name, .hostname = name + ".cluster", .machine_id = machine_id};
}

std::vector<CompareRow> Collect(const Store& store) { return CollectCompareRows({&store}, std::nullopt); }

const CompareRow& RowOf(const std::vector<CompareRow>& rows, const std::string& host) {
  for (const CompareRow& row : rows) {
    if (row.host.name == host) return row;
  }
  ADD_FAILURE() << "no row for host " << host;
  return rows.front();
}

TEST(HostIdentityTest, ReadsMachineIdAndKeepsItOutOfTheHash) {
  Fingerprint f = Machine("node-1", "", 8);
  const std::string hash = f.Hash();
  f.machine_id = "3d1219c7c4c5404aaa1f6d2a48adfda4";
  f.label = "box-a";
  EXPECT_EQ(f.Hash(), hash) << "the host does not change the hardware class";
  const HostIdentity host = HostOf(f);
  EXPECT_EQ(host.name, "box-a");
  EXPECT_EQ(host.hostname, "node-1");
  EXPECT_EQ(host.Key(), "box-a/3d1219c7c4c5404aaa1f6d2a48adfda4");
  f.label.clear();
  EXPECT_EQ(HostOf(f).name, "node-1") << "no label: the hostname";
  EXPECT_EQ((HostIdentity{.name = "n", .hostname = "", .machine_id = ""}).Key(), "n") << "no machine-id: the name alone";
}

TEST(HostIdentityTest, StoreKeepsTheRunsHostAndFallsBackToTheMachineRow) {
  TempDir dir;
  Store store = Store::Open(dir / "hosts.db");
  const RunRecord labelled = WriteSweep(store, Machine("node-1", "lab", 4), "w", 1.0, "2024-05-01T10:00:00Z",
                                        Host("box-a", "abc"));
  EXPECT_EQ(labelled.host, Host("box-a", "abc"));
  const RunRecord unnamed = WriteSweep(store, Machine("node-1", "lab", 4), "w", 1.0, "2024-05-02T10:00:00Z");
  EXPECT_EQ(unnamed.host.name, "lab");
  EXPECT_EQ(unnamed.host.hostname, "node-1");

  // merge carries the host with the run.
  Store fleet = Store::Open(dir / "fleet.db");
  MergeInto(fleet, store);
  EXPECT_EQ(fleet.LoadRuns().at(0).host, Host("box-a", "abc"));
}

// The case: two sweeps on one machine under two labels are two hosts
// of one class, not one row.
TEST(FleetCompareTest, TwoLabelsOnOneMachineAreTwoRowsOfOneClass) {
  TempDir dir;
  Store store = Store::Open(dir / "one-box.db");
  const Fingerprint box = Machine("the-box", "", 4);
  WriteSweep(store, box, "quickstart", 1.0, "2024-05-01T10:00:00Z", Host("box-a", "m1"));
  WriteSweep(store, box, "quickstart", 1.2, "2024-05-01T11:00:00Z", Host("box-b", "m1"));
  const std::vector<CompareRow> rows = Collect(store);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].host.name, "box-b") << "fastest first";
  EXPECT_EQ(rows[1].host.name, "box-a");
  EXPECT_EQ(rows[0].machine_hash, rows[1].machine_hash);
  EXPECT_EQ(rows[1].machine.label, "box-a") << "the row names its host, not the class row's last label";
  const std::vector<ClassSpread> spreads = ClassSpreads(rows);
  ASSERT_EQ(spreads.size(), 1u);
  EXPECT_EQ(spreads[0].hosts, 2);
  EXPECT_FALSE(rows[1].outlier) << "two hosts: neither is the odd one";
  // report and export name the run's host, not the class row's last label.
  EXPECT_EQ(LoadRunView(store, 1).machine->label, "box-a");
  EXPECT_EQ(LoadRunView(store, 2).machine->label, "box-b");
}

// A generated fleet: 6 identical nodes and 2 of another class.
class FleetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_.emplace(Store::Open(dir_ / "fleet.db"));
    const auto run = [&](const Fingerprint& machine, const std::string& host, double best, double low, double high) {
      WriteHostRun(*store_, machine, Host(host, "id-" + host), "resnet", best, low, high, "2024-06-01T10:00:00Z");
    };
    run(gpu_node_, "node-01", 1000, 990, 1010);
    run(gpu_node_, "node-02", 1010, 1000, 1020);
    run(gpu_node_, "node-03", 990, 980, 1000);
    run(gpu_node_, "node-04", 1005, 995, 1015);
    run(gpu_node_, "node-05", 850, 840, 860);   // throttled: far below, tight interval
    run(gpu_node_, "node-06", 900, 700, 1100);  // as far below, but its interval reaches the median
    run(cpu_node_, "small-1", 400, 395, 405);
    run(cpu_node_, "small-2", 380, 375, 385);
  }

  TempDir dir_;
  std::optional<Store> store_;
  const Fingerprint gpu_node_ = Machine("gpu", "", 32);
  const Fingerprint cpu_node_ = Machine("cpu", "", 8);
};

TEST_F(FleetTest, IdenticalHostsGroupIntoOneClassWithItsSpread) {
  const std::vector<CompareRow> rows = Collect(*store_);
  ASSERT_EQ(rows.size(), 8u);
  const std::vector<ClassSpread> spreads = ClassSpreads(rows);
  ASSERT_EQ(spreads.size(), 2u);
  const ClassSpread& big = spreads[0];  // the faster class first
  EXPECT_EQ(big.machine_hash, gpu_node_.Hash());
  EXPECT_EQ(big.hosts, 6);
  EXPECT_EQ(big.measured, 6);
  EXPECT_DOUBLE_EQ(big.median, (990.0 + 1000.0) / 2);  // 850 900 990 | 1000 1005 1010
  EXPECT_DOUBLE_EQ(big.min, 850);
  EXPECT_DOUBLE_EQ(big.max, 1010);
  EXPECT_DOUBLE_EQ(big.median_ci_low, (980.0 + 990.0) / 2);  // 700 840 980 | 990 995 1000
  EXPECT_EQ(big.outliers, 1);
  EXPECT_EQ(big.rows.front()->host.name, "node-02") << "fastest host first";
  const ClassSpread& small = spreads[1];
  EXPECT_EQ(small.machine_hash, cpu_node_.Hash());
  EXPECT_EQ(small.hosts, 2);
  EXPECT_DOUBLE_EQ(small.median, 390);
}

TEST_F(FleetTest, OutlierIsFlaggedAndAHostWithinTheNoiseIsNot) {
  const std::vector<CompareRow> rows = Collect(*store_);
  const CompareRow& throttled = RowOf(rows, "node-05");
  EXPECT_TRUE(throttled.outlier);
  EXPECT_NEAR(throttled.below_class_median, (995.0 - 850.0) / 995.0, 1e-12);
  const CompareRow& noisy = RowOf(rows, "node-06");
  EXPECT_FALSE(noisy.outlier) << "9.5% below, but its interval overlaps the median host's";
  EXPECT_FALSE(RowOf(rows, "node-03").outlier) << "0.5% below: under the threshold";
  EXPECT_FALSE(RowOf(rows, "small-2").outlier) << "a class of two has no odd one";

  const std::string table = RenderCompareTable(rows);
  EXPECT_NE(table.find("workload resnet (hash hash-of-resnet): 8 hosts in 2 classes"), std::string::npos) << table;
  EXPECT_NE(table.find("best samples/s median 995.0 (min 850.0, max 1010.0) over 6 hosts; 1 outlier"),
            std::string::npos)
      << table;
  EXPECT_NE(table.find("-14.6% OUTLIER"), std::string::npos) << table;
  EXPECT_EQ(table.find("-9.5% OUTLIER"), std::string::npos) << table;

  const json out = json::parse(RenderCompareJson(rows));
  const json& classes = out["workloads"][0]["classes"];
  ASSERT_EQ(classes.size(), 2u);
  EXPECT_EQ(classes[0]["hash"], gpu_node_.Hash());
  EXPECT_EQ(classes[0]["median"], 995.0);
  EXPECT_EQ(classes[0]["outliers"], json::array({"node-05"}));
  for (const json& machine : out["workloads"][0]["machines"]) {
    EXPECT_EQ(machine["outlier"], machine["host"]["name"] == "node-05") << machine.dump();
  }

  // The page lists the outliers before the classes, and the outlier's row is marked.
  const std::string html = RenderCompareHtml(rows);
  const size_t outliers = html.find("<h3>Outliers: 1 host below");
  ASSERT_NE(outliers, std::string::npos);
  EXPECT_LT(outliers, html.find("<g class=\"class\""));
  EXPECT_NE(html.find("<tr class=\"outlier\" data-host=\"node-05\""), std::string::npos);
  EXPECT_NE(html.find("data-host=\"node-05\" class=\"outlier\""), std::string::npos);
  EXPECT_EQ(html.find("data-host=\"node-06\" class=\"outlier\""), std::string::npos);
  // Read back by a real HTML parser: tags balance, nothing external.
  const std::string page = dir_ / "fleet.html";
  testing::WriteFile(page, html);
  const auto parsed = testing::RunShell("/usr/bin/python3 " + testing::SourceDir() + "/tests/results/html_points.py " + page, dir_);
  ASSERT_EQ(parsed.code, 0) << parsed.err;
  const json points = json::parse(parsed.out);
  EXPECT_EQ(points["errors"], json::array()) << parsed.out;
  EXPECT_EQ(points["external"], json::array());
}

TEST_F(FleetTest, AClassOutlierDoesNotStandForItsClass) {
  // The newest run of the class is a throttled host's: a new node of the class
  // takes the newest typical host's instead, and the throttled host its own.
  WriteHostRun(*store_, gpu_node_, Host("node-07", "id-node-07"), "resnet", 800, 790, 810, "2024-06-09T10:00:00Z");
  auto match = NearestStoredRun(*store_, "resnet", gpu_node_, Host("node-99", "id-node-99"));
  ASSERT_TRUE(match.has_value());
  EXPECT_EQ(match->match, RunMatch::kClass);
  EXPECT_EQ(match->run.host.name, "node-06");
  match = NearestStoredRun(*store_, "resnet", gpu_node_, Host("node-07", "id-node-07"));
  ASSERT_TRUE(match.has_value());
  EXPECT_EQ(match->match, RunMatch::kHost);
  EXPECT_EQ(match->run.host.name, "node-07");
}

// A fixture fleet for `export --machine this`: three classes of one workload.
class NearestRunTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_.emplace(Store::Open(dir_ / "fixture.db"));
    h100_ = WithGpu(Machine("h100-node", "", 32), "NVIDIA H100", 8);
    a100_small_ = WithGpu(Machine("a100-small", "", 16), "NVIDIA A100", 4);
    a100_big_ = WithGpu(Machine("a100-big", "", 64), "NVIDIA A100", 8);
    WriteHostRun(*store_, h100_, Host("h100-1", "id-h1"), "resnet", 9000, 8900, 9100, "2024-06-01T10:00:00Z", 8);
    WriteHostRun(*store_, h100_, Host("h100-2", "id-h2"), "resnet", 9100, 9000, 9200, "2024-06-02T10:00:00Z", 8);
    WriteHostRun(*store_, a100_small_, Host("a100-s", "id-as"), "resnet", 4000, 3950, 4050, "2024-06-03T10:00:00Z", 4);
    WriteHostRun(*store_, a100_big_, Host("a100-b", "id-ab"), "resnet", 7000, 6900, 7100, "2024-06-04T10:00:00Z", 6);
  }

  static Fingerprint WithGpu(Fingerprint f, const std::string& gpu, int count) {
    f.gpu_name = gpu;
    f.gpu_count = count;
    f.gpu_mem_bytes = int64_t{80} << 30;
    return f;
  }

  TempDir dir_;
  std::optional<Store> store_;
  Fingerprint h100_, a100_small_, a100_big_;
};

TEST_F(NearestRunTest, PicksThisHostThenItsClassThenTheNearestNeighbour) {
  // This host has its own run: that one, though a newer run of its class exists.
  auto match = NearestStoredRun(*store_, "resnet", h100_, Host("h100-1", "id-h1"));
  ASSERT_TRUE(match.has_value());
  EXPECT_EQ(match->match, RunMatch::kHost);
  EXPECT_EQ(match->run.host.name, "h100-1");
  EXPECT_NE(match->Describe().find("this host's latest run (run 1 of h100-1"), std::string::npos) << match->Describe();

  // A new H100 node: its class's latest run.
  match = NearestStoredRun(*store_, "resnet", h100_, Host("h100-9", "id-h9"));
  ASSERT_TRUE(match.has_value());
  EXPECT_EQ(match->match, RunMatch::kClass);
  EXPECT_EQ(match->run.host.name, "h100-2");
  EXPECT_EQ(match->machine_hash, h100_.Hash());

  // A new class: an A100 box with 8 GPUs and 48 CPUs is nearer the big A100 class
  // than the small one, and any A100 is nearer than the H100s.
  const Fingerprint new_a100 = WithGpu(Machine("a100-new", "", 48), "NVIDIA A100", 8);
  match = NearestStoredRun(*store_, "resnet", new_a100, Host("a100-new", "id-an"));
  ASSERT_TRUE(match.has_value());
  EXPECT_EQ(match->match, RunMatch::kNeighbour);
  EXPECT_EQ(match->run.host.name, "a100-b");
  EXPECT_NEAR(match->distance, std::log2(64.0 / 48.0), 1e-9);
  EXPECT_NE(match->Describe().find("the nearest neighbour's run, class " + a100_big_.Hash() + ": 8x NVIDIA A100"),
            std::string::npos)
      << match->Describe();

  // Same hostname, no machine-id on either side: still this host.
  match = NearestStoredRun(*store_, "resnet", h100_, HostIdentity{.name = "x", .hostname = "h100-1.cluster", .machine_id = ""});
  ASSERT_TRUE(match.has_value());
  EXPECT_EQ(match->match, RunMatch::kHost);

  EXPECT_FALSE(NearestStoredRun(*store_, "bert", h100_, Host("h100-1", "id-h1")).has_value());
  EXPECT_EQ(DescribeStoredWorkloads(*store_), "resnet (4 runs on 4 hosts)");
}

TEST_F(NearestRunTest, ExportSaysWhereTheSettingCameFrom) {
  const auto match = NearestStoredRun(*store_, "resnet", h100_, Host("h100-9", "id-h9"));
  ASSERT_TRUE(match.has_value());
  const RunView view = LoadRunView(*store_, match->run.id);
  ExportSource source{.match = RunMatchName(match->match), .for_host = "h100-9", .why = match->Describe(),
                      .db_path = "fleet.db", .run_host = match->run.host.name, .run_class = match->machine_hash};
  const std::string env = RenderExport(view, ExportFormat::kEnv, &source);
  EXPECT_EQ(env.rfind("# feedtune: for host h100-9 (class match): the latest run of its class " + h100_.Hash(), 0), 0u)
      << env;
  EXPECT_NE(env.find("FEEDTUNE_NUM_WORKERS=8\n"), std::string::npos) << env;
  const json j = json::parse(RenderExport(view, ExportFormat::kJson, &source));
  EXPECT_EQ(j["source"]["match"], "class");
  EXPECT_EQ(j["source"]["run_host"], "h100-2");
  EXPECT_EQ(j["num_workers"], 8);
  EXPECT_EQ(json::parse(RenderExport(view, ExportFormat::kJson)).count("source"), 0u) << "unchanged without a source";
}

// `check`: a rerun within the noise passes; one whose interval falls wholly
// below the previous run's is a regression.
TEST(CheckFleetTest, NoisyButEqualRerunPassesAndADropBeyondBothIntervalsFails) {
  TempDir dir;
  Store store = Store::Open(dir / "check.db");
  const Fingerprint node = Machine("node", "", 16);
  WriteHostRun(store, node, Host("steady"), "resnet", 1000, 980, 1020, "2024-06-01T10:00:00Z");
  WriteHostRun(store, node, Host("steady"), "resnet", 960, 900, 1010, "2024-06-08T10:00:00Z");  // noisy, overlaps
  WriteHostRun(store, node, Host("failing"), "resnet", 1000, 990, 1010, "2024-06-01T10:00:00Z");
  WriteHostRun(store, node, Host("failing"), "resnet", 940, 930, 985, "2024-06-08T10:00:00Z");  // ci_high < 990
  std::vector<FleetFinding> findings = CheckFleet(store, std::nullopt);
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_EQ(findings[0].kind, "regression");
  EXPECT_EQ(findings[0].host.name, "failing");
  EXPECT_DOUBLE_EQ(findings[0].drop, 0.06);
  EXPECT_EQ(findings[0].text,
            "failing: resnet fell 6.0% (run 3 1000.0 samples/s [990.0, 1010.0] -> run 4 940.0 [930.0, 985.0]), "
            "beyond both intervals");
  EXPECT_TRUE(CheckFleet(store, std::string("bert")).empty());

  // An outlier of its class is a finding too (4 hosts: median 950, lower bounds 915).
  WriteHostRun(store, node, Host("third"), "resnet", 1005, 1000, 1010, "2024-06-08T11:00:00Z");
  WriteHostRun(store, node, Host("slow"), "resnet", 800, 790, 810, "2024-06-08T12:00:00Z");
  findings = CheckFleet(store, std::nullopt);
  ASSERT_EQ(findings.size(), 2u);
  EXPECT_EQ(findings[1].kind, "outlier");
  EXPECT_EQ(findings[1].host.name, "slow");
}

}  // namespace
}  // namespace feedtune::results
