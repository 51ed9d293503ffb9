// Command workloads with ranks (tuner/measure/command_ranks.h), with shell
// commands for ranks: the environment and placeholders each rank gets, the
// node's aggregate, a rank that fails or hangs, the binding, and serve's
// refusal. The probe over gloo is in probe_ranks_test.cc.
#include "tuner/measure/command_ranks.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tuner/measure/command_measurer.h"
#include "tuner/measure/measurer_factory.h"
#include "tuner/measure/cpu_affinity.h"
#include "tuner/measure/node_measurer.h"

namespace feedtune::tuner {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

class CommandRanks : public testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/feedtune_command_ranks.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }

  SweepConfig Config(const std::string& script, int ranks, double timeout_s = 30) const {
    SweepConfig config;
    config.source = "ranks.yaml";
    config.workload.kind = workloads::WorkloadKind::kCommand;
    config.workload.command.argv = {"/bin/sh", "-c", script, "sh", "{rank}", "{world_size}", "{num_workers}"};
    config.workload.command.timeout_s = timeout_s;
    config.sweep.repeats = 1;
    config.sweep.ranks = ranks;
    return config;
  }

  std::string Read(const std::string& name) const {
    std::ifstream in(dir_ / name);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }

  fs::path dir_;
};

// Rank r reports (100 + 200 r) samples/s over a window of (2 - r) s: rank 0
// 200 samples in 2 s, rank 1 300 samples in 1 s. The node's rate is all
// samples over the longest window: 500 / 2 = 250, not the rates' sum (400).
TEST_F(CommandRanks, EachRankGetsItsEnvironmentAndTheNodeAddsTheirSamplesOverTheLongestWindow) {
  const std::string script =
      "env | grep -E '^(RANK|LOCAL_RANK|WORLD_SIZE|LOCAL_WORLD_SIZE|MASTER_ADDR|MASTER_PORT|FEEDTUNE_RANK|"
      "FEEDTUNE_WORLD_SIZE)=' | sort > " + (dir_ / "env-$1").string() + "; echo \"$1 $2 $3\" > " +
      (dir_ / "args-$1").string() +
      "; echo '{\"samples_per_s\": '$((100 + RANK * 200))', \"seconds\": '$((2 - RANK))', \"rank\": '$RANK', "
      "\"gpu_idle_frac\": 0.'$((2 + RANK))', \"wait_p50_us\": '$((100 + RANK))', \"wait_p99_us\": 900}'";
  CommandMeasurer measurer(Config(script, 2), nullptr);
  loader::Knobs knobs;
  knobs.num_workers = 3;
  const results::TrialRecord t = measurer.Measure(knobs);
  ASSERT_EQ(t.status, results::TrialStatus::kOk) << t.error.value_or("");
  EXPECT_DOUBLE_EQ(t.samples_per_s, 250);
  ASSERT_TRUE(t.node.has_value());
  EXPECT_EQ(t.node->ranks, 2);
  ASSERT_EQ(t.node->rank_rows.size(), 2u);
  EXPECT_EQ(t.node->rank_rows[0].samples_per_s, 100);
  EXPECT_EQ(t.node->rank_rows[1].samples_per_s, 300);
  EXPECT_EQ(t.node->slowest_rank_samples_per_s, 100);
  EXPECT_DOUBLE_EQ(t.gpu_idle_frac, 0.25);  // the ranks' mean
  EXPECT_NE(t.node->rank_rows[0].pid, t.node->rank_rows[1].pid);
  EXPECT_FALSE(t.node->rank_rows[0].cpu_mask.empty());

  const std::string env0 = Read("env-0"), env1 = Read("env-1");
  const std::string port_line = env0.substr(env0.find("MASTER_PORT="), env0.find('\n', env0.find("MASTER_PORT=")) -
                                                                          env0.find("MASTER_PORT=") + 1);
  EXPECT_GT(std::atoi(port_line.c_str() + 12), 0);
  EXPECT_EQ(env0, "FEEDTUNE_RANK=0\nFEEDTUNE_WORLD_SIZE=2\nLOCAL_RANK=0\nLOCAL_WORLD_SIZE=2\nMASTER_ADDR=127.0.0.1\n" +
                      port_line + "RANK=0\nWORLD_SIZE=2\n");
  EXPECT_EQ(env1, "FEEDTUNE_RANK=1\nFEEDTUNE_WORLD_SIZE=2\nLOCAL_RANK=1\nLOCAL_WORLD_SIZE=2\nMASTER_ADDR=127.0.0.1\n" +
                      port_line + "RANK=1\nWORLD_SIZE=2\n");
  EXPECT_EQ(Read("args-0"), "0 2 3\n");
  EXPECT_EQ(Read("args-1"), "1 2 3\n");
}

// Each rank's probe samples its own workers: the node's growth is the rank
// that grows fastest (the flag and the budget must hold for every rank), its
// peak the largest, its samples all of theirs.
TEST_F(CommandRanks, TheNodeGrowsAsItsFastestGrowingRank) {
  const std::string script =
      "echo '{\"samples_per_s\": 10, \"rank\": '$RANK', \"worker_rss_start_bytes\": '$((1000 + RANK * 1000))', "
      "\"worker_rss_peak_bytes\": '$((5000 - RANK * 1000))', \"worker_rss_growth_bytes_per_epoch\": "
      "'$((100 + RANK * 900))', \"worker_rss_samples\": 10, \"worker_rss_epochs\": '$((2 + RANK))'}'";
  CommandMeasurer measurer(Config(script, 2), nullptr);
  loader::Knobs knobs;
  knobs.num_workers = 2;
  const results::TrialRecord t = measurer.Measure(knobs);
  ASSERT_EQ(t.status, results::TrialStatus::kOk) << t.error.value_or("");
  EXPECT_EQ(t.worker_rss_growth_bytes_per_epoch, 1000);  // rank 1's
  EXPECT_EQ(t.worker_rss_epochs, 3);                     // and its span
  EXPECT_EQ(t.worker_rss_peak_bytes, 5000);              // rank 0's
  EXPECT_EQ(t.worker_rss_start_bytes, 1500);             // the ranks' mean
  EXPECT_EQ(t.worker_rss_samples, 20);
  EXPECT_FALSE(t.worker_rss_in_consumer);
}

