// Node trials end to end in this process: real rank processes (host-sim,
// native synthetic datasets), each with its own loader, over the rank
// barrier. Bounds are ratios with room: this box is small and shared.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <sched.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <regex>
#include <string>
#include <thread>

#include "tuner/config/config.h"
#include "tuner/measure/cpu_affinity.h"
#include "tuner/measure/node_measurer.h"
#include "tuner/measure/rank_facts.h"
#include "tuner/search/search.h"
#include "tests/tuner/search_record.h"

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
  ASSERT_EQ(single.status, results::TrialStatus::kOk) << single.error.value_or("");
  ASSERT_EQ(node.status, results::TrialStatus::kOk) << node.error.value_or("");
  ASSERT_TRUE(node.node.has_value());
  ASSERT_EQ(node.node->rank_rows.size(), 2u);
  const double ratio = node.samples_per_s / single.samples_per_s;
  EXPECT_GT(ratio, 1.5) << node.samples_per_s << " vs " << single.samples_per_s;
  EXPECT_LT(ratio, 2.5) << node.samples_per_s << " vs " << single.samples_per_s;
  // Each rank reads half of each epoch: its batches per epoch are halved.
  EXPECT_EQ(node.batches_per_epoch.value_or(0), 2048 / 2);
  for (const auto& row : node.node->rank_rows) {
    EXPECT_EQ(row.status, results::TrialStatus::kOk);
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
  ASSERT_EQ(paced.status, results::TrialStatus::kOk) << paced.error.value_or("");
  ASSERT_EQ(free.status, results::TrialStatus::kOk) << free.error.value_or("");
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
  EXPECT_EQ(trial.status, results::TrialStatus::kFailed);
  const std::string expected = "rank 1 \\(pid " + std::to_string(victim) +
                               "\\) died during the trial: killed by SIGKILL; the node's later trials cannot run";
  EXPECT_TRUE(std::regex_search(trial.error.value_or(""), std::regex(expected))) << trial.error.value_or("");
  // Later trials fail at once with the same reason.
  const auto later = ranks.Measure(config.loader.knobs, {});
  EXPECT_EQ(later.status, results::TrialStatus::kFailed);
  EXPECT_EQ(later.error, trial.error);
  // Rank 0 is alive until the set ends it.
  EXPECT_EQ(kill(ranks.pids()[0], 0), 0);
}

std::set<int> CpuSet(const std::string& list) {
  const std::vector<int> cpus = ParseCpuList(list);
  return std::set<int>(cpus.begin(), cpus.end());
}

// The CPUs of every process below `pid` (itself excluded): the fork server's
// and the workers' masks, by pid.
std::map<pid_t, std::string> DescendantMasks(pid_t pid) {
  std::map<pid_t, std::string> out;
  std::vector<pid_t> todo = {pid};
  while (!todo.empty()) {
    const pid_t p = todo.back();
    todo.pop_back();
    std::ifstream children("/proc/" + std::to_string(p) + "/task/" + std::to_string(p) + "/children");
    for (pid_t c; children >> c;) {
      out[c] = CpuListOfProcess(c);
      todo.push_back(c);
    }
  }
  return out;
}

