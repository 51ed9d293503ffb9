// The estimate a search under a time budget starts its num_workers phase
// from (tuner/search/worker_estimate.h), on baselines of the three kinds, and
// the phase it starts: a scripted curve whose knee lies far above the CPU
// count, behind slow trials at the bottom, in a budget that holds few trials.
#include "tuner/search/worker_estimate.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "tests/tuner/search_record.h"
#include "tuner/search/search.h"

namespace feedtune::tuner {
namespace {

using results::TrialRecord;

TrialRecord Baseline(double samples_per_s, double gpu_idle_frac, double cpu_util) {
  TrialRecord t;
  t.status = results::TrialStatus::kOk;
  t.samples_per_s = samples_per_s;
  t.gpu_idle_frac = gpu_idle_frac;
  t.cpu_util = cpu_util;
  t.repeats = 3;
  t.ci_low = samples_per_s * 0.99;
  t.ci_high = samples_per_s * 1.01;
  return t;
}

EstimateLimits TwoCpus() {
  EstimateLimits limits;
  limits.usable_cpus = 2;
  return limits;
}

// A baseline feedtune.autotune recorded on the 2-CPU VM (2026-12-06, the
// guides' SampleDataset of bench/in_job: 10 ms of sleep per sample, batch 64,
// an MLP step): 91.5 samples/s, 93.5% of it waiting, 0.075 CPU seconds per
// second. Its knee in the truth of its process lay at 16 workers.
TEST(WorkerEstimate, AWaitBoundBaselineStartsHigh) {
  const WorkerEstimate e = EstimateWorkers(Baseline(91.5, 0.935, 0.075), TwoCpus());
  EXPECT_EQ(e.workers, 15) << e.how;
  EXPECT_EQ(e.how,
            "the baseline waited 10.22 ms per sample for its data and stepped 0.71 ms; feeding 1408 samples/s (the "
            "lower of the step's own pace, 1408 samples/s and 2 CPUs at 0.82 ms of CPU per sample, 2440 samples/s) "
            "keeps 1408 x 10.22 ms = 14.4 samples in flight");
}

// The two below are made to the shape of their kind: a CPU-bound loading
// (90% of the time, the process busy throughout), and a step that takes 90%.
TEST(WorkerEstimate, ACpuBoundBaselineStartsNearTheCpuCount) {
  const WorkerEstimate e = EstimateWorkers(Baseline(100, 0.9, 1.0), TwoCpus());
  EXPECT_EQ(e.workers, 2) << e.how;
  EXPECT_NEAR(e.rate, 200, 1e-6);  // the CPUs' bound: 2 CPUs at 10 ms per sample
}

TEST(WorkerEstimate, AStepBoundBaselineStartsLow) {
  const WorkerEstimate e = EstimateWorkers(Baseline(100, 0.1, 1.0), TwoCpus());
  EXPECT_EQ(e.workers, 1) << e.how;
}

TEST(WorkerEstimate, TheCapsBindAndSaySo) {
  EstimateLimits limits = TwoCpus();
  limits.max_workers = 64;
  limits.batches = 8;
  const WorkerEstimate by_epoch = EstimateWorkers(Baseline(91.5, 0.935, 0.075), limits);
  EXPECT_EQ(by_epoch.workers, 8);
  EXPECT_NE(by_epoch.how.find("capped at 8: one round per epoch of 8 batches"), std::string::npos) << by_epoch.how;
  limits.batches = 0;
  limits.fitting_workers = 6;
  const WorkerEstimate by_budget = EstimateWorkers(Baseline(91.5, 0.935, 0.075), limits);
  EXPECT_EQ(by_budget.workers, 6);
  EXPECT_NE(by_budget.how.find("the memory, /dev/shm and open-file budgets"), std::string::npos) << by_budget.how;
}

TEST(WorkerEstimate, NoWaitMeasuredGivesNoEstimate) {
  EXPECT_EQ(EstimateWorkers(Baseline(100, 0, 0.5), TwoCpus()).workers, 0);
  TrialRecord failed = Baseline(100, 0.5, 0.5);
  failed.status = results::TrialStatus::kFailed;
  EXPECT_EQ(EstimateWorkers(failed, TwoCpus()).workers, 0);
}

// A wait-bound curve: each worker adds 90 samples/s up to 16 workers, the
// knee, then the main process's share of every batch holds it at 1440
// (slightly less past 32). A trial takes its samples' time: 1 s at the knee's
// rate, 16 s at the baseline's (one window: a third). The budget holds the
// baseline and 5 s: the doubling from 1 would spend it all on 1 worker.
class TimedCurve final : public TrialMeasurer {
 public:
  explicit TimedCurve(double* clock) : clock_(clock) {}
  TrialRecord Measure(const loader::Knobs& knobs) override { return MeasurePlanned(knobs, {}); }
  TrialRecord MeasurePlanned(const loader::Knobs& knobs, const TrialPlan& plan) override {
    const int w = knobs.num_workers;
    const double rate = w == 0 ? 90.0 : 90.0 * std::min(w, 16) * (w > 32 ? 0.97 : 1.0);
    const int repeats = plan.repeats > 0 ? plan.repeats : 3;
    *clock_ += 1440.0 / rate * repeats / 3.0;
    measured.push_back(w);
    TrialRecord t = Baseline(rate, w == 0 ? 0.95 : 0.2, w == 0 ? 0.1 : 0.5);
    t.repeats = repeats;
    if (w > 0) t.time_to_first_batch_s = first_batch_s;
    return t;
  }
  std::vector<int> measured;
  double first_batch_s = 0;  // each worker trial's restart
 private:
  double* clock_;
};

TEST(WorkerEstimate, AKneeFarAboveTheCpusIsReachedWithinABudgetOfFiveTrials) {
  double clock = 0;
  TimedCurve m(&clock);
  SweepOptions options;
  options.copy_phases = false;
  options.time_budget_s = 16 + 5.0;
  SearchSetup setup;
  setup.usable_cpus = 2;
  setup.elapsed_s = [&clock] { return clock; };
  const SearchOutcome o = search_record::RecordedRunSearch(options, setup, loader::Knobs{}, m, {});
  ASSERT_TRUE(o.knee_workers.has_value());
  EXPECT_GE(*o.knee_workers, 15);
  EXPECT_LE(*o.knee_workers, 17);
  EXPECT_EQ(o.trials[*o.best].knobs.num_workers, *o.knee_workers);
  ASSERT_TRUE(o.estimate_workers.has_value());
  // 90 samples/s, 95% of it waiting: 10.6 ms of wait and 0.56 ms of step per
  // sample, 1800 samples/s to feed, 19 workers: above the knee, as a model
  // that cannot see the main process's share of every batch is.
  EXPECT_EQ(*o.estimate_workers, 19);
  // Started at the estimate, not at 1 worker; no count below the knee measured twice.
  ASSERT_GE(m.measured.size(), 2u);
  EXPECT_EQ(m.measured[1], *o.estimate_workers);
  EXPECT_EQ(std::find(m.measured.begin(), m.measured.end(), 1), m.measured.end());
  std::string workers_why;
  for (const auto& p : o.phases) {
    if (p.phase == "num_workers") workers_why = p.why;
  }
  EXPECT_NE(workers_why.find("started at the estimate of " + std::to_string(*o.estimate_workers) + " workers"),
            std::string::npos)
      << workers_why;
}

// When the budget ends the search before persistent_workers while the
// knee's restart is a large share of its epoch, the time_budget phase says
// so, with the budget that would reach it.
TEST(WorkerEstimate, ABudgetThatEndsBeforePersistentWorkersSaysWhatTheRestartCosts) {
  double clock = 0;
  TimedCurve m(&clock);
  m.first_batch_s = 1.0;  // 16 workers restart in 1 s, at each epoch of 4032 samples (2.8 s at 1440/s)
  SweepOptions options;
  options.copy_phases = false;
  options.time_budget_s = 16 + 5.0;
  SearchSetup setup;
  setup.usable_cpus = 2;
  setup.samples_per_epoch = 4032;
  setup.elapsed_s = [&clock] { return clock; };
  const SearchOutcome o = search_record::RecordedRunSearch(options, setup, loader::Knobs{}, m, {});
  std::string budget_why;
  for (const auto& p : o.phases) {
    if (p.phase == "time_budget") budget_why = p.why;
  }
  EXPECT_NE(budget_why.find("it ended before persistent_workers: at 16 workers each epoch's first batch waits 1.0 s "
                            "(the workers' restart and their first batch), in an epoch of 3.8 s; budget_s=50 would "
                            "reach it"),
            std::string::npos)
      << budget_why;
}

// The doubling from 1 on the same curve, with the same budget, stops on the
// way up: the budget ends it while it still doubles, and says so.
TEST(WorkerEstimate, ABudgetThatEndsARisingCurveSaysSoWithTheBudgetThatWouldGoOn) {
  double clock = 0;
  TimedCurve m(&clock);
  SweepOptions options;
  options.copy_phases = false;
  options.time_budget_s = 16 + 20.0;  // 1 worker takes 16 s, 2 workers 8 s: the budget ends after 2
  SearchSetup setup;
  setup.usable_cpus = 2;
  setup.elapsed_s = [&clock] { return clock; };
  // No estimate: a baseline without a measured wait (as a sweep's native workload may give).
  struct NoWait final : TrialMeasurer {
    TimedCurve& inner;
    explicit NoWait(TimedCurve& m) : inner(m) {}
    TrialRecord Measure(const loader::Knobs& k) override { return MeasurePlanned(k, {}); }
    TrialRecord MeasurePlanned(const loader::Knobs& k, const TrialPlan& p) override {
      TrialRecord t = inner.MeasurePlanned(k, p);
      t.gpu_idle_frac = 0;
      return t;
    }
  } no_wait(m);
  const SearchOutcome o = search_record::RecordedRunSearch(options, setup, loader::Knobs{}, no_wait, {});
  EXPECT_FALSE(o.estimate_workers.has_value());
  EXPECT_EQ(m.measured, (std::vector<int>{0, 1, 2}));
  std::string budget_why;
  for (const auto& p : o.phases) {
    if (p.phase == "time_budget") budget_why = p.why;
  }
  EXPECT_NE(budget_why.find("the curve was still rising: +100.0% from 1 to 2 workers when the budget of 36 s ended "
                            "it; budget_s=80 would go on"),
            std::string::npos)
      << budget_why;
}

}  // namespace
}  // namespace feedtune::tuner
