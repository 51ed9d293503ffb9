// End to end: a command workload that reports samples/s and nothing else.
// Every other figure of its trials is not measured, and says so everywhere it
// appears: NULL in the store (trials and repeats), null in `report --format
// json` and `trial --json`, a dash or "not measured" in the progress lines, the
// summary, the report table and the HTML; no decision quotes such a figure,
// and the safe limit has no number.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "tests/common/run_feedtune.h"

namespace {

namespace fs = std::filesystem;

using Result = feedtune::testing_util::CliResult;

// samples/s grows with the workers (so the sweep keeps some), nothing else is said.
constexpr const char* kRateOnlyConfig = R"(name: rate-only
workload:
  kind: command
  argv: [/bin/sh, -c, 'echo "{\"samples_per_s\": $((1000 + FEEDTUNE_NUM_WORKERS * 300))}"']
  timeout_s: 30
loader:
  batch_size: 16
sweep:
  max_workers: 2
  prefetch_factors: [2]
  repeats: 2
)";

// The figures a command did not report, as the report's JSON names them.
const std::vector<std::string> kTrialFigures = {"mb_per_s",         "gpu_idle_frac",         "copy_s",
                                                "wait_p50_us",      "wait_p99_us",           "worker_startup_s",
                                                "time_to_first_batch_s", "epoch_boundary_ms", "worker_busy_frac",
                                                "pinned_alloc_s",   "worker_rss_bytes"};