// cpu_binding per trial (Knobs::cpu_binding): during a split trial the masks
// of every rank and its workers, read from /proc while the trial runs, are
// disjoint between ranks and cover the usable CPUs; during the next trial,
// with none, every rank and worker has the full mask again (the ranks were
// forked once: they re-bind themselves and their fork servers per trial).
TEST(NodeTrial, SplitBindingGivesEachRankAndItsWorkersADisjointShare) {
  const std::vector<int> usable = AffinityCpus();
  if (usable.size() < 2) GTEST_SKIP() << "needs 2 usable CPUs";
  const std::set<int> all(usable.begin(), usable.end());
  SweepConfig config = WaitBound(2);
  config.loader.knobs.num_workers = 2;
  RankSet ranks(config, 2);
  ranks.WaitReady();

  // Reads every rank's tree from outside while the trial runs.
  const auto measure_watching = [&](loader::CpuBinding binding, std::vector<std::map<pid_t, std::string>>* seen) {
    loader::Knobs knobs = config.loader.knobs;
    knobs.cpu_binding = binding;
    std::atomic<bool> done{false};
    seen->assign(2, {});
    std::thread watcher([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(800));  // past the warm-up: workers are up
      for (int r = 0; r < 2 && !done.load(); ++r) {
        const pid_t rank = ranks.pids()[static_cast<size_t>(r)];
        (*seen)[static_cast<size_t>(r)] = DescendantMasks(rank);
        (*seen)[static_cast<size_t>(r)][rank] = CpuListOfProcess(rank);
      }
    });
    const auto trial = ranks.Measure(knobs, {});
    done.store(true);
    watcher.join();
    return trial;
  };

  std::vector<std::map<pid_t, std::string>> seen;
  const auto split = measure_watching(loader::CpuBinding::kSplit, &seen);
  ASSERT_EQ(split.status, results::TrialStatus::kOk) << split.error.value_or("");
  EXPECT_EQ(split.knobs.cpu_binding, loader::CpuBinding::kSplit);
  std::set<int> covered;
  for (int r = 0; r < 2; ++r) {
    const auto& row = split.node->rank_rows[static_cast<size_t>(r)];
    const std::set<int> mask = CpuSet(row.cpu_mask);
    ASSERT_FALSE(mask.empty()) << row.cpu_mask;
    // Its fork server and two workers: one distinct mask, the rank's own.
    EXPECT_EQ(row.worker_cpu_masks, row.cpu_mask) << "rank " << r;
    EXPECT_GE(row.processes, 4) << "rank " << r;
    for (int cpu : mask) EXPECT_TRUE(covered.insert(cpu).second) << "CPU " << cpu << " in two ranks' masks";
    // From outside, during the trial: the rank, its fork server and its 2 workers.
    EXPECT_GE(seen[static_cast<size_t>(r)].size(), 4u) << "rank " << r;
    for (const auto& [pid, list] : seen[static_cast<size_t>(r)]) {
      if (!list.empty()) {
        EXPECT_EQ(CpuSet(list), mask) << "rank " << r << ", pid " << pid << ": " << list;
      }
    }
  }
  EXPECT_EQ(covered, all);

  const auto none = measure_watching(loader::CpuBinding::kNone, &seen);
  ASSERT_EQ(none.status, results::TrialStatus::kOk) << none.error.value_or("");
  for (int r = 0; r < 2; ++r) {
    const auto& row = none.node->rank_rows[static_cast<size_t>(r)];
    EXPECT_EQ(CpuSet(row.cpu_mask), all) << "rank " << r << ": " << row.cpu_mask;
    EXPECT_EQ(CpuSet(row.worker_cpu_masks), all) << "rank " << r << ": " << row.worker_cpu_masks;
    EXPECT_GE(seen[static_cast<size_t>(r)].size(), 4u) << "rank " << r;
    for (const auto& [pid, list] : seen[static_cast<size_t>(r)]) {
      if (!list.empty()) {
        EXPECT_EQ(CpuSet(list), all) << "rank " << r << ", pid " << pid << ": " << list;
      }
    }
  }
}

// numa on host-sim: no GPU, so no NUMA node: split, and the trial says so.
TEST(NodeTrial, NumaWithoutAKnownNodeBindsAsSplitAndSaysSo) {
  const std::vector<int> usable = {0, 1, 2, 3};
  std::string note;
  EXPECT_EQ(BindingCpus(loader::CpuBinding::kNuma, usable, 1, 2, {-1, -1}, &note), (std::vector<int>{2, 3}));
  EXPECT_NE(note.find("cpu_binding numa: the NUMA node of rank 1's GPU is unknown"), std::string::npos) << note;
  EXPECT_EQ(BindingCpus(loader::CpuBinding::kNone, usable, 1, 2, {-1, -1}, &note), usable);
  EXPECT_TRUE(note.empty());
  EXPECT_EQ(GpuNumaNodes(WaitBound(2), 2), (std::vector<int>{-1, -1}));
  EXPECT_EQ(ParseCpuList("0-2,5,7-8"), (std::vector<int>{0, 1, 2, 5, 7, 8}));
}

// Binds this process (and so the ranks it forks) to its first `n` CPUs for a
// scope, so a test sees the same machine on a bigger one.
class FirstCpus {
 public:
  explicit FirstCpus(size_t n) {
    sched_getaffinity(0, sizeof saved_, &saved_);
    const std::vector<int> cpus = AffinityCpus();
    ok_ = cpus.size() >= n;
    if (!ok_) return;
    cpu_set_t set;
    CPU_ZERO(&set);
    for (size_t i = 0; i < n; ++i) CPU_SET(cpus[i], &set);
    sched_setaffinity(0, sizeof set, &set);
  }
  ~FirstCpus() { sched_setaffinity(0, sizeof saved_, &saved_); }
  bool ok() const { return ok_; }

 private:
  cpu_set_t saved_;
  bool ok_ = false;
};

