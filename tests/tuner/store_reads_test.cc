// A trial's figures of a remote store (tuner/measure/store_reads.h): the
// first byte's percentiles from the tally's histogram against known times,
// the windows added without what came between them, and a trial whose
// worker process reads "from a store" reporting exactly its windows' reads.
#include "tuner/measure/store_reads.h"

#include <gtest/gtest.h>

#include <cmath>
#include <memory>

#include "storage/fetch_tally.h"
#include "tests/common/tiny_trial.h"
#include "workloads/remote_dataset.h"
#include "workloads/synthetic_dataset.h"

namespace feedtune::tuner {
namespace {

loader::StoreReads Counts(const storage::FetchTally& tally) { return workloads::StoreReadsOf(tally.Snapshot()); }

// `count` first bytes spread evenly over [from, to).
void AddEvenly(storage::FetchTally& tally, int count, double from, double to) {
  for (int i = 0; i < count; ++i) tally.AddObject(1000, from + (to - from) * (i + 0.5) / count, 0.001);
}

TEST(StoreWindows, FirstBytePercentilesAreWithinABucketOfTheExactOnes) {
  storage::FetchTally tally;
  const loader::StoreReads start = Counts(tally);
  AddEvenly(tally, 1000, 0.010, 0.030);
  StoreWindows windows;
  windows.Add(start, Counts(tally));
  const results::StoreFigures f = windows.Figures();
  EXPECT_EQ(f.objects, 1000);
  EXPECT_NEAR(f.first_byte_p50_s, 0.020, 0.020 * 0.042);
  EXPECT_NEAR(f.first_byte_p99_s, 0.0298, 0.0298 * 0.042);
}

TEST(StoreWindows, OneTimeReadsAsItsBucket) {
  storage::FetchTally tally;
  const loader::StoreReads start = Counts(tally);
  for (int i = 0; i < 50; ++i) tally.AddObject(10, 0.021, 0.0);
  StoreWindows windows;
  windows.Add(start, Counts(tally));
  const results::StoreFigures f = windows.Figures();
  EXPECT_NEAR(f.first_byte_p50_s, 0.021, 0.021 * 0.042);
  EXPECT_NEAR(f.first_byte_p99_s, 0.021, 0.021 * 0.042);
  EXPECT_TRUE(std::isnan(f.mb_per_s_per_connection));  // no time after the first bytes: not measured
}

TEST(StoreWindows, AddsTheWindowsAndNotWhatCameBetweenThem) {
  storage::FetchTally tally;
  const loader::StoreReads first_start = Counts(tally);
  for (int i = 0; i < 3; ++i) tally.AddRequest();
  tally.AddRetry(storage::FetchTally::Retry::kSlowDown);
  tally.AddObject(2'000'000, 0.020, 0.5);
  tally.AddObject(2'000'000, 0.020, 0.5);
  const loader::StoreReads first_end = Counts(tally);
  // Between the windows (a warm-up, a re-measured window): not the trial's.
  for (int i = 0; i < 10; ++i) tally.AddRequest();
  tally.AddRetry(storage::FetchTally::Retry::kServerError);
  AddEvenly(tally, 100, 1.0, 2.0);
  const loader::StoreReads second_start = Counts(tally);
  tally.AddRequest();
  tally.AddRetry(storage::FetchTally::Retry::kConnection);
  tally.AddObject(1'000'000, 0.040, 1.0);
  StoreWindows windows;
  windows.Add(first_start, first_end);
  windows.Add(second_start, Counts(tally));
  const results::StoreFigures f = windows.Figures();
  EXPECT_EQ(f.requests, 4);
  EXPECT_EQ(f.retries_slowdown, 1);
  EXPECT_EQ(f.retries_server_error, 0);
  EXPECT_EQ(f.retries_connection, 1);
  EXPECT_EQ(f.objects, 3);
  EXPECT_EQ(f.bytes, 5'000'000);
  EXPECT_NEAR(f.mb_per_s_per_connection, 2.5, 1e-9);  // 5 MB over 2 s after the first bytes
  EXPECT_LT(f.first_byte_p99_s, 0.045);               // none of the 1-2 s between the windows
}

TEST(StoreWindows, HistogramPercentileOfNothingIsNotMeasured) {
  const std::vector<int64_t> counts(3, 0);
  const std::vector<double> low = {0, 1, 2};
  EXPECT_TRUE(std::isnan(HistogramPercentile(counts, low, 50)));
  EXPECT_DOUBLE_EQ(HistogramPercentile(std::vector<int64_t>{0, 0, 4}, low, 50), 2);  // the open bucket: its low
}

// A synthetic dataset read "from a store": each sample read adds one GET of
// 5 ms to the first byte to a tally made before the workers fork.
class TalliedDataset final : public loader::Dataset {
 public:
  explicit TalliedDataset(const workloads::SyntheticOptions& options)
      : inner_(options), tally_(std::make_shared<storage::FetchTally>()) {}
  int64_t size() const override { return inner_.size(); }
  int64_t max_sample_bytes() const override { return inner_.max_sample_bytes(); }
  int64_t Read(int64_t index, std::span<std::byte> out) const override {
    const int64_t bytes = inner_.Read(index, out);
    tally_->AddRequest();
    tally_->AddObject(bytes, 0.005, 0.001);
    return bytes;
  }
  std::optional<loader::StoreReads> ReadsFromStore() const override { return Counts(*tally_); }

 private:
  const workloads::SyntheticDataset inner_;
  const std::shared_ptr<storage::FetchTally> tally_;
};

// One worker process over a warm-up epoch and two one-epoch windows of 16
// samples: the trial's store figures are the windows' 32 reads, made in the
// worker, not the warm-up's.
TEST(StoreTrial, AWorkerProcesssReadsInTheWindowsAreTheTrialsFigures) {
  const SweepConfig config = testing_util::TinyTrialConfig("store");
  const results::TrialRecord t = testing_util::TinyTrial(
      config, std::make_shared<TalliedDataset>(config.workload.synthetic), testing_util::OnePersistentWorker(config));
  ASSERT_EQ(t.status, results::TrialStatus::kOk) << t.error.value_or("");
  ASSERT_TRUE(t.store.has_value());
  EXPECT_EQ(t.store->objects, 32);
  EXPECT_EQ(t.store->requests, 32);
  EXPECT_EQ(t.store->bytes, 32 * 64);
  EXPECT_EQ(t.store->retries(), 0);
  EXPECT_NEAR(t.store->first_byte_p50_s, 0.005, 0.005 * 0.042);
}

TEST(StoreTrial, LocalDataHasNoStoreFigures) {
  const SweepConfig config = testing_util::TinyTrialConfig("local");
  const results::TrialRecord t =
      testing_util::TinyTrial(config, std::make_shared<workloads::SyntheticDataset>(config.workload.synthetic),
                              testing_util::OnePersistentWorker(config));
  ASSERT_EQ(t.status, results::TrialStatus::kOk) << t.error.value_or("");
  EXPECT_FALSE(t.store.has_value());
}

}  // namespace
}  // namespace feedtune::tuner
