#include "tuner/measure/stats.h"

#include <gtest/gtest.h>

namespace feedtune::tuner {
namespace {

TEST(Stats, MedianAndPercentiles) {
  EXPECT_DOUBLE_EQ(Median({3, 1, 2}), 2);
  EXPECT_DOUBLE_EQ(Median({4, 1, 2, 3}), 2.5);
  EXPECT_DOUBLE_EQ(Percentile({10, 20, 30, 40, 50}, 0), 10);
  EXPECT_DOUBLE_EQ(Percentile({10, 20, 30, 40, 50}, 100), 50);
  EXPECT_DOUBLE_EQ(Percentile({10, 20, 30, 40, 50}, 25), 20);
  EXPECT_DOUBLE_EQ(Percentile({}, 50), 0);
}

TEST(Stats, SingleValueHasAPointInterval) {
  const Summary s = Summarize({100});
  EXPECT_DOUBLE_EQ(s.median, 100);
  EXPECT_DOUBLE_EQ(s.ci_low, 100);
  EXPECT_DOUBLE_EQ(s.ci_high, 100);
  EXPECT_DOUBLE_EQ(s.cv, 0);
}

TEST(Stats, IntervalBracketsTheMedianAndIsDeterministic) {
  const std::vector<double> v = {98, 100, 101, 99, 102, 100, 97};
  const Summary a = Summarize(v);
  const Summary b = Summarize(v);
  EXPECT_DOUBLE_EQ(a.median, 100);
  EXPECT_LE(a.ci_low, 100);
  EXPECT_GE(a.ci_high, 100);
  EXPECT_GE(a.ci_low, 97);
  EXPECT_LE(a.ci_high, 102);
  EXPECT_DOUBLE_EQ(a.ci_low, b.ci_low);
  EXPECT_NEAR(a.cv, 0.0167, 0.001);
}

TEST(Stats, ModifiedZScoreFlagsOutliers) {
  const Summary s = Summarize({100, 101, 99, 100, 250});
  ASSERT_EQ(s.outliers.size(), 5u);
  EXPECT_FALSE(s.outliers[0]);
  EXPECT_TRUE(s.outliers[4]);
  const Summary flat = Summarize({5, 5, 5});
  for (bool o : flat.outliers) EXPECT_FALSE(o);
}

TEST(Stats, MedianIntervalAndCvOnFixedInputs) {
  const Summary s = Summarize({1000, 1100, 900});
  EXPECT_DOUBLE_EQ(s.median, 1000);
  // Three windows: the bootstrap interval of the median spans the data.
  EXPECT_DOUBLE_EQ(s.ci_low, 900);
  EXPECT_DOUBLE_EQ(s.ci_high, 1100);
  EXPECT_NEAR(s.cv, 0.1, 1e-12);  // sd 100 over mean 1000
  const Summary two = Summarize({10, 20});
  EXPECT_DOUBLE_EQ(two.median, 15);
  EXPECT_DOUBLE_EQ(two.ci_low, 10);
  EXPECT_DOUBLE_EQ(two.ci_high, 20);
}

TEST(Stats, ModifiedZScoreThresholdIsThreePointFive) {
  // median 100, MAD 1: z = 0.6745 |x - 100|; 105 gives 3.37 (kept), 106 gives 4.05 (flagged).
  EXPECT_FALSE(Summarize({99, 100, 101, 100, 105}).outliers[4]);
  EXPECT_TRUE(Summarize({99, 100, 101, 100, 106}).outliers[4]);
  // Low outliers count too.
  EXPECT_TRUE(Summarize({99, 100, 101, 100, 10}).outliers[4]);
}

TEST(Kneedle, MatchesTheReferenceExample) {
  // kneed's documented example (DataGenerator.figure2): y = -1 / (x + 0.1) + 5
  // on 10 points of [0, 1]; kneed reports the knee at x = 0.222.
  std::vector<double> x, y;
  for (int i = 0; i < 10; ++i) {
    x.push_back(i / 9.0);
    y.push_back(-1.0 / (x.back() + 0.1) + 5.0);
  }
  const auto k = KneedleIndex(x, y, 1.0);
  ASSERT_TRUE(k.has_value());
  EXPECT_EQ(*k, 2u);
  EXPECT_NEAR(x[*k], 0.222, 0.001);
}

TEST(Kneedle, WorkerCurves) {
  const std::vector<double> workers = {0, 1, 2, 4, 8, 16};
  // Rising to 4 workers, flat after.
  EXPECT_EQ(KneedleIndex(workers, {1000, 2000, 3000, 4000, 4000, 4000}), 3u);
  // Saturates at once.
  EXPECT_EQ(KneedleIndex(workers, {1000, 2000, 2000, 2000, 2000, 2000}), 1u);
  // Peaked at 2 workers.
  EXPECT_EQ(KneedleIndex({0, 1, 2, 4, 8}, {500, 900, 1800, 1200, 1200}), 2u);
  // A longer curve: linear to 8 workers, then 6% more at 16 and flat to 64.
  EXPECT_EQ(KneedleIndex({0, 1, 2, 4, 8, 16, 32, 64}, {100, 200, 400, 800, 1600, 1700, 1700, 1700}), 4u);
}

TEST(Kneedle, NoKneeOnFlatShortOrStraightCurves) {
  EXPECT_FALSE(KneedleIndex({0, 1, 2, 4}, {5, 5, 5, 5}).has_value());
  EXPECT_FALSE(KneedleIndex({0, 1}, {1, 2}).has_value());
  EXPECT_FALSE(KneedleIndex({0, 1, 2, 3}, {0, 1, 2, 3}).has_value());
  EXPECT_FALSE(KneedleIndex({0, 1, 2}, {1, 2}).has_value());  // lengths differ
}

}  // namespace
}  // namespace feedtune::tuner