// One integer from a query on the results file.
int64_t QueryInt(const std::string& db, const std::string& sql) {
  sqlite3* handle = nullptr;
  EXPECT_EQ(sqlite3_open_v2(db.c_str(), &handle, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
  sqlite3_stmt* statement = nullptr;
  EXPECT_EQ(sqlite3_prepare_v2(handle, sql.c_str(), -1, &statement, nullptr), SQLITE_OK) << sqlite3_errmsg(handle);
  int64_t value = -1;
  if (statement != nullptr && sqlite3_step(statement) == SQLITE_ROW) value = sqlite3_column_int64(statement, 0);
  sqlite3_finalize(statement);
  sqlite3_close(handle);
  return value;
}

std::vector<std::string> Words(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

class Unmeasured : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("feedtune-unmeasured-" + std::to_string(getpid()) + "-" +
                                        testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    config_ = (dir_ / "c.yaml").string();
    std::ofstream(config_) << kRateOnlyConfig;
  }
  void TearDown() override { fs::remove_all(dir_); }

  Result Run(const std::string& args) { return feedtune::testing_util::RunFeedtune(args, dir_); }

  fs::path dir_;
  std::string config_;
};

TEST_F(Unmeasured, ACommandThatReportsOnlySamplesPerSecond) {
  const std::string db = (dir_ / "r.db").string();
  Result r = Run("sweep " + config_ + " --db " + db);
  ASSERT_EQ(r.code, 0) << r.err << r.out;

  // The store: every figure the command did not report is NULL, in every
  // trial and every repeat; samples/s is there.
  const int64_t ok = QueryInt(db, "SELECT count(*) FROM trials WHERE status = 'ok'");
  ASSERT_GE(ok, 4);
  EXPECT_EQ(QueryInt(db, "SELECT count(*) FROM trials WHERE status = 'ok' AND samples_per_s IS NOT NULL"), ok);
  for (const std::string& column : kTrialFigures) {
    EXPECT_EQ(QueryInt(db, "SELECT count(*) FROM trials WHERE " + column + " IS NOT NULL"), 0) << column;
  }
  EXPECT_GE(QueryInt(db, "SELECT count(*) FROM repeats"), ok);  // the final check's trials have one
  for (const char* column : {"mb_per_s", "gpu_idle_frac", "wait_p50_us", "wait_p99_us"}) {
    EXPECT_EQ(QueryInt(db, std::string("SELECT count(*) FROM repeats WHERE ") + column + " IS NOT NULL"), 0)
        << column;
  }
  EXPECT_EQ(QueryInt(db, "SELECT count(*) FROM runs WHERE safe_max_workers IS NOT NULL"), 0);

  // The progress lines (stderr) and the summary (stdout).
  for (const std::string& line : {r.err, r.out}) {
    EXPECT_EQ(line.find("GPU idle   0.0%"), std::string::npos) << line;
    EXPECT_EQ(line.find("0.0 ms"), std::string::npos) << line;  // no epoch boundary of 0.0 ms
    EXPECT_EQ(line.find("nan"), std::string::npos) << line;
    EXPECT_EQ(line.find("num_workers <="), std::string::npos) << line;  // no safe number
  }
  std::istringstream progress(r.err);
  int trial_lines = 0;
  for (std::string line; std::getline(progress, line);) {
    if (line.rfind("[", 0) != 0 || line.find("samples/s") == std::string::npos) continue;
    ++trial_lines;
    EXPECT_NE(line.find("GPU idle not measured"), std::string::npos) << line;
  }
  EXPECT_EQ(trial_lines, ok);
  EXPECT_NE(r.out.find("GPU idle not measured"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("safe:      unknown: the command reported no worker memory"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("persistent_workers"), std::string::npos) << r.out;

  // report --format json: null, never 0.
  r = Run("report --db " + db + " --format json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_TRUE(j["safe_max_workers"].is_null());
  EXPECT_EQ(j["safe_max_workers_basis"], "unknown: the command reported no worker memory (worker_peak_rss_bytes)");
  EXPECT_TRUE(j["best"]["gpu_idle_frac"].is_null());
  EXPECT_TRUE(j["baseline"]["gpu_idle_frac"].is_null());
  for (const auto& t : j["trials"]) {
    if (t["status"] != "ok") continue;
    EXPECT_TRUE(t["samples_per_s"].is_number());
    for (const std::string& key : kTrialFigures) EXPECT_TRUE(t[key].is_null()) << key << " of trial " << t["id"];
    EXPECT_EQ(t["decision"].get<std::string>().find("0.0 ms"), std::string::npos) << t["decision"];
  }

  // The table: MB/s, GPU idle and the waits are dashes; the best and the
  // baseline say "not measured"; the safe limit has its basis and no number.
  r = Run("report --db " + db);
  ASSERT_EQ(r.code, 0) << r.err;
  std::istringstream table(r.out);
  int rows = 0;
  bool in_rows = false;
  for (std::string line; std::getline(table, line);) {
    if (line.rfind("----", 0) == 0) {
      in_rows = true;
      continue;
    }
    if (!in_rows) continue;
    if (line.empty()) break;
    const std::vector<std::string> w = Words(line);
    ASSERT_GE(w.size(), 13u) << line;
    // id phase workers pin nb prefetch persist samples/s CI MB/s idle p50 p99 ...
    for (size_t column = 9; column <= 12; ++column) EXPECT_EQ(w[column], "-") << line;
    ++rows;
  }
  EXPECT_EQ(rows, static_cast<int>(j["trials"].size()));
  EXPECT_NE(r.out.find("GPU idle not measured"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("safe max: unknown: the command reported no worker memory"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("nan"), std::string::npos) << r.out;

  // The HTML: no NaN drawn, GPU idle said to be not measured.
  const std::string html = (dir_ / "r.html").string();
  r = Run("report --db " + db + " --format html --out " + html);
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string page = feedtune::testing_util::ReadFile(html);
  EXPECT_EQ(page.find("nan"), std::string::npos);
  EXPECT_NE(page.find("GPU idle not measured"), std::string::npos);
  EXPECT_NE(page.find("unknown: the command reported no worker memory"), std::string::npos);

  // trial --json and the trial's text.
  r = Run("trial " + config_ + " --set loader.num_workers=1 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto trial = nlohmann::json::parse(r.out);
  EXPECT_EQ(trial["samples_per_s"], 1300);
  for (const std::string& key : kTrialFigures) EXPECT_TRUE(trial[key].is_null()) << key;
  r = Run("trial " + config_);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("GPU idle not measured"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("nan"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("first batch not measured, workers start in not measured, pinned pool not measured"),
            std::string::npos)
      << r.out;
}

}  // namespace
