// End to end: the feedtune binary as a user runs it.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/common/cli_scratch.h"
#include "tests/common/tiny_sweep.h"

namespace {

namespace fs = std::filesystem;

using Result = feedtune::testing_util::CliResult;

class Cli : public feedtune::testing_util::CliScratchTest {};

const std::string kTinyConfig = feedtune::testing_util::TinySweepYaml({});

TEST_F(Cli, HelpAndVersion) {
  Result r = Run("--help");
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.out.find("feedtune sweep configs/quickstart.yaml"), std::string::npos);
  r = Run("--version");
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.out.find("feedtune 0."), std::string::npos);
  // The build string: version, commit, compiler, CUDA (what runs.version keeps).
  EXPECT_NE(r.out.find(" (git "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(", CUDA "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("CUDA backend"), std::string::npos);
  for (const char* sub : {"sweep", "trial", "validate", "report", "machine"}) {
    r = Run(std::string(sub) + " --help");
    EXPECT_EQ(r.code, 0) << sub;
    EXPECT_NE(r.out.find("Example"), std::string::npos) << sub;
  }
}

TEST_F(Cli, BadUsageExitsTwo) {
  EXPECT_EQ(Run("").code, 2);
  EXPECT_EQ(Run("frobnicate").code, 2);
  EXPECT_EQ(Run("sweep").code, 2);
  EXPECT_EQ(Run("report --format xml").code, 2);
  EXPECT_EQ(Run("report --run abc").code, 2);
}

TEST_F(Cli, TypoInAKeyFailsWithLocation) {
  const std::string path = Write("typo.yaml", "name: t\nloader:\n  num_worker: 4\n");
  const Result r = Run("sweep " + path);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find(path + ":3:3: loader.num_worker: unknown key; did you mean 'num_workers'?"), std::string::npos)
      << r.err;
}

TEST_F(Cli, ValidatePrintsTheEffectiveConfig) {
  const Result r = Run("validate " + Write("c.yaml", kTinyConfig));
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("prefetch_factor: 2"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("gain_threshold: 0.05"), std::string::npos) << r.out;
}

TEST_F(Cli, SweepStoresTrialsAndReportShowsThem) {
  // Waits of 1.5 ms a sample (24 ms a batch of 16) against a 2 ms step: the
  // workers' gain (x3 and more) stands above the noise of a box whose CPUs
  // other work fills (make test beside a hog per CPU; at 0.3 ms a sample the
  // knee read 0 workers there).
  feedtune::testing_util::TinySweep tiny;
  tiny.io_us_per_sample = 1500;
  const std::string config = Write("c.yaml", feedtune::testing_util::TinySweepYaml(tiny));
  const std::string db = (dir_ / "r.db").string();
  Result r = Run("sweep " + config + " --db " + db + " --label box-a");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("knee:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("best:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("speedup:"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("baseline"), std::string::npos) << r.err;

  r = Run("report --db " + db + " --format json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  for (const char* key : {"run_id", "status", "workload", "backend", "machine", "baseline", "best", "knee", "speedup",
                          "trials"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_EQ(j["status"], "done");
  EXPECT_EQ(j["backend"], "host-sim");
  EXPECT_EQ(j["workload"], "tiny");
  EXPECT_GE(j["trials"].size(), 6u);
  for (const char* key : {"batch_size", "num_workers", "pin_memory", "non_blocking", "prefetch_factor",
                          "persistent_workers"}) {
    EXPECT_TRUE(j["best"]["config"].contains(key)) << key;
  }
  // A waiting-bound load (16 x 1.5 ms = 24 ms per batch) against a 2 ms step:
  // workers must beat the baseline clearly, even on a machine busy with other work.
  EXPECT_GT(j["speedup"].get<double>(), 1.3);
  EXPECT_GE(j["knee"]["num_workers"].get<int>(), 1);
  EXPECT_EQ(j["trials"][0]["phase"], "baseline");
  EXPECT_EQ(j["trials"][0]["config"]["num_workers"], 0);
  for (const auto& t : j["trials"]) {
    EXPECT_TRUE(t.contains("ci"));
    EXPECT_TRUE(t.contains("wait_p99_us"));
  }

  r = Run("report --db " + db);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("baseline"), std::string::npos) << r.out;
}

TEST_F(Cli, ReportWithoutResultsFileIsAClearError) {
  const Result r = Run("report --db " + (dir_ / "none.db").string());
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("no results file"), std::string::npos) << r.err;
}

TEST_F(Cli, TrialPrintsJson) {
  const std::string config = Write("c.yaml", kTinyConfig);
  const Result r = Run("trial " + config + " --set loader.num_workers=2 --set loader.pin_memory=true --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["config"]["num_workers"], 2);
  EXPECT_EQ(j["config"]["pin_memory"], true);
  EXPECT_EQ(j["status"], "ok");
  EXPECT_GT(j["samples_per_s"].get<double>(), 0);
  // Allocating the pinned pool is reported, apart from the windows.
  EXPECT_GT(j["pinned_alloc_s"].get<double>(), 0);

  const Result unpinned = Run("trial " + config + " --set loader.num_workers=2 --json");
  ASSERT_EQ(unpinned.code, 0) << unpinned.err;
  EXPECT_EQ(nlohmann::json::parse(unpinned.out)["pinned_alloc_s"], 0);
}

// sweep --set is trial's --set: the same key paths, the same errors, and the
// run stores the config as swept.
TEST_F(Cli, SweepTakesSetAsTrialDoes) {
  const std::string config = Write("c.yaml", kTinyConfig);
  const std::string db = (dir_ / "r.db").string();
  for (const char* bad : {"--set loader.num_worker=2", "--set sweep.max_workers=many", "--set loader.num_workers"}) {
    const Result sweep = Run("sweep " + config + " --db " + db + " " + bad);
    const Result trial = Run("trial " + config + " " + bad);
    EXPECT_EQ(sweep.code, 2) << bad << "\n" << sweep.err;
    EXPECT_EQ(trial.code, 2) << bad << "\n" << trial.err;
    EXPECT_FALSE(sweep.err.empty()) << bad;
    EXPECT_EQ(sweep.err, trial.err) << bad;
  }
  EXPECT_NE(Run("sweep " + config + " --set loader.num_worker=2").err.find(
                "loader.num_worker: unknown key; did you mean 'num_workers'?"),
            std::string::npos);
  EXPECT_FALSE(fs::exists(db)) << "a rejected --set must leave no results file";

  const Result r = Run("sweep " + config + " --db " + db + " -q --set sweep.max_workers=1 --set sweep.repeats=2");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(Run("report --db " + db + " --format json").out);
  EXPECT_NE(j["config_yaml"].get<std::string>().find("max_workers: 1\n"), std::string::npos) << j["config_yaml"];
  EXPECT_NE(j["config_yaml"].get<std::string>().find("repeats: 2\n"), std::string::npos) << j["config_yaml"];
  for (const auto& t : j["trials"]) EXPECT_LE(t["config"]["num_workers"].get<int>(), 1) << t;

  const Result resumed = Run("sweep --resume 1 --db " + db + " --set sweep.repeats=3");
  EXPECT_EQ(resumed.code, 2);
  EXPECT_NE(resumed.err.find("--resume goes on with the config stored with the run"), std::string::npos)
      << resumed.err;
}

TEST_F(Cli, MachineJson) {
  const Result r = Run("machine --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_GE(j["usable_cpus"].get<int>(), 1);
  EXPECT_EQ(j["hash"].get<std::string>().size(), 16u);
}

}  // namespace
