// The sequence's decisions on scripted curves: no timing, no loader.
#include "tuner/search/search.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <set>

#include "tuner/search/budget.h"
#include "tuner/search/replay.h"
#include "tests/tuner/search_record.h"

namespace feedtune::tuner {
namespace {

using results::TrialRecord;

// What a scripted curve gives for one trial: samples/s (< 0: the trial
// fails), or skip: the trial comes back skipped.
using Curve = std::function<double(const loader::Knobs&, const TrialPlan&, int index)>;

// Throughput from a curve; +-1% interval, 3 repeats (1 when the plan asks
// for 1), epoch boundary 100 ms without persistent workers and 5 ms with.
class ScriptedMeasurer final : public TrialMeasurer {
 public:
  explicit ScriptedMeasurer(Curve curve, int first_index = 0) : curve_(std::move(curve)), index_(first_index) {}
  TrialRecord Measure(const loader::Knobs& knobs) override { return MeasurePlanned(knobs, {}); }
  TrialRecord MeasurePlanned(const loader::Knobs& knobs, const TrialPlan& plan) override {
    plans.push_back(plan);
    TrialRecord t;
    t.knobs = knobs;
    const double v = curve_(knobs, plan, index_++);
    if (v < 0) {
      t.status = results::TrialStatus::kFailed;
      t.error = "worker 0 (pid 1) was killed by signal 9 (SIGKILL) while loading batch 0";
      return t;
    }
    t.samples_per_s = v;
    const double spread = ci_spread ? ci_spread(knobs) : 0.01;
    t.ci_low = v * (1.0 - spread);
    t.ci_high = v * (1.0 + spread);
    t.repeats = plan.repeats > 0 ? plan.repeats : 3;
    t.epoch_boundary_ms = plan.window_epochs > 0 ? (knobs.persistent_workers ? 5.0 : 100.0) : NAN;
    t.time_to_first_batch_s = knobs.num_workers > 0 ? (first_batch ? first_batch(knobs) : first_batch_s) : 0.0;
    return t;
  }
  std::vector<TrialPlan> plans;
  double first_batch_s = 0;  // each worker trial's time to its first batch
  std::function<double(const loader::Knobs&)> first_batch;  // set: the time to first batch by knobs
  // The 95% interval's half width as a share of the median (default 1%).
  std::function<double(const loader::Knobs&)> ci_spread;

 private:
  Curve curve_;
  int index_;
};

// A measurer that raises Interrupted at trial `at` (0-based), as SIGINT does.
class InterruptingMeasurer final : public TrialMeasurer {
 public:
  InterruptingMeasurer(TrialMeasurer& inner, int at) : inner_(inner), at_(at) {}
  TrialRecord Measure(const loader::Knobs& knobs) override { return MeasurePlanned(knobs, {}); }
  TrialRecord MeasurePlanned(const loader::Knobs& knobs, const TrialPlan& plan) override {
    if (calls_++ == at_) throw Interrupted();
    return inner_.MeasurePlanned(knobs, plan);
  }

