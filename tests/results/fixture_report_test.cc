// The report in its three forms on the committed fixture DB (a real v1 sweep)
// and on a v2 run: the table's marks, the JSON's values, and the HTML read
// back with a real HTML parser (tests/results/html_points.py), its chart
// points checked against the stored trials.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "results/report.h"
#include "results/store.h"
#include "results_test_util.h"

#include "results/units.h"

namespace feedtune::results {
namespace {

using nlohmann::json;
using testing::ReadFile;
using testing::RunShell;
using testing::SourceDir;
using testing::TempDir;
using testing::WriteFile;

const std::string kFixture = SourceDir() + "/tests/testdata/db/v1.db";

// The parsed page (see html_points.py for the fields).
json ParseHtml(const std::string& html, const TempDir& dir) {
  const std::string path = dir / "report.html";
  WriteFile(path, html);
  const auto result =
      RunShell("/usr/bin/python3 " + SourceDir() + "/tests/results/html_points.py " + path, dir);
  if (result.code != 0) {
    ADD_FAILURE() << "html_points.py failed: " << result.err;
    return json::object();
  }
  return json::parse(result.out);
}

bool HasPython(const TempDir& dir) { return RunShell("/usr/bin/python3 -c ''", dir).code == 0; }

// Elements of the chart whose svg has `chart_class`, with `css_class`.
std::vector<json> ChartElements(const json& page, const std::string& chart_class,
                                const std::string& css_class) {
  std::vector<json> found;
  for (const json& e : page["elements"]) {
    if (e["class"] != css_class) continue;
    for (const json& parent : e["parent_classes"]) {
      if (parent == "chart " + chart_class) found.push_back(e);
    }
  }
  return found;
}

double Num(const json& element, const std::string& key) {
  return std::stod(element["data"][key].get<std::string>());
}

class FixtureReportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_.emplace(Store::OpenReadOnly(kFixture));
    view_ = LoadRunView(*store_, std::nullopt);
  }
  std::optional<Store> store_;
  RunView view_;
};

const TrialRecord& ById(const RunView& view, int64_t id) {
  for (const TrialRecord& t : view.trials) {
    if (t.id == id) return t;
  }
  throw std::runtime_error("no trial " + std::to_string(id));
}

TEST_F(FixtureReportTest, FixtureIsTheExpectedSweep) {
  // What the other tests rely on, so a replaced fixture fails here first.
  ASSERT_EQ(view_.trials.size(), 8u);
  EXPECT_EQ(view_.run.knee_workers, 1);
  EXPECT_EQ(view_.run.baseline_trial_id, 1);
  EXPECT_EQ(view_.run.best_trial_id, 6);
  EXPECT_EQ(view_.machine->label, "fixture-v1");
}

TEST_F(FixtureReportTest, TableMarksBaselineKneeAndBestWithUnits) {
  const std::string text = RenderTable(view_);
  std::map<int64_t, std::string> row_of;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.size() > 4 && line.find(" ok") != std::string::npos) {
      row_of[std::stoll(line.substr(0, line.find_first_not_of(" 0123456789")))] = line;
    }
  }
  ASSERT_EQ(row_of.size(), 8u) << text;
  EXPECT_NE(row_of[1].find("baseline"), std::string::npos) << text;
  EXPECT_NE(row_of[3].find("knee (1 worker)"), std::string::npos) << text;
  EXPECT_NE(row_of[6].find("*best*"), std::string::npos) << text;
  for (const char* unit : {"samples/s", "95% CI (samples/s)", "MB/s", "GPU idle %", "wait p50 ms"}) {
    EXPECT_NE(text.find(unit), std::string::npos) << unit;
  }
  EXPECT_NE(text.find("speedup:  x1.64 over baseline"), std::string::npos) << text;
  EXPECT_NE(text.find("not kept: -0.6% is within noise"), std::string::npos) << "decisions shown";
}

TEST_F(FixtureReportTest, JsonCarriesTheStoredValues) {
  const json out = json::parse(RenderJson(view_));
  EXPECT_EQ(out["run_id"], 1);
  EXPECT_EQ(out["workload"], "tiny-v1");
  EXPECT_EQ(out["machine"]["label"], "fixture-v1");
  EXPECT_EQ(out["knee"]["num_workers"], 1);
  EXPECT_EQ(out["best"]["samples_per_s"].get<double>(), ById(view_, 6).samples_per_s);
  EXPECT_EQ(out["baseline"]["samples_per_s"].get<double>(), ById(view_, 1).samples_per_s);
  EXPECT_DOUBLE_EQ(out["speedup"].get<double>(),
                   ById(view_, 6).samples_per_s / ById(view_, 1).samples_per_s);
  ASSERT_EQ(out["trials"].size(), 8u);
  for (size_t i = 0; i < 8; ++i) {
    EXPECT_EQ(out["trials"][i]["samples_per_s"].get<double>(), view_.trials[i].samples_per_s);
    EXPECT_TRUE(out["trials"][i]["cv"].is_null()) << "a v1 file has no cv";
  }
  EXPECT_TRUE(out["speedup_ci"].is_null());
  EXPECT_EQ(out["run_uid"], view_.run.uid);
}

