// End to end: node trials (sweep.ranks > 1) through the feedtune binary.
// `trial --json` carries the node's figures and one row per rank; a sweep
// started under `taskset -c 0` warns about the narrowed CPU mask before any
// trial and stores the warning with the run.
#include <gtest/gtest.h>
#include <sched.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "results/store.h"
#include "tests/common/run_feedtune.h"

namespace {

namespace fs = std::filesystem;

constexpr const char* kNodeConfig = R"(name: node-e2e
workload: {kind: synthetic, samples: 1024, sample_bytes: 4096, cpu_us_per_sample: 0,
           io_us_per_sample: 500, jitter: 0}
loader: {batch_size: 8}
device: {backend: host-sim, step_us: 500}
sweep: {ranks: 2, max_workers: 1, prefetch_factors: [2], repeats: 1, warmup_batches: 1,
        measure_seconds: 0.2}
)";

class NodeCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("feedtune-node-e2e-" + std::to_string(getpid()));
    fs::create_directories(dir_);
    std::ofstream(dir_ / "node.yaml") << kNodeConfig;
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(NodeCli, TrialJsonCarriesTheNodeAndEveryRank) {
  const auto r = feedtune::testing_util::RunFeedtune(
      "trial " + (dir_ / "node.yaml").string() + " --set loader.num_workers=1 --json", dir_);
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_TRUE(j.contains("node")) << r.out;
  const auto& node = j["node"];
  EXPECT_EQ(node["ranks"], 2);
  ASSERT_EQ(node["per_rank"].size(), 2u);
  std::set<int64_t> pids;
  double sum = 0;
  for (const auto& rank : node["per_rank"]) {
    EXPECT_EQ(rank["status"], "ok");
    pids.insert(rank["pid"].get<int64_t>());
    sum += rank["samples_per_s"].get<double>();
    // The rank, its fork server and its one worker.
    EXPECT_GE(rank["processes"].get<int>(), 3) << rank.dump();
    EXPECT_FALSE(rank["cpu_mask"].get<std::string>().empty());
  }
  EXPECT_EQ(pids.size(), 2u);
  // Lockstep ranks: the aggregate is close to the sum of the ranks' rates.
  EXPECT_NEAR(j["samples_per_s"].get<double>() / sum, 1.0, 0.15) << r.out;
  EXPECT_GE(node["processes"].get<int>(), 7);  // the tuner and two trees of three
}

TEST_F(NodeCli, ANarrowedCpuMaskIsWarnedBeforeAnyTrialAndStoredWithTheRun) {
  cpu_set_t set;
  CPU_ZERO(&set);
  ASSERT_EQ(sched_getaffinity(0, sizeof set, &set), 0);
  if (CPU_COUNT(&set) < 2 || !CPU_ISSET(0, &set)) GTEST_SKIP() << "needs CPU 0 and one more in this test's mask";
  if (std::system("command -v taskset >/dev/null 2>&1") != 0) GTEST_SKIP() << "taskset is not installed";
  const fs::path db = dir_ / "r.db";
  const std::string cmd = "taskset -c 0 " + std::string(FEEDTUNE_BINARY) + " sweep " +
                          (dir_ / "node.yaml").string() + " --db " + db.string() + " >" + (dir_ / "out").string() +
                          " 2>" + (dir_ / "err").string();
  const int status = std::system(cmd.c_str());
  const std::string err = feedtune::testing_util::ReadFile(dir_ / "err");
  ASSERT_EQ(WEXITSTATUS(status), 0) << err;
  const auto warning = err.find("feedtune: warning: CPU mask: feedtune may use 1 of the");
  ASSERT_NE(warning, std::string::npos) << err;
  // Before the first trial's progress line.
  const auto first_trial = err.find("baseline");
  EXPECT_LT(warning, first_trial) << err;
  EXPECT_NE(err.find("ranks: 2 ranks on 1 usable CPUs"), std::string::npos) << err;

  const auto store = feedtune::results::Store::Open(db.string());
  const auto runs = store.LoadRuns();
  ASSERT_EQ(runs.size(), 1u);
  const std::vector<std::string>& preflight = runs[0].facts.preflight;
  ASSERT_FALSE(preflight.empty());
  EXPECT_EQ(preflight[0].rfind("CPU mask: feedtune may use 1 of the", 0), 0u) << preflight[0];
  // sweep.diagnose is on by default, but the stage trials measure one loader
  // alone: a node sweep says so and stores no verdict rather than a wrong one.
  EXPECT_NE(err.find("diagnose: not run: the stage trials measure one loader alone, not a rank among 2"),
            std::string::npos)
      << err;
  EXPECT_FALSE(store.LoadVerdict(runs[0].id).has_value());
}

