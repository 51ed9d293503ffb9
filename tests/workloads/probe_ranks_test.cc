// Two ranks of the PyTorch probe (workloads/python/feedtune_probe.py) over
// gloo, started by feedtune as sweep.ranks: 2 starts them
// (tuner/measure/command_ranks.h): both join the process group and report, their
// DistributedSampler shares are disjoint, equal and cover the dataset, and the
// trial's rate is all ranks' samples over the longest window. A rank that
// exits early fails the trial naming it, and nothing waits for gloo's timeout.
//
// Needs /usr/bin/python3 with torch (scripts/setup-deps installs python3-torch).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "tuner/measure/command_measurer.h"

#ifndef FEEDTUNE_SOURCE_DIR
#define FEEDTUNE_SOURCE_DIR "."
#endif

namespace feedtune::tuner {
namespace {

namespace fs = std::filesystem;

const std::string kRanksProbe = FEEDTUNE_SOURCE_DIR "/workloads/python/feedtune_probe.py";
constexpr int kSamples = 256;

class ProbeRanks : public testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(std::system("/usr/bin/python3 -c 'import torch.distributed' 2>/dev/null"), 0)
        << "/usr/bin/python3 cannot import torch.distributed: install python3-torch (scripts/setup-deps does)";
    char tmpl[] = "/tmp/feedtune_probe_ranks.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }

  // The probe on the CPU, 256 small samples with a little waiting each, 2 ranks.
  SweepConfig Config(std::vector<std::string> prefix) const {
    SweepConfig config;
    config.workload.kind = workloads::WorkloadKind::kCommand;
    std::vector<std::string>& argv = config.workload.command.argv;
    argv = std::move(prefix);
    for (const std::string& a :
         {std::string("/usr/bin/python3"), kRanksProbe, std::string("--device"), std::string("cpu"),
          std::string("--samples"), std::to_string(kSamples), std::string("--sample-bytes"), std::string("1024"),
          std::string("--cpu-us-per-sample"), std::string("0"), std::string("--io-us-per-sample"),
          std::string("200"), std::string("--batch-size"), std::string("{batch_size}"),
          std::string("--num-workers"), std::string("{num_workers}"), std::string("--seconds"),
          std::string("{measure_seconds}"), std::string("--warmup-batches"), std::string("{warmup_batches}"),
          std::string("--step-us"), std::string("{step_us}"), std::string("--report-share"),
          (dir_ / "rank-{rank}-of-{world_size}.json").string()}) {
      argv.push_back(a);
    }
    config.workload.command.timeout_s = 120;  // python and torch start slowly on a loaded box
    config.loader.knobs.batch_size = 16;
    config.device.step_us = 2000;
    config.sweep.repeats = 1;
    config.sweep.warmup_batches = 2;
    config.sweep.measure_seconds = 1.0;
    config.sweep.ranks = 2;
    return config;
  }

  nlohmann::json Share(int rank) const {
    std::ifstream in(dir_ / ("rank-" + std::to_string(rank) + "-of-2.json"));
    std::string line;
    std::getline(in, line);
    return nlohmann::json::parse(line, nullptr, false);
  }

  fs::path dir_;
};

TEST_F(ProbeRanks, TwoRanksOverGlooReportDisjointEqualSharesAndTheNodeAddsThemUp) {
  const SweepConfig config = Config({});
  CommandMeasurer measurer(config, nullptr);
  loader::Knobs knobs = config.loader.knobs;
  knobs.num_workers = 1;
  const results::TrialRecord t = measurer.Measure(knobs);
  ASSERT_EQ(t.status, results::TrialStatus::kOk) << t.error.value_or("");
  ASSERT_TRUE(t.node.has_value());
  ASSERT_EQ(t.node->rank_rows.size(), 2u);

  const nlohmann::json a = Share(0), b = Share(1);
  ASSERT_TRUE(a.is_object() && b.is_object()) << "both ranks write their line";
  EXPECT_EQ(a["rank"], 0);
  EXPECT_EQ(b["rank"], 1);
  EXPECT_EQ(a["world_size"], 2);
  const auto share_a = a["share"].get<std::vector<int>>(), share_b = b["share"].get<std::vector<int>>();
  EXPECT_EQ(share_a.size(), static_cast<size_t>(kSamples / 2));
  EXPECT_EQ(share_b.size(), share_a.size());
  std::set<int> all(share_a.begin(), share_a.end());
  for (int i : share_b) EXPECT_TRUE(all.insert(i).second) << "index " << i << " is in both shares";
  EXPECT_EQ(all.size(), static_cast<size_t>(kSamples));
  EXPECT_EQ(*all.begin(), 0);
  EXPECT_EQ(*all.rbegin(), kSamples - 1);
  EXPECT_FALSE(std::is_sorted(share_a.begin(), share_a.end())) << "shuffled, as the sampler does";

  // Each rank's row is its own line; the node is their samples over the longer window.
  EXPECT_DOUBLE_EQ(t.node->rank_rows[0].samples_per_s, a["samples_per_s"].get<double>());
  EXPECT_DOUBLE_EQ(t.node->rank_rows[1].samples_per_s, b["samples_per_s"].get<double>());
  const double samples = a["samples"].get<double>() + b["samples"].get<double>();
  const double longest = std::max(a["seconds"].get<double>(), b["seconds"].get<double>());
  EXPECT_NEAR(t.samples_per_s, samples / longest, 1e-9 * t.samples_per_s);
  EXPECT_GT(a["samples"].get<double>(), 0);
  EXPECT_GT(b["samples"].get<double>(), 0);
  EXPECT_NE(t.node->rank_rows[0].pid, t.node->rank_rows[1].pid);
}

// {rank} makes rank 1 exit with 3 before it joins the group: rank 0, waiting
// for it in init_process_group, is stopped at once, not after a timeout.
TEST_F(ProbeRanks, ARankThatExitsFailsTheTrialNamingItsRankAndStatus) {
  const SweepConfig config =
      Config({"/bin/sh", "-c", "if [ {rank} = 1 ]; then echo 'rank 1 refuses' >&2; exit 3; fi; exec \"$@\"", "sh"});
  CommandMeasurer measurer(config, nullptr);
  const auto start = std::chrono::steady_clock::now();
  const results::TrialRecord t = measurer.Measure(config.loader.knobs);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(t.status, results::TrialStatus::kFailed);
  const std::string error = t.error.value_or("");
  EXPECT_NE(error.find("rank 1 (pid "), std::string::npos) << error;
  EXPECT_NE(error.find("the command exited with code 3; the other ranks were stopped"), std::string::npos) << error;
  EXPECT_NE(error.find("rank 1 refuses"), std::string::npos) << error;
  EXPECT_LT(seconds, 60) << "rank 0 was left waiting for rank 1";
}

}  // namespace
}  // namespace feedtune::tuner