 private:
  TrialMeasurer& inner_;
  int at_;
  int calls_ = 0;
};

struct SearchRun {
  SearchOutcome outcome;
  std::vector<std::string> seen;  // "phase nw" in callback order
  std::vector<int> trials_left;    // the estimate after each trial, in callback order
  std::vector<TrialPlan> plans;
  int last_trials_left = -1;
};

SearchRun RunOn(TrialMeasurer& m, const SweepOptions& options = {}, SearchSetup setup = {},
                std::vector<TrialRecord>* stored = nullptr) {
  SearchRun r;
  SearchEvents events;
  int64_t next_id = 1;
  events.on_trial = [&](TrialRecord& t, const SearchProgress& p) {
    r.seen.push_back(t.phase + " " + std::to_string(t.knobs.num_workers));
    r.last_trials_left = p.trials_left;
    r.trials_left.push_back(p.trials_left);
    if (t.id == 0) t.id = next_id++;
    if (stored != nullptr) stored->push_back(t);
  };
  r.outcome = search_record::RecordedRunSearch(options, setup, loader::Knobs{}, m, events);
  return r;
}

SearchRun Search(std::function<double(const loader::Knobs&)> curve, int max_workers = 64,
                 const SweepOptions& options = {}) {
  ScriptedMeasurer m([curve](const loader::Knobs& k, const TrialPlan&, int) { return curve(k); });
  SearchSetup setup;
  setup.max_workers = max_workers;
  SearchRun r = RunOn(m, options, setup);
  r.plans = m.plans;
  return r;
}

const TrialRecord& Best(const SearchRun& r) { return r.outcome.trials[*r.outcome.best]; }

// Every trial's and phase's decision, for comparing two runs.
std::vector<std::string> Decisions(const SearchOutcome& o) {
  std::vector<std::string> v;
  for (const auto& t : o.trials) {
    v.push_back(t.phase + " " + std::to_string(t.knobs.num_workers) + " " + results::TrialStatusName(t.status) + ": " +
                t.decision);
  }
  for (const auto& p : o.phases) v.push_back(p.phase + (p.kept ? " kept: " : " not kept: ") + p.why);
  return v;
}

const PhaseDecision* Phase(const SearchRun& r, const std::string& name) {
  for (const auto& p : r.outcome.phases) {
    if (p.phase == name) return &p;
  }
  return nullptr;
}

std::vector<std::string> FinalChecks(int pairs, int best_workers) {
  std::vector<std::string> v;
  for (int i = 0; i < pairs; ++i) {
    v.push_back("final_check 0");
    v.push_back("final_check " + std::to_string(best_workers));
  }
  return v;
}

TEST(Search, RisingThenFlatFindsTheKneeAndStopsDoubling) {
  // 1000 x workers up to 4, flat after.
  const SearchRun r = Search([](const loader::Knobs& k) { return 1000.0 * std::min(std::max(k.num_workers, 1), 4); });
  EXPECT_EQ(r.outcome.knee_workers, 4);
  EXPECT_EQ(r.outcome.kneedle_workers, 4);
  // 1, 2, 4, then 8 and 16 do not gain: stop. Then the later phases, and the
  // interleaved final check (3 pairs).
  std::vector<std::string> want = {"baseline 0",         "pin_memory 0",        "num_workers 1",
                                   "num_workers 2",      "num_workers 4",       "num_workers 8",
                                   "num_workers 16",     "non_blocking 4",      "prefetch_factor 4",
                                   "prefetch_factor 4",  "prefetch_factor 4",   "persistent_workers 4",
                                   "persistent_workers 4"};
  for (const auto& s : FinalChecks(3, 4)) want.push_back(s);
  EXPECT_EQ(r.seen, want);
  EXPECT_EQ(Best(r).samples_per_s, 4000);
  EXPECT_EQ(Best(r).knobs.num_workers, 4);
  EXPECT_EQ(r.last_trials_left, 0);
  // The sweep ran a small fraction of the 256-point grid.
  EXPECT_LE(r.outcome.trials.size(), 256u / 4);
  const PhaseDecision* workers = Phase(r, "num_workers");
  ASSERT_NE(workers, nullptr);
  EXPECT_NE(workers->why.find("knee at 4 workers"), std::string::npos) << workers->why;
  EXPECT_NE(workers->why.find("two doublings without a gain"), std::string::npos) << workers->why;
}

// sweep.time_budget_s: a scripted clock that passes 1 s per trial. With a
// budget of 3.5 s the baseline, pin_memory, 1 and 2 workers run, and the
// doubling cut short keeps the best measured so far (2 workers gains beyond
// the noise over the kept 0-worker setting) without a final check.
TEST(Search, TheTimeBudgetEndsTheSequenceAtTheBestSoFar) {
  int trials = 0;
  ScriptedMeasurer m([&trials](const loader::Knobs& k, const TrialPlan&, int) {
    ++trials;
    return 1000.0 * std::min(std::max(k.num_workers, 1), 4);
  });
  SweepOptions options;
  options.time_budget_s = 3.5;
  SearchSetup setup;
  setup.elapsed_s = [&trials] { return static_cast<double>(trials); };
  const SearchRun r = RunOn(m, options, setup);
  const std::vector<std::string> want = {"baseline 0", "pin_memory 0", "num_workers 1", "num_workers 2"};
  EXPECT_EQ(r.seen, want);
  EXPECT_EQ(Best(r).knobs.num_workers, 2);
  EXPECT_FALSE(r.outcome.speedup.has_value());
  const PhaseDecision* budget = Phase(r, "time_budget");
  ASSERT_NE(budget, nullptr);
  EXPECT_EQ(budget->why,
            "the time budget of 3.5 s ended the search after 4 trials (4.0 s); kept the best setting so far; the curve "
            "was still rising: +100.0% from 1 to 2 workers when the budget of 3.5 s ended it; budget_s=10 would go on");
  EXPECT_EQ(Phase(r, "final_check"), nullptr);
}

// A doubling cut short by the budget names the knee of the curve measured
// so far, as the phase would have at its end, not the last count that gained
// by THE RULE. Here 8 workers' windows spread (one ran slow), so 8 did not
// gain beyond the noise over 4 and 16 did; the budget ends the phase after
// 16, and 8, within the knee tolerance of 16's median, is the answer. (In a
// job, bench/in_job's wait profile, 16 was kept so.)
TEST(Search, ATimeBudgetThatEndsTheDoublingKeepsTheKneeOfTheCurveSoFar) {
  int trials = 0;
  ScriptedMeasurer m([&trials](const loader::Knobs& k, const TrialPlan&, int) {
    ++trials;
    if (k.num_workers >= 16) return 4000.0;
    if (k.num_workers == 8) return 3900.0;
    return 1000.0 * std::max(k.num_workers, 1) * (k.num_workers == 4 ? 0.75 : 1.0);  // 1: 1000, 2: 2000, 4: 3000
  });
  m.ci_spread = [](const loader::Knobs& k) { return k.num_workers == 8 ? 0.6 : 0.01; };
  SweepOptions options;
  options.copy_phases = false;
  options.time_budget_s = 5.5;  // baseline, 1, 2, 4, 8, 16 (1 s each); the budget has passed at 32
  SearchSetup setup;
  setup.elapsed_s = [&trials] { return static_cast<double>(trials); };
  const SearchRun r = RunOn(m, options, setup);
  const std::vector<std::string> want = {"baseline 0", "num_workers 1", "num_workers 2", "num_workers 4",
                                         "num_workers 8", "num_workers 16"};
  EXPECT_EQ(r.seen, want);
  EXPECT_EQ(Best(r).knobs.num_workers, 8);
  EXPECT_EQ(r.outcome.knee_workers, 8);
  const PhaseDecision* workers = Phase(r, "num_workers");
  ASSERT_NE(workers, nullptr);
  EXPECT_NE(workers->why.find("knee at 8 workers"), std::string::npos) << workers->why;
  EXPECT_NE(workers->why.find("the time budget ended the phase after 16 workers"), std::string::npos) << workers->why;
  ASSERT_NE(Phase(r, "time_budget"), nullptr);
}

// Under a time budget, above the usable CPU count, one doubling without a
// gain ends the doubling (without a budget it takes two). Below the CPU
// count any rise still keeps it going.
TEST(Search, UnderATimeBudgetOneDoublingWithoutAGainAboveTheCpusEndsIt) {
  ScriptedMeasurer m([](const loader::Knobs& k, const TrialPlan&, int) {
    return 1000.0 * std::min(std::max(k.num_workers, 1), 4);
  });
  SweepOptions options;
  options.copy_phases = false;
  options.prefetch_factors = {2};
  SearchSetup setup;
  setup.usable_cpus = 2;
  const SearchRun unbudgeted = RunOn(m, options, setup);
  EXPECT_NE(std::find(unbudgeted.seen.begin(), unbudgeted.seen.end(), "num_workers 16"), unbudgeted.seen.end());
  options.time_budget_s = 1e9;  // never reached: only the rule is under test
  const SearchRun r = RunOn(m, options, setup);
  EXPECT_NE(std::find(r.seen.begin(), r.seen.end(), "num_workers 8"), r.seen.end());
  EXPECT_EQ(std::find(r.seen.begin(), r.seen.end(), "num_workers 16"), r.seen.end());
  EXPECT_EQ(Best(r).knobs.num_workers, 4);
  const PhaseDecision* workers = Phase(r, "num_workers");
  ASSERT_NE(workers, nullptr);
  EXPECT_NE(workers->why.find("stopped at 8 workers: a doubling without a gain under the time budget"),
            std::string::npos)
      << workers->why;
}

// At the budget, only trials measured since the kept setting compete with
// it. Here persistent workers were kept over whole epochs (3600 samples/s,
// the restart paid) after a prefetch_factor trial of time windows measured
// 4150 without ever crossing an epoch: that earlier, differently measured
// trial must not take the kept step back (bench/in_job's wait job did).
TEST(Search, TheTimeBudgetKeepsAStepKeptOverAnEarlierTrial) {
  int trials = 0;
  ScriptedMeasurer m([&trials](const loader::Knobs& k, const TrialPlan& plan, int) {
    ++trials;
    if (plan.window_epochs > 0) return k.persistent_workers ? 3600.0 : 3000.0;  // whole epochs
    const double v = 1000.0 * std::min(std::max(k.num_workers, 1), 4);
    return k.prefetch_factor == 4 ? v * 1.0375 : v;  // +3.75%: under the 5% threshold
  });
  SweepOptions options;
  options.copy_phases = false;
  options.prefetch_factors = {2, 4};
  SearchSetup setup;
  setup.samples_per_epoch = 4096;  // whole-epoch windows fit at these rates
  setup.elapsed_s = [&trials] { return static_cast<double>(trials); };
  // Find where persistent_workers is kept under a budget never reached (a
  // budget shortens the doubling), then end the budget right after it.
  options.time_budget_s = 1e9;
  SearchRun probe = RunOn(m, options, setup);
  const auto on = std::find(probe.seen.begin(), probe.seen.end(), "persistent_workers 4");
  ASSERT_NE(on, probe.seen.end());
  ASSERT_NE(std::find(on + 1, probe.seen.end(), "persistent_workers 4"), probe.seen.end());  // off, then on
  ASSERT_TRUE(Phase(probe, "persistent_workers")->kept);
  const auto kept_at = std::find(on + 1, probe.seen.end(), "persistent_workers 4") - probe.seen.begin() + 1;
  trials = 0;
  options.time_budget_s = static_cast<double>(kept_at) - 0.5;
  const SearchRun r = RunOn(m, options, setup);
  ASSERT_NE(Phase(r, "time_budget"), nullptr);
  EXPECT_TRUE(Best(r).knobs.persistent_workers);
  EXPECT_EQ(Best(r).knobs.prefetch_factor, 2);
}

// Under a time budget, a persistent_workers pair after the first begins only
// where the time left holds one more as long as the last: a pair of whole
// epochs is seconds long (5 s a trial here, 1 s a time window), and one begun
// at the budget's edge ran a 60 s in-job budget to 73 s.
TEST(Search, UnderATimeBudgetAPairBeginsOnlyWhereTheTimeLeftHoldsIt) {
  double clock = 0;
  std::vector<double> ends;  // the clock at each trial's end
  ScriptedMeasurer m([&clock, &ends](const loader::Knobs& k, const TrialPlan& plan, int) {
    clock += plan.window_epochs > 0 ? 5.0 : 1.0;
    ends.push_back(clock);
    const double v = 1000.0 * std::min(std::max(k.num_workers, 1), 4);
    if (plan.window_epochs > 0) return k.persistent_workers ? v * 0.9 : v * 0.6;
    return v;
  });
  SweepOptions options;
  options.copy_phases = false;
  options.prefetch_factors = {2};
  SearchSetup setup;
  setup.samples_per_epoch = 4096;
  setup.elapsed_s = [&clock] { return clock; };
  // Where the first pair ends, under a budget never reached.
  options.time_budget_s = 1e9;
  const SearchRun probe = RunOn(m, options, setup);
  const auto first = std::find(probe.seen.begin(), probe.seen.end(), "persistent_workers 4") - probe.seen.begin();
  ASSERT_LT(first + 1, static_cast<long>(probe.seen.size()));
  ASSERT_EQ(probe.seen.at(first + 1), "persistent_workers 4");
  const double first_pair_ends = ends.at(first + 1);

  // The second pair would end 4 s past this budget: it does not begin.
  clock = 0;
  ends.clear();
  options.time_budget_s = first_pair_ends + 6.0;
  const SearchRun r = RunOn(m, options, setup);
  EXPECT_EQ(std::count(r.seen.begin(), r.seen.end(), "persistent_workers 4"), 2);
  EXPECT_LE(clock, options.time_budget_s);
  const PhaseDecision* persistent = Phase(r, "persistent_workers");
  ASSERT_NE(persistent, nullptr);
  EXPECT_NE(persistent->why.find("1 interleaved pair of"), std::string::npos) << persistent->why;
  EXPECT_NE(persistent->why.find("the time budget ended the pairs"), std::string::npos) << persistent->why;
  EXPECT_TRUE(Best(r).knobs.persistent_workers);

  // A budget that holds it takes it.
  clock = 0;
  ends.clear();
  options.time_budget_s = first_pair_ends + 10.0;
  const SearchRun two = RunOn(m, options, setup);
  EXPECT_EQ(std::count(two.seen.begin(), two.seen.end(), "persistent_workers 4"), 4);
}

// Under a time budget, persistent_workers goes before prefetch_factor when
// the knee's restart (its time to the first batch) is at least
// gain_threshold of an epoch: here 0.5 s of a 1.024 s epoch at 4 workers.
// Its trials measure two whole-epoch windows, and once it is kept, the
// prefetch_factor trials are measured over whole epochs too.
TEST(Search, UnderATimeBudgetAnExpensiveRestartPutsPersistentWorkersFirst) {
  ScriptedMeasurer m([](const loader::Knobs& k, const TrialPlan& plan, int) {
    const double v = 1000.0 * std::min(std::max(k.num_workers, 1), 4);
    if (plan.window_epochs > 0) return k.persistent_workers ? v * 0.9 : v * 0.6;  // the restart paid
    return v;
  });
  m.first_batch_s = 0.5;
  SweepOptions options;
  options.copy_phases = false;
  options.prefetch_factors = {2, 4};
  options.time_budget_s = 1000;  // never reached: only the order is under test
  SearchSetup setup;
  setup.samples_per_epoch = 4096;
  const SearchRun r = RunOn(m, options, setup);
  const auto at = [&r](const std::string& s) { return std::find(r.seen.begin(), r.seen.end(), s) - r.seen.begin(); };
  ASSERT_LT(at("persistent_workers 4"), static_cast<long>(r.seen.size()));
  EXPECT_LT(at("persistent_workers 4"), at("prefetch_factor 4"));
  const PhaseDecision* persistent = Phase(r, "persistent_workers");
  ASSERT_NE(persistent, nullptr);
  EXPECT_TRUE(persistent->kept);
  EXPECT_NE(persistent->why.find("tried before prefetch_factor, as the time budget may end the search: the workers' "
                                 "restart at each epoch was 49% of one at the knee"),
            std::string::npos)
      << persistent->why;
  // Off and on in interleaved pairs of one whole epoch each
  // (PersistentInPairs), then whole epochs against the kept setting.
  EXPECT_EQ(std::count(r.seen.begin(), r.seen.end(), "persistent_workers 4"), 6);
  for (size_t i = 0; i < r.seen.size(); ++i) {
    if (r.seen[i].rfind("persistent_workers", 0) == 0) {
      EXPECT_EQ(m.plans[i].repeats, 1) << r.seen[i];
      EXPECT_EQ(m.plans[i].window_epochs, 1) << r.seen[i];
    }
    if (r.seen[i].rfind("prefetch_factor", 0) == 0) {
      EXPECT_EQ(m.plans[i].window_epochs, 1) << r.seen[i];
    }
  }
  EXPECT_TRUE(Best(r).knobs.persistent_workers);

  // A restart under gain_threshold of an epoch: the order is tuner/search/sequence.cc's.
  ScriptedMeasurer cheap([](const loader::Knobs& k, const TrialPlan&, int) {
    return 1000.0 * std::min(std::max(k.num_workers, 1), 4);
  });
  cheap.first_batch_s = 0.02;
  const SearchRun c = RunOn(cheap, options, setup);
  const auto at_c = [&c](const std::string& s) { return std::find(c.seen.begin(), c.seen.end(), s) - c.seen.begin(); };
  EXPECT_LT(at_c("prefetch_factor 4"), at_c("persistent_workers 4"));
  EXPECT_EQ(Phase(c, "persistent_workers")->why.find("before prefetch_factor"), std::string::npos);
}

// A short-epoch job tuned in time windows (the in-job wait profile: 2048
// samples, 10 ms of waiting each): more workers hide the waits a little
// better in the windows, but each restart grows with the workers, and a job
// without persistent workers pays it at every epoch. Under a time budget the
// counts are judged per epoch, restart charged, and the knee is 8 rather than
// the windows' 10. A whole epoch pays the restart without persistent workers
// and loses 3% to the windows with them. Without a budget the windows decide.
TEST(Search, UnderATimeBudgetWorkerCountsPayTheirRestartOncePerEpoch) {
  const auto restart = [](const loader::Knobs& k) { return 0.15 + 0.04 * k.num_workers; };
  const auto windows = [restart](const loader::Knobs& k, const TrialPlan& plan, int) {
    const double v = k.num_workers == 0 ? 90.0 : std::min(735.0, 86.0 * k.num_workers);
    if (plan.window_epochs == 0 || k.num_workers == 0) return v;
    return k.persistent_workers ? 0.97 * v : 2048 / (2048 / v + restart(k));
  };
  SweepOptions options;
  options.copy_phases = false;
  options.prefetch_factors = {2};
  SearchSetup setup;
  setup.samples_per_epoch = 2048;
  setup.usable_cpus = 2;

  ScriptedMeasurer windowed(windows);
  windowed.first_batch = restart;
  const SearchRun plain = RunOn(windowed, options, setup);
  EXPECT_EQ(plain.outcome.knee_workers, 10);  // 16, then refined to 12 and 10: all at 735 in the windows
  EXPECT_EQ(std::count(plain.seen.begin(), plain.seen.end(), "persistent_workers 10"), 2);

  options.time_budget_s = 1000;  // never reached: how the counts are judged is under test
  ScriptedMeasurer budgeted(windows);
  budgeted.first_batch = restart;
  const SearchRun r = RunOn(budgeted, options, setup);
  EXPECT_EQ(r.outcome.knee_workers, 8);
  const TrialRecord* eight = nullptr;
  for (const TrialRecord& t : r.outcome.trials) {
    if (t.phase == "num_workers" && t.knobs.num_workers == 8) eight = &t;
  }
  ASSERT_NE(eight, nullptr);
  // 2048 / (2048 / 688 + 0.47): 594.2 samples/s per epoch.
  EXPECT_NEAR(eight->samples_per_s, 594.2, 0.1);
  EXPECT_NE(eight->decision.find("594.2 samples/s per epoch: 688.0 in its windows, its restart (470 ms to the first "
                                 "batch) charged once per epoch of 2048 samples"),
            std::string::npos)
      << eight->decision;
  // Off and on in 3 interleaved pairs of whole epochs: 0.97 * 688 over 594.2.
  EXPECT_EQ(std::count(r.seen.begin(), r.seen.end(), "persistent_workers 8"), 6);
  const PhaseDecision* persistent = Phase(r, "persistent_workers");
  ASSERT_NE(persistent, nullptr);
  EXPECT_TRUE(persistent->kept) << persistent->why;
  EXPECT_NE(persistent->why.find("kept: x1.12 [1.12, 1.12] with over without, 3 interleaved pairs of 1 whole epoch "
                                 "each; epoch boundary 100.0 ms without, 5.0 ms with"),
            std::string::npos)
      << persistent->why;
  EXPECT_TRUE(Best(r).knobs.persistent_workers);

  // A resumed run replays the stored, charged figures without charging them
  // again, and reaches the same decisions.
  const size_t n = r.outcome.trials.size();
  for (size_t at : {size_t{4}, size_t{7}, n - 1}) {
    SCOPED_TRACE("interrupted at trial " + std::to_string(at));
    ScriptedMeasurer first(windows);
    first.first_batch = restart;
    InterruptingMeasurer interrupting(first, static_cast<int>(at));
    std::vector<TrialRecord> stored;
    EXPECT_THROW(RunOn(interrupting, options, setup, &stored), Interrupted);
    ScriptedMeasurer rest(windows, static_cast<int>(at));
    rest.first_batch = restart;
    ReplayMeasurer replay(stored, rest);
    const SearchRun resumed = RunOn(replay, options, setup);
    EXPECT_EQ(Decisions(resumed.outcome), Decisions(r.outcome));
  }
}

// Under a time budget persistent_workers is weighed in interleaved pairs of
// whole epochs (the in-job CNN: a CPU-trained step whose slow phases enter an
// epoch's mean and miss most short windows, so a whole epoch reads 12% under
// the windows). Persistent workers save a 0.5 s restart per epoch of 4096
// samples: x1.10 per epoch. Weighed against the knee's charged windows (810.9
// samples/s) the whole epochs with them (792) would lose; in pairs both sides
// are whole epochs and they are kept. A budget that runs out inside the pairs
// lets the pair begun finish, and the pairs measured decide. Any gain in the
// pairs keeps them.
TEST(Search, UnderATimeBudgetPersistentWorkersAreWeighedInWholeEpochPairs) {
  int trials = 0;
  const auto job = [&trials](const loader::Knobs& k, const TrialPlan& plan, int) {
    ++trials;
    const double windows = k.num_workers == 0 ? 600.0 : 900.0;
    if (plan.window_epochs == 0 || k.num_workers == 0) return windows;
    const double epoch = 0.88 * windows;
    return k.persistent_workers ? epoch : 4096 / (4096 / epoch + 0.5);
  };
  SweepOptions options;
  options.copy_phases = false;
  options.prefetch_factors = {2};
  options.time_budget_s = 1000;
  SearchSetup setup;
  setup.samples_per_epoch = 4096;
  setup.usable_cpus = 2;
  setup.elapsed_s = [&trials] { return static_cast<double>(trials); };

  ScriptedMeasurer m(job);
  m.first_batch_s = 0.5;
  const SearchRun r = RunOn(m, options, setup);
  EXPECT_EQ(r.outcome.knee_workers, 1);
  const std::vector<std::string> pairs(6, "persistent_workers 1");
  const auto first = std::find(r.seen.begin(), r.seen.end(), "persistent_workers 1");
  ASSERT_NE(first, r.seen.end());
  EXPECT_TRUE(std::equal(pairs.begin(), pairs.end(), first));
  const size_t at = static_cast<size_t>(first - r.seen.begin());
  for (size_t i = at; i < at + 6; ++i) {
    EXPECT_EQ(m.plans[i].repeats, 1);
    EXPECT_EQ(m.plans[i].window_epochs, 1);
    EXPECT_EQ(r.outcome.trials[i].knobs.persistent_workers, (i - at) % 2 == 1);
  }
  EXPECT_EQ(r.outcome.trials[at + 1].decision,
            "pair 1: with persistent_workers, x1.10 over the pair's trial without");
  // The estimate of trials left counts the pairs down one by one.
  for (size_t i = at + 1; i < at + 6; ++i) EXPECT_EQ(r.trials_left[i], r.trials_left[i - 1] - 1) << i;
  const PhaseDecision* persistent = Phase(r, "persistent_workers");
  ASSERT_NE(persistent, nullptr);
  EXPECT_TRUE(persistent->kept) << persistent->why;
  EXPECT_EQ(persistent->why.rfind("kept: x1.10 [1.10, 1.10] with over without, 3 interleaved pairs of 1 whole epoch "
                                  "each; epoch boundary 100.0 ms without, 5.0 ms with",
                                  0),
            0u)
      << persistent->why;
  EXPECT_TRUE(Best(r).knobs.persistent_workers);

  // A resumed run replays the pairs and takes the same decisions.
  for (size_t cut : {at, at + 1, at + 4}) {
    SCOPED_TRACE("interrupted at trial " + std::to_string(cut));
    trials = 0;
    ScriptedMeasurer before(job);
    before.first_batch_s = 0.5;
    InterruptingMeasurer interrupting(before, static_cast<int>(cut));
    std::vector<TrialRecord> stored;
    EXPECT_THROW(RunOn(interrupting, options, setup, &stored), Interrupted);
    trials = 0;
    ScriptedMeasurer rest(job, static_cast<int>(cut));
    rest.first_batch_s = 0.5;
    ReplayMeasurer replay(stored, rest);
    EXPECT_EQ(Decisions(RunOn(replay, options, setup).outcome), Decisions(r.outcome));
  }

  // The budget runs out after the first pair's trial without: its trial with
  // is measured all the same, the pair decides, and the search ends there.
  trials = 0;
  options.time_budget_s = static_cast<double>(at) + 0.5;
  ScriptedMeasurer cut(job);
  cut.first_batch_s = 0.5;
  const SearchRun c = RunOn(cut, options, setup);
  EXPECT_EQ(std::count(c.seen.begin(), c.seen.end(), "persistent_workers 1"), 2);
  const PhaseDecision* cut_persistent = Phase(c, "persistent_workers");
  ASSERT_NE(cut_persistent, nullptr);
  EXPECT_TRUE(cut_persistent->kept);
  EXPECT_NE(cut_persistent->why.find("x1.10 [1.10, 1.10] with over without, 1 interleaved pair of 1 whole epoch "
                                     "each; epoch boundary 100.0 ms without, 5.0 ms with; the time budget ended the "
                                     "pairs"),
            std::string::npos)
      << cut_persistent->why;
  EXPECT_NE(Phase(c, "time_budget"), nullptr);
  EXPECT_TRUE(Best(c).knobs.persistent_workers);
  EXPECT_EQ(Best(c).knobs.num_workers, 1);

  // A first pair whose trial with persistent workers fails: not kept, and the phase says why.
  options.time_budget_s = 1000;
  ScriptedMeasurer failing([](const loader::Knobs& k, const TrialPlan& plan, int) {
    if (plan.window_epochs > 0 && k.persistent_workers) return -1.0;
    return k.num_workers == 0 ? 600.0 : 900.0;
  });
  const SearchRun f = RunOn(failing, options, setup);
  const PhaseDecision* failed = Phase(f, "persistent_workers");
  ASSERT_NE(failed, nullptr);
  EXPECT_FALSE(failed->kept);
  EXPECT_EQ(failed->why.rfind("failed: worker 0 (pid 1) was killed by signal 9", 0), 0u) << failed->why;
  EXPECT_EQ(std::count(f.seen.begin(), f.seen.end(), "persistent_workers 1"), 2);
  EXPECT_FALSE(Best(f).knobs.persistent_workers);

  // Any gain in the pairs keeps them (the setting only removes the restart),
  // one under gain_threshold included; none does not.
  for (const double with : {1.03, 0.98}) {
    SCOPED_TRACE(with);
    ScriptedMeasurer small([with](const loader::Knobs& k, const TrialPlan& plan, int) {
      const double windows = k.num_workers == 0 ? 600.0 : 900.0;
      return plan.window_epochs > 0 && k.persistent_workers ? windows * with : windows;
    });
    const SearchRun s = RunOn(small, options, setup);
    const PhaseDecision* p = Phase(s, "persistent_workers");
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(p->kept, with > 1.0) << p->why;
    EXPECT_EQ(Best(s).knobs.persistent_workers, with > 1.0);
    if (with < 1.0) {
      EXPECT_EQ(p->why.rfind("not kept: x0.98 [0.98, 0.98] with over without, 3 interleaved pairs of 1 whole epoch "
                             "each, not above x1.00",
                             0),
                0u)
          << p->why;
    }
  }
}

// Under a time budget a knee at 0 workers is checked in interleaved pairs
// before the workers are dropped: here the machine slows by a fifth after
// the baseline (a CPU-trained step's speed moving within its process), so
// the sequential trials put workers that gain x1.15 below the baseline.
TEST(Search, UnderATimeBudgetAKneeAtZeroWorkersIsCheckedInPairs) {
  const auto drifting = [](double gain) {
    return [gain](const loader::Knobs& k, const TrialPlan&, int index) {
      return (k.num_workers == 0 ? 100.0 : 100.0 * gain) * (index == 0 ? 1.0 : 0.8);
    };
  };
  SweepOptions options;
  options.copy_phases = false;
  options.prefetch_factors = {2};
  SearchSetup setup;
  setup.usable_cpus = 2;

  // Without a budget the doubling needs two misses and no pairs are measured.
  ScriptedMeasurer unbudgeted(drifting(1.15));
  const SearchRun plain = RunOn(unbudgeted, options, setup);
  EXPECT_EQ(plain.outcome.knee_workers, 0);
  EXPECT_EQ(std::count(plain.seen.begin(), plain.seen.end(), "num_workers_pairs 1"), 0);

  options.time_budget_s = 1000;  // never reached
  ScriptedMeasurer m(drifting(1.15));
  const SearchRun r = RunOn(m, options, setup);
  EXPECT_EQ(r.outcome.knee_workers, 1);
  EXPECT_EQ(std::count(r.seen.begin(), r.seen.end(), "num_workers_pairs 0"), 3);
  EXPECT_EQ(std::count(r.seen.begin(), r.seen.end(), "num_workers_pairs 1"), 3);
  const PhaseDecision* workers = Phase(r, "num_workers");
  ASSERT_NE(workers, nullptr);
  EXPECT_TRUE(workers->kept);
  EXPECT_NE(workers->why.find("knee at 1 worker (by its pairs with the baseline, below)"), std::string::npos)
      << workers->why;
  EXPECT_NE(workers->why.find("the knee at 0 workers was checked in pairs: 1 worker ran x1.15 [1.15, 1.15] over "
                              "the baseline in their windows, 3 interleaved pairs, the baseline outside 5.0% of it "
                              "(above x1.053): 1 worker is the knee"),
            std::string::npos)
      << workers->why;
  EXPECT_EQ(Best(r).knobs.num_workers, 1);
  // The single windows of the pairs are not the fastest trial.
  EXPECT_NE(r.outcome.trials[*r.outcome.fastest].phase, "num_workers_pairs");

  // With each worker trial's restart charged (3 s on an epoch of 2048
  // samples at 92 samples/s, 22 s: x0.88 per epoch, under the knee rule's
  // x1.053), the pairs still compare the windows.
  setup.samples_per_epoch = 2048;
  ScriptedMeasurer charged(drifting(1.15));
  charged.first_batch_s = 3.0;
  const SearchRun c = RunOn(charged, options, setup);
  EXPECT_EQ(c.outcome.knee_workers, 1);
  const PhaseDecision* charged_workers = Phase(c, "num_workers");
  ASSERT_NE(charged_workers, nullptr);
  EXPECT_NE(charged_workers->why.find("1 worker ran x1.15 [1.15, 1.15] over the baseline in their windows"),
            std::string::npos)
      << charged_workers->why;
  setup.samples_per_epoch = 0;

  // Workers that gain less than knee_tolerance leave the knee at 0.
  ScriptedMeasurer flat(drifting(1.03));
  const SearchRun f = RunOn(flat, options, setup);
  EXPECT_EQ(f.outcome.knee_workers, 0);
  const PhaseDecision* flat_workers = Phase(f, "num_workers");
  ASSERT_NE(flat_workers, nullptr);
  EXPECT_NE(flat_workers->why.find("ran x1.03 [1.03, 1.03] over the baseline in their windows, 3 interleaved "
                                   "pairs, not above x1.053 (the baseline within 5.0% of it): the knee stays at 0 "
                                   "workers"),
            std::string::npos)
      << flat_workers->why;

  // A resumed run replays the pairs and takes the same decisions.
  const size_t n = r.outcome.trials.size();
  for (size_t at : {size_t{4}, size_t{6}, n - 1}) {
    SCOPED_TRACE("interrupted at trial " + std::to_string(at));
    ScriptedMeasurer first(drifting(1.15));
    InterruptingMeasurer interrupting(first, static_cast<int>(at));
    std::vector<TrialRecord> stored;
    EXPECT_THROW(RunOn(interrupting, options, setup, &stored), Interrupted);
    ScriptedMeasurer rest(drifting(1.15), static_cast<int>(at));
    ReplayMeasurer replay(stored, rest);
    const SearchRun resumed = RunOn(replay, options, setup);
    EXPECT_EQ(Decisions(resumed.outcome), Decisions(r.outcome));
  }
}

// The count the pairs check is the knee rule's among the worker counts
// measured: the fewest within knee_tolerance of the best of them, not the
// best alone. An in-job CNN's doubling read 1 worker -3.4% and 2 workers
// -3.0% of the baseline; its truth ran 1 worker with persistent workers
// x1.18 of 0 and 2 workers x1.06.
TEST(Search, UnderATimeBudgetTheKneePairsCheckTheFewestWorkersWithinTheTolerance) {
  // The machine slows by a fifth after the baseline; `one` and `two` are the
  // worker counts' gains, and the pairs see them without the drift.
  const auto curve = [](double one, double two) {
    return [one, two](const loader::Knobs& k, const TrialPlan& plan, int index) {
      const double gain = k.num_workers == 0 ? 1.0 : k.num_workers == 1 ? one : two;
      return 100.0 * gain * (plan.phase == "num_workers_pairs" || index == 0 ? 1.0 : 0.8);
    };
  };
  SweepOptions options;
  options.copy_phases = false;
  options.prefetch_factors = {2};
  options.time_budget_s = 1000;  // never reached
  SearchSetup setup;
  setup.usable_cpus = 2;

  // 1 worker within 5% of 2: the pairs check 1 worker, and it is the knee.
  ScriptedMeasurer close(curve(1.16, 1.19));
  const SearchRun c = RunOn(close, options, setup);
  EXPECT_EQ(std::count(c.seen.begin(), c.seen.end(), "num_workers_pairs 1"), 3);
  EXPECT_EQ(std::count(c.seen.begin(), c.seen.end(), "num_workers_pairs 2"), 0);
  EXPECT_EQ(c.outcome.knee_workers, 1);
  const PhaseDecision* workers = Phase(c, "num_workers");
  ASSERT_NE(workers, nullptr);
  EXPECT_NE(workers->why.find("1 worker ran x1.16 [1.16, 1.16] over the baseline in their windows"), std::string::npos)
      << workers->why;

  // 1 worker more than 5% under 2: the pairs check 2 workers.
  ScriptedMeasurer apart(curve(1.05, 1.19));
  const SearchRun a = RunOn(apart, options, setup);
  EXPECT_EQ(std::count(a.seen.begin(), a.seen.end(), "num_workers_pairs 1"), 0);
  EXPECT_EQ(std::count(a.seen.begin(), a.seen.end(), "num_workers_pairs 2"), 3);
  EXPECT_EQ(a.outcome.knee_workers, 2);
}

// The pairs that check a knee at 0 workers go on past `repeats` while the
// knee rule's bar (x1.053) is still inside their interval and the budget has
// time, up to 3 x repeats: an in-job CNN's three pairs read x0.84, x1.03,
// x1.09 (median under the bar) where 1 worker ran x1.09 in its truth.
TEST(Search, UnderATimeBudgetPairsThatCannotPlaceTheKneeBarTakeMoreOfTheBudget) {
  // The sequential trials see the drift (x0.8 after the baseline) and leave
  // the knee at 0; the pairs' 1 worker trials run `ratios` in turn.
  const auto pairs = [](std::vector<double> ratios, std::function<void(int)> on_pair = {}) {
    auto next = std::make_shared<size_t>(0);
    return [ratios, next, on_pair](const loader::Knobs& k, const TrialPlan& plan, int index) {
      if (plan.phase != "num_workers_pairs") return (k.num_workers == 0 ? 100.0 : 109.0) * (index == 0 ? 1.0 : 0.8);
      if (k.num_workers == 0) return 80.0;
      const double ratio = ratios[std::min(*next, ratios.size() - 1)];
      ++*next;
      if (on_pair) on_pair(static_cast<int>(*next));
      return 80.0 * ratio;
    };
  };
  SweepOptions options;
  options.copy_phases = false;
  options.prefetch_factors = {2};
  options.time_budget_s = 1000;
  SearchSetup setup;
  setup.usable_cpus = 2;
  const auto why = [](const SearchRun& r) {
    const PhaseDecision* p = Phase(r, "num_workers");
    return p ? p->why : std::string("no num_workers phase");
  };

  // Three pairs that straddle the bar, then pairs at x1.10: more pairs move
  // the median above it.
  ScriptedMeasurer settling(pairs({0.84, 1.03, 1.09, 1.10}));
  const SearchRun r = RunOn(settling, options, setup);
  const auto measured = std::count(r.seen.begin(), r.seen.end(), "num_workers_pairs 1");
  EXPECT_GT(measured, 3);
  EXPECT_LE(measured, 9);
  EXPECT_EQ(std::count(r.seen.begin(), r.seen.end(), "num_workers_pairs 0"), measured);
  EXPECT_EQ(r.outcome.knee_workers, 1) << why(r);
  EXPECT_NE(why(r).find(" interleaved pairs (3, then more while their interval held x1.053 and the budget had time), "
                        "the baseline outside 5.0% of it (above x1.053): 1 worker is the knee"),
            std::string::npos)
      << why(r);

  // Pairs that never settle stop at 3 x repeats, and their median decides.
  ScriptedMeasurer unsettled(pairs({0.90, 1.20, 0.90, 1.20, 0.90, 1.20, 0.90, 1.20, 0.90, 1.20, 0.90, 1.20}));
  const SearchRun u = RunOn(unsettled, options, setup);
  EXPECT_EQ(std::count(u.seen.begin(), u.seen.end(), "num_workers_pairs 1"), 9);
  EXPECT_EQ(u.outcome.knee_workers, 0);
  EXPECT_NE(why(u).find("ran x0.90 [0.90, 1.20] over the baseline in their windows, 9 interleaved pairs (3, then more"),
            std::string::npos)
      << why(u);

  // A budget whose time left holds no pair as long as the last takes no
  // more: 1 s a trial, and a budget 1 s past the end of the third pair.
  double clock = 0;
  setup.elapsed_s = [&clock] { return clock; };
  const auto ticking = [&clock](Curve curve) -> Curve {
    return [&clock, curve](const loader::Knobs& k, const TrialPlan& plan, int index) {
      clock += 1;
      return curve(k, plan, index);
    };
  };
  double third_ends = 0;
  ScriptedMeasurer probe(ticking(pairs({0.84, 1.03, 1.09, 1.10}, [&third_ends, &clock](int pair) {
    if (pair == 3) third_ends = clock;
  })));
  RunOn(probe, options, setup);  // the budget of 1000 s is never reached
  ASSERT_GT(third_ends, 0);
  clock = 0;
  options.time_budget_s = third_ends + 1.0;
  ScriptedMeasurer short_budget(ticking(pairs({0.84, 1.03, 1.09, 1.10})));
  const SearchRun s = RunOn(short_budget, options, setup);
  EXPECT_EQ(std::count(s.seen.begin(), s.seen.end(), "num_workers_pairs 1"), 3);
  EXPECT_EQ(s.outcome.knee_workers, 0) << why(s);
  options.time_budget_s = 1000;

  // A budget spent by the third pair takes no more, and its three decide.
  bool spent = false;
  setup.elapsed_s = [&spent] { return spent ? 2000.0 : 0.0; };
  ScriptedMeasurer budgeted(pairs({0.84, 1.03, 1.09, 1.10}, [&spent](int pair) { spent = pair >= 3; }));
  const SearchRun b = RunOn(budgeted, options, setup);
  EXPECT_EQ(std::count(b.seen.begin(), b.seen.end(), "num_workers_pairs 1"), 3);
  EXPECT_EQ(b.outcome.knee_workers, 0);
  EXPECT_NE(why(b).find("ran x1.03 [0.84, 1.09] over the baseline in their windows, 3 interleaved pairs, not above "
                        "x1.053"),
            std::string::npos)
      << why(b);
}

// sweep.copy_phases false (a job that trains on the CPU): neither
// pin_memory nor non_blocking is measured, and each phase says why.
TEST(Search, WithoutCopyPhasesPinMemoryAndNonBlockingAreNotTried) {
  ScriptedMeasurer m([](const loader::Knobs& k, const TrialPlan&, int) {
    return 1000.0 * std::min(std::max(k.num_workers, 1), 4) * (k.pin_memory ? 2.0 : 1.0);
  });
  SweepOptions options;
  options.copy_phases = false;
  const SearchRun r = RunOn(m, options, {});
  for (const auto& s : r.seen) {
    EXPECT_EQ(s.rfind("pin_memory", 0), std::string::npos) << s;
    EXPECT_EQ(s.rfind("non_blocking", 0), std::string::npos) << s;
  }
  EXPECT_EQ(r.seen.at(1), "num_workers 1");
  EXPECT_FALSE(Best(r).knobs.pin_memory);
  for (const char* phase : {"pin_memory", "non_blocking"}) {
    const PhaseDecision* d = Phase(r, phase);
    ASSERT_NE(d, nullptr) << phase;
    EXPECT_FALSE(d->kept);
    EXPECT_EQ(d->why, "not tried: sweep.copy_phases is false (the job trains on the CPU: no batch is copied to a device)");
  }
}

// With a reference setting (feedtune.autotune: the job's own DataLoader), the
// final check pairs it with the best instead of the baseline.
TEST(Search, TheFinalCheckPairsTheBestWithTheReference) {
  ScriptedMeasurer m([](const loader::Knobs& k, const TrialPlan&, int) {
    return 1000.0 * std::min(std::max(k.num_workers, 1), 4);
  });
  SearchSetup setup;
  loader::Knobs own;
  own.num_workers = 1;
  setup.reference = own;
  const SearchRun r = RunOn(m, {}, setup);
  std::vector<std::string> checks;
  for (const auto& s : r.seen) {
    if (s.rfind("final_check", 0) == 0) checks.push_back(s);
  }
  const std::vector<std::string> want = {"final_check 1", "final_check 4", "final_check 1", "final_check 4",
                                         "final_check 1", "final_check 4"};
  EXPECT_EQ(checks, want);
  ASSERT_TRUE(r.outcome.speedup.has_value());
  EXPECT_DOUBLE_EQ(*r.outcome.speedup, 4.0);
  const PhaseDecision* check = Phase(r, "final_check");
  ASSERT_NE(check, nullptr);
  EXPECT_NE(check->why.find("over the job's own setting"), std::string::npos) << check->why;
}

TEST(Search, PeakedCurveStopsWhenTheFallIsConfirmed) {
  const std::map<int, double> curve = {{0, 500}, {1, 900}, {2, 1800}, {4, 1200}, {8, 1000}};
  const SearchRun r = Search([&](const loader::Knobs& k) { return curve.at(k.num_workers); });
  EXPECT_EQ(r.outcome.knee_workers, 2);
  EXPECT_EQ(r.outcome.kneedle_workers, 2);
  EXPECT_EQ(r.outcome.trials[4].decision,
            "-33.3% below the best, beyond the noise; the next doubling confirms it before stopping");
  EXPECT_EQ(r.outcome.trials[5].decision, "-44.4% below the best: the fall is confirmed, stop doubling");
  EXPECT_NE(Phase(r, "num_workers")->why.find("stopped at 8 workers: throughput falls"), std::string::npos);
}

TEST(Search, FlatCurveKeepsZeroWorkers) {
  const SearchRun r = Search([](const loader::Knobs&) { return 1000.0; });
  EXPECT_EQ(r.outcome.knee_workers, 0);
  EXPECT_FALSE(r.outcome.kneedle_workers.has_value());
  // Workers never gained, so prefetch_factor and persistent_workers are not
  // tried, and the best is the baseline: no final check.
  for (const auto& t : r.outcome.trials) {
    EXPECT_NE(t.phase, "prefetch_factor");
    EXPECT_NE(t.phase, "persistent_workers");
    EXPECT_NE(t.phase, "final_check");
  }
  EXPECT_EQ(r.outcome.trials[1].decision, "not kept: +0.0%: within the noise");
  EXPECT_EQ(*r.outcome.best, *r.outcome.baseline);
  EXPECT_EQ(r.outcome.speedup, 1.0);
  ASSERT_NE(Phase(r, "persistent_workers"), nullptr);
  EXPECT_FALSE(Phase(r, "persistent_workers")->kept);
}

TEST(Search, SlowerBeyondTheNoiseIsAnIntervalWhollyBelowOne) {
  SearchOutcome outcome;
  EXPECT_FALSE(SlowerBeyondTheNoise(outcome));  // no check measured
  outcome.speedup = 1.0;                        // the check not run: the best is the reference
  EXPECT_FALSE(SlowerBeyondTheNoise(outcome));
  outcome.speedup = 0.82;
  outcome.speedup_ci_low = 0.61;
  outcome.speedup_ci_high = 1.07;  // below x1.00 within the noise
  EXPECT_FALSE(SlowerBeyondTheNoise(outcome));
  outcome.speedup_ci_high = 0.93;
  EXPECT_TRUE(SlowerBeyondTheNoise(outcome));
}

TEST(Search, GainWithinNoiseIsNotKept) {
  TrialRecord cur, cand;
  cur.samples_per_s = 1000;
  cur.ci_low = 900;
  cur.ci_high = 1100;
  cur.repeats = 3;
  cand = cur;
  cand.samples_per_s = 1080;  // +8% but intervals overlap
  cand.ci_low = 1000;
  cand.ci_high = 1160;
  EXPECT_FALSE(IsGain(cand, cur, 0.05));
  cand.ci_low = 1101;
  EXPECT_TRUE(IsGain(cand, cur, 0.05));
  cand.samples_per_s = 1040;  // below the threshold
  EXPECT_FALSE(IsGain(cand, cur, 0.05));
  cand.status = results::TrialStatus::kSkipped;
  cand.samples_per_s = 5000;
  EXPECT_FALSE(IsGain(cand, cur, 0.05));
}

TEST(Search, NoisyCurveKeepsOnlyStepsBeyondTheNoise) {
  // Every trial's interval is +-15%: a 10% step overlaps and is not kept, a
  // 50% step is kept.
  ScriptedMeasurer inner([](const loader::Knobs& k, const TrialPlan&, int) {
    double v = k.num_workers >= 2 ? 1500.0 : 1000.0;
    if (k.pin_memory) v *= 1.10;
    return v;
  });
  struct Noisy final : TrialMeasurer {
    explicit Noisy(TrialMeasurer& in) : in_(in) {}
    TrialRecord Measure(const loader::Knobs& k) override { return MeasurePlanned(k, {}); }
    TrialRecord MeasurePlanned(const loader::Knobs& k, const TrialPlan& p) override {
      TrialRecord t = in_.MeasurePlanned(k, p);
      t.ci_low = t.samples_per_s * 0.85;
      t.ci_high = t.samples_per_s * 1.15;
      return t;
    }
    TrialMeasurer& in_;
  } noisy(inner);
  SearchSetup setup;
  setup.max_workers = 8;
  const SearchRun r = RunOn(noisy, {}, setup);
  EXPECT_EQ(r.outcome.trials[1].phase, "pin_memory");
  EXPECT_EQ(r.outcome.trials[1].decision, "not kept: +10.0%: within the noise");
  EXPECT_EQ(r.outcome.knee_workers, 2);
  EXPECT_FALSE(Best(r).knobs.pin_memory);
}

// A measurer whose intervals are +-15%: wide, as on a busy machine.
SearchRun NoisySearch(const std::map<int, double>& curve) {
  ScriptedMeasurer m([&](const loader::Knobs& k, const TrialPlan&, int) { return curve.at(k.num_workers); });
  struct Wide final : TrialMeasurer {
    explicit Wide(TrialMeasurer& in) : in_(in) {}
    TrialRecord Measure(const loader::Knobs& k) override { return MeasurePlanned(k, {}); }
    TrialRecord MeasurePlanned(const loader::Knobs& k, const TrialPlan& p) override {
      TrialRecord t = in_.MeasurePlanned(k, p);
      t.ci_low = t.samples_per_s * 0.85;
      t.ci_high = t.samples_per_s * 1.15;
      return t;
    }
    TrialMeasurer& in_;
  } wide(m);
  SearchSetup setup;
  setup.max_workers = 64;
  return RunOn(wide, {}, setup);
}

TEST(Search, RisingWithinNoiseKeepsDoubling) {
  // 2 and 4 workers rise beyond the threshold but within the noise: no gain
  // to keep, and no reason to stop; 8 gains clearly; 16 and 32 do not.
  const SearchRun r =
      NoisySearch({{0, 1000}, {1, 1000}, {2, 1100}, {4, 1200}, {6, 1300}, {8, 1400}, {16, 1400}, {32, 1400}});
  EXPECT_EQ(r.outcome.trials[2].decision,
            "+0.0%: 1 worker adds no parallelism to the main process's loading; go on to 2");
  EXPECT_EQ(r.outcome.trials[3].decision, "+10.0%: rising, but within noise; keep doubling");
  EXPECT_EQ(r.outcome.trials[4].decision, "+20.0%: rising, but within noise; keep doubling");
  EXPECT_EQ(r.outcome.trials[5].decision, "+40.0% over the best so far");
  EXPECT_EQ(r.outcome.trials[7].decision, "+0.0%: two doublings without a gain, stop doubling");
  EXPECT_EQ(r.outcome.trials[7].knobs.num_workers, 32);
  EXPECT_EQ(r.outcome.knee_workers, 8);
}

TEST(Search, AFallWithinNoiseIsAMissNotAStop) {
  const SearchRun r = NoisySearch({{0, 1000}, {1, 2000}, {2, 1850}, {4, 2000}, {8, 1500}});
  EXPECT_EQ(r.outcome.trials[3].decision, "-7.5%: no gain beyond noise");
  EXPECT_EQ(r.outcome.trials[4].decision, "+0.0%: two doublings without a gain, stop doubling");
  EXPECT_EQ(r.outcome.knee_workers, 1);
}

TEST(Search, KeptStepsCarryForward) {
  // pin helps by 20%, non_blocking by 10% more, prefetch 4 by 10% more.
  const SearchRun r = Search([](const loader::Knobs& k) {
    double v = 1000.0 * std::min(std::max(k.num_workers, 1), 2);
    if (k.pin_memory) v *= 1.2;
    if (k.non_blocking) v *= 1.1;
    if (k.prefetch_factor == 4) v *= 1.1;
    return v;
  });
  const TrialRecord& best = Best(r);
  EXPECT_TRUE(best.knobs.pin_memory);
  EXPECT_TRUE(best.knobs.non_blocking);
  EXPECT_EQ(best.knobs.prefetch_factor, 4);
  EXPECT_EQ(best.knobs.num_workers, 2);
  EXPECT_FALSE(best.knobs.persistent_workers);
  EXPECT_EQ(r.outcome.trials[1].decision, "kept: +20.0%");
  ASSERT_NE(Phase(r, "prefetch_factor"), nullptr);
  EXPECT_TRUE(Phase(r, "prefetch_factor")->kept);
  EXPECT_EQ(Phase(r, "prefetch_factor")->why, "kept 4: +10.0% over prefetch_factor 2");
}

TEST(Search, NonBlockingIsTriedWithPinningWhenPinningAloneDidNotPay) {
  const SearchRun r = Search([](const loader::Knobs& k) { return k.pin_memory && k.non_blocking ? 1500.0 : 1000.0; });
  const TrialRecord* nb = nullptr;
  for (const auto& t : r.outcome.trials) {
    if (t.phase == "non_blocking") nb = &t;
  }
  ASSERT_NE(nb, nullptr);
  EXPECT_TRUE(nb->knobs.pin_memory);
  EXPECT_TRUE(nb->knobs.non_blocking);
  EXPECT_EQ(nb->decision, "kept: +50.0% (with pin_memory: a pageable copy is synchronous anyway)");
}

TEST(Search, FailingTrialStopsTheDoublingAndIsRecorded) {
  const SearchRun r =
      Search([](const loader::Knobs& k) { return k.num_workers >= 4 ? -1.0 : 1000.0 * (k.num_workers + 1); });
  EXPECT_EQ(r.outcome.knee_workers, 2);
  bool found = false;
  for (const auto& t : r.outcome.trials) {
    if (t.status == results::TrialStatus::kFailed) {
      found = true;
      EXPECT_EQ(t.knobs.num_workers, 4);
      EXPECT_EQ(t.decision, "failed: worker 0 (pid 1) was killed by signal 9 (SIGKILL) while loading batch 0");
    }
  }
  EXPECT_TRUE(found);
  EXPECT_NE(Phase(r, "num_workers")->why.find("stopped at 4 workers: the trial failed"), std::string::npos);
}

TEST(Search, FailedBaselineEndsTheSearch) {
  const SearchRun r = Search([](const loader::Knobs&) { return -1.0; });
  EXPECT_EQ(r.outcome.trials.size(), 1u);
  EXPECT_FALSE(r.outcome.best.has_value());
  EXPECT_FALSE(r.outcome.phases.empty());
}

TEST(Search, KneeIsRefinedByBisection) {
  // Gains until 6 workers, flat after: doubling sees 4 < 8 ~ 16; bisection finds 6.
  const SearchRun r = Search([](const loader::Knobs& k) { return 1000.0 * std::min(std::max(k.num_workers, 1), 6); });
  EXPECT_EQ(r.outcome.knee_workers, 6);
}

TEST(Search, RefinementOnlyWhenTheKneeStepIsWorthIt) {
  // The knee (8, within 5% of the best) gains only 0.2% over its lower
  // neighbour (4): no point between them can be told apart, so no bisection.
  const std::map<int, double> curve = {{0, 100}, {1, 200}, {2, 400}, {4, 949}, {8, 951}, {16, 1000}, {32, 1000},
                                       {64, 1000}};
  const SearchRun r = Search([&](const loader::Knobs& k) { return curve.at(k.num_workers); });
  EXPECT_EQ(r.outcome.knee_workers, 8);
  for (const auto& t : r.outcome.trials) EXPECT_NE(t.knobs.num_workers, 6) << t.phase;
}

TEST(Search, MaxWorkersCapsTheDoubling) {
  const SearchRun r = Search([](const loader::Knobs& k) { return 1000.0 * std::max(k.num_workers, 1); }, 4);
  int most = 0;
  for (const auto& t : r.outcome.trials) most = std::max(most, t.knobs.num_workers);
  EXPECT_EQ(most, 4);
  EXPECT_EQ(r.outcome.knee_workers, 4);
  EXPECT_NE(Phase(r, "num_workers")->why.find("reached max_workers 4"), std::string::npos);
}

TEST(Search, BudgetSkipStopsTheDoublingAndIsRecorded) {
  // Throughput keeps rising, but from 16 workers on the memory budget says no:
  // 64 MiB per worker against 0.5 x 2 GiB.
  ScriptedMeasurer inner(
      [](const loader::Knobs& k, const TrialPlan&, int) { return 1000.0 * std::max(k.num_workers, 1); });
  BudgetFacts facts;
  facts.mem_available_bytes = int64_t{2} << 30;
  facts.batch_bytes = 1 << 20;
  Budget budget(facts, BudgetOptions{});
  TrialRecord base;
  base.status = results::TrialStatus::kOk;
  base.peak_rss_bytes = 64 << 20;  // a worker may come to own all of it
  budget.Observe(base);
  BudgetGate gate(budget, inner);
  const SearchRun r = RunOn(gate);
  const TrialRecord* skipped = nullptr;
  for (const auto& t : r.outcome.trials) {
    if (t.status == results::TrialStatus::kSkipped) {
      skipped = &t;
      break;
    }
  }
  ASSERT_NE(skipped, nullptr);
  EXPECT_EQ(skipped->knobs.num_workers, 16);
  EXPECT_EQ(skipped->phase, "num_workers");
  EXPECT_EQ(skipped->decision.rfind("skipped: memory budget: needs about", 0), 0u) << skipped->decision;
  EXPECT_NE(skipped->decision.find("sweep.budget.memory_fraction"), std::string::npos);
  EXPECT_EQ(r.outcome.knee_workers, 8);
  EXPECT_NE(Phase(r, "num_workers")->why.find("stopped at 16 workers: over a budget"), std::string::npos);
  for (const auto& t : r.outcome.trials) {
    if (t.status == results::TrialStatus::kOk) {
      EXPECT_LT(t.knobs.num_workers, 16);
    }
  }
}

TEST(Search, PersistentWorkersAreMeasuredOverWholeEpochsBothWays) {
  // Persistent workers save the restart: 20% more over whole epochs.
  ScriptedMeasurer m([](const loader::Knobs& k, const TrialPlan&, int) {
    return 1000.0 * std::min(std::max(k.num_workers, 1), 2) * (k.persistent_workers ? 1.2 : 1.0);
  });
  SearchSetup setup;
  setup.samples_per_epoch = 4096;
  const SearchRun r = RunOn(m, {}, setup);
  std::vector<const TrialRecord*> pers;
  for (const auto& t : r.outcome.trials) {
    if (t.phase == "persistent_workers") pers.push_back(&t);
  }
  ASSERT_EQ(pers.size(), 2u);
  EXPECT_FALSE(pers[0]->knobs.persistent_workers);
  EXPECT_TRUE(pers[1]->knobs.persistent_workers);
  EXPECT_EQ(pers[0]->decision, "reference over whole epochs: epoch boundary 100.0 ms");
  EXPECT_EQ(pers[1]->decision, "kept: +20.0%; epoch boundary 100.0 ms without, 5.0 ms with");
  int epoch_plans = 0;
  for (const auto& p : m.plans) {
    if (p.phase == "persistent_workers") {
      ++epoch_plans;
      EXPECT_GE(p.window_epochs * 3, 2);  // 3 repeats: at least 2 epochs per setting
    } else if (p.phase == "num_workers_persistent") {
      EXPECT_EQ(p.window_epochs, 1);  // as the persistent_workers pair, with 3 repeats
    } else if (p.phase != "final_check") {
      EXPECT_EQ(p.window_epochs, 0) << p.phase;
    }
  }
  EXPECT_EQ(epoch_plans, 2);
  EXPECT_TRUE(Best(r).knobs.persistent_workers);
}

TEST(Search, OneRepeatStillSpansTwoEpochsPerSetting) {
  ScriptedMeasurer m([](const loader::Knobs& k, const TrialPlan&, int) { return 1000.0 * std::max(k.num_workers, 1); });
  SweepOptions options;
  options.repeats = 1;
  SearchSetup setup;
  setup.max_workers = 2;
  RunOn(m, options, setup);
  bool seen = false;
  for (const auto& p : m.plans) {
    if (p.phase == "persistent_workers") {
      seen = true;
      EXPECT_EQ(p.window_epochs, 2);
    }
  }
  EXPECT_TRUE(seen);
}

TEST(Search, PersistentCheckIsNotRunWhenEpochsAreTooLong) {
  ScriptedMeasurer m([](const loader::Knobs& k, const TrialPlan&, int) { return 1000.0 * std::max(k.num_workers, 1); });
  SearchSetup setup;
  setup.max_workers = 2;
  setup.samples_per_epoch = 1'281'167;  // ImageNet at 2000 samples/s: ~11 minutes an epoch
  const SearchRun r = RunOn(m, {}, setup);
  for (const auto& t : r.outcome.trials) EXPECT_NE(t.phase, "persistent_workers");
  ASSERT_NE(Phase(r, "persistent_workers"), nullptr);
  EXPECT_NE(Phase(r, "persistent_workers")->why.find("not tried: an epoch takes about 641 s"), std::string::npos)
      << Phase(r, "persistent_workers")->why;
}

TEST(Search, SmallGainsThatAddUpAreKeptTogether) {
  // 32 workers +4% over the knee (16), prefetch_factor 8 +3%, persistent
  // workers +3%: each below the 5% threshold alone, +10% together.
  ScriptedMeasurer m([](const loader::Knobs& k, const TrialPlan&, int) {
    double v = 1000.0 * std::min(std::max(k.num_workers, 1), 16) * (k.num_workers >= 32 ? 1.04 : 1.0);
    if (k.prefetch_factor == 8) v *= 1.03;
    if (k.persistent_workers) v *= 1.03;
    return v;
  });
  SearchSetup setup;
  setup.samples_per_epoch = 4096;
  const SearchRun r = RunOn(m, {}, setup);
  EXPECT_EQ(r.outcome.knee_workers, 16);
  const TrialRecord* combined = nullptr;
  for (const auto& t : r.outcome.trials) {
    if (t.phase == "combined") combined = &t;
  }
  ASSERT_NE(combined, nullptr);
  EXPECT_EQ(combined->decision, "kept: +10.3% for num_workers 32, prefetch_factor 8, persistent_workers together");
  EXPECT_EQ(Best(r).phase, "combined");
  EXPECT_EQ(Best(r).knobs.num_workers, 32);
  EXPECT_EQ(Best(r).knobs.prefetch_factor, 8);
  EXPECT_TRUE(Best(r).knobs.persistent_workers);
  // Measured over whole epochs, as persistent_workers is part of it.
  bool seen = false;
  for (const auto& p : m.plans) {
    if (p.phase == "combined") {
      seen = true;
      EXPECT_GE(p.window_epochs, 1);
    }
  }
  EXPECT_TRUE(seen);
}

TEST(Search, ASingleSmallGainGetsNoSecondChance) {
  // Only persistent_workers gains (+3%, below the threshold): nothing to combine.
  const SearchRun r = Search([](const loader::Knobs& k) {
    return 1000.0 * std::min(std::max(k.num_workers, 1), 4) * (k.persistent_workers ? 1.03 : 1.0);
  });
  for (const auto& t : r.outcome.trials) EXPECT_NE(t.phase, "combined");
  EXPECT_EQ(Phase(r, "combined")->why, "not tried: only persistent_workers gained within the noise");
  EXPECT_FALSE(Best(r).knobs.persistent_workers);
}

TEST(Search, FinalCheckInterleavesBaselineAndBestAndReportsTheSpeedup) {
  // During the final check the machine drifts: each pair is slower than the
  // last, but baseline and best drift alike, so the ratio stays 2.
  ScriptedMeasurer m([](const loader::Knobs& k, const TrialPlan& p, int index) {
    const double v = 1000.0 * std::min(std::max(k.num_workers, 1), 2);
    return p.phase == "final_check" ? v * (1.0 - 0.05 * index / 2) : v;
  });
  SearchSetup setup;
  setup.max_workers = 4;
  const SearchRun r = RunOn(m, {}, setup);
  std::vector<const TrialRecord*> checks;
  for (const auto& t : r.outcome.trials) {
    if (t.phase == "final_check") checks.push_back(&t);
  }
  ASSERT_EQ(checks.size(), 6u);
  for (size_t i = 0; i < checks.size(); ++i) {
    EXPECT_EQ(checks[i]->knobs.num_workers, i % 2 == 0 ? 0 : 2) << i;  // A B A B A B
    EXPECT_EQ(checks[i]->repeats, 1);
  }
  ASSERT_TRUE(r.outcome.speedup.has_value());
  EXPECT_NEAR(*r.outcome.speedup, 2.0, 0.15);
  EXPECT_LE(*r.outcome.speedup_ci_low, *r.outcome.speedup);
  EXPECT_GE(*r.outcome.speedup_ci_high, *r.outcome.speedup);
  EXPECT_GT(*r.outcome.speedup_ci_low, 1.5);
  EXPECT_TRUE(Phase(r, "final_check")->kept);
  // The final check never becomes the best.
  EXPECT_NE(Best(r).phase, "final_check");
}

TEST(Search, EveryPhaseHasADecision) {
  const SearchRun r = Search([](const loader::Knobs& k) { return 1000.0 * std::min(std::max(k.num_workers, 1), 4); });
  std::vector<std::string> names;
  for (const auto& p : r.outcome.phases) {
    names.push_back(p.phase);
    EXPECT_FALSE(p.why.empty()) << p.phase;
  }
  const std::vector<std::string> want = {"pin_memory",  "num_workers",    "non_blocking", "prefetch_factor",
                                         "persistent_workers", "cpu_binding", "worker_threads", "combined",
                                         "final_check"};
  EXPECT_EQ(names, want);
  EXPECT_EQ(Phase(r, "combined")->why, "not tried: no change gained even within the noise");
  for (const auto& t : r.outcome.trials) EXPECT_FALSE(t.decision.empty()) << t.phase;
}

TEST(Search, UsesAtMostAQuarterOfTheDefaultGrid) {
  // The default space: max_workers 64, prefetch_factors {1, 2, 4, 8}, pin,
  // non_blocking, persistent: 8 x 2 x 2 x 4 x 2 = 256 grid points. Whatever
  // the curve, the sequence (final check included) stays within 64 trials.
  const std::vector<std::pair<std::string, std::function<double(const loader::Knobs&)>>> curves = {
      {"flat", [](const loader::Knobs&) { return 1000.0; }},
      {"rising to 64", [](const loader::Knobs& k) { return 100.0 * (k.num_workers + 1); }},
      {"knee at 48", [](const loader::Knobs& k) { return 100.0 * std::min(k.num_workers + 1, 48); }},
      {"peaked at 2", [](const loader::Knobs& k) { return k.num_workers == 2 ? 2000.0 : 1000.0; }},
      {"every knob gains",
       [](const loader::Knobs& k) {
         return 100.0 * std::min(k.num_workers + 1, 40) * (k.pin_memory ? 1.2 : 1) * (k.non_blocking ? 1.2 : 1) *
                (k.prefetch_factor == 8 ? 1.2 : 1) * (k.persistent_workers ? 1.2 : 1);
       }},
  };
  for (const auto& [name, curve] : curves) {
    const SearchRun r = Search(curve, 64);
    EXPECT_LE(r.outcome.trials.size(), 64u) << name;
  }
}

// --- resume -------------------------------------------------------------

// Noisy and deterministic in the trial's position in the sequence, so that a
// trial measured in the first run and the same trial measured after a resume
// give the same figures.
double NoisyCurve(const loader::Knobs& k, const TrialPlan&, int index) {
  double v = 800.0 * std::min(std::max(k.num_workers, 1), 6);
  if (k.pin_memory) v *= 1.08;
  if (k.prefetch_factor == 8) v *= 1.07;
  if (k.persistent_workers) v *= 1.06;
  if (k.num_workers == 12) return -1;  // one failing trial on the way
  return v * (1.0 + 0.03 * std::sin(index * 1.7));
}

// Recorded curve shapes of real DataLoader jobs: whatever the
// shape, the named setting is within 5% of the curve's best.

// Throughput by worker count from a table; counts between entries take the
// lower entry's value (a step function), so refinement points are defined.
double Lookup(const std::map<int, double>& curve, int workers) {
  auto it = curve.upper_bound(workers);
  return std::prev(it)->second;
}

// A measurer on a worker curve with a relative interval of +-`noise`, that
// reports `batches_per_epoch` like a workload that knows its epoch.
class CurveMeasurer final : public TrialMeasurer {
 public:
  CurveMeasurer(std::function<double(int)> curve, double noise, int64_t batches_per_epoch = 0)
      : curve_(std::move(curve)), noise_(noise), batches_(batches_per_epoch) {}
  TrialRecord Measure(const loader::Knobs& k) override { return MeasurePlanned(k, {}); }
  TrialRecord MeasurePlanned(const loader::Knobs& k, const TrialPlan& plan) override {
    TrialRecord t;
    t.knobs = k;
    t.samples_per_s = curve_(k.num_workers);
    t.ci_low = t.samples_per_s * (1 - noise_);
    t.ci_high = t.samples_per_s * (1 + noise_);
    t.repeats = plan.repeats > 0 ? plan.repeats : 3;
    t.epoch_boundary_ms = NAN;
    if (batches_ > 0) t.batches_per_epoch = batches_;
    measured.insert(k.num_workers);
    return t;
  }
  std::set<int> measured;