// A tiny /dev/shm (a 1 MiB tmpfs in a private mount namespace): the sweep
// warns before any trial with the fix (--shm-size), and the trials whose
// slots, counted over both ranks, would not fit are skipped with the reason
// in their record. Needs root for unshare -m (CI and this box have it); when
// unshare cannot make the namespace the test fails with its reason.
TEST_F(NodeCli, ATinyDevShmIsWarnedAndTrialsThatWouldNotFitAreSkipped) {
  // 2 ranks x batches of 4 x 64 KiB: 256 KiB a slot. Baseline (1 slot per
  // rank) fits 1 MiB; 1 worker (prefetch 2 + 1 = 3 slots per rank) does not.
  std::ofstream(dir_ / "shm.yaml") << R"(name: node-shm
workload: {kind: synthetic, samples: 256, sample_bytes: 65536, cpu_us_per_sample: 0,
           io_us_per_sample: 200, jitter: 0}
loader: {batch_size: 4}
device: {backend: host-sim, step_us: 200}
sweep: {ranks: 2, max_workers: 2, prefetch_factors: [2], repeats: 1, warmup_batches: 1,
        measure_seconds: 0.2, diagnose: false}
)";
  const fs::path db = dir_ / "shm.db";
  const std::string inner = "mount -t tmpfs -o size=1m tmpfs /dev/shm && exec " + std::string(FEEDTUNE_BINARY) +
                            " sweep " + (dir_ / "shm.yaml").string() + " --db " + db.string();
  const std::string cmd = "unshare -m sh -c '" + inner + "' >" + (dir_ / "out").string() + " 2>" +
                          (dir_ / "err").string();
  const int status = std::system(cmd.c_str());
  const std::string err = feedtune::testing_util::ReadFile(dir_ / "err");
  ASSERT_EQ(WEXITSTATUS(status), 0) << "unshare -m with a 1 MiB tmpfs on /dev/shm (needs root): " << err;
  const auto warning = err.find("feedtune: warning: /dev/shm: 1 MiB, but 2 rank(s) x 3 slots x ");
  ASSERT_NE(warning, std::string::npos) << err;
  EXPECT_NE(err.find("--shm-size=", warning), std::string::npos) << err;
  EXPECT_LT(warning, err.find("baseline")) << err;

  const auto store = feedtune::results::Store::Open(db.string());
  const auto runs = store.LoadRuns();
  ASSERT_EQ(runs.size(), 1u);
  const auto trials = store.LoadTrials(runs[0].id);
  bool baseline_ok = false, skipped = false;
  for (const auto& t : trials) {
    if (t.phase == "baseline") baseline_ok = t.status == feedtune::results::TrialStatus::kOk;
    if (t.status == feedtune::results::TrialStatus::kSkipped) {
      skipped = true;
      EXPECT_GE(t.knobs.num_workers, 1) << t.decision;
      EXPECT_NE(t.error.value_or("").find("/dev/shm"), std::string::npos) << t.error.value_or("");
      EXPECT_EQ(t.decision.rfind("skipped: ", 0), 0u) << t.decision;
    }
  }
  EXPECT_TRUE(baseline_ok);
  EXPECT_TRUE(skipped) << err;
}

}  // namespace