// A CPU-bound workload: 1.5 ms of real CPU work per sample, no waiting.
SweepConfig CpuBound(int ranks) {
  SweepConfig c = ParseConfig(R"(
name: node-cpu-test
workload: {kind: synthetic, samples: 256, sample_bytes: 1024, cpu_us_per_sample: 1500, jitter: 0}
loader: {batch_size: 4, num_workers: 0}
device: {backend: host-sim, step_us: 0}
sweep: {repeats: 3, warmup_batches: 2, measure_seconds: 0.25, prefetch_factors: [2], cpu_binding: none}
)",
                              "node-cpu-test");
  c.sweep.ranks = ranks;
  return c;
}

SearchOutcome Sweep(const SweepConfig& config, int ranks, double usable_cpus, int max_workers) {
  auto set = std::make_shared<RankSet>(config, ranks);
  NodeMeasurer measurer(set);
  SearchSetup setup;
  setup.max_workers = max_workers;
  setup.ranks = ranks;
  setup.usable_cpus = usable_cpus / ranks;  // one rank's share, as the sweep's budget gives it
  setup.default_worker_threads = config.workload.synthetic.cpu_threads;
  return search_record::RecordedRunSearch(config.sweep, setup, config.loader.knobs, measurer, {});
}

// Two ranks on 2 CPUs share them: each rank's knee (workers per rank) is no
// higher than one loader's alone on the same CPUs, beyond noise. The curve is
// flat past the CPUs, so on a loaded box (ctest -j2 beside other tests) a
// higher node knee can come from a few percent of noise: then the node's own
// figure at the single loader's knee must be within 15% of its knee's.
TEST(NodeTrial, CpuBoundRanksKneeNoHigherThanTheSingleLoaders) {
  FirstCpus two(2);
  if (!two.ok()) GTEST_SKIP() << "needs 2 usable CPUs";
  const SearchOutcome single = Sweep(CpuBound(1), 1, 2, 4);
  const SearchOutcome node = Sweep(CpuBound(2), 2, 2, 4);
  ASSERT_TRUE(single.knee_workers.has_value());
  ASSERT_TRUE(node.knee_workers.has_value());
  const std::string what = "node knee " + std::to_string(*node.knee_workers) + " (" +
                           std::to_string(node.knee_samples_per_s) + " samples/s), single " +
                           std::to_string(*single.knee_workers) + " (" + std::to_string(single.knee_samples_per_s) +
                           ")";
  if (*node.knee_workers > *single.knee_workers) {
    double at_single_knee = 0;
    for (const auto& t : node.trials) {
      if ((t.phase == "num_workers" || t.phase == "baseline") && t.status == results::TrialStatus::kOk &&
          t.knobs.num_workers == *single.knee_workers) {
        at_single_knee = std::max(at_single_knee, t.samples_per_s);
      }
    }
    EXPECT_GE(at_single_knee, 0.85 * node.knee_samples_per_s) << what;
  }
  EXPECT_GE(*single.knee_workers, 1);  // CPU work moves out of the main process
}

// worker_threads: a sample's CPU work split over 4 threads (workload.cpu_threads)
// in 2 workers on 2 CPUs; the phase measures 1 thread, and that trial's record
// (and the wire between rank and tuner) carries it.
TEST(NodeTrial, WorkerThreadsPhaseMeasuresOneThread) {
  FirstCpus two(2);
  if (!two.ok()) GTEST_SKIP() << "needs 2 usable CPUs";
  SweepConfig config = CpuBound(1);
  config.workload.synthetic.cpu_threads = 4;
  config.loader.knobs.num_workers = 2;
  auto set = std::make_shared<RankSet>(config, 1);
  // The trial itself: 2 workers, each splitting its samples over 4 threads.
  loader::Knobs knobs = config.loader.knobs;
  const auto four = set->Measure(knobs, {});
  knobs.worker_threads = 1;
  const auto one = set->Measure(knobs, {});
  ASSERT_EQ(four.status, results::TrialStatus::kOk) << four.error.value_or("");
  ASSERT_EQ(one.status, results::TrialStatus::kOk) << one.error.value_or("");
  EXPECT_EQ(one.knobs.worker_threads, 1);
  EXPECT_EQ(four.knobs.worker_threads, 0);
  // The search's phase, from 4 threads: 1 is measured.
  const SearchOutcome outcome = Sweep(config, 1, 2, 2);
  bool measured_one = false;
  for (const auto& t : outcome.trials) {
    if (t.phase == "worker_threads") {
      EXPECT_NE(t.knobs.worker_threads, 0);
      if (t.knobs.worker_threads == 1 && t.status == results::TrialStatus::kOk) measured_one = true;
    }
  }
  EXPECT_TRUE(measured_one);
}

}  // namespace
}  // namespace feedtune::tuner::node
