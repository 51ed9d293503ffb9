// Node trials end to end in this process: real rank processes (host-sim,
// native synthetic datasets), each with its own loader, over the rank
// barrier. Bounds are ratios with room: this box is small and shared.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <set>
#include <sstream>
#include <regex>
#include <string>
#include <thread>

#include "tuner/config.h"
#include "tuner/node/node_measurer.h"

namespace feedtune::tuner::node {
namespace {

// A wait-bound workload: one sample of 20 ms storage wait per batch, no CPU,
// a 1 ms step; one loader without workers reads about 47 samples/s. One long
// wait per step keeps the figures steady on a loaded box, where every wake-up
// comes late; three windows, the median.
SweepConfig WaitBound(int ranks) {
  SweepConfig c = ParseConfig(R"(
name: node-test
workload: {kind: synthetic, samples: 2048, sample_bytes: 1024, cpu_us_per_sample: 0,
           io_us_per_sample: 20000, jitter: 0}
loader: {batch_size: 1, num_workers: 0}
device: {backend: host-sim, step_us: 1000}
sweep: {repeats: 3, warmup_batches: 2, measure_seconds: 0.5}
)",
                              "node-test");
  c.sweep.ranks = ranks;
  return c;
}

TEST(NodeTrial, WaitBoundRanksAddUp) {
  RankSet one(WaitBound(1), 1);
  RankSet two(WaitBound(2), 2);
  const loader::Knobs knobs = WaitBound(1).loader.knobs;
  const auto single = one.Measure(knobs, {});
  const auto node = two.Measure(knobs, {});
  ASSERT_EQ(single.status, "ok") << single.error.value_or("");
  ASSERT_EQ(node.status, "ok") << node.error.value_or("");
  ASSERT_TRUE(node.node.has_value());
  ASSERT_EQ(node.node->rank_rows.size(), 2u);
  const double ratio = node.samples_per_s / single.samples_per_s;
  EXPECT_GT(ratio, 1.5) << node.samples_per_s << " vs " << single.samples_per_s;
  EXPECT_LT(ratio, 2.5) << node.samples_per_s << " vs " << single.samples_per_s;
  // Each rank reads half of each epoch: its batches per epoch are halved.
  EXPECT_EQ(node.batches_per_epoch.value_or(0), 2048 / 2);
  for (const auto& row : node.node->rank_rows) {
    EXPECT_EQ(row.status, "ok");
    EXPECT_GT(row.pid, 0);
    EXPECT_FALSE(row.cpu_mask.empty());
    EXPECT_GE(row.processes, 1);  // the rank (its fork server too, in process mode)
    EXPECT_GT(row.shm_bytes, 0);  // its batch slot
  }
  EXPECT_GE(node.node->processes, 3);
  EXPECT_LE(node.node->rank_spread, 0.2);
}

// With the per-step barrier, a rank whose samples take twice as long sets the
// pace of both; without it, the fast rank runs ahead at its own rate.
TEST(NodeTrial, PerStepBarrierMakesTheSlowRankSetTheNodesRate) {
  const auto slower_rank_1 = [](int rank, SweepConfig& c) {
    if (rank == 1) c.workload.synthetic.io_us_per_sample *= 2;
  };
  SweepConfig config = WaitBound(2);
  const loader::Knobs knobs = config.loader.knobs;
  RankSet barrier(config, 2, slower_rank_1);
  config.device.rank_barrier = false;
  RankSet free_running(config, 2, slower_rank_1);

  const auto paced = barrier.Measure(knobs, {});
  const auto free = free_running.Measure(knobs, {});
  ASSERT_EQ(paced.status, "ok") << paced.error.value_or("");
  ASSERT_EQ(free.status, "ok") << free.error.value_or("");
  const auto& p = paced.node->rank_rows;
  const auto& f = free.node->rank_rows;
  EXPECT_LT(p[0].samples_per_s / p[1].samples_per_s, 1.15) << p[0].samples_per_s << " " << p[1].samples_per_s;
  EXPECT_GT(f[0].samples_per_s / f[1].samples_per_s, 1.5) << f[0].samples_per_s << " " << f[1].samples_per_s;
  // The node's rate is twice the slow rank's, not the mean of the two.
  EXPECT_NEAR(paced.samples_per_s / (2 * paced.node->slowest_rank_samples_per_s), 1.0, 0.15);
  EXPECT_LT(paced.samples_per_s, free.samples_per_s * 0.9);
}

TEST(NodeTrial, ADeadRankFailsTheTrialWithItsPidAndCauseAndHangsNobody) {
  SweepConfig config = WaitBound(2);
  config.sweep.measure_seconds = 3;
  RankSet ranks(config, 2);
  ranks.WaitReady();
  const pid_t victim = ranks.pids()[1];
  std::thread killer([victim] {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    kill(victim, SIGKILL);
  });
  const auto start = std::chrono::steady_clock::now();
  const auto trial = ranks.Measure(config.loader.knobs, {});
  killer.join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(3));  // not the window's 3 s
  EXPECT_EQ(trial.status, "failed");
  const std::string expected = "rank 1 \\(pid " + std::to_string(victim) +
                               "\\) died during the trial: killed by SIGKILL; the node's later trials cannot run";
  EXPECT_TRUE(std::regex_search(trial.error.value_or(""), std::regex(expected))) << trial.error.value_or("");
  // Later trials fail at once with the same reason.
  const auto later = ranks.Measure(config.loader.knobs, {});
  EXPECT_EQ(later.status, "failed");
  EXPECT_EQ(later.error, trial.error);
  // Rank 0 is alive until the set ends it.
  EXPECT_EQ(kill(ranks.pids()[0], 0), 0);
}

