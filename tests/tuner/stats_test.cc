#include "tuner/stats.h"

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

}  // namespace
}  // namespace feedtune::tuner
