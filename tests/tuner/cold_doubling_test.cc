// feedtune layout's cold doubling (tuner/search/cold_doubling.h) and THE
// RULE's cold form (IsColdGain), on scripted cold points.
#include "tuner/search/cold_doubling.h"

#include <atomic>
#include <map>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tuner/search/search.h"

namespace feedtune::tuner {
namespace {

using results::TrialRecord;
using results::TrialStatus;

TrialRecord Point(double median, double low, double high) {
  TrialRecord t;
  t.samples_per_s = median;
  t.ci_low = low;
  t.ci_high = high;
  t.repeats = 3;
  return t;
}

// Scripted points by worker count (a count not scripted fails the test); the counts asked, in order.
struct Script {
  std::map<int, TrialRecord> points;
  std::vector<int> asked = {};
  MeasureColdCount Measure() {
    return [this](int workers) {
      asked.push_back(workers);
      const auto it = points.find(workers);
      EXPECT_NE(it, points.end()) << "asked for " << workers << " workers";
      TrialRecord t = it == points.end() ? TrialRecord{} : it->second;
      t.knobs.num_workers = workers;
      return t;
    };
  }
};

constexpr double kThreshold = 0.05;

TEST(ColdGain, EitherIntervalAloneBeyondTheNoiseIsAGain) {
  const TrialRecord one = Point(969, 950, 990);
  // The case the cold form is for: a streamed window that met an epoch's end
  // widened the interval, yet the median is far above the other's interval.
  const TrialRecord wide = Point(1790, 593, 4286);
  EXPECT_TRUE(IsColdGain(wide, one, kThreshold));
  EXPECT_FALSE(IsGain(wide, one, kThreshold));  // the sweep's form wants both apart
  // Its interval above the other's median, its median inside the other's interval.
  EXPECT_TRUE(IsColdGain(Point(1100, 1000, 1200), Point(990, 900, 1150), kThreshold));
  // Within 5%: no gain, however narrow the intervals.
  EXPECT_FALSE(IsColdGain(Point(1040, 1039, 1041), Point(1000, 999, 1001), kThreshold));
  // Both tests failed: the intervals overlap the medians.
  EXPECT_FALSE(IsColdGain(Point(1100, 950, 1300), Point(1000, 900, 1150), kThreshold));
  TrialRecord failed = Point(5000, 4900, 5100);
  failed.status = TrialStatus::kFailed;
  EXPECT_FALSE(IsColdGain(failed, one, kThreshold));
}

TEST(ColdDoubling, ZeroToOneIsNeverTheEndAndTheFirstMissFromOneIsAtTwoOrMore) {
  // A cold LMDB: nothing gained at 1 worker, 3x at 4, then flat.
  Script s{{{0, Point(100, 95, 105)}, {1, Point(98, 93, 103)}, {2, Point(104, 99, 109)}, {4, Point(300, 290, 310)},
            {8, Point(305, 295, 315)}}};
  const std::atomic<bool> stop{false};
  // 1 is no gain over 0 and goes on; 2 is no gain (+4%) and ends it, so 4 is never asked.
  ColdCurve curve = ColdDoubling(64, kThreshold, s.Measure(), stop);
  EXPECT_THAT(s.asked, testing::ElementsAre(0, 1, 2));
  ASSERT_TRUE(curve.best.has_value());
  EXPECT_EQ(curve.points[*curve.best].knobs.num_workers, 0);  // no step gained over it
  EXPECT_FALSE(curve.interrupted);

  // With a gain at 2, it goes on to 4 and 8, and ends at 8's miss.
  s.points[2] = Point(200, 190, 210);
  s.asked.clear();
  curve = ColdDoubling(64, kThreshold, s.Measure(), stop);
  EXPECT_THAT(s.asked, testing::ElementsAre(0, 1, 2, 4, 8));
  EXPECT_EQ(curve.points.size(), 5u);
  EXPECT_EQ(curve.points[*curve.best].knobs.num_workers, 4);
}

TEST(ColdDoubling, EndsAtMaxWorkersAFailureOrAStop) {
  Script s{{{0, Point(100, 99, 101)}, {1, Point(200, 199, 201)}, {2, Point(400, 399, 401)}, {4, Point(800, 799, 801)}}};
  std::atomic<bool> stop{false};
  ColdCurve curve = ColdDoubling(2, kThreshold, s.Measure(), stop);
  EXPECT_THAT(s.asked, testing::ElementsAre(0, 1, 2));
  EXPECT_EQ(curve.points[*curve.best].knobs.num_workers, 2);

  // A failure (or a budget's refusal) ends the doubling; the best so far stands.
  TrialRecord refused;
  refused.status = TrialStatus::kSkipped;
  refused.error = "over the memory budget";
  s.points[2] = refused;
  s.asked.clear();
  curve = ColdDoubling(64, kThreshold, s.Measure(), stop);
  EXPECT_THAT(s.asked, testing::ElementsAre(0, 1, 2));
  EXPECT_EQ(curve.points.back().status, TrialStatus::kSkipped);
  EXPECT_EQ(curve.points[*curve.best].knobs.num_workers, 1);

  // Nothing measured: no best, and the point says why.
  TrialRecord failed;
  failed.status = TrialStatus::kFailed;
  failed.error = "exit 1";
  s.points[0] = failed;
  curve = ColdDoubling(64, kThreshold, s.Measure(), stop);
  EXPECT_FALSE(curve.best.has_value());
  ASSERT_EQ(curve.points.size(), 1u);
  EXPECT_EQ(curve.points[0].error, "exit 1");

  stop = true;
  s.asked.clear();
  curve = ColdDoubling(64, kThreshold, s.Measure(), stop);
  EXPECT_TRUE(curve.interrupted);
  EXPECT_TRUE(s.asked.empty());
}

TEST(ColdInFlightDoubling, DoublesRequestsInFlightWhileTheyGainUpToTheCap) {
  // Behind a round trip: each doubling doubles the rate until the store binds at 8.
  Script s{{{1, Point(45, 44, 46)}, {2, Point(90, 88, 92)}, {4, Point(178, 175, 181)}, {8, Point(290, 280, 300)},
            {16, Point(295, 285, 305)}, {32, Point(300, 290, 310)}}};
  const std::atomic<bool> stop{false};
  ColdCurve curve = ColdInFlightDoubling(32, kThreshold, s.Measure(), stop);
  EXPECT_THAT(s.asked, testing::ElementsAre(1, 2, 4, 8, 16));  // 16 is no gain over 8 and ends it
  ASSERT_TRUE(curve.best.has_value());
  EXPECT_EQ(*curve.best, 3u);

  // The cap (the batch size) ends it, and a cap under 1 still measures one in flight.
  s.asked.clear();
  curve = ColdInFlightDoubling(4, kThreshold, s.Measure(), stop);
  EXPECT_THAT(s.asked, testing::ElementsAre(1, 2, 4));
  EXPECT_EQ(*curve.best, 2u);
  s.asked.clear();
  curve = ColdInFlightDoubling(0, kThreshold, s.Measure(), stop);
  EXPECT_THAT(s.asked, testing::ElementsAre(1));

  // A failure ends it with the best so far; a stop before the first leaves nothing.
  TrialRecord failed;
  failed.status = TrialStatus::kFailed;
  s.points[4] = failed;
  s.asked.clear();
  curve = ColdInFlightDoubling(32, kThreshold, s.Measure(), stop);
  EXPECT_THAT(s.asked, testing::ElementsAre(1, 2, 4));
  EXPECT_EQ(*curve.best, 1u);
  const std::atomic<bool> stopped{true};
  curve = ColdInFlightDoubling(32, kThreshold, s.Measure(), stopped);
  EXPECT_TRUE(curve.interrupted);
  EXPECT_TRUE(curve.points.empty());
}

}  // namespace
}  // namespace feedtune::tuner