// "0-2,5" -> {0, 1, 2, 5}.
std::set<int> ParseCpuList(const std::string& list) {
  std::set<int> cpus;
  std::stringstream in(list);
  for (std::string item; std::getline(in, item, ',');) {
    int lo = 0, hi = 0;
    const int n = std::sscanf(item.c_str(), "%d-%d", &lo, &hi);
    if (n == 1) hi = lo;
    for (int c = lo; n >= 1 && c <= hi; ++c) cpus.insert(c);
  }
  return cpus;
}

// cpu_binding split: the masks of every rank and its workers, read from /proc
// during the trial, are disjoint between ranks and cover the usable CPUs.
TEST(NodeTrial, SplitBindingGivesEachRankAndItsWorkersADisjointShare) {
  const std::vector<int> usable = AffinityCpus();
  if (usable.size() < 2) GTEST_SKIP() << "needs 2 usable CPUs";
  SweepConfig config = WaitBound(2);
  config.sweep.cpu_binding = CpuBinding::kSplit;
  config.loader.knobs.num_workers = 2;
  RankSet ranks(config, 2);
  const auto trial = ranks.Measure(config.loader.knobs, {});
  ASSERT_EQ(trial.status, "ok") << trial.error.value_or("");
  std::set<int> covered;
  for (const auto& row : trial.node->rank_rows) {
    const std::set<int> mask = ParseCpuList(row.cpu_mask);
    ASSERT_FALSE(mask.empty()) << row.cpu_mask;
    // Its fork server and two workers: one distinct mask, the rank's own.
    EXPECT_EQ(row.worker_cpu_masks, row.cpu_mask) << "rank " << row.rank;
    EXPECT_GE(row.processes, 4) << "rank " << row.rank;
    for (int cpu : mask) EXPECT_TRUE(covered.insert(cpu).second) << "CPU " << cpu << " in two ranks' masks";
  }
  EXPECT_EQ(covered, std::set<int>(usable.begin(), usable.end()));
}

}  // namespace
}  // namespace feedtune::tuner::node