 private:
  std::function<double(int)> curve_;
  double noise_;
  int64_t batches_;
};

double ChoiceOverBest(const SearchRun& r, const std::function<double(int)>& curve, int max_workers) {
  double best = 0;
  for (int w = 0; w <= max_workers; ++w) best = std::max(best, curve(w));
  return curve(Best(r).knobs.num_workers) / best;
}

TEST(RecordedCurves, DipAtOneWorkerDoesNotEndTheDoubling) {
  // torch 1.13, 1 ms CPU per 150 KB sample, batch 64, 2 CPUs:
  // 1 worker is slower than none, 2 and 4 are the best.
  const std::map<int, double> curve = {{0, 912}, {1, 805}, {2, 1520}, {3, 1540}, {4, 1570}, {8, 1480}};
  const auto f = [&](int w) { return Lookup(curve, w); };
  CurveMeasurer m(f, 0.04);
  SearchSetup setup;
  setup.max_workers = 8;
  setup.usable_cpus = 2;
  const SearchRun r = RunOn(m, {}, setup);
  EXPECT_EQ(r.outcome.trials[2].knobs.num_workers, 1);
  EXPECT_EQ(r.outcome.trials[2].decision,
            "-11.7% below the best: 1 worker adds no parallelism to the main process's loading; go on to 2");
  EXPECT_TRUE(m.measured.count(2) && m.measured.count(4));
  EXPECT_GE(ChoiceOverBest(r, f, 8), 0.95) << "chose " << Best(r).knobs.num_workers;
}

TEST(RecordedCurves, JaggedShortEpochMeasuresOnlyPointsThatCanDiffer) {
  // Wait-bound, 500 samples, batch 32: 16 batches per epoch, non-persistent
  // workers. 9 to 15 workers need 2 rounds per epoch as 8 do (12 and 14
  // were measured below 8); 16 need one.
  const std::map<int, double> curve = {{0, 70}, {1, 66}, {2, 130}, {3, 170}, {4, 250}, {6, 330},
                                       {8, 516}, {12, 486}, {14, 471}, {16, 650}};
  const auto f = [&](int w) { return Lookup(curve, w); };
  CurveMeasurer m(f, 0.03, 16);
  SearchSetup setup;
  setup.max_workers = 64;
  setup.usable_cpus = 2;
  const SearchRun r = RunOn(m, {}, setup);
  EXPECT_EQ(Best(r).knobs.num_workers, 16);
  for (int w : m.measured) {
    EXPECT_TRUE(w <= 4 || w == 6 || w == 8 || w == 16) << w << " workers cannot differ from a measured point";
  }
  const PhaseDecision* workers = Phase(r, "num_workers");
  ASSERT_NE(workers, nullptr);
  EXPECT_NE(workers->why.find("stopped at 16 workers: one round per epoch (16 batches)"), std::string::npos)
      << workers->why;
  EXPECT_NE(workers->why.find("the curve is stepped by epoch rounds: 16 batches per epoch"), std::string::npos)
      << workers->why;
  EXPECT_NE(workers->why.find("9 to 15 workers take 2 rounds as 8 do"), std::string::npos) << workers->why;
  EXPECT_GE(ChoiceOverBest(r, f, 64), 0.95);
}

TEST(RecordedCurves, ShortEpochDoublingEndsAtOneRound) {
  // 15 batches per epoch: the doubling goes 1, 2, 4, 8, then 15 (not 16).
  const auto f = [](int w) { return w == 0 ? 60.0 : 900.0 / static_cast<double>((15 + w - 1) / w); };
  CurveMeasurer m(f, 0.02, 15);
  SearchSetup setup;
  setup.usable_cpus = 2;
  const SearchRun r = RunOn(m, {}, setup);
  EXPECT_TRUE(m.measured.count(15));
  EXPECT_FALSE(m.measured.count(16));
  EXPECT_EQ(Best(r).knobs.num_workers, 15);
}

TEST(RecordedCurves, PlateauTakesTheFewestWorkersOnIt) {
  const std::map<int, double> curve = {{0, 1000}, {1, 1900}, {2, 3000}, {4, 3100}, {8, 3050}, {16, 3080}, {32, 3000}};
  const auto f = [&](int w) { return Lookup(curve, w); };
  CurveMeasurer m(f, 0.03);
  SearchSetup setup;
  setup.usable_cpus = 8;
  const SearchRun r = RunOn(m, {}, setup);
  EXPECT_EQ(Best(r).knobs.num_workers, 2);
  EXPECT_GE(ChoiceOverBest(r, f, 64), 0.95);
}

TEST(RecordedCurves, OneNoisyFallIsConfirmedBeforeStopping) {
  // 4 workers measured low once (a neighbour's burst); 8 and 16 are the best.
  const std::map<int, double> curve = {{0, 500}, {1, 950}, {2, 1800}, {4, 1250}, {5, 2400}, {8, 2600}, {16, 2700},
                                       {32, 2650}};
  const auto f = [&](int w) { return Lookup(curve, w); };
  CurveMeasurer m(f, 0.03);
  SearchSetup setup;
  setup.usable_cpus = 16;
  const SearchRun r = RunOn(m, {}, setup);
  EXPECT_EQ(r.outcome.trials[4].knobs.num_workers, 4);
  EXPECT_EQ(r.outcome.trials[4].decision,
            "-30.6% below the best, beyond the noise; the next doubling confirms it before stopping");
  EXPECT_TRUE(m.measured.count(8));
  EXPECT_GE(ChoiceOverBest(r, f, 64), 0.95) << "chose " << Best(r).knobs.num_workers;
}

TEST(RecordedCurves, MonotoneRiseReachesTheUsableCpuCount) {
  // CPU-bound on 16 usable CPUs; near the count each doubling gains less than
  // the threshold beyond the noise (+-8%), and it still pays to go on.
  const std::map<int, double> curve = {{0, 250}, {1, 240}, {2, 470}, {4, 900}, {8, 930}, {16, 1000}, {32, 990},
                                       {64, 980}};
  const auto f = [&](int w) { return Lookup(curve, w); };
  CurveMeasurer m(f, 0.08);
  SearchSetup setup;
  setup.usable_cpus = 16;
  const SearchRun r = RunOn(m, {}, setup);
  EXPECT_TRUE(m.measured.count(16));
  EXPECT_EQ(r.outcome.trials[5].knobs.num_workers, 8);
  EXPECT_EQ(r.outcome.trials[5].decision, "+3.3%: rising below the usable CPU count; keep doubling");
  EXPECT_GE(ChoiceOverBest(r, f, 64), 0.95) << "chose " << Best(r).knobs.num_workers;
}

TEST(RecordedCurves, PersistentWorkersReopenTheCountsAboveTheKnee) {
  // bench/regret's short epoch (16 batches): without persistent workers 6
  // beat 8 (8 restart every epoch); with them 8 take 2 rounds against 3.
  const std::map<int, double> restart = {{0, 300}, {1, 290}, {2, 450}, {4, 650}, {6, 787}, {8, 703}};
  const std::map<int, double> persistent = {{0, 300}, {1, 290}, {2, 460}, {4, 700}, {6, 1000}, {8, 1400}};
  ScriptedMeasurer m([&](const loader::Knobs& k, const TrialPlan&, int) {
    return Lookup(k.persistent_workers ? persistent : restart, k.num_workers);
  });
  SearchSetup setup;
  setup.max_workers = 8;
  setup.usable_cpus = 2;
  setup.batches_per_epoch = 16;
  const SearchRun r = RunOn(m, {}, setup);
  EXPECT_EQ(r.outcome.knee_workers, 6);
  EXPECT_EQ(Best(r).knobs.num_workers, 8);
  EXPECT_TRUE(Best(r).knobs.persistent_workers);
  EXPECT_EQ(Best(r).phase, "num_workers_persistent");
  EXPECT_EQ(Best(r).decision, "kept: +40.0% over 6 workers with persistent_workers");
  const PhaseDecision* phase = Phase(r, "num_workers_persistent");
  ASSERT_NE(phase, nullptr);
  EXPECT_EQ(phase->why, "kept 8 workers with persistent_workers (the knee without it: 6)");
}

TEST(Decisions, ADropAChangeWithinTheNoiseAndASmallGainAreToldApart) {
  const auto run = [](double pin_factor, double noise) {
    CurveMeasurer m([](int) { return 1000.0; }, noise);
    struct Pinned final : TrialMeasurer {
      Pinned(TrialMeasurer& in, double f) : in_(in), f_(f) {}
      TrialRecord Measure(const loader::Knobs& k) override { return MeasurePlanned(k, {}); }
      TrialRecord MeasurePlanned(const loader::Knobs& k, const TrialPlan& p) override {
        TrialRecord t = in_.MeasurePlanned(k, p);
        if (k.pin_memory) {
          t.samples_per_s *= f_;
          t.ci_low *= f_;
          t.ci_high *= f_;
        }
        return t;
      }
      TrialMeasurer& in_;
      double f_;
    } pinned(m, pin_factor);
    SearchSetup setup;
    setup.max_workers = 2;
    return RunOn(pinned, {}, setup).outcome.trials[1].decision;
  };
  EXPECT_EQ(run(0.391, 0.01), "not kept: -60.9%: slower beyond the noise");
  EXPECT_EQ(run(1.03, 0.10), "not kept: +3.0%: within the noise");
  EXPECT_EQ(run(1.03, 0.01), "not kept: +3.0%: faster beyond the noise, but under the 5.0% threshold");
  EXPECT_EQ(run(0.98, 0.10), "not kept: -2.0%: within the noise");
}

TEST(Resume, ReachesTheDecisionsOfAnUninterruptedRun) {
  SearchSetup setup;
  setup.max_workers = 32;
  setup.samples_per_epoch = 2048;
  ScriptedMeasurer whole(NoisyCurve);
  const SearchRun reference = RunOn(whole, {}, setup);
  const size_t n = reference.outcome.trials.size();
  ASSERT_GT(n, 15u);

  for (size_t at = 0; at < n; ++at) {
    SCOPED_TRACE("interrupted at trial " + std::to_string(at));
    // First run: interrupted before trial `at` finishes; the store keeps the others.
    ScriptedMeasurer first(NoisyCurve);
    InterruptingMeasurer interrupting(first, static_cast<int>(at));
    std::vector<TrialRecord> stored;
    EXPECT_THROW(RunOn(interrupting, {}, setup, &stored), Interrupted);
    ASSERT_EQ(stored.size(), at);

    // Resume: the stored trials are replayed, the rest measured.
    ScriptedMeasurer rest(NoisyCurve, static_cast<int>(at));
    ReplayMeasurer replay(stored, rest);
    const SearchRun resumed = RunOn(replay, {}, setup);
    EXPECT_EQ(replay.replayed(), at);
    EXPECT_EQ(rest.plans.size(), n - at);  // nothing measured twice
    EXPECT_EQ(Decisions(resumed.outcome), Decisions(reference.outcome));
    EXPECT_EQ(resumed.outcome.best, reference.outcome.best);
    EXPECT_EQ(resumed.outcome.knee_workers, reference.outcome.knee_workers);
    EXPECT_EQ(resumed.outcome.kneedle_workers, reference.outcome.kneedle_workers);
    EXPECT_EQ(resumed.outcome.speedup, reference.outcome.speedup);
  }
}

TEST(Resume, AMismatchedStoredTrialIsRefused) {
  ScriptedMeasurer first(NoisyCurve);
  std::vector<TrialRecord> stored;
  RunOn(first, {}, {}, &stored);
  stored.resize(4);
  stored[3].knobs.num_workers = 3;  // the sequence would never ask for this
  ScriptedMeasurer rest(NoisyCurve);
  ReplayMeasurer replay(stored, rest);
  try {
    RunOn(replay);
    FAIL() << "expected ReplayMismatch";
  } catch (const ReplayMismatch& e) {
    EXPECT_NE(std::string(e.what()).find("stored trial 4"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("nw=3"), std::string::npos) << e.what();
  }
}

TEST(Knee, FewestWorkersWithinTolerance) {
  TrialRecord a, b, c;
  a.samples_per_s = 100;
  b.samples_per_s = 960;
  c.samples_per_s = 1000;
  std::vector<std::pair<int, const TrialRecord*>> curve = {{0, &a}, {4, &b}, {8, &c}};
  EXPECT_EQ(KneeIndex(curve, 0.05), 1u);
  EXPECT_EQ(KneeIndex(curve, 0.01), 2u);
}

// Seeded searches (`sweep --seed-from`): a curve that peaks at `peak`
// workers (250 per worker up to it, 10% less per doubling above it), the
// other knobs changing nothing unless `non_blocking_gain` says so.
double PeakCurve(const loader::Knobs& k, int peak, double non_blocking_gain = 0) {
  double v = 200;
  if (k.num_workers > 0) {
    v = k.num_workers <= peak ? 250.0 * k.num_workers
                              : 250.0 * peak * std::pow(0.9, std::log2(double(k.num_workers) / peak));
  }
  return k.non_blocking ? v * (1 + non_blocking_gain) : v;
}

SearchSeed SeedOf(int knee, loader::Knobs best = {}) {
  SearchSeed seed;
  seed.knee_workers = knee;
  best.num_workers = knee;
  seed.best = best;
  seed.source = "run 1 of box-a";
  return seed;
}

SearchRun SeededSearch(std::function<double(const loader::Knobs&)> curve, std::optional<SearchSeed> seed,
                       const SweepOptions& options, int max_workers = 64) {
  ScriptedMeasurer m([curve](const loader::Knobs& k, const TrialPlan&, int) { return curve(k); });
  SearchSetup setup;
  setup.max_workers = max_workers;
  setup.seed = std::move(seed);
  SearchRun r = RunOn(m, options, setup);
  r.plans = m.plans;
  return r;
}

TEST(Seeded, AtTheRightKneeTakesAtMostHalfTheTrialsAndPicksTheSameSetting) {
  SweepOptions options;
  options.repeats = 2;  // final check: 2 pairs in both
  const auto curve = [](const loader::Knobs& k) { return PeakCurve(k, 4); };
  const SearchRun unseeded = SeededSearch(curve, std::nullopt, options);
  const SearchRun seeded = SeededSearch(curve, SeedOf(4), options);
  EXPECT_EQ(unseeded.outcome.knee_workers, 4);
  EXPECT_EQ(seeded.outcome.knee_workers, 4);
  EXPECT_EQ(Best(seeded).knobs, Best(unseeded).knobs);
  EXPECT_LE(2 * seeded.outcome.trials.size(), unseeded.outcome.trials.size())
      << seeded.outcome.trials.size() << " seeded against " << unseeded.outcome.trials.size();
  // The knee, one doubling above it, one halving below it; nothing else to confirm.
  std::vector<std::string> expected = {"baseline 0", "num_workers 4", "num_workers 8", "num_workers 2"};
  for (const std::string& s : FinalChecks(2, 4)) expected.push_back(s);
  EXPECT_EQ(seeded.seen, expected);
  EXPECT_EQ(seeded.outcome.trials[1].decision,
            "+400.0% over the baseline: the knee of run 1 of box-a, where the seeded doubling starts");
  EXPECT_EQ(seeded.outcome.trials[2].decision, "-10.0%: no gain over the best so far, stop doubling up");
  EXPECT_EQ(seeded.outcome.trials[3].decision, "-50.0% against the best median, beyond the knee tolerance: stop halving");
  ASSERT_NE(Phase(seeded, "num_workers"), nullptr);
  EXPECT_NE(Phase(seeded, "num_workers")->why.find("seeded at 4 workers, the knee of run 1 of box-a; doubled up to "
                                                   "8 workers: no gain; halved down to 2 workers: below the knee "
                                                   "tolerance"),
            std::string::npos)
      << Phase(seeded, "num_workers")->why;
  EXPECT_EQ(Phase(seeded, "persistent_workers")->why, "not tried: seeded, and run 1 of box-a did not keep it");
}

TEST(Seeded, AWrongNeighboursKneeWalksDownToTheRightOne) {
  // The neighbour's knee is 16; here the curve peaks at 2.
  SweepOptions options;
  options.repeats = 2;
  const auto curve = [](const loader::Knobs& k) { return PeakCurve(k, 2); };
  const SearchRun unseeded = SeededSearch(curve, std::nullopt, options);
  const SearchRun seeded = SeededSearch(curve, SeedOf(16), options);
  EXPECT_EQ(unseeded.outcome.knee_workers, 2);
  EXPECT_EQ(seeded.outcome.knee_workers, 2);
  EXPECT_EQ(Best(seeded).knobs, Best(unseeded).knobs);
  const std::vector<std::string> doubling(seeded.seen.begin(), seeded.seen.begin() + 7);
  EXPECT_EQ(doubling, (std::vector<std::string>{"baseline 0", "num_workers 16", "num_workers 32", "num_workers 8",
                                                "num_workers 4", "num_workers 2", "num_workers 1"}));
}

TEST(Seeded, TheKneeIsClampedToMaxWorkersAndOneRoundPerEpoch) {
  SweepOptions options;
  options.repeats = 1;
  const SearchRun capped = SeededSearch([](const loader::Knobs& k) { return PeakCurve(k, 64); }, SeedOf(64),
                                        options, /*max_workers=*/8);
  EXPECT_EQ(capped.seen[1], "num_workers 8");
  EXPECT_EQ(capped.seen[2], "num_workers 4");  // nothing above max_workers
  EXPECT_NE(Phase(capped, "num_workers")->why.find("doubled up to 8 workers: max_workers"), std::string::npos)
      << Phase(capped, "num_workers")->why;
}

TEST(Seeded, TheSeedsSettingsAreKeptWhenTheyGainAndDroppedWhenNot) {
  SweepOptions options;
  options.repeats = 1;
  loader::Knobs best;
  best.pin_memory = best.non_blocking = true;
  best.prefetch_factor = 4;
  // non_blocking gains 20% here: the seed's settings stand.
  const SearchRun gains =
      SeededSearch([](const loader::Knobs& k) { return PeakCurve(k, 4, 0.2); }, SeedOf(4, best), options);
  EXPECT_TRUE(Best(gains).knobs.non_blocking);
  EXPECT_TRUE(Best(gains).knobs.pin_memory);
  EXPECT_EQ(Best(gains).knobs.prefetch_factor, 4);
  EXPECT_EQ(Best(gains).knobs.num_workers, 4);
  ASSERT_NE(Phase(gains, "seed"), nullptr);
  EXPECT_TRUE(Phase(gains, "seed")->kept);
  EXPECT_EQ(Phase(gains, "seed")->why, "kept the seed's pin_memory, non_blocking, prefetch_factor 4: +20.0% at the knee");
  // The doubling ran with them; the one trial without them is the seed phase's.
  EXPECT_TRUE(gains.outcome.trials[1].knobs.non_blocking);
  EXPECT_EQ(gains.seen[4], "seed 4");
  EXPECT_FALSE(gains.outcome.trials[4].knobs.non_blocking);
  EXPECT_EQ(gains.outcome.trials[4].knobs.prefetch_factor, 2);

  // Here they change nothing: dropped, the plain knee is the best.
  const SearchRun flat = SeededSearch([](const loader::Knobs& k) { return PeakCurve(k, 4); }, SeedOf(4, best), options);
  EXPECT_FALSE(Best(flat).knobs.non_blocking);
  EXPECT_FALSE(Best(flat).knobs.pin_memory);
  EXPECT_EQ(Best(flat).knobs.prefetch_factor, 2);
  EXPECT_EQ(Best(flat).knobs.num_workers, 4);
  EXPECT_FALSE(Phase(flat, "seed")->kept);
  EXPECT_EQ(Phase(flat, "seed")->why.rfind("dropped the seed's pin_memory, non_blocking, prefetch_factor 4: not kept", 0),
            0u)
      << Phase(flat, "seed")->why;
}

// A job's stored answer (feedtune.autotune run again: check_seed) gets one
// trial and the final check's pairs against the reference, not a search.
TEST(Seeded, AStoredAnswerIsCheckedOnceInsteadOfSearched) {
  SweepOptions options;
  options.repeats = 2;
  ScriptedMeasurer m([](const loader::Knobs& k, const TrialPlan&, int) { return PeakCurve(k, 4); });
  SearchSetup setup;
  setup.seed = SeedOf(4);
  setup.check_seed = true;
  const SearchRun r = RunOn(m, options, setup);
  std::vector<std::string> expected = {"baseline 0", "seed_check 4"};
  for (const std::string& s : FinalChecks(2, 4)) expected.push_back(s);
  EXPECT_EQ(r.seen, expected);
  EXPECT_EQ(Best(r).knobs.num_workers, 4);
  ASSERT_TRUE(r.outcome.speedup.has_value());
  EXPECT_DOUBLE_EQ(*r.outcome.speedup, 5.0);  // 1000 over 200 samples/s
  const PhaseDecision* check = Phase(r, "seed_check");
  ASSERT_NE(check, nullptr);
  EXPECT_TRUE(check->kept);
  EXPECT_EQ(check->why, "kept the stored setting of run 1 of box-a (" + loader::KnobsShort(Best(r).knobs) +
                            ") after one check instead of the search");
  EXPECT_EQ(Phase(r, "num_workers"), nullptr);
  EXPECT_EQ(r.last_trials_left, 0);
}

// The check fails when the pairs put the stored setting below the reference
// beyond the noise: the search then runs from the baseline, unseeded.
TEST(Seeded, AStoredAnswerSlowerThanTheReferenceIsSearchedAgain) {
  SweepOptions options;
  options.repeats = 2;
  const auto curve = [](const loader::Knobs& k) { return k.num_workers >= 4 ? 100.0 : PeakCurve(k, 2); };
  ScriptedMeasurer m([curve](const loader::Knobs& k, const TrialPlan&, int) { return curve(k); });
  SearchSetup setup;
  setup.seed = SeedOf(4);
  setup.check_seed = true;
  const SearchRun r = RunOn(m, options, setup);
  std::vector<std::string> start = {"baseline 0", "seed_check 4"};
  for (const std::string& s : FinalChecks(2, 4)) start.push_back(s);
  start.push_back("pin_memory 0");
  ASSERT_GT(r.seen.size(), start.size());
  EXPECT_EQ(std::vector<std::string>(r.seen.begin(), r.seen.begin() + start.size()), start);
  const PhaseDecision* check = Phase(r, "seed_check");
  ASSERT_NE(check, nullptr);
  EXPECT_FALSE(check->kept);
  EXPECT_EQ(check->why, "the stored setting ran x0.50 [0.50, 0.50] of the baseline, slower beyond the noise; "
                        "the search runs from the baseline, unseeded");
  EXPECT_EQ(Best(r).knobs.num_workers, 2);
  ASSERT_NE(Phase(r, "final_check"), nullptr);
  ASSERT_TRUE(r.outcome.speedup.has_value());
  EXPECT_DOUBLE_EQ(*r.outcome.speedup, 2.5);  // 500 over 200 samples/s
}

TEST(Seeded, PersistentWorkersIsTriedOnlyWhenTheSeedKeptIt) {
  SweepOptions options;
  options.repeats = 1;
  loader::Knobs best;
  best.persistent_workers = true;
  SearchSetup setup;
  setup.max_workers = 64;
  setup.samples_per_epoch = 1024;  // 5 s at the baseline's 200 samples/s: whole-epoch windows fit
  setup.seed = SeedOf(4, best);
  ScriptedMeasurer m([](const loader::Knobs& k, const TrialPlan&, int) {
    return PeakCurve(k, 4) * (k.persistent_workers ? 1.3 : 1.0);
  });
  const SearchRun r = RunOn(m, options, setup);
  EXPECT_TRUE(Best(r).knobs.persistent_workers);
  EXPECT_TRUE(Phase(r, "persistent_workers")->kept);
  // The seeded curve ran with it over whole epochs; the seed phase's one
  // trial without it (and the seed's other settings) confirmed it, so neither
  // persistent_workers nor num_workers_persistent measures again.
  std::vector<std::string> expected = {"baseline 0", "num_workers 4", "num_workers 8", "num_workers 2", "seed 4"};
  for (const std::string& s : FinalChecks(1, 4)) expected.push_back(s);
  EXPECT_EQ(r.seen, expected);
  for (size_t i = 1; i <= 4; ++i) EXPECT_EQ(m.plans[i].window_epochs, 2) << r.seen[i];
  EXPECT_TRUE(r.outcome.trials[1].knobs.persistent_workers);
  EXPECT_FALSE(r.outcome.trials[4].knobs.persistent_workers);
  EXPECT_EQ(Phase(r, "seed")->why, "kept the seed's persistent_workers: +30.0% at the knee");
  EXPECT_EQ(Phase(r, "persistent_workers")->why,
            "kept with the seed phase: the seeded curve was measured with persistent workers over whole epochs");

  // The unseeded search of the same curve measures it off and on, then the
  // counts above the knee again: the seeded one takes at most half its trials.
  setup.seed.reset();
  ScriptedMeasurer unseeded_m([](const loader::Knobs& k, const TrialPlan&, int) {
    return PeakCurve(k, 4) * (k.persistent_workers ? 1.3 : 1.0);
  });
  const SearchRun unseeded = RunOn(unseeded_m, options, setup);
  EXPECT_EQ(Best(unseeded).knobs, Best(r).knobs);
  EXPECT_LE(2 * r.outcome.trials.size(), unseeded.outcome.trials.size())
      << r.outcome.trials.size() << " seeded against " << unseeded.outcome.trials.size();
}

// A seed whose best used more workers than its knee (more paid once
// persistent) starts the curve at its best's count, in its best's regime.
TEST(Seeded, ABestAboveTheKneeIsWhereTheCurveStarts) {
  SweepOptions options;
  options.repeats = 1;
  SearchSeed seed = SeedOf(4);
  seed.best.num_workers = 8;
  const SearchRun r = SeededSearch([](const loader::Knobs& k) { return PeakCurve(k, 8); }, seed, options);
  EXPECT_EQ(r.seen[1], "num_workers 8");
  EXPECT_EQ(r.outcome.knee_workers, 8);
  EXPECT_NE(Phase(r, "num_workers")->why.find("seeded at 8 workers, the best setting's worker count of run 1 of box-a"),
            std::string::npos)
      << Phase(r, "num_workers")->why;
}

TEST(Seeded, EpochsTooLongForWholeEpochWindowsLeavePersistentWorkersToItsPhase) {
  SweepOptions options;
  options.repeats = 1;
  loader::Knobs best;
  best.persistent_workers = true;
  SearchSetup setup;
  setup.max_workers = 64;
  setup.samples_per_epoch = 10'000'000;  // hours at these rates
  setup.seed = SeedOf(4, best);
  ScriptedMeasurer m([](const loader::Knobs& k, const TrialPlan&, int) { return PeakCurve(k, 4); });
  const SearchRun r = RunOn(m, options, setup);
  for (const TrialPlan& plan : m.plans) EXPECT_EQ(plan.window_epochs, 0);
  EXPECT_FALSE(r.outcome.trials[1].knobs.persistent_workers);
  EXPECT_EQ(Phase(r, "persistent_workers")->why.rfind("not tried: an epoch takes about", 0), 0u)
      << Phase(r, "persistent_workers")->why;
}

TEST(Seeded, AResumedRunReachesTheDecisionsOfAnUninterruptedOne) {
  SweepOptions options;
  options.repeats = 2;
  loader::Knobs best;
  best.non_blocking = best.pin_memory = true;
  SearchSetup setup;
  setup.max_workers = 32;
  setup.seed = SeedOf(8, best);
  ScriptedMeasurer whole(NoisyCurve);
  const SearchRun reference = RunOn(whole, options, setup);
  const size_t n = reference.outcome.trials.size();
  for (size_t at = 0; at < n; ++at) {
    SCOPED_TRACE("interrupted at trial " + std::to_string(at));
    ScriptedMeasurer first(NoisyCurve);
    InterruptingMeasurer interrupting(first, static_cast<int>(at));
    std::vector<TrialRecord> stored;
    EXPECT_THROW(RunOn(interrupting, options, setup, &stored), Interrupted);
    ScriptedMeasurer rest(NoisyCurve, static_cast<int>(at));
    ReplayMeasurer replay(stored, rest);
    const SearchRun resumed = RunOn(replay, options, setup);
    EXPECT_EQ(rest.plans.size(), n - at);
    EXPECT_EQ(Decisions(resumed.outcome), Decisions(reference.outcome));
    EXPECT_EQ(resumed.outcome.best, reference.outcome.best);
  }
}

TEST(Seeded, AKneeAtTheSeedsOwnIsNotBisectedAgain) {
  SweepOptions options;
  options.repeats = 1;
  const auto curve = [](const loader::Knobs& k) { return PeakCurve(k, 8); };
  const SearchRun seeded = SeededSearch(curve, SeedOf(8), options);
  EXPECT_EQ(seeded.outcome.knee_workers, 8);
  const std::vector<std::string> doubling(seeded.seen.begin(), seeded.seen.begin() + 5);
  // No 6 between 4 and 8: the seed's run placed its knee there by bisecting.
  EXPECT_EQ(doubling, (std::vector<std::string>{"baseline 0", "num_workers 8", "num_workers 16", "num_workers 4",
                                                "final_check 0"}));
  // Unseeded, the same curve is bisected.
  const SearchRun unseeded = SeededSearch(curve, std::nullopt, options);
  EXPECT_NE(std::find(unseeded.seen.begin(), unseeded.seen.end(), "num_workers 6"), unseeded.seen.end());
}

// Remote data where memory caps the workers (64 MiB each against 0.5 x 512
// MiB): the workers phase says what requests in flight give instead of the
// workers the budget refused.
TEST(Search, RemoteDataCappedByMemorySaysWhatRequestsInFlightGiveInstead) {
  ScriptedMeasurer inner([](const loader::Knobs& k, const TrialPlan&, int) {
    return 10.0 * k.fetch_concurrency * std::max(1, k.num_workers);  // the round trip binds, every way
  });
  BudgetFacts facts;
  facts.mem_available_bytes = int64_t{512} << 20;
  facts.batch_bytes = 1 << 20;
  Budget budget(facts, BudgetOptions{});
  TrialRecord base;
  base.status = results::TrialStatus::kOk;
  base.peak_rss_bytes = 64 << 20;
  budget.Observe(base);
  BudgetGate gate(budget, inner);
  SearchSetup setup;
  setup.max_workers = 64;
  setup.remote_reads = true;
  const SearchRun r = RunOn(gate, {}, setup);
  const PhaseDecision* workers = Phase(r, "num_workers");
  ASSERT_NE(workers, nullptr);
  EXPECT_NE(workers->why.find(": over a budget (memory budget: needs about"), std::string::npos) << workers->why;
  EXPECT_NE(workers->why.find("requests in flight per worker give them without a process each"), std::string::npos)
      << workers->why;
  // batch_size 64 (the knobs' default) caps the doubling at 64: at the cap already.
  EXPECT_EQ(Best(r).knobs.fetch_concurrency, 64);
  EXPECT_NE(workers->why.find("fetch_concurrency is at the batch size, 64, already"), std::string::npos)
      << workers->why;
}

}  // namespace
}  // namespace feedtune::tuner

namespace feedtune::tuner {
namespace {

// The cpu_binding phase (node sweeps): split is measured against none at the
// knee and kept when it gains by the rule; not tried with one rank or a named
// sweep.cpu_binding.
TEST(SearchNodePhases, CpuBindingSplitIsKeptWhenItGains) {
  const auto curve = [](const loader::Knobs& k, const TrialPlan&, int) {
    const double base = 1000.0 * std::min(std::max(k.num_workers, 1), 2);
    return k.cpu_binding == loader::CpuBinding::kSplit ? base * 1.3 : base;
  };
  ScriptedMeasurer m(curve);
  SearchSetup setup;
  setup.max_workers = 4;
  setup.ranks = 2;
  const SearchRun r = RunOn(m, {}, setup);
  const PhaseDecision* phase = Phase(r, "cpu_binding");
  ASSERT_NE(phase, nullptr);
  EXPECT_TRUE(phase->kept) << phase->why;
  EXPECT_NE(phase->why.find("kept split: +30.0% over cpu_binding none"), std::string::npos) << phase->why;
  EXPECT_EQ(Best(r).knobs.cpu_binding, loader::CpuBinding::kSplit);
  // The baseline ran with the inherited mask; numa was not tried (unknown nodes).
  EXPECT_EQ(r.outcome.trials[0].knobs.cpu_binding, loader::CpuBinding::kNone);
  for (const auto& t : r.outcome.trials) EXPECT_NE(t.knobs.cpu_binding, loader::CpuBinding::kNuma);
}

TEST(SearchNodePhases, CpuBindingWithinNoiseIsNotKeptAndNamedBindingIsNotSearched) {
  const auto flat = [](const loader::Knobs& k, const TrialPlan&, int) {
    return 1000.0 * std::min(std::max(k.num_workers, 1), 2) * (k.cpu_binding == loader::CpuBinding::kSplit ? 1.01 : 1);
  };
  ScriptedMeasurer m(flat);
  SearchSetup setup;
  setup.max_workers = 4;
  setup.ranks = 2;
  const SearchRun r = RunOn(m, {}, setup);
  ASSERT_NE(Phase(r, "cpu_binding"), nullptr);
  EXPECT_FALSE(Phase(r, "cpu_binding")->kept);
  EXPECT_EQ(Best(r).knobs.cpu_binding, loader::CpuBinding::kNone);

  SweepOptions named;
  named.cpu_binding = BindingChoice::kSplit;
  ScriptedMeasurer m2(flat);
  const SearchRun fixed = RunOn(m2, named, setup);
  EXPECT_EQ(Phase(fixed, "cpu_binding")->why,
            "not tried: sweep.cpu_binding is split for every trial (auto searches it)");
  for (const auto& t : fixed.outcome.trials) EXPECT_EQ(t.knobs.cpu_binding, loader::CpuBinding::kSplit);

  ScriptedMeasurer m3(flat);
  SearchSetup one = setup;
  one.ranks = 1;
  const SearchRun single = RunOn(m3, {}, one);
  EXPECT_NE(Phase(single, "cpu_binding")->why.find("not tried: one rank"), std::string::npos);
}

// worker_threads: from the workload's 4 threads, 1 and the CPU share per
// worker (8 CPUs / 2 workers = 4: not fewer, so only 1) are tried; 1 gains and is kept.
TEST(SearchNodePhases, WorkerThreadsTriesOneThreadAndKeepsItWhenItGains) {
  const auto curve = [](const loader::Knobs& k, const TrialPlan&, int) {
    const double base = 1000.0 * std::min(std::max(k.num_workers, 1), 2);
    return k.worker_threads == 1 ? base * 1.5 : base;
  };
  ScriptedMeasurer m(curve);
  SearchSetup setup;
  setup.max_workers = 2;
  setup.usable_cpus = 8;
  setup.default_worker_threads = 4;
  const SearchRun r = RunOn(m, {}, setup);
  std::vector<int> tried;
  for (const auto& t : r.outcome.trials) {
    if (t.phase == "worker_threads") tried.push_back(t.knobs.worker_threads);
  }
  EXPECT_EQ(tried, (std::vector<int>{1}));
  const PhaseDecision* phase = Phase(r, "worker_threads");
  ASSERT_NE(phase, nullptr);
  EXPECT_TRUE(phase->kept) << phase->why;
  EXPECT_NE(phase->why.find("kept 1 thread: +50.0% over 4 threads per worker"), std::string::npos) << phase->why;
  EXPECT_EQ(Best(r).knobs.worker_threads, 1);
}

// With 16 CPUs and 2 workers the share (8) lies between 1 and 16: both are
// tried; neither gains, so the workload's own threads stay (knob 0).
TEST(SearchNodePhases, WorkerThreadsTriesTheSharePerWorkerTooAndKeepsNothingWithoutAGain) {
  const auto flat = [](const loader::Knobs& k, const TrialPlan&, int) {
    return 1000.0 * std::min(std::max(k.num_workers, 1), 2);
  };
  ScriptedMeasurer m(flat);
  SearchSetup setup;
  setup.max_workers = 2;
  setup.usable_cpus = 16;
  setup.default_worker_threads = 16;
  const SearchRun r = RunOn(m, {}, setup);
  std::vector<int> tried;
  for (const auto& t : r.outcome.trials) {
    if (t.phase == "worker_threads") tried.push_back(t.knobs.worker_threads);
  }
  EXPECT_EQ(tried, (std::vector<int>{1, 8}));
  EXPECT_FALSE(Phase(r, "worker_threads")->kept);
  EXPECT_EQ(Best(r).knobs.worker_threads, 0);

  ScriptedMeasurer m2(flat);
  setup.default_worker_threads = 1;
  const SearchRun none = RunOn(m2, {}, setup);
  EXPECT_NE(Phase(none, "worker_threads")->why.find("not tried"), std::string::npos);
}

}  // namespace
}  // namespace feedtune::tuner

namespace feedtune::tuner {
namespace {

using loader::StartMethod;

// The multiprocessing_context phase (a Python command with workers): each
// method has its own worker start-up and epoch boundary, as a forkserver or
// spawn worker pays for the pickled Dataset and fresh imports at each start.
class StartMethodMeasurer final : public TrialMeasurer {
 public:
  // `gain` per method resolved: the throughput factor over the fork figure.
  StartMethodMeasurer(StartMethod default_method, std::map<StartMethod, double> gain)
      : default_(default_method), gain_(std::move(gain)) {}
  TrialRecord Measure(const loader::Knobs& knobs) override { return MeasurePlanned(knobs, {}); }
  TrialRecord MeasurePlanned(const loader::Knobs& knobs, const TrialPlan& plan) override {
    plans.push_back(plan);
    const StartMethod method =
        knobs.multiprocessing_context == StartMethod::kDefault ? default_ : knobs.multiprocessing_context;
    TrialRecord t;
    t.knobs = knobs;
    const double factor = gain_.count(method) != 0 ? gain_[method] : 1.0;
    t.samples_per_s = 1000.0 * std::min(std::max(knobs.num_workers, 1), 2) * factor;
    t.ci_low = t.samples_per_s * 0.99;
    t.ci_high = t.samples_per_s * 1.01;
    t.repeats = 3;
    const double startup = method == StartMethod::kFork ? 0.05 : method == StartMethod::kForkserver ? 0.4 : 1.2;
    t.worker_startup_s = knobs.num_workers > 0 ? startup : NAN;
    t.epoch_boundary_ms = plan.window_epochs > 0 && !knobs.persistent_workers ? startup * 1000 : NAN;
    return t;
  }
  std::vector<TrialPlan> plans;

