// The formulas row's picks that the doubling did not measure are measured
// once after the search, at the best setting with only num_workers changed.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "results/node_report.h"
#include "tuner/search/formula_trials.h"

namespace feedtune::tuner::node {
namespace {

results::TrialRecord NodeTrial(int workers, double samples_per_s) {
  results::TrialRecord t;
  t.status = results::TrialStatus::kOk;
  t.phase = "num_workers";
  t.knobs.num_workers = workers;
  t.knobs.pin_memory = true;
  t.knobs.persistent_workers = true;
  t.samples_per_s = samples_per_s;
  t.node.emplace();
  t.node->ranks = 2;
  return t;
}

// Answers with a node record of 100 samples/s per worker; remembers what it was asked.
class CountingMeasurer : public TrialMeasurer {
 public:
  results::TrialRecord Measure(const loader::Knobs& knobs) override { return MeasurePlanned(knobs, {}); }
  results::TrialRecord MeasurePlanned(const loader::Knobs& knobs, const TrialPlan& plan) override {
    asked.push_back(knobs);
    phases.push_back(plan.phase);
    results::TrialRecord t = NodeTrial(knobs.num_workers, 100.0 * knobs.num_workers);
    t.phase.clear();  // the caller names the phase
    return t;
  }
  std::vector<loader::Knobs> asked;
  std::vector<std::string> phases;
};

SearchOutcome DoublingUpTo4() {
  SearchOutcome outcome;
  for (int w : {1, 2, 4}) outcome.trials.push_back(NodeTrial(w, 100.0 * w));
  outcome.best = 2;
  return outcome;
}

TEST(FormulaTrials, MeasuresEachUnmeasuredPickOnceAtTheBestSetting) {
  SearchOutcome outcome = DoublingUpTo4();
  CountingMeasurer measurer;
  std::vector<std::string> stored;
  SearchEvents events;
  events.on_trial = [&](results::TrialRecord& t, const SearchProgress&) { stored.push_back(t.decision); };
  // 12 CPUs, 2 ranks: Lightning max(1, 12 // 2 - 1) = 5, cpus // ranks = 6, timm 4 (measured).
  const std::vector<size_t> added = MeasureFormulaSettings(outcome, 12, 64, measurer, events);
  ASSERT_EQ(added, (std::vector<size_t>{3, 4}));
  ASSERT_EQ(measurer.asked.size(), 2u);
  EXPECT_EQ(measurer.asked[0].num_workers, 5);
  EXPECT_EQ(measurer.asked[1].num_workers, 6);
  for (const loader::Knobs& k : measurer.asked) {
    EXPECT_TRUE(k.pin_memory);  // the best's other knobs
    EXPECT_TRUE(k.persistent_workers);
  }
  EXPECT_EQ(measurer.phases, (std::vector<std::string>{"formulas", "formulas"}));
  EXPECT_EQ(outcome.trials[3].phase, "formulas");
  ASSERT_EQ(stored.size(), 2u);
  EXPECT_EQ(stored[0], "measured for the formulas row (Lightning: max(1, 12 // 2 - 1)); not a search step");
  EXPECT_EQ(stored[1], "measured for the formulas row (cpus // ranks: 12 // 2); not a search step");
  // Now every row has its figure.
  for (const results::FormulaRow& row : results::NodeFormulas(outcome.trials, 12, &outcome.trials[2])) {
    EXPECT_TRUE(row.samples_per_s) << row.name;
    EXPECT_TRUE(row.at_best_settings) << row.name;
  }
  EXPECT_TRUE(MeasureFormulaSettings(outcome, 12, 64, measurer, events).empty()) << "measured once";
}

TEST(FormulaTrials, TwoFormulasOnOneCountMeasureItOnceAndTheCapHolds) {
  SearchOutcome outcome = DoublingUpTo4();
  CountingMeasurer measurer;
  std::vector<std::string> stored;
  SearchEvents events;
  events.on_trial = [&](results::TrialRecord& t, const SearchProgress&) { stored.push_back(t.decision); };
  // 6 CPUs, 2 ranks: Lightning 2 (measured), cpus // ranks 3 (measured here), timm 4.
  MeasureFormulaSettings(outcome, 6, 64, measurer, events);
  ASSERT_EQ(measurer.asked.size(), 1u);
  EXPECT_EQ(measurer.asked[0].num_workers, 3);
  // 16 CPUs: Lightning 7 and cpus // ranks 8, both above max_workers 6: not measured.
  SearchOutcome capped = DoublingUpTo4();
  CountingMeasurer none;
  EXPECT_TRUE(MeasureFormulaSettings(capped, 16, 6, none, events).empty());
  EXPECT_TRUE(none.asked.empty());
  // 14 CPUs, 2 ranks: Lightning 6 and cpus // ranks 7, in the rows' order.
  SearchOutcome both = DoublingUpTo4();
  CountingMeasurer two;
  MeasureFormulaSettings(both, 14, 64, two, events);
  ASSERT_EQ(two.asked.size(), 2u);
  EXPECT_EQ(two.asked[0].num_workers, 6);
  EXPECT_EQ(two.asked[1].num_workers, 7);
}

// A pick measured only before a later phase changed another setting (here
// 2 workers without pin_memory) is measured again at the best's settings,
// and the row then shows that trial, not the faster one at other settings.
TEST(FormulaTrials, APickMeasuredAtOtherSettingsIsMeasuredAtTheBests) {
  SearchOutcome outcome = DoublingUpTo4();
  outcome.trials[1].knobs.pin_memory = false;
  outcome.trials[1].samples_per_s = 900;  // faster than the best: a fallback must not hide behind it
  CountingMeasurer measurer;
  // 6 CPUs, 2 ranks: Lightning max(1, 6 // 2 - 1) = 2, cpus // ranks 3, timm 4.
  const auto before = results::NodeFormulas(outcome.trials, 6, &outcome.trials[2]);
  ASSERT_EQ(before.size(), 3u);
  EXPECT_EQ(before[0].workers, 2);
  EXPECT_FALSE(before[0].at_best_settings);
  EXPECT_EQ(before[0].samples_per_s, 900);
  MeasureFormulaSettings(outcome, 6, 64, measurer, {});
  ASSERT_EQ(measurer.asked.size(), 2u);
  EXPECT_EQ(measurer.asked[0].num_workers, 2);
  EXPECT_TRUE(measurer.asked[0].pin_memory);
  EXPECT_EQ(measurer.asked[1].num_workers, 3);
  const auto after = results::NodeFormulas(outcome.trials, 6, &outcome.trials[2]);
  EXPECT_TRUE(after[0].at_best_settings);
  EXPECT_EQ(after[0].samples_per_s, 200);  // the measurer's 100 per worker
  const std::string text = results::NodeFormulasText(after, 400.0, "");
  EXPECT_NE(text.find("-> 2   workers per rank: 200.0 samples/s (trial 0), -50.0% against the best\n"),
            std::string::npos)
      << text;
  // Without workers a formula's setting is not persistent, and prefetch_factor does not matter.
  const loader::Knobs zero = results::FormulaKnobs(outcome.trials[2].knobs, 0);
  EXPECT_EQ(zero.num_workers, 0);
  EXPECT_FALSE(zero.persistent_workers);
  EXPECT_TRUE(zero.pin_memory);
}

TEST(FormulaTrials, NothingWithoutNodeTrialsOrABest) {
  SearchOutcome single;
  results::TrialRecord t;
  t.status = results::TrialStatus::kOk;
  t.knobs.num_workers = 2;
  t.samples_per_s = 10;
  single.trials.push_back(t);
  single.best = 0;
  CountingMeasurer measurer;
  EXPECT_TRUE(MeasureFormulaSettings(single, 12, 64, measurer, {}).empty());
  SearchOutcome no_best = DoublingUpTo4();
  no_best.best.reset();
  EXPECT_TRUE(MeasureFormulaSettings(no_best, 12, 64, measurer, {}).empty());
  EXPECT_TRUE(measurer.asked.empty());
}

}  // namespace
}  // namespace feedtune::tuner::node
