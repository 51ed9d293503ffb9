// The tally the object clients of a dataset add to across processes
// (storage/fetch_tally.h): a forked child's counts are the parent's, and the
// first-byte histogram's buckets hold the times they say.
#include "storage/fetch_tally.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>


namespace feedtune::storage {
namespace {

TEST(FetchTally, ACountInAForkedChildIsSeenByTheParent) {
  FetchTally tally;
  tally.AddRequest();
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    for (int i = 0; i < 3; ++i) tally.AddRequest();
    tally.AddRetry(FetchTally::Retry::kSlowDown);
    tally.AddRetry(FetchTally::Retry::kSlowDown);
    tally.AddRetry(FetchTally::Retry::kConnection);
    tally.AddObject(1000, 0.020, 0.5);
    tally.AddObject(3000, 0.030, 1.5);
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  const TallySnapshot s = tally.Snapshot();
  EXPECT_EQ(s.requests, 4);
  EXPECT_EQ(s.retries_slowdown, 2);
  EXPECT_EQ(s.retries_server_error, 0);
  EXPECT_EQ(s.retries_connection, 1);
  EXPECT_EQ(s.retries(), 3);
  EXPECT_EQ(s.objects, 2);
  EXPECT_EQ(s.bytes, 4000);
  EXPECT_DOUBLE_EQ(s.transfer_s, 2.0);
  EXPECT_EQ(s.first_byte[FirstByteBucket(0.020)], 1);
  EXPECT_EQ(s.first_byte[FirstByteBucket(0.030)], 1);
}

TEST(FetchTally, TheDifferenceOfTwoSnapshotsIsWhatCameBetween) {
  FetchTally tally;
  tally.AddObject(100, 0.005, 0.01);
  const TallySnapshot before = tally.Snapshot();
  tally.AddRequest();
  tally.AddObject(200, 0.050, 0.02);
  const TallySnapshot between = tally.Snapshot() - before;
  EXPECT_EQ(between.requests, 1);
  EXPECT_EQ(between.objects, 1);
  EXPECT_EQ(between.bytes, 200);
  EXPECT_NEAR(between.transfer_s, 0.02, 1e-9);
  EXPECT_EQ(between.first_byte[FirstByteBucket(0.005)], 0);
  EXPECT_EQ(between.first_byte[FirstByteBucket(0.050)], 1);
}

// Each bucket holds the times from its low up to the next bucket's, 4.2% apart.
TEST(FetchTally, EachFirstByteBucketHoldsTheTimesBetweenItsBounds) {
  EXPECT_EQ(FirstByteBucket(0), 0u);
  EXPECT_EQ(FirstByteBucket(5e-5), 0u);
  EXPECT_EQ(FirstByteBucket(std::nan("")), 0u);
  EXPECT_EQ(FirstByteBucket(1e-4), 1u);
  EXPECT_EQ(FirstByteBucket(60), kFirstByteBuckets - 1);
  EXPECT_EQ(FirstByteBucket(3600), kFirstByteBuckets - 1);
  EXPECT_DOUBLE_EQ(FirstByteBucketLow(0), 0);
  EXPECT_DOUBLE_EQ(FirstByteBucketLow(1), 1e-4);
  EXPECT_DOUBLE_EQ(FirstByteBucketLow(kFirstByteBuckets - 1), 60);
  for (const double t : {2e-4, 1e-3, 0.0123, 0.020, 0.1, 1.0, 7.5, 59.0}) {
    const size_t b = FirstByteBucket(t);
    EXPECT_LE(FirstByteBucketLow(b), t) << t;
    EXPECT_GT(FirstByteBucketLow(b + 1), t) << t;
    EXPECT_NEAR(FirstByteBucketLow(b + 1) / FirstByteBucketLow(b), 1.0425, 0.001) << t;
  }
}

}  // namespace
}  // namespace feedtune::storage