 private:
  StartMethod default_;
  std::map<StartMethod, double> gain_;
};

SearchSetup PythonSetup(StartMethod default_method) {
  SearchSetup setup;
  setup.max_workers = 4;
  setup.python_workload = true;
  setup.default_start_method = default_method;
  return setup;
}

std::vector<StartMethod> MethodsTried(const SearchRun& r) {
  std::vector<StartMethod> tried;
  for (const auto& t : r.outcome.trials) {
    if (t.phase == "multiprocessing_context") tried.push_back(t.knobs.multiprocessing_context);
  }
  return tried;
}

// Python 3.14: forkserver is the default. With sweep.start_methods auto the
// phase measures the default again as its reference, then fork and spawn over
// whole epochs; fork gains 30% (no pickling, no re-import at each epoch's
// restart) and is kept; the decision names each method's start-up.
TEST(SearchStartMethod, ADefaultOtherThanForkIsSweptAndAGainIsKept) {
  StartMethodMeasurer m(StartMethod::kForkserver, {{StartMethod::kFork, 1.3}, {StartMethod::kSpawn, 0.8}});
  const SearchRun r = RunOn(m, {}, PythonSetup(StartMethod::kForkserver));
  EXPECT_EQ(MethodsTried(r), (std::vector<StartMethod>{StartMethod::kDefault, StartMethod::kFork, StartMethod::kSpawn}));
  const PhaseDecision* phase = Phase(r, "multiprocessing_context");
  ASSERT_NE(phase, nullptr);
  EXPECT_TRUE(phase->kept) << phase->why;
  EXPECT_NE(phase->why.find("kept fork: +30.0%"), std::string::npos) << phase->why;
  EXPECT_NE(phase->why.find("forkserver (the default): worker start-up 0.400 s, epoch boundary 400.0 ms"),
            std::string::npos) << phase->why;
  EXPECT_NE(phase->why.find("spawn: worker start-up 1.200 s"), std::string::npos) << phase->why;
  EXPECT_EQ(Best(r).knobs.multiprocessing_context, StartMethod::kFork);
  // The same windows for every method: whole epochs, since workers restart at each.
  for (size_t i = 0; i < r.outcome.trials.size(); ++i) {
    if (r.outcome.trials[i].phase == "multiprocessing_context") {
      EXPECT_GT(m.plans[i].window_epochs, 0) << i;
    }
  }
  // The final check re-measures the kept method.
  EXPECT_EQ(r.outcome.trials.back().knobs.multiprocessing_context, StartMethod::kFork);
}

// Where fork is the default (Python <= 3.13 on Linux), auto leaves the start
// method alone; listing the methods measures them anyway, and a method that
// only costs start-up is not kept.
TEST(SearchStartMethod, ForkByDefaultIsNotSweptUnlessTheConfigListsTheMethods) {
  StartMethodMeasurer m(StartMethod::kFork, {{StartMethod::kForkserver, 0.97}, {StartMethod::kSpawn, 0.9}});
  const SearchRun r = RunOn(m, {}, PythonSetup(StartMethod::kFork));
  EXPECT_TRUE(MethodsTried(r).empty());
  ASSERT_NE(Phase(r, "multiprocessing_context"), nullptr);
  EXPECT_NE(Phase(r, "multiprocessing_context")->why.find("not tried: the interpreter's default start method is fork"),
            std::string::npos);

  SweepOptions listed;
  listed.start_methods = {StartMethod::kFork, StartMethod::kForkserver, StartMethod::kSpawn};
  StartMethodMeasurer m2(StartMethod::kFork, {{StartMethod::kForkserver, 0.97}, {StartMethod::kSpawn, 0.9}});
  const SearchRun swept = RunOn(m2, listed, PythonSetup(StartMethod::kFork));
  EXPECT_EQ(MethodsTried(swept),
            (std::vector<StartMethod>{StartMethod::kDefault, StartMethod::kForkserver, StartMethod::kSpawn}));
  const PhaseDecision* phase = Phase(swept, "multiprocessing_context");
  ASSERT_NE(phase, nullptr);
  EXPECT_FALSE(phase->kept);
  EXPECT_NE(phase->why.find("kept fork: no other method gained"), std::string::npos) << phase->why;
  EXPECT_NE(phase->why.find("forkserver: worker start-up 0.400 s"), std::string::npos) << phase->why;
  EXPECT_EQ(Best(swept).knobs.multiprocessing_context, StartMethod::kDefault);
}

// Not a Python command (or one that gave no preflight): no phase at all, so
// native reports read as before. Without workers: not tried, said so.
TEST(SearchStartMethod, OnlyPythonWorkloadsWithWorkersHaveThePhase) {
  StartMethodMeasurer m(StartMethod::kForkserver, {});
  SearchSetup native = PythonSetup(StartMethod::kForkserver);
  native.python_workload = false;
  const SearchRun r = RunOn(m, {}, native);
  EXPECT_EQ(Phase(r, "multiprocessing_context"), nullptr);
  EXPECT_TRUE(MethodsTried(r).empty());

  ScriptedMeasurer flat([](const loader::Knobs&, const TrialPlan&, int) { return 1000.0; });
  const SearchRun none = RunOn(flat, {}, PythonSetup(StartMethod::kForkserver));
  ASSERT_NE(Phase(none, "multiprocessing_context"), nullptr);
  EXPECT_EQ(Phase(none, "multiprocessing_context")->why, "not tried: without workers no process is started");
}

// A resumed run replays its stored trials and takes the same decisions.
TEST(SearchStartMethod, AResumedRunReachesTheSameDecisions) {
  const std::map<StartMethod, double> gains = {{StartMethod::kFork, 1.3}, {StartMethod::kSpawn, 0.8}};
  StartMethodMeasurer whole(StartMethod::kForkserver, gains);
  std::vector<TrialRecord> stored;
  const SearchRun full = RunOn(whole, {}, PythonSetup(StartMethod::kForkserver), &stored);
  for (size_t cut = 1; cut < stored.size(); cut += 3) {
    std::vector<TrialRecord> head(stored.begin(), stored.begin() + static_cast<std::ptrdiff_t>(cut));
    StartMethodMeasurer rest(StartMethod::kForkserver, gains);
    ReplayMeasurer replay(head, rest);
    const SearchRun resumed = RunOn(replay, {}, PythonSetup(StartMethod::kForkserver));
    ASSERT_EQ(resumed.seen, full.seen) << "cut " << cut;
    EXPECT_EQ(Best(resumed).knobs, Best(full).knobs) << "cut " << cut;
  }
}

// Remote data (SearchSetup::remote_reads): a round trip of 20 ms, so one
// request in flight reads 50 samples/s, and a CPU that binds at 1000
// samples/s per process, up to the box's 2 CPUs. Requests in flight per
// worker reach the round trip's limit in one process (fetch_concurrency 32:
// 1600 > 1000, no gain at 64); the workers then add the second CPU (knee at
// 2 workers). Without the phase, the same curve needs 40 worker processes.
double RemoteCurve(const loader::Knobs& k) {
  return std::min(50.0 * k.fetch_concurrency * std::max(1, k.num_workers),
                  1000.0 * std::min(k.num_workers + 1, 2));
}

// A remote trial as a real one reports it: each sample waits its round trip
// for the data (98% of the time at 50 samples/s: 19.6 ms) and steps 0.4 ms,
// 0.4 ms of CPU per sample.
class RoundTripMeasurer final : public TrialMeasurer {
 public:
  explicit RoundTripMeasurer(Curve curve) : inner_(std::move(curve)) {}
  TrialRecord Measure(const loader::Knobs& knobs) override { return MeasurePlanned(knobs, {}); }
  TrialRecord MeasurePlanned(const loader::Knobs& knobs, const TrialPlan& plan) override {
    TrialRecord t = inner_.MeasurePlanned(knobs, plan);
    t.gpu_idle_frac = 0.98;
    t.cpu_util = 0.02;
    return t;
  }

