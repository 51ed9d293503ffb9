// The sequence's decisions on scripted curves: no timing, no loader.
#include "tuner/search.h"

#include <gtest/gtest.h>

#include <functional>
#include <map>

namespace feedtune::tuner {
namespace {

using results::TrialRecord;

// Throughput as a function of the knobs; +-1% interval, 3 repeats.
class ScriptedMeasurer final : public TrialMeasurer {
 public:
  explicit ScriptedMeasurer(std::function<double(const loader::Knobs&)> curve) : curve_(std::move(curve)) {}
  TrialRecord Measure(const loader::Knobs& knobs) override {
    ++calls;
    TrialRecord t;
    const double v = curve_(knobs);
    if (v < 0) {
      t.status = "failed";
      t.error = "worker 0 (pid 1) was killed by signal 9 (SIGKILL) while loading batch 0";
      return t;
    }
    t.samples_per_s = v;
    t.ci_low = v * 0.99;
    t.ci_high = v * 1.01;
    t.repeats = 3;
    return t;
  }
  int calls = 0;

 private:
  std::function<double(const loader::Knobs&)> curve_;
};

SweepOptions Defaults() { return SweepOptions{}; }

struct SearchRun {
  SearchOutcome outcome;
  std::vector<std::string> seen;  // "phase nw" in callback order
};

SearchRun Search(std::function<double(const loader::Knobs&)> curve, int max_workers = 64) {
  ScriptedMeasurer m(std::move(curve));
  SearchRun r;
  loader::Knobs start;
  r.outcome = RunSearch(Defaults(), max_workers, start, m, [&](TrialRecord& t) {
    r.seen.push_back(t.phase + " " + std::to_string(t.knobs.num_workers));
  });
  return r;
}

const TrialRecord& Best(const SearchRun& r) { return r.outcome.trials[*r.outcome.best]; }

TEST(Search, RisingThenFlatFindsTheKneeAndStopsDoubling) {
  // 1000 x workers up to 4, flat after.
  const SearchRun r = Search([](const loader::Knobs& k) { return 1000.0 * std::min(std::max(k.num_workers, 1), 4); });
  EXPECT_EQ(r.outcome.knee_workers, 4);
  // 1, 2, 4, then 8 and 16 do not gain: stop.
  const std::vector<std::string> want = {"baseline 0", "pin_memory 0", "num_workers 1", "num_workers 2",
                                         "num_workers 4", "num_workers 8", "num_workers 16",
                                         "non_blocking 4", "prefetch_factor 4", "prefetch_factor 4",
                                         "prefetch_factor 4", "persistent_workers 4"};
  EXPECT_EQ(r.seen, want);
  EXPECT_EQ(Best(r).samples_per_s, 4000);
  EXPECT_EQ(Best(r).knobs.num_workers, 4);
}

TEST(Search, PeakedCurveStopsWhenThroughputFalls) {
  const std::map<int, double> curve = {{0, 500}, {1, 900}, {2, 1800}, {4, 1200}};
  const SearchRun r = Search([&](const loader::Knobs& k) { return curve.at(k.num_workers); });
  EXPECT_EQ(r.outcome.knee_workers, 2);
  EXPECT_EQ(r.outcome.trials[4].decision, "-33.3% below the best: throughput falls, stop doubling");
}

TEST(Search, FlatCurveKeepsZeroWorkers) {
  const SearchRun r = Search([](const loader::Knobs&) { return 1000.0; });
  EXPECT_EQ(r.outcome.knee_workers, 0);
  // Workers never gained, so prefetch_factor and persistent_workers are not tried.
  for (const auto& t : r.outcome.trials) {
    EXPECT_NE(t.phase, "prefetch_factor");
    EXPECT_NE(t.phase, "persistent_workers");
  }
  EXPECT_EQ(r.outcome.trials[1].decision,
            "not kept: +0.0% is within noise or below the 5.0% threshold");
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
}

TEST(Search, NonBlockingIsTriedWithPinningWhenPinningAloneDidNotPay) {
  const SearchRun r = Search([](const loader::Knobs& k) { return k.pin_memory && k.non_blocking ? 1500.0 : 1000.0; });
  const auto& nb = r.outcome.trials[r.seen.size() - 1];
  EXPECT_EQ(nb.phase, "non_blocking");
  EXPECT_TRUE(nb.knobs.pin_memory);
  EXPECT_TRUE(nb.knobs.non_blocking);
  EXPECT_EQ(nb.decision, "kept: +50.0% (with pin_memory: a pageable copy is synchronous anyway)");
}

TEST(Search, FailingTrialStopsTheDoublingAndIsRecorded) {
  const SearchRun r = Search([](const loader::Knobs& k) { return k.num_workers >= 4 ? -1.0 : 1000.0 * (k.num_workers + 1); });
  EXPECT_EQ(r.outcome.knee_workers, 2);
  bool found = false;
  for (const auto& t : r.outcome.trials) {
    if (t.status == "failed") {
      found = true;
      EXPECT_EQ(t.knobs.num_workers, 4);
      EXPECT_EQ(t.decision, "failed: worker 0 (pid 1) was killed by signal 9 (SIGKILL) while loading batch 0");
    }
  }
  EXPECT_TRUE(found);
}

TEST(Search, FailedBaselineEndsTheSearch) {
  const SearchRun r = Search([](const loader::Knobs&) { return -1.0; });
  EXPECT_EQ(r.outcome.trials.size(), 1u);
  EXPECT_FALSE(r.outcome.best.has_value());
}

TEST(Search, KneeIsRefinedByBisection) {
  // Gains until 6 workers, flat after: doubling sees 4 < 8 ~ 16; bisection finds 6.
  const SearchRun r = Search([](const loader::Knobs& k) { return 1000.0 * std::min(std::max(k.num_workers, 1), 6); });
  EXPECT_EQ(r.outcome.knee_workers, 6);
}

TEST(Search, MaxWorkersCapsTheDoubling) {
  const SearchRun r = Search([](const loader::Knobs& k) { return 1000.0 * std::max(k.num_workers, 1); }, 4);
  int most = 0;
  for (const auto& t : r.outcome.trials) most = std::max(most, t.knobs.num_workers);
  EXPECT_EQ(most, 4);
  EXPECT_EQ(r.outcome.knee_workers, 4);
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

}  // namespace
}  // namespace feedtune::tuner