TEST_F(FixtureReportTest, HtmlChartsHoldTheTrialsPoints) {
  TempDir dir;
  if (!HasPython(dir)) GTEST_SKIP() << "/usr/bin/python3 is needed to parse the HTML";
  const std::string html = RenderHtml(view_);
  const json page = ParseHtml(html, dir);
  ASSERT_TRUE(page.contains("errors"));
  EXPECT_TRUE(page["errors"].empty()) << page["errors"].dump();
  EXPECT_TRUE(page["doctype"].get<bool>());
  EXPECT_TRUE(page["external"].empty()) << "self-contained: " << page["external"].dump();
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(page["svg_count"], 2);
  EXPECT_EQ(page["title"], "feedtune: tiny-v1 on fixture-v1 (run 1)");

  // samples/s against num_workers: the baseline (0 workers, the phase's start)
  // and the num_workers trials 3, 4, 5 at 1, 2, 4 workers, with their intervals.
  const std::vector<json> points = ChartElements(page, "throughput", "point");
  ASSERT_EQ(points.size(), 4u) << page.dump();
  const std::vector<std::pair<int, int64_t>> expected = {{0, 1}, {1, 3}, {2, 4}, {4, 5}};
  for (size_t i = 0; i < points.size(); ++i) {
    const TrialRecord& t = ById(view_, expected[i].second);
    EXPECT_EQ(points[i]["data"]["workers"], std::to_string(expected[i].first));
    EXPECT_EQ(points[i]["data"]["trial-id"], std::to_string(t.id));
    EXPECT_EQ(Num(points[i], "samples-per-s"), t.samples_per_s);  // exact round trip
    EXPECT_EQ(Num(points[i], "ci-low"), t.ci_low);
    EXPECT_EQ(Num(points[i], "ci-high"), t.ci_high);
  }
  const std::vector<json> knee = ChartElements(page, "throughput", "knee");
  ASSERT_EQ(knee.size(), 1u);
  EXPECT_EQ(knee[0]["data"]["workers"], "1");
  const std::vector<json> baseline = ChartElements(page, "throughput", "baseline");
  ASSERT_EQ(baseline.size(), 1u);
  EXPECT_EQ(Num(baseline[0], "samples-per-s"), ById(view_, 1).samples_per_s);
  const std::vector<json> best = ChartElements(page, "throughput", "best-line");
  ASSERT_EQ(best.size(), 1u);
  EXPECT_EQ(Num(best[0], "samples-per-s"), ById(view_, 6).samples_per_s);

  // GPU idle against num_workers: the same trials, their idle fractions.
  const std::vector<json> idle = ChartElements(page, "idle", "point");
  ASSERT_EQ(idle.size(), 4u);
  for (size_t i = 0; i < idle.size(); ++i) {
    EXPECT_EQ(Num(idle[i], "gpu-idle-frac"), ById(view_, expected[i].second).gpu_idle_frac);
  }
  EXPECT_EQ(ChartElements(page, "idle", "knee").size(), 1u);

  // The trial table: a header and one row per trial, best and knee marked.
  const json& rows = page["tables"]["trials"];
  ASSERT_EQ(rows.size(), 9u);
  EXPECT_EQ(rows[0][0], "id");
  std::map<std::string, std::string> row_class;
  for (const json& e : page["elements"]) {
    if (e["tag"] == "tr" && e["data"].contains("trial-id")) {
      row_class[e["data"]["trial-id"].get<std::string>()] = e["class"].get<std::string>();
    }
  }
  EXPECT_EQ(row_class.size(), 8u);
  EXPECT_EQ(row_class["6"], "best");
  EXPECT_EQ(row_class["3"], "knee");
  EXPECT_EQ(rows[6][7], Fixed(ById(view_, 6).samples_per_s, 1));

  // The machine and the effective config.
  EXPECT_FALSE(page["tables"]["kv"].empty());
  EXPECT_NE(html.find("fixture-v1"), std::string::npos);
  EXPECT_NE(html.find("<pre class=\"config\">name: tiny-v1"), std::string::npos);
}

TEST(HtmlReportTest, FailedWorkersAndEscapingOnAV2Run) {
  TempDir dir;
  if (!HasPython(dir)) GTEST_SKIP() << "/usr/bin/python3 is needed to parse the HTML";
  Store store = Store::Open(dir / "feedtune.db");
  Fingerprint machine = testing::Machine("box<a>", "lab \"A\" & <b>", 8);
  const RunRecord run = testing::WriteSweep(store, machine, "q<&>", 1.0);
  const RunView view = LoadRunView(store, run.id);
  const std::string html = RenderHtml(view);
  const json page = ParseHtml(html, dir);
  EXPECT_TRUE(page["errors"].empty()) << page["errors"].dump();
  EXPECT_EQ(page["title"], "feedtune: q<&> on lab \"A\" & <b> (run 1)");
  EXPECT_EQ(html.find("<b>"), std::string::npos) << "machine label escaped";

  const std::vector<json> points = ChartElements(page, "throughput", "point");
  std::vector<std::string> workers;
  for (const json& p : points) workers.push_back(p["data"]["workers"]);
  EXPECT_EQ(workers, (std::vector<std::string>{"0", "1", "2", "4", "8"}));
  const std::vector<json> failed = ChartElements(page, "throughput", "failed");
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_EQ(failed[0]["data"]["workers"], "16");
  EXPECT_NE(html.find("safe max workers"), std::string::npos);
  EXPECT_NE(html.find("95% CI x6.80 to x7.20"), std::string::npos);
}

TEST(HtmlReportTest, EmptyRunStillRenders) {
  RunView view;
  view.run.id = 4;
  view.run.status = results::RunStatus::kRunning;
  const std::string html = RenderHtml(view);
  EXPECT_NE(html.find("no trials recorded"), std::string::npos);
  EXPECT_NE(html.find("no num_workers trial measured"), std::string::npos);
  EXPECT_NE(html.find("</html>"), std::string::npos);
}

}  // namespace
}  // namespace feedtune::results