 private:
  ScriptedMeasurer inner_;
};

// The phase starts where Little's law puts it: 2500 samples/s (the step's
// pace) x 19.6 ms = 49 in flight, so at 32 (the largest doubling under it),
// then doubles up and halves down to the fewest at the knee.
TEST(Search, RemoteDataStartsRequestsInFlightAtTheBaselinesEstimate) {
  const auto tried = [](const SearchRun& r) {
    std::vector<int> counts;
    for (const TrialRecord& t : r.outcome.trials) {
      if (t.phase == "fetch_concurrency") counts.push_back(t.knobs.fetch_concurrency);
    }
    return counts;
  };
  SearchSetup setup;
  setup.max_workers = 64;
  setup.remote_reads = true;
  // The knee at 32 in flight (1000/s): 64 gains nothing, 16 is 20% slower.
  RoundTripMeasurer knee([](const loader::Knobs& k, const TrialPlan&, int) { return RemoteCurve(k); });
  const SearchRun r = RunOn(knee, {}, setup);
  EXPECT_EQ(tried(r), (std::vector<int>{32, 64, 16})) << "3 trials where the doubling from 2 takes 6";
  const PhaseDecision* phase = Phase(r, "fetch_concurrency");
  ASSERT_NE(phase, nullptr);
  EXPECT_EQ(phase->why.find("started at the estimate of 32 in flight (49 predicted: the baseline waited 19.60 ms per "
                            "sample for its data and stepped 0.40 ms"),
            0u)
      << phase->why;
  EXPECT_NE(phase->why.find("kept 32 requests in flight per worker; the doubling stopped at 64 in flight, no gain "
                            "over 32; 32 gains over 16"),
            std::string::npos)
      << phase->why;
  EXPECT_EQ(Best(r).knobs.fetch_concurrency, 32);
  EXPECT_EQ(Best(r).knobs.num_workers, 2);

  // The store binds at 8 in flight (400/s): the estimate overshoots, and the
  // halving comes down to the fewest that read as fast.
  RoundTripMeasurer early([](const loader::Knobs& k, const TrialPlan&, int) {
    return std::min(50.0 * k.fetch_concurrency * std::max(1, k.num_workers), 400.0);
  });
  const SearchRun e = RunOn(early, {}, setup);
  EXPECT_EQ(tried(e), (std::vector<int>{32, 64, 16, 8, 4}));
  const PhaseDecision* down = Phase(e, "fetch_concurrency");
  ASSERT_NE(down, nullptr);
  EXPECT_NE(down->why.find("kept 8 requests in flight per worker"), std::string::npos) << down->why;
  EXPECT_NE(down->why.find("; 8 gains over 4"), std::string::npos) << down->why;
  EXPECT_EQ(Best(e).knobs.fetch_concurrency, 8);
}

TEST(Search, RemoteDataTunesRequestsInFlightBeforeTheWorkers) {
  ScriptedMeasurer m([](const loader::Knobs& k, const TrialPlan&, int) { return RemoteCurve(k); });
  SearchSetup setup;
  setup.max_workers = 64;
  setup.remote_reads = true;
  const SearchRun r = RunOn(m, {}, setup);
  std::vector<int> tried;
  for (const TrialRecord& t : r.outcome.trials) {
    if (t.phase == "fetch_concurrency") tried.push_back(t.knobs.fetch_concurrency);
  }
  EXPECT_EQ(tried, (std::vector<int>{2, 4, 8, 16, 32, 64})) << "doubling to the first that does not gain";
  const PhaseDecision* phase = Phase(r, "fetch_concurrency");
  ASSERT_NE(phase, nullptr);
  EXPECT_TRUE(phase->kept);
  EXPECT_NE(phase->why.find("kept 32 requests in flight per worker; the doubling stopped at 64 in flight, no gain "
                            "over 32"),
            std::string::npos)
      << phase->why;
  EXPECT_EQ(Best(r).knobs.fetch_concurrency, 32);
  EXPECT_EQ(Best(r).knobs.num_workers, 2);

  // A local dataset: no such phase, and fetch_concurrency stays 1.
  ScriptedMeasurer local([](const loader::Knobs& k, const TrialPlan&, int) { return RemoteCurve(k); });
  const SearchRun l = RunOn(local, {}, SearchSetup{});
  EXPECT_EQ(Phase(l, "fetch_concurrency"), nullptr);
  for (const TrialRecord& t : l.outcome.trials) EXPECT_EQ(t.knobs.fetch_concurrency, 1);
}

}  // namespace
}  // namespace feedtune::tuner
