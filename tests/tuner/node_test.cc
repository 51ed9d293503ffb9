// The parts of a node trial that need no workload: the DistributedSampler
// share (loader/sampler.h), the rank barrier across processes, and how the
// ranks' records add up to the node's.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <chrono>
#include <cmath>
#include <numeric>
#include <set>
#include <thread>
#include <vector>

#include "loader/sampler.h"
#include "results/store.h"
#include "tuner/measure/cpu_affinity.h"
#include "tuner/measure/node_measurer.h"
#include "tuner/measure/rank_aggregate.h"
#include "tuner/measure/rank_wire.h"
#include "tuner/search/preflight.h"
#include "tuner/measure/rank_barrier.h"

namespace feedtune::tuner::node {
namespace {

TEST(DistributedShare, TakesEveryWorldSizethPositionOfThePaddedOrder) {
  // torch: indices += indices[:padding]; indices[rank:total:world_size].
  const std::vector<int64_t> order = {7, 3, 9, 0, 1, 8, 2, 6, 5, 4};
  EXPECT_EQ(loader::DistributedShare(order, 0, 3), (std::vector<int64_t>{7, 0, 2, 4}));
  EXPECT_EQ(loader::DistributedShare(order, 1, 3), (std::vector<int64_t>{3, 1, 6, 7}));
  EXPECT_EQ(loader::DistributedShare(order, 2, 3), (std::vector<int64_t>{9, 8, 5, 3}));
  EXPECT_EQ(loader::DistributedShare(order, 0, 1), order);
  // Padding longer than the data repeats it, as torch's
  // (indices * ceil(padding / len))[:padding].
  EXPECT_EQ(loader::DistributedShare({5, 6}, 4, 5), (std::vector<int64_t>{5}));
  EXPECT_THROW(loader::DistributedShare(order, 3, 3), std::invalid_argument);
}

TEST(DistributedShare, SharesAreDisjointEqualAndCoverTheEpochWhenTheWorldDividesIt) {
  const auto order = loader::EpochOrder(4096, /*shuffle=*/true, /*seed=*/11, /*epoch=*/2);
  std::set<int64_t> seen;
  for (int r = 0; r < 4; ++r) {
    const auto share = loader::DistributedShare(order, r, 4);
    EXPECT_EQ(share.size(), 1024u);
    seen.insert(share.begin(), share.end());
  }
  EXPECT_EQ(seen.size(), 4096u);
}

// Three processes step 500 times in lockstep; one votes "done" at step 300
// only. Every party must leave that generation with the vote, and no other.
TEST(RankBarrier, EveryPartyGetsTheSameAnswerAtTheSameGeneration) {
  RankBarrier barrier(3);
  std::vector<pid_t> children;
  for (int p = 0; p < 3; ++p) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      int wrong = 0;
      for (int step = 0; step < 500; ++step) {
        const bool done = barrier.Arrive(p == 1 && step == 300);
        if (done != (step == 300)) ++wrong;
      }
      _exit(wrong == 0 ? 0 : 1);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
  }
}

TEST(RankBarrier, BreakWakesAWaiterWithWhoBrokeIt) {
  RankBarrier barrier(2);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    try {
      barrier.Arrive(false);  // the other party never comes
    } catch (const BarrierBroken& e) {
      _exit(e.rank() == -1 ? 7 : 8);
    }
    _exit(0);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const auto start = std::chrono::steady_clock::now();
  barrier.Break(-1);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 7) << "status " << status;
  EXPECT_TRUE(barrier.broken());
  EXPECT_THROW(barrier.Arrive(false), BarrierBroken);
  barrier.Reset();
  EXPECT_FALSE(barrier.broken());
}

results::TrialRecord RankTrial(std::vector<std::pair<double, double>> rate_and_wall) {
  results::TrialRecord t;
  std::vector<double> rates;
  for (const auto& [rate, wall] : rate_and_wall) {
    results::RepeatRecord rep;
    rep.samples_per_s = rate;
    rep.wall_s = wall;
    rep.mb_per_s = rate / 1000;
    t.repeat_rows.push_back(rep);
    rates.push_back(rate);
  }
  std::sort(rates.begin(), rates.end());
  t.samples_per_s = rates[rates.size() / 2];
  t.repeats = static_cast<int>(rate_and_wall.size());
  t.peak_rss_bytes = 100;
  t.cpu_util = 0.5;
  return t;
}