TEST_F(CommandRanks, AFailingRankFailsTheTrialNamingItAndTheOthersAreStopped) {
  const auto start = Clock::now();
  CommandMeasurer measurer(
      Config("if [ \"$1\" = 1 ]; then echo 'rank one gives up' >&2; exit 3; fi; sleep 20; "
             "echo '{\"samples_per_s\": 1}'",
             2),
      nullptr);
  const results::TrialRecord t = measurer.Measure({});
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  EXPECT_EQ(t.status, results::TrialStatus::kFailed);
  const std::string error = t.error.value_or("");
  EXPECT_NE(error.find("repeat 1 of 1: rank 1 (pid "), std::string::npos) << error;
  EXPECT_NE(error.find("the command exited with code 3; the other ranks were stopped"), std::string::npos) << error;
  EXPECT_NE(error.find("stderr of rank 1 (last lines):\nrank one gives up"), std::string::npos) << error;
  EXPECT_LT(seconds, 10) << "rank 0 (sleep 20) was not stopped";
}

TEST_F(CommandRanks, AHangingRankTimesOutNamedAndTheTrialEnds) {
  CommandMeasurer measurer(
      Config("if [ \"$1\" = 1 ]; then sleep 30; fi; echo '{\"samples_per_s\": 1}'", 2, /*timeout_s=*/1), nullptr);
  const auto start = Clock::now();
  const results::TrialRecord t = measurer.Measure({});
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - start).count(), 10);
  EXPECT_EQ(t.status, results::TrialStatus::kFailed);
  const std::string error = t.error.value_or("");
  EXPECT_NE(error.find("rank 1 (pid "), std::string::npos) << error;
  EXPECT_NE(error.find("timed out after 1 s (workload.timeout_s) and was killed (ranks still running: 1;"),
            std::string::npos)
      << error;
}

TEST_F(CommandRanks, ALineOfAnotherRankIsAnError) {
  CommandMeasurer measurer(Config("echo '{\"samples_per_s\": 1, \"rank\": 0}'", 2), nullptr);
  const results::TrialRecord t = measurer.Measure({});
  EXPECT_EQ(t.status, results::TrialStatus::kFailed);
  EXPECT_NE(t.error.value_or("").find("rank 1 (pid "), std::string::npos) << t.error.value_or("");
  EXPECT_NE(t.error.value_or("").find("its result line says rank 0, not 1"), std::string::npos) << t.error.value_or("");
}

// split: each rank starts on its own share (read by the rank itself, first thing).
TEST_F(CommandRanks, SplitBindsEachRankBeforeItRuns) {
  const std::vector<int> usable = node::AffinityCpus();
  CommandMeasurer measurer(
      Config("grep Cpus_allowed_list /proc/self/status > " + (dir_ / "cpus-$1").string() +
                 "; echo '{\"samples_per_s\": 1}'",
             2),
      nullptr);
  loader::Knobs knobs;
  knobs.cpu_binding = loader::CpuBinding::kSplit;
  const results::TrialRecord t = measurer.Measure(knobs);
  ASSERT_EQ(t.status, results::TrialStatus::kOk) << t.error.value_or("");
  for (int r = 0; r < 2; ++r) {
    const std::vector<int> share = node::SplitShare(usable, r, 2);
    const std::string text = Read("cpus-" + std::to_string(r));
    const std::vector<int> got = node::ParseCpuList(text.substr(text.find(':') + 1));
    EXPECT_EQ(got, share) << "rank " << r << ": " << text;
  }
  EXPECT_EQ(node::AffinityCpus(), usable) << "the tuner keeps its own mask";
}

TEST_F(CommandRanks, ServeWithRanksIsRefusedWithTheFix) {
  SweepConfig config = Config("true", 2);
  config.workload.command.protocol = workloads::CommandProtocol::kServe;
  try {
    OpenWorkload(config);
    FAIL() << "serve with 2 ranks was accepted";
  } catch (const WorkloadError& e) {
    EXPECT_EQ(std::string(e.what()),
              "ranks.yaml: sweep.ranks: 2 ranks of a serving command (workload.protocol: serve) are not supported: a "
              "serving process is one rank; use workload.protocol: run with the knobs as {placeholders} in argv "
              "(feedtune starts the ranks per repeat; configs/torch-probe-2ranks.yaml), or sweep.ranks: 1");
  }
}

// At config time (validate, before anything runs): where the mistake is, and the fix.
TEST_F(CommandRanks, ServeWithRanksIsAConfigError) {
  try {
    ParseConfig("workload:\n  kind: command\n  protocol: serve\n  argv: [/bin/true]\nsweep:\n  ranks: 2\n",
                "serve.yaml");
    FAIL() << "serve with 2 ranks was accepted";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()),
              "serve.yaml:6:10: sweep.ranks: expected sweep.ranks 1 (or auto) when workload.protocol is serve (a "
              "serving process is one rank), got 2; use workload.protocol: run with the knobs as {placeholders} in "
              "argv (feedtune starts the ranks per repeat; configs/torch-probe-2ranks.yaml), or sweep.ranks: 1");
  }
}

}  // namespace
}  // namespace feedtune::tuner
