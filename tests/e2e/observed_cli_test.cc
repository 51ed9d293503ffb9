// End to end: a training job's observed run comes back into
// a results file through `feedtune observe`, and `feedtune check` holds it
// against a real sweep of the same host and config; `report` shows it beside.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/common/run_feedtune.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using Result = feedtune::testing_util::CliResult;

// A sweep short enough for a test: one repeat, short windows, 0..1 workers.
constexpr const char* kSweepConfig = R"(name: observed-e2e
workload: {kind: synthetic, samples: 256, sample_bytes: 2048, cpu_us_per_sample: 100, jitter: 0}
loader: {batch_size: 16}
device: {backend: host-sim, step_us: 1000}
sweep: {max_workers: 1, prefetch_factors: [2], repeats: 1, warmup_batches: 1, measure_seconds: 0.05, diagnose: false}
)";

class ObservedCli : public testing::Test {
 protected:
  // One real sweep for the whole suite; each test works on a copy of its file.
  static void SetUpTestSuite() {
    suite_dir_ = fs::temp_directory_path() / ("feedtune-observed-" + std::to_string(getpid()));
    fs::remove_all(suite_dir_);
    fs::create_directories(suite_dir_);
    std::ofstream(suite_dir_ / "sweep.yaml") << kSweepConfig;
    sweep_db_ = suite_dir_ / "sweep.db";
    sweep_ = feedtune::testing_util::RunFeedtune(
        "sweep " + (suite_dir_ / "sweep.yaml").string() + " --db " + sweep_db_.string() + " -q", suite_dir_);
  }
  static void TearDownTestSuite() { fs::remove_all(suite_dir_); }

  void SetUp() override {
    ASSERT_EQ(sweep_.code, 0) << sweep_.err;
    dir_ = suite_dir_ / testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::create_directories(dir_);
    db_ = (dir_ / "results.db").string();
    fs::copy_file(sweep_db_, db_);
    const Result report = Run("report --db " + db_ + " --format json");
    ASSERT_EQ(report.code, 0) << report.err;
    best_ = json::parse(report.out)["best"];
    ASSERT_TRUE(best_.is_object()) << report.out;
  }

  Result Run(const std::string& args) { return feedtune::testing_util::RunFeedtune(args, dir_); }

  // An observed record with the swept best's knobs, at `fraction` of its samples/s.
  json Record(double fraction, double input_bound) const {
    const json& config = best_["config"];
    return json{{"config", "observed-e2e"},
                {"samples_per_s", best_["samples_per_s"].get<double>() * fraction},
                {"input_bound_frac", input_bound},
                {"steps", 500},
                {"knobs",
                 {{"batch_size", config["batch_size"]},
                  {"num_workers", config["num_workers"]},
                  {"pin_memory", config["pin_memory"]},
                  {"prefetch_factor", config["prefetch_factor"]},
                  {"persistent_workers", config["persistent_workers"]}}},
                {"uid", "job-1"}};
  }

  // `feedtune observe` with the record on stdin, as feedtune.watch's writer could.
  Result Observe(const std::string& lines) {
    std::ofstream(dir_ / "records.jsonl") << lines;
    return Run("observe --db " + db_ + " < " + (dir_ / "records.jsonl").string());
  }

  int ObservedRows() {
    const Result report = Run("report --db " + db_ + " --format json");
    EXPECT_EQ(report.code, 0) << report.err;
    return static_cast<int>(json::parse(report.out)["observed"].size());
  }

  static inline fs::path suite_dir_;
  static inline fs::path sweep_db_;
  static inline Result sweep_;
  fs::path dir_;
  std::string db_;
  json best_;
};

TEST_F(ObservedCli, ObserveRejectsABadRecordNamingTheFieldAndWritesNothing) {
  struct Case {
    std::string patch;  // applied to a good record
    std::string message;
  };
  const Case cases[] = {
      {R"({"input_bound_frac": 1.4})", "field 'input_bound_frac': 1.4 is out of range"},
      {R"({"samples_per_s": "fast"})", "field 'samples_per_s': \"fast\" is not a number"},
      {R"({"steps": 0})", "field 'steps': 0 is out of range"},
      {R"({"config": null})", "field 'config': missing"},
      {R"({"knobs": {"num_workers": 2}})", "field 'knobs.batch_size': missing"},
      {R"({"knobs": {"batch_size": 16, "num_workers": -1, "pin_memory": false}})",
       "field 'knobs.num_workers': -1 is out of range"},
      {R"({"sample_per_s": 3})", "field 'sample_per_s': unknown field"},
      {R"({"ended_at": "yesterday"})", "field 'ended_at': 'yesterday' is not an ISO 8601 UTC time"},
  };
  for (const Case& c : cases) {
    json record = Record(1.0, 0.02);
    const json patch = json::parse(c.patch);  // items() refers to it: it must outlive the loop
    for (const auto& [key, value] : patch.items()) {
      if (value.is_null()) {
        record.erase(key);
      } else {
        record[key] = value;  // replaced whole: a knobs object is the new one, not merged
      }
    }
    const Result r = Run("observe --db " + db_ + " --record '" + record.dump() + "'");
    EXPECT_EQ(r.code, 2) << c.patch;
    EXPECT_NE(r.err.find("--record: " + c.message), std::string::npos) << c.patch << "\n" << r.err;
    EXPECT_NE(r.err.find("nothing was written"), std::string::npos) << r.err;
  }
  // A good line then a bad one: neither is written (one transaction, checked first).
  const Result mixed = Observe(Record(1.0, 0.02).dump() + "\n{\"config\": \"x\"}\n");
  EXPECT_EQ(mixed.code, 2);
  EXPECT_NE(mixed.err.find("stdin line 2: field 'samples_per_s': missing"), std::string::npos) << mixed.err;
  EXPECT_EQ(Run("observe --db " + db_ + " --record 'not json'").code, 2);
  EXPECT_EQ(ObservedRows(), 0);

  const Result help = Run("observe --help");
  EXPECT_EQ(help.code, 0);
  EXPECT_NE(help.out.find("input_bound_frac"), std::string::npos) << help.out;
}