TEST(AggregateRanks, AllSamplesOverTheLongestWindow) {
  // Window 0: 200 + 125 samples, the longer window 2.5 s: 130/s.
  const auto r0 = RankTrial({{100, 2.0}, {100, 2.0}, {100, 2.0}});
  const auto r1 = RankTrial({{50, 2.5}, {50, 2.0}, {50, 2.0}});
  std::vector<results::RankRecord> rows(2);
  rows[0].samples_per_s = 100;
  rows[0].processes = 3;
  rows[0].threads = 5;
  rows[0].shm_bytes = 1000;
  rows[1].samples_per_s = 50;
  rows[1].processes = 2;
  rows[1].threads = 4;
  rows[1].shm_bytes = 500;
  const auto node = AggregateRanks({}, {r0, r1}, rows);
  ASSERT_EQ(node.repeat_rows.size(), 3u);
  EXPECT_DOUBLE_EQ(node.repeat_rows[0].samples_per_s, 130.0);
  EXPECT_DOUBLE_EQ(node.repeat_rows[1].samples_per_s, 150.0);
  EXPECT_DOUBLE_EQ(node.samples_per_s, 150.0);
  EXPECT_EQ(node.peak_rss_bytes, 100);  // the largest rank's: the budget's per-rank memory
  EXPECT_DOUBLE_EQ(node.cpu_util, 1.0);
  ASSERT_TRUE(node.node.has_value());
  EXPECT_EQ(node.node->ranks, 2);
  EXPECT_DOUBLE_EQ(node.node->slowest_rank_samples_per_s, 50.0);
  EXPECT_DOUBLE_EQ(node.node->rank_spread, 0.5);
  EXPECT_EQ(node.node->processes, 5);
  EXPECT_EQ(node.node->threads, 9);
  EXPECT_EQ(node.node->shm_bytes, 1500);
  EXPECT_EQ(node.node->rank_rows[1].rank, 1);
}

// Worker memory over time, native ranks as command ranks: the growth of the
// rank whose workers grow fastest (the flag and the budget hold for every
// rank), the largest peak, the mean start; a rank without workers is skipped.
TEST(AggregateRanks, WorkerMemoryIsTheFastestGrowingRanks) {
  constexpr double kMiB = 1 << 20;
  auto r0 = RankTrial({{100, 2.0}});
  r0.worker_rss_bytes = 40 * kMiB;
  r0.worker_rss_start_bytes = 30 * kMiB;
  r0.worker_rss_peak_bytes = 40 * kMiB;
  r0.worker_rss_growth_bytes_per_epoch = 2 * kMiB;
  r0.worker_rss_epochs = 3;
  r0.worker_rss_samples = 20;
  auto r1 = r0;
  r1.worker_rss_bytes = 90 * kMiB;
  r1.worker_rss_start_bytes = 50 * kMiB;
  r1.worker_rss_peak_bytes = 90 * kMiB;
  r1.worker_rss_growth_bytes_per_epoch = 16 * kMiB;
  r1.worker_rss_epochs = 2.5;
  auto r2 = RankTrial({{100, 2.0}});  // num_workers 0 on this rank: nothing measured
  const auto node = AggregateRanks({}, {r0, r1, r2}, std::vector<results::RankRecord>(3));
  EXPECT_DOUBLE_EQ(node.worker_rss_growth_bytes_per_epoch, 16 * kMiB);
  EXPECT_DOUBLE_EQ(node.worker_rss_epochs, 2.5);
  EXPECT_DOUBLE_EQ(node.worker_rss_peak_bytes, 90 * kMiB);
  EXPECT_DOUBLE_EQ(node.worker_rss_bytes, 90 * kMiB);
  EXPECT_DOUBLE_EQ(node.worker_rss_start_bytes, 40 * kMiB);
  EXPECT_EQ(node.worker_rss_samples, 40);

  const auto none = AggregateRanks({}, {r2, r2}, std::vector<results::RankRecord>(2));
  EXPECT_TRUE(std::isnan(none.worker_rss_growth_bytes_per_epoch));
  EXPECT_TRUE(std::isnan(none.worker_rss_bytes));
}

TEST(ResolveRanks, AutoIsOneOnHostSimAndTheConfiguredCountOtherwise) {
  SweepConfig config;
  config.device.backend = device::BackendChoice::kHostSim;
  EXPECT_EQ(ResolveRanks(config), 1);
  config.sweep.ranks = 3;
  EXPECT_EQ(ResolveRanks(config), 3);
}

