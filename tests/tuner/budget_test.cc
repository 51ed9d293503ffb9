// Budget predictions on fixed facts: memory, /dev/shm, file descriptors, and
// what the budget learns from trials.
#include "tuner/search/budget.h"

#include <gtest/gtest.h>

namespace feedtune::tuner {
namespace {

using results::TrialRecord;

constexpr int64_t kMiB = 1 << 20;

BudgetFacts Facts() {
  BudgetFacts f;
  f.mem_available_bytes = 4096 * kMiB;
  f.shm_free_bytes = 1024 * kMiB;
  f.nofile_limit = 1024;
  f.fds_open = 8;
  f.usable_cpus = 2;
  f.batch_bytes = 8 * kMiB;
  return f;
}

loader::Knobs Workers(int n, int pf = 2, bool pin = false) {
  loader::Knobs k;
  k.num_workers = n;
  k.prefetch_factor = pf;
  k.pin_memory = pin;
  return k;
}

TrialRecord Trial(int workers, int64_t peak_rss) {
  TrialRecord t;
  t.knobs.num_workers = workers;
  t.peak_rss_bytes = peak_rss;
  return t;
}

TEST(Budget, PredictsSlotsPinnedPoolAndWorkerMemory) {
  Budget b(Facts(), BudgetOptions{});
  b.Observe(Trial(0, 100 * kMiB));  // baseline
  b.Observe(Trial(4, 372 * kMiB));  // 50 MiB per worker beyond the baseline and the 9 slots of 8 MiB
  EXPECT_EQ(b.worker_rss_bytes(), 50 * kMiB);
  const Prediction p = b.Predict(Workers(4, 2, true));
  // 4 x 50 MiB + (2 x 4 + 1) slots x 8 MiB, twice with the pinned pool.
  EXPECT_EQ(p.mem_bytes, 200 * kMiB + 2 * 9 * 8 * kMiB);
  EXPECT_EQ(p.shm_bytes, 9 * 8 * kMiB);
  EXPECT_EQ(p.fds, 8 + Budget::kFdsPerTrial + 4 * Budget::kFdsPerWorker);
  EXPECT_TRUE(p.ok);
  EXPECT_EQ(p.note, "4 workers on 2 usable CPUs");
  // Without workers: one slot, no /dev/shm.
  const Prediction zero = b.Predict(Workers(0));
  EXPECT_EQ(zero.shm_bytes, 0);
  EXPECT_EQ(zero.mem_bytes, 8 * kMiB);
  EXPECT_TRUE(zero.note.empty());
}

TEST(Budget, BeforeAnyWorkerTrialAWorkerIsAssumedToOwnTheBaselineRss) {
  Budget b(Facts(), BudgetOptions{});
  b.Observe(Trial(0, 100 * kMiB));
  EXPECT_EQ(b.worker_rss_bytes(), 100 * kMiB);
  // The largest per-worker figure seen is kept.
  b.Observe(Trial(2, 240 * kMiB));  // (240 - 100 - 5 slots x 8) / 2
  b.Observe(Trial(8, 260 * kMiB));  // (260 - 100 - 17 slots x 8) / 8
  EXPECT_EQ(b.worker_rss_bytes(), 50 * kMiB);
  // Failed and skipped trials teach nothing.
  TrialRecord failed = Trial(1, 4000 * kMiB);
  failed.status = results::TrialStatus::kFailed;
  b.Observe(failed);
  EXPECT_EQ(b.worker_rss_bytes(), 50 * kMiB);
}

TEST(Budget, MemoryBudgetSkipsWithTheFigures) {
  BudgetFacts f = Facts();
  f.mem_available_bytes = 1000 * kMiB;
  Budget b(f, BudgetOptions{0.5, 0.8});
  b.Observe(Trial(0, 100 * kMiB));
  b.Observe(Trial(2, 340 * kMiB));  // 100 MiB per worker beyond the baseline and 5 slots
  EXPECT_TRUE(b.Predict(Workers(4)).ok);   // 400 + 72 <= 500
  const Prediction p = b.Predict(Workers(5));  // 500 + 88 > 500
  EXPECT_FALSE(p.ok);
  EXPECT_EQ(p.reason,
            "memory budget: needs about 588 MiB (5 workers x 100 MiB + 11 slots x 8 MiB), over 0.5 x 1000 MiB "
            "available (sweep.budget.memory_fraction)");
  EXPECT_EQ(b.SafeMaxWorkers(Workers(1), 1024), 4);
}

TEST(Budget, SafeLimitNamesTheTrialItRestsOn) {
  BudgetFacts f = Facts();
  f.mem_available_bytes = 1000 * kMiB;
  Budget b(f, BudgetOptions{0.5, 0.8});
  EXPECT_FALSE(b.SafeLimitFor(Workers(1), 1024).workers.has_value());  // nothing measured yet
  EXPECT_EQ(b.SafeLimitFor(Workers(1), 1024).basis, "unknown: no trial measured memory");
  TrialRecord base = Trial(0, 100 * kMiB);
  base.id = 1;
  b.Observe(base);
  EXPECT_EQ(b.SafeLimitFor(Workers(1), 1024).basis_trial, 1);
  TrialRecord two = Trial(2, 340 * kMiB);  // 100 MiB per worker
  two.id = 3;
  b.Observe(two);
  const SafeLimit safe = b.SafeLimitFor(Workers(1), 1024);
  EXPECT_EQ(safe.workers, 4);
  EXPECT_EQ(safe.basis, "worker RSS from the process tree of trial 3 (100 MiB)");
  EXPECT_EQ(safe.basis_trial, 3);
  EXPECT_EQ(safe.worker_rss_bytes, 100 * kMiB);
}

// The safe limit adds what the workers grow by over the job: all the
// workers' growth per epoch, over sweep.budget.job_epochs with persistent
// workers and over one epoch without; the gate of a trial does not.
TEST(Budget, SafeLimitCountsTheWorkersGrowthOverTheJob) {
  BudgetFacts f = Facts();
  f.mem_available_bytes = 1000 * kMiB;
  BudgetOptions options;
  options.job_epochs = 5;
  Budget b(f, options);
  TrialRecord base = Trial(0, 100 * kMiB);
  base.id = 1;
  b.Observe(base);
  TrialRecord two = Trial(2, 340 * kMiB);  // 100 MiB per worker
  two.id = 3;
  two.worker_rss_growth_bytes_per_epoch = 20 * kMiB;  // 40 MiB per epoch, both workers
  b.Observe(two);
  loader::Knobs persistent = Workers(1);
  persistent.persistent_workers = true;
  EXPECT_EQ(b.GrowthBytes(persistent), 200 * kMiB);
  EXPECT_EQ(b.GrowthBytes(Workers(1)), 40 * kMiB);
  // 2 x 100 + 5 x 8 + 200 = 440 <= 500; 3 workers: 556.
  const SafeLimit safe = b.SafeLimitFor(persistent, 1024);
  EXPECT_EQ(safe.workers, 2);
  EXPECT_EQ(safe.growth_bytes, 200 * kMiB);
  EXPECT_EQ(safe.basis,
            "worker RSS from the process tree of trial 3 (100 MiB); + 200 MiB of worker growth over 5 epochs "
            "(trial 3: 40 MiB per epoch, all workers; sweep.budget.job_epochs)");
  // Not persistent: one epoch's growth, 3 x 100 + 7 x 8 + 40 = 396.
  EXPECT_EQ(b.SafeLimitFor(Workers(1), 1024).workers, 3);
  // Trials are gated without it: 4 x 100 + 9 x 8 = 472.
  EXPECT_TRUE(b.Predict(Workers(4)).ok);
}

// A command's workers: the budget rests on the worker RSS the command
// measured, and gives no safe limit until one is reported.
TEST(Budget, CommandsRestOnTheReportedWorkerRss) {
  BudgetFacts f = Facts();
  f.mem_available_bytes = 1000 * kMiB;
  Budget b(f, BudgetOptions{0.5, 0.8}, WorkerMemory::kReported);
  TrialRecord base = Trial(0, 100 * kMiB);
  base.id = 1;
  b.Observe(base);
  TrialRecord two = Trial(2, 340 * kMiB);  // the tree's figure would say 100 MiB per worker
  two.id = 2;
  b.Observe(two);
  SafeLimit safe = b.SafeLimitFor(Workers(1), 1024);
  EXPECT_FALSE(safe.workers.has_value());
  EXPECT_EQ(safe.basis, "unknown: the command reported no worker memory (worker_peak_rss_bytes)");
  EXPECT_EQ(b.worker_rss_bytes(), 100 * kMiB);  // trials are still gated on what the tree shows

  TrialRecord reported = Trial(2, 340 * kMiB);
  reported.id = 4;
  reported.worker_rss_bytes = 50.0 * kMiB;
  b.Observe(reported);
  TrialRecord smaller = Trial(4, 340 * kMiB);
  smaller.id = 5;
  smaller.worker_rss_bytes = 20.0 * kMiB;  // the largest reported stays
  b.Observe(smaller);
  EXPECT_EQ(b.worker_rss_bytes(), 50 * kMiB);
  safe = b.SafeLimitFor(Workers(1), 1024);
  // n x 50 MiB + (2n + 1) x 8 MiB <= 500 MiB: n = 7 (350 + 120 = 470; 8: 400 + 136 = 536).
  EXPECT_EQ(safe.workers, 7);
  EXPECT_EQ(safe.basis, "measured worker RSS of trial 4 (50 MiB)");
  EXPECT_EQ(safe.basis_trial, 4);
}

TEST(Budget, ShmBudget) {
  BudgetFacts f = Facts();
  f.shm_free_bytes = 100 * kMiB;  // 80 MiB usable: 9 slots of 8 MiB fit, 17 do not
  Budget b(f, BudgetOptions{});
  b.Observe(Trial(0, 1 * kMiB));
  b.Observe(Trial(1, 1 * kMiB));
  EXPECT_TRUE(b.Predict(Workers(4, 2)).ok);
  const Prediction p = b.Predict(Workers(8, 2));
  EXPECT_FALSE(p.ok);
  EXPECT_EQ(p.reason.rfind("/dev/shm budget: 17 slots x 8 MiB = 136 MiB, over 0.8 x 100 MiB free", 0), 0u)
      << p.reason;
  // A deeper prefetch costs slots too.
  EXPECT_FALSE(b.Predict(Workers(4, 4)).ok);
  EXPECT_EQ(b.SafeMaxWorkers(Workers(1, 2), 1024), 4);
}

TEST(Budget, FileDescriptorLimit) {
  BudgetFacts f = Facts();
  f.nofile_limit = 64;  // 8 open + 16 per trial + 4 per worker: 10 workers fit
  f.batch_bytes = 1;
  Budget b(f, BudgetOptions{});
  b.Observe(Trial(0, 1));
  EXPECT_TRUE(b.Predict(Workers(10)).ok);
  const Prediction p = b.Predict(Workers(11));
  EXPECT_FALSE(p.ok);
  EXPECT_EQ(p.reason, "file descriptors: needs about 68, over the open-file limit of 64 (ulimit -n)");
  EXPECT_EQ(b.SafeMaxWorkers(Workers(1), 1024), 10);
}

TEST(Budget, UnknownFactsNeverSkip) {
  Budget b(BudgetFacts{}, BudgetOptions{});
  EXPECT_TRUE(b.Predict(Workers(512, 8, true)).ok);
  EXPECT_EQ(b.SafeMaxWorkers(Workers(1), 1024), 1024);
}

TEST(Budget, LearnsTheBatchSizeWhenTheConfigDoesNotSayIt) {
  BudgetFacts f = Facts();
  f.batch_bytes = 0;
  Budget b(f, BudgetOptions{});
  TrialRecord t = Trial(0, 10 * kMiB);
  t.knobs.batch_size = 64;
  t.samples_per_s = 1000;
  t.mb_per_s = 150.528;  // 150528 bytes a sample
  b.Observe(t);
  EXPECT_EQ(b.Predict(Workers(0)).mem_bytes, 64 * 150528);
}

TEST(Budget, GateSkipsWithoutMeasuring) {
  struct Counting final : TrialMeasurer {
    TrialRecord Measure(const loader::Knobs& k) override {
      ++calls;
      TrialRecord t;
      t.knobs = k;
      return t;
    }
    int calls = 0;
  } inner;
  BudgetFacts f = Facts();
  f.nofile_limit = 40;
  Budget b(f, BudgetOptions{});
  BudgetGate gate(b, inner);
  EXPECT_EQ(gate.Measure(Workers(2)).status, results::TrialStatus::kOk);
  EXPECT_EQ(inner.calls, 1);
  const TrialRecord t = gate.MeasurePlanned(Workers(8), {});
  EXPECT_EQ(inner.calls, 1);
  EXPECT_EQ(t.status, results::TrialStatus::kSkipped);
  ASSERT_TRUE(t.error.has_value());
  EXPECT_NE(t.error->find("open-file limit of 40"), std::string::npos);
  EXPECT_FALSE(gate.last_prediction().ok);
}

TEST(Budget, LiveFactsAreRead) {
  const BudgetFacts f = ReadBudgetFacts(0, 2, 1234);
  EXPECT_GT(f.mem_available_bytes, 0);
  EXPECT_GT(f.fds_open, 0);
  EXPECT_EQ(f.usable_cpus, 2);
  EXPECT_EQ(f.batch_bytes, 1234);
}

// `trial` and `diagnose`: the setting the user chose, before any loader starts.
TEST(CheckSetting, RefusesOverTheShmBudgetWithTheSlotsArithmetic) {
  BudgetFacts f = Facts();
  f.shm_free_bytes = 24 * 1024 * kMiB;
  f.mem_available_bytes = 1024 * 1024 * kMiB;  // memory is no limit here
  f.batch_bytes = 1024 * kMiB;
  const SettingCheck check = CheckSetting(f, BudgetOptions{}, WorkerMemory::kProcessTree, {}, 30 * kMiB, Workers(8, 4));
  EXPECT_FALSE(check.prediction.ok);
  EXPECT_EQ(check.refusal,
            "/dev/shm budget: 33 slots x 1024 MiB = 33792 MiB, over 0.8 x 24576 MiB free (sweep.budget.shm_fraction); "
            "33 slots = 8 workers x prefetch_factor 4 + 1");
  EXPECT_TRUE(check.not_applied.empty());
}

TEST(CheckSetting, WithoutAStoredRunEachWorkerIsTakenAtTheEstimate) {
  BudgetFacts f = Facts();
  f.mem_available_bytes = 1000 * kMiB;
  const SettingCheck check = CheckSetting(f, BudgetOptions{}, WorkerMemory::kProcessTree, {}, 60 * kMiB, Workers(8));
  EXPECT_EQ(check.refusal,
            "memory budget: needs about 616 MiB (8 workers x 60 MiB + 17 slots x 8 MiB), over 0.5 x 1000 MiB available "
            "(sweep.budget.memory_fraction); 17 slots = 8 workers x prefetch_factor 2 + 1; per worker: an estimate: "
            "feedtune's own RSS now (60 MiB), which a forked worker may come to own; no stored trial of this host and "
            "workload measured worker memory");
  // Four workers fit: 240 + 72 <= 500.
  EXPECT_TRUE(CheckSetting(f, BudgetOptions{}, WorkerMemory::kProcessTree, {}, 60 * kMiB, Workers(4)).prediction.ok);
}

TEST(CheckSetting, AStoredRunsMeasuredWorkerMemoryIsUsed) {
  BudgetFacts f = Facts();
  f.mem_available_bytes = 1000 * kMiB;
  TrialRecord base = Trial(0, 100 * kMiB);
  base.id = 1;
  TrialRecord two = Trial(2, 340 * kMiB);  // 100 MiB per worker
  two.id = 2;
  // The estimate (10 MiB) would let 5 workers through; the measured 100 MiB does not.
  const SettingCheck check =
      CheckSetting(f, BudgetOptions{}, WorkerMemory::kProcessTree, {base, two}, 10 * kMiB, Workers(5));
  EXPECT_FALSE(check.prediction.ok);
  EXPECT_EQ(check.worker_basis,
            "worker RSS from the process tree of trial 2 (100 MiB) (a stored run of this host and workload)");
  EXPECT_NE(check.refusal.find("5 workers x 100 MiB"), std::string::npos) << check.refusal;
}

TEST(CheckSetting, ACommandOfUnknownBatchSizeSaysTheBudgetIsNotApplied) {
  BudgetFacts f = Facts();
  f.batch_bytes = 0;
  const SettingCheck check = CheckSetting(f, BudgetOptions{}, WorkerMemory::kReported, {}, 60 * kMiB, Workers(64, 8));
  EXPECT_TRUE(check.prediction.ok);
  EXPECT_EQ(check.not_applied,
            "the memory and /dev/shm budgets could not be applied to the slots: feedtune does not know the size of "
            "this workload's batches (a command's samples are its own; a stored sweep of it on this host would tell)");
  EXPECT_EQ(check.worker_basis, "unknown (no stored trial of this command reported worker memory): 0 MiB taken");
}

TEST(CheckSetting, TheOpenFileLimitRefusesToo) {
  BudgetFacts f = Facts();
  f.nofile_limit = 64;
  const SettingCheck check = CheckSetting(f, BudgetOptions{}, WorkerMemory::kProcessTree, {}, 1 * kMiB, Workers(16, 1));
  EXPECT_EQ(check.refusal, "file descriptors: needs about 88, over the open-file limit of 64 (ulimit -n)");
}

}  // namespace
}  // namespace feedtune::tuner