TEST_F(ObservedCli, CheckFlagsAPlantedSlowdown) {
  const Result observed = Observe(Record(0.70, 0.02).dump() + "\n");
  ASSERT_EQ(observed.code, 0) << observed.err;
  const Result check = Run("check --db " + db_);
  EXPECT_EQ(check.code, 1) << check.out << check.err;
  EXPECT_NE(check.out.find("the job ran 30% below the swept figure"), std::string::npos) << check.out;
  EXPECT_EQ(check.out.find("input-bound at"), std::string::npos) << check.out;
  EXPECT_EQ(check.out.find("knobs differ"), std::string::npos) << check.out;

  const Result as_json = Run("check --db " + db_ + " --format json");
  EXPECT_EQ(as_json.code, 1);
  const json out = json::parse(as_json.out);
  ASSERT_EQ(out["observed"].size(), 1u) << as_json.out;
  EXPECT_EQ(out["observed_findings"], 1);
  EXPECT_EQ(out["observed"][0]["findings"][0]["kind"], "slower");
  EXPECT_NEAR(out["observed"][0]["drop"].get<double>(), 0.30, 1e-6);
  EXPECT_EQ(out["observed"][0]["swept"]["run"], 1);
  // A looser threshold lets the same job pass.
  EXPECT_EQ(Run("check --db " + db_ + " --slower-than 35").code, 0);
  EXPECT_EQ(Run("check --db " + db_ + " --slower-than 150").code, 2);
}

TEST_F(ObservedCli, CheckFlagsAnInputBoundJob) {
  ASSERT_EQ(Observe(Record(1.0, 0.31).dump()).code, 0);
  const Result check = Run("check --db " + db_);
  EXPECT_EQ(check.code, 1) << check.out << check.err;
  EXPECT_NE(check.out.find("the job is 31% input-bound at the swept setting (highly input-bound"), std::string::npos)
      << check.out;
  EXPECT_EQ(check.out.find("below the swept figure"), std::string::npos) << check.out;
}

TEST_F(ObservedCli, CheckNamesTheKnobsThatDiffer) {
  json record = Record(1.0, 0.02);
  const int swept_workers = best_["config"]["num_workers"];
  record["knobs"]["num_workers"] = swept_workers + 3;
  record["knobs"]["batch_size"] = 128;
  ASSERT_EQ(Observe(record.dump()).code, 0);
  const Result check = Run("check --db " + db_);
  EXPECT_EQ(check.code, 1) << check.out << check.err;
  EXPECT_NE(check.out.find("the observed knobs differ from the swept best: batch_size 128 (swept 16), num_workers " +
                           std::to_string(swept_workers + 3) + " (swept " + std::to_string(swept_workers) + ")"),
            std::string::npos)
      << check.out;
}

TEST_F(ObservedCli, CheckSaysHoldsWhenTheJobRunsAsSwept) {
  ASSERT_EQ(Observe(Record(0.95, 0.02).dump()).code, 0);
  const Result check = Run("check --db " + db_);
  EXPECT_EQ(check.code, 0) << check.out << check.err;
  EXPECT_NE(check.out.find("  holds: host "), std::string::npos) << check.out;
  EXPECT_NE(check.out.find("config observed-e2e: "), std::string::npos) << check.out;
  EXPECT_NE(check.out.find("(5% below), 2% input-bound (not input-bound), knobs as swept"), std::string::npos)
      << check.out;

  // A later write of the same job replaces it; a slower one then fails the check.
  json later = Record(0.5, 0.02);
  later["ended_at"] = "2099-01-01T00:00:00Z";
  later["started_at"] = "2099-01-01T00:00:00Z";
  ASSERT_EQ(Observe(later.dump()).code, 0);
  EXPECT_EQ(ObservedRows(), 1);
  EXPECT_EQ(Run("check --db " + db_).code, 1);
}

TEST_F(ObservedCli, ReportShowsObservedRunsBesideTheSweep) {
  ASSERT_EQ(Observe(Record(0.9, 0.08).dump()).code, 0);
  const Result table = Run("report --db " + db_);
  ASSERT_EQ(table.code, 0) << table.err;
  EXPECT_NE(table.out.find("observed in training jobs on "), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("moderately input-bound"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("-10%"), std::string::npos) << table.out;

  const Result as_json = Run("report --db " + db_ + " --format json");
  ASSERT_EQ(as_json.code, 0);
  const json observed = json::parse(as_json.out)["observed"];
  ASSERT_EQ(observed.size(), 1u);
  EXPECT_EQ(observed[0]["config"], "observed-e2e");
  EXPECT_EQ(observed[0]["band"], "moderately input-bound");
  EXPECT_EQ(observed[0]["steps"], 500);
  EXPECT_EQ(observed[0]["uid"], "job-1");

  const Result html = Run("report --db " + db_ + " --format html");
  ASSERT_EQ(html.code, 0);
  EXPECT_NE(html.out.find("<h2>Observed in training jobs</h2>"), std::string::npos);
}

}  // namespace