TEST(SplitShare, EqualDisjointSharesCoveringTheCpus) {
  const std::vector<int> cpus = {0, 1, 2, 3, 8, 9, 10};
  EXPECT_EQ(SplitShare(cpus, 0, 2), (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(SplitShare(cpus, 1, 2), (std::vector<int>{3, 8, 9, 10}));
  EXPECT_EQ(SplitShare(cpus, 2, 3), (std::vector<int>{8, 9, 10}));
  EXPECT_EQ(SplitShare({0, 1}, 2, 3), (std::vector<int>{0}));  // more ranks than CPUs: shared
}

PreflightFacts RoomyNode() {
  PreflightFacts f;
  f.mask_cpus = 16;
  f.mask_list = "0-15";
  f.offered_cpus = 16;
  f.shm_bytes = int64_t{32} << 30;
  f.nofile_soft = 1 << 20;
  f.nofile_hard = 1 << 20;
  f.gpus = 2;
  return f;
}

TEST(Preflight, SaysNothingOnARoomyNode) {
  SweepConfig config;
  EXPECT_TRUE(Preflight(config, 2, 1 << 20, RoomyNode()).empty());
}

TEST(Preflight, EachNarrowLimitIsAWarningWithItsFix) {
  SweepConfig config;  // prefetch_factor 2: 3 slots per rank with one worker
  PreflightFacts f = RoomyNode();
  f.mask_cpus = 1;
  f.mask_list = "0";
  f.shm_bytes = int64_t{64} << 20;  // Docker's default
  f.nofile_soft = 256;
  f.nofile_hard = 4096;
  f.gpus = 1;
  const auto w = Preflight(config, 2, int64_t{32} << 20, f);
  ASSERT_EQ(w.size(), 5u);
  EXPECT_EQ(w[0].rfind("CPU mask: feedtune may use 1 of the 16 CPUs this machine offers (Cpus_allowed_list 0)", 0), 0u)
      << w[0];
  EXPECT_NE(w[0].find("taskset -c 0-15"), std::string::npos) << w[0];
  EXPECT_EQ(w[1].rfind("ranks: 2 ranks on 1 usable CPUs", 0), 0u) << w[1];
  EXPECT_EQ(w[2].rfind("/dev/shm: 64 MiB, but 2 rank(s) x 3 slots x 32 MiB need 192 MiB", 0), 0u) << w[2];
  EXPECT_NE(w[2].find("--shm-size=769m"), std::string::npos) << w[2];
  EXPECT_EQ(w[3].rfind("open files: the soft limit is 256, and 2 rank(s) with up to 64 workers each may need "
                       "about 1152; raise it with ulimit -n 4096",
                       0),
            0u)
      << w[3];
  EXPECT_EQ(w[4].rfind("GPUs: 2 ranks but 1 GPU(s) visible: ranks beyond 1 share a GPU", 0), 0u) << w[4];
  // host-sim asked for: no GPU warning.
  config.device.backend = device::BackendChoice::kHostSim;
  EXPECT_EQ(Preflight(config, 2, int64_t{32} << 20, f).size(), 4u);
  // No GPU at all: a native rank gets a host-sim device; a command's rank runs
  // on the CPU, whatever device.backend says (it is feedtune's own device).
  f.gpus = 0;
  config.device.backend = device::BackendChoice::kAuto;
  EXPECT_NE(Preflight(config, 2, 0, f).back().find("every rank runs on a host-sim device"), std::string::npos);
  config.workload.kind = workloads::WorkloadKind::kCommand;
  config.device.backend = device::BackendChoice::kHostSim;
  const std::string command = Preflight(config, 2, 0, f).back();
  EXPECT_EQ(command.rfind("GPUs: 2 ranks but 0 GPU(s) visible: each rank of the command runs without one", 0), 0u)
      << command;
  EXPECT_EQ(command.find("host-sim"), std::string::npos) << command;
}

TEST(ShareBudget, EachRankGetsItsShareOfMemoryShmAndCpus) {
  BudgetFacts facts;
  facts.mem_available_bytes = 1000;
  facts.shm_free_bytes = 600;
  facts.usable_cpus = 4;
  facts.nofile_limit = 1024;
  ShareBudget(2, &facts);
  EXPECT_EQ(facts.mem_available_bytes, 500);
  EXPECT_EQ(facts.shm_free_bytes, 300);
  EXPECT_DOUBLE_EQ(facts.usable_cpus, 2);
  EXPECT_EQ(facts.nofile_limit, 1024);  // per process
}

// A node trial's figures and ranks go into the results file and come back
// as they were (trial_nodes, trial_ranks); a one-loader trial has none.
TEST(NodeStore, NodeFiguresAndRanksRoundTrip) {
  const std::string path = ::testing::TempDir() + "node-store-" + std::to_string(getpid()) + ".db";
  std::remove(path.c_str());
  {
    auto store = results::Store::Open(path);
    results::Fingerprint machine;
    machine.hostname = "node-test";
    results::RunRecord run;
    run.machine_id = store.UpsertMachine(machine);
    run.workload_name = "w";
    run.workload_hash = "0";
    run.backend = "host-sim";
    const int64_t run_id = store.BeginRun(run);
    results::TrialRecord single;
    single.phase = "baseline";
    store.AddTrial(run_id, single);
    results::TrialRecord node = RankTrial({{100, 2.0}});
    node.phase = "num_workers";
    results::NodeFigures figures;
    figures.ranks = 2;
    figures.slowest_rank_samples_per_s = 90;
    figures.rank_spread = 0.1;
    figures.processes = 7;
    figures.threads = 19;
    figures.shm_bytes = 4096;
    for (int r = 0; r < 2; ++r) {
      results::RankRecord row;
      row.rank = r;
      row.pid = 1000 + r;
      row.samples_per_s = r == 0 ? 100 : 90;
      row.gpu_idle_frac = 0.25;
      row.wait_p50_us = 10;
      row.wait_p99_us = 20;
      row.cpu_mask = r == 0 ? "0" : "1";
      row.worker_cpu_masks = row.cpu_mask;
      row.processes = 3;
      row.threads = 9;
      row.shm_bytes = 2048;
      figures.rank_rows.push_back(row);
    }
    node.node = figures;
    node.knobs.cpu_binding = loader::CpuBinding::kSplit;  // the knobs around the loader, stored per trial
    node.knobs.worker_threads = 1;
    store.AddTrial(run_id, node);
  }
  const auto store = results::Store::OpenReadOnly(path);
  const auto runs = store.LoadRuns();
  ASSERT_EQ(runs.size(), 1u);
  const auto trials = store.LoadTrials(runs[0].id);
  ASSERT_EQ(trials.size(), 2u);
  EXPECT_FALSE(trials[0].node.has_value());
  EXPECT_EQ(trials[0].knobs.cpu_binding, loader::CpuBinding::kNone);
  EXPECT_EQ(trials[0].knobs.worker_threads, 0);
  EXPECT_EQ(trials[1].knobs.cpu_binding, loader::CpuBinding::kSplit);
  EXPECT_EQ(trials[1].knobs.worker_threads, 1);
  ASSERT_TRUE(trials[1].node.has_value());
  const auto& n = *trials[1].node;
  EXPECT_EQ(n.ranks, 2);
  EXPECT_DOUBLE_EQ(n.slowest_rank_samples_per_s, 90);
  EXPECT_DOUBLE_EQ(n.rank_spread, 0.1);
  EXPECT_EQ(n.processes, 7);
  EXPECT_EQ(n.threads, 19);
  EXPECT_EQ(n.shm_bytes, 4096);
  ASSERT_EQ(n.rank_rows.size(), 2u);
  EXPECT_EQ(n.rank_rows[1].pid, 1001);
  EXPECT_EQ(n.rank_rows[1].cpu_mask, "1");
  EXPECT_DOUBLE_EQ(n.rank_rows[1].samples_per_s, 90);
  EXPECT_EQ(n.rank_rows[0].status, results::TrialStatus::kOk);
  std::remove(path.c_str());
}

// The trial request carries the knobs around the loader to the ranks.
TEST(RankWire, RequestCarriesTheBindingAndThreads) {
  loader::Knobs k;
  k.num_workers = 3;
  k.cpu_binding = loader::CpuBinding::kNuma;
  k.worker_threads = 2;
  TrialPlan plan;
  plan.phase = "worker_threads";
  loader::Knobs got;
  TrialPlan got_plan;
  ParseRequest(RequestLine(k, plan), &got, &got_plan);
  EXPECT_EQ(got, k);
  EXPECT_EQ(got_plan.phase, "worker_threads");
}

// A rank's worker memory series reaches the tuner: the node's growth flag
// needs each rank's.
TEST(RankWire, RecordCarriesTheWorkerMemorySeries) {
  results::TrialRecord t;
  t.status = results::TrialStatus::kOk;
  t.worker_rss_bytes = 5e7;
  t.worker_rss_start_bytes = 3e7;
  t.worker_rss_peak_bytes = 6e7;
  t.worker_rss_growth_bytes_per_epoch = 1.5e7;
  t.worker_rss_epochs = 2.25;
  t.worker_rss_samples = 17;
  t.worker_rss_in_consumer = true;
  results::TrialRecord got;
  results::RankRecord rank;
  ParseRecord(RecordLine(t, rank), &got, &rank);
  EXPECT_DOUBLE_EQ(got.worker_rss_bytes, 5e7);
  EXPECT_DOUBLE_EQ(got.worker_rss_start_bytes, 3e7);
  EXPECT_DOUBLE_EQ(got.worker_rss_peak_bytes, 6e7);
  EXPECT_DOUBLE_EQ(got.worker_rss_growth_bytes_per_epoch, 1.5e7);
  EXPECT_DOUBLE_EQ(got.worker_rss_epochs, 2.25);
  EXPECT_EQ(got.worker_rss_samples, 17);
  EXPECT_TRUE(got.worker_rss_in_consumer);

  ParseRecord(RecordLine(results::TrialRecord{}, rank), &got, &rank);  // no workers: NaN stays NaN
  EXPECT_TRUE(std::isnan(got.worker_rss_growth_bytes_per_epoch));
}

}  // namespace
}  // namespace feedtune::tuner::node
