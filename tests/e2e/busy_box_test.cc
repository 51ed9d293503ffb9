// A sweep on a busy box, end to end (docs/measurement.md, "A busy box"): beside
// a hog this test starts, the sweep names it before its baseline, its
// decisions name what other processes took, and the run is marked busy; then
// export, check and compare hold a quiet run of the same host over it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/common/cli_scratch.h"
#include "tests/common/hog.h"
#include "tests/common/tiny_sweep.h"

namespace {

namespace fs = std::filesystem;
using feedtune::testing_util::CliResult;
using feedtune::testing_util::Hog;
using feedtune::testing_util::TinySweepYaml;

// A sweep of seconds; `background` is its sweep.background section.
std::string TinyConfig(const std::string& background) {
  return TinySweepYaml({.name = "busy-box",
                        .max_workers = 2,
                        .prefetch_factors = "[2]",
                        .background = background,
                        .sweep_extra = "  diagnose: false\n"});
}

class BusyBox : public feedtune::testing_util::CliScratchTest {};

TEST_F(BusyBox, AHogIsNamedTheRunMarkedAndTheQuietRunExported) {
  const std::string db = (dir_ / "r.db").string();
  // The quiet run: thresholds no box of 2 CPUs reaches, so whatever else this
  // box runs meanwhile, it is not marked (what makes a run quiet is tested on
  // recorded figures in tests/results/background_test.cc).
  const std::string quiet = Write("quiet.yaml", TinyConfig("{warn_cpu: 8, disturbed_cpu: 8}"));
  CliResult r = Run("sweep " + quiet + " --db " + db + " --label box-a");
  ASSERT_EQ(r.code, 0) << r.err << r.out;

  // Beside a hog of one CPU, with the default thresholds (0.25 CPU).
  const std::string busy = Write("busy.yaml", TinyConfig("{sample_seconds: 1.0}"));
  {
    Hog hog("feedtune_hog");
    ASSERT_GT(hog.pid(), 0);
    r = Run("sweep " + busy + " --db " + db + " --label box-a");
    ASSERT_EQ(r.code, 0) << r.err << r.out;
    EXPECT_NE(r.err.find("feedtune: warning: other processes took "), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("before the baseline (above sweep.background.warn_cpu 0.25"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("feedtune_hog (pid " + std::to_string(hog.pid()) + ")"), std::string::npos) << r.err;
  }
  EXPECT_NE(r.out.find("busy:      other processes wanted "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("; other processes took "), std::string::npos) << "a decision names the background\n" << r.out;

  const CliResult report = Run("report --db " + db + " --run 2 --format json");
  ASSERT_EQ(report.code, 0) << report.err;
  const nlohmann::json j = nlohmann::json::parse(report.out);
  EXPECT_EQ(j["busy"], true);
  EXPECT_GT(j["background"]["median_cpu"].get<double>(), 0.25);
  EXPECT_GT(j["background"]["demand_cpu"].get<double>(), 0.25);
  // demand_windows may be 0: on a box that other tests load too, no window
  // need leave CPU idle, and the sample before the baseline carries the demand.
  EXPECT_GT(j["background"]["start_cpu"].get<double>(), 0.25);
  EXPECT_GE(j["background"]["windows"].get<int>(), 4);
  EXPECT_TRUE(j["trials"][0]["background_cpu"].is_number());
  const CliResult first = Run("report --db " + db + " --run 1 --format json");
  EXPECT_EQ(nlohmann::json::parse(first.out)["busy"], false);

  // export (the latest run by default) takes the quiet run and says so.
  const CliResult exported = Run("export --db " + db + " --format json");
  ASSERT_EQ(exported.code, 0) << exported.err;
  const nlohmann::json e = nlohmann::json::parse(exported.out);
  EXPECT_EQ(e["source"]["run"], 1) << exported.out;
  const std::string why = e["source"]["why"];
  EXPECT_NE(why.find("quiet, taken over run 2 of box-a"), std::string::npos) << why;
  EXPECT_NE(why.find("--run 2 exports the busy run anyway"), std::string::npos) << why;
  const CliResult env = Run("export --db " + db + " --run 2 --format env");
  ASSERT_EQ(env.code, 0) << env.err;
  EXPECT_NE(env.out.find("# (busy: other processes wanted "), std::string::npos) << env.out;

  // check lists it (not a finding); compare marks it.
  const CliResult check = Run("check --db " + db);
  EXPECT_EQ(check.code, 0) << check.out << check.err;
  EXPECT_NE(check.out.find("  busy: box-a: busy-box run 2 ("), std::string::npos) << check.out;
  EXPECT_NE(check.out.find("take run 1 instead"), std::string::npos) << check.out;
  const CliResult compare = Run("compare --db " + db);
  ASSERT_EQ(compare.code, 0) << compare.err;
  EXPECT_NE(compare.out.find("2 BUSY"), std::string::npos) << compare.out;
}

// Issue 56's busy box, through the sweep: a CPU-bound sweep beside a hog of
// one CPU. The trials fill the box (1 to 2 CPUs of their own on 2), and where
// they do the scheduler leaves the hog a share, not what it wants: read
// there, the hog's demand came out 0.48 CPU. The mark rests on the windows
// where the box had CPU idle, and on the sample before the baseline, where the
// hog gets its whole CPU. Other tests may run beside this one (make test runs
// them side by side): they only add to what the neighbours want, so the
// bound is from below.
TEST_F(BusyBox, BesideAOneCpuHogACpuBoundSweepReadsItsDemandNotItsShare) {
  const std::string db = (dir_ / "r.db").string();
  const std::string config = Write("cpu.yaml", TinySweepYaml({.name = "busy-cpu",
                                                              .samples = 512,
                                                              .io_us_per_sample = 0,
                                                              .cpu_us_per_sample = 400,
                                                              .max_workers = 4,
                                                              .prefetch_factors = "[2]",
                                                              .repeats = 3,
                                                              .background = "{sample_seconds: 1.0}",
                                                              .sweep_extra = "  diagnose: false\n"}));
  CliResult r;
  {
    Hog hog("feedtune_hog2");  // the other test's hog may run beside it (make test runs tests side by side)
    ASSERT_GT(hog.pid(), 0);
    r = Run("sweep " + config + " --db " + db);
  }
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  const CliResult report = Run("report --db " + db + " --format json");
  ASSERT_EQ(report.code, 0) << report.err;
  const nlohmann::json j = nlohmann::json::parse(report.out);
  const nlohmann::json& bg = j["background"];
  EXPECT_EQ(j["busy"], true) << bg.dump();
  ASSERT_TRUE(bg["demand_cpu"].is_number()) << bg.dump();
  EXPECT_GE(bg["demand_cpu"].get<double>(), 0.9) << "the hog wants a whole CPU\n" << bg.dump();
}

}  // namespace
