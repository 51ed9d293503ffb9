// The workers' memory over a trial (tuner/measure/worker_memory.h): the
// sampler's line through a series, and real trials of the synthetic dataset
// whose workers keep workload.leak_bytes_per_sample of every read: a leak is
// flagged (results/memory_growth.h), a flat worker is not. Epoch-based windows,
// so what is measured does not depend on how fast the box runs.
#include "tuner/measure/worker_memory.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "results/memory_growth.h"
#include "tests/common/tiny_trial.h"
#include "tuner/config/config.h"
#include "workloads/synthetic_dataset.h"

namespace feedtune::tuner {
namespace {

constexpr double kMiBytes = 1 << 20;

// ThreadSanitizer maps several bytes of shadow for each byte a test writes
// (4-5x seen here), so under it only the lower bounds of a growth hold.
// AddressSanitizer's shadow (one byte per eight) fits in the upper bounds.
#if defined(__SANITIZE_THREAD__)
constexpr bool kTsanShadow = true;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
constexpr bool kTsanShadow = true;
#else
constexpr bool kTsanShadow = false;
#endif
#else
constexpr bool kTsanShadow = false;
#endif

// This process (no workers) grows by 32 MiB, written, between samples a
// whole epoch apart: the line's slope is the growth, per epoch.
TEST(WorkerMemorySampler, TheGrowthIsTheSlopePerEpoch) {
  WorkerMemorySampler sampler(/*num_workers=*/0, /*thread_workers=*/false);
  std::vector<std::unique_ptr<char[]>> kept;
  for (int epoch = 0; epoch < 3; ++epoch) {
    if (epoch > 0) {
      kept.push_back(std::make_unique<char[]>(32 << 20));
      std::memset(kept.back().get(), 1, 32 << 20);
    }
    sampler.Sample({}, epoch);
  }
  results::TrialRecord t;
  sampler.Fill(&t);
  EXPECT_EQ(t.worker_rss_samples, 3);
  EXPECT_EQ(t.worker_rss_epochs, 2);
  EXPECT_TRUE(t.worker_rss_in_consumer);
  // At least the bytes written; at most those plus AddressSanitizer's shadow
  // (one byte per eight written) and some slack, so the check holds in the
  // plain build and under ASan alike.
  EXPECT_GE(t.worker_rss_growth_bytes_per_epoch, 31 * kMiBytes);
  EXPECT_GE(t.worker_rss_peak_bytes - t.worker_rss_start_bytes, 62 * kMiBytes);
  if (!kTsanShadow) {
    EXPECT_LE(t.worker_rss_growth_bytes_per_epoch, 32 * kMiBytes * 9 / 8 + 3 * kMiBytes);
    EXPECT_LE(t.worker_rss_peak_bytes - t.worker_rss_start_bytes, 64 * kMiBytes * 9 / 8 + 6 * kMiBytes);
  }
}

TEST(WorkerMemorySampler, NoSampleLeavesTheFiguresUnmeasured) {
  WorkerMemorySampler sampler(2, false);
  sampler.Sample({}, 0.5);  // worker processes stopped: nothing to read
  results::TrialRecord t;
  sampler.Fill(&t);
  EXPECT_TRUE(std::isnan(t.worker_rss_growth_bytes_per_epoch));
  EXPECT_TRUE(std::isnan(t.worker_rss_peak_bytes));
  EXPECT_EQ(t.worker_rss_samples, 0);
}

// One persistent worker process over a warm-up epoch and two one-epoch
// windows of 16 tiny samples, each read keeping `leak` bytes.
results::TrialRecord LeakTrial(int64_t leak) {
  SweepConfig config = testing_util::TinyTrialConfig("leak");
  config.workload.synthetic.leak_bytes_per_sample = leak;
  return testing_util::TinyTrial(config, std::make_shared<workloads::SyntheticDataset>(config.workload.synthetic),
                                 testing_util::OnePersistentWorker(config));
}

TEST(WorkerMemoryTrial, ALeakingWorkerIsFlaggedWithItsGrowth) {
  // 16 samples x 6 MiB: 96 MiB per epoch for the one worker.
  const results::TrialRecord t = LeakTrial(6 << 20);
  ASSERT_EQ(t.status, results::TrialStatus::kOk) << t.error.value_or("");
  EXPECT_FALSE(t.worker_rss_in_consumer);
  EXPECT_GE(t.worker_rss_samples, 4);  // each window's start and its epoch's two edges
  EXPECT_GE(t.worker_rss_epochs, 1.0);
  EXPECT_GE(t.worker_rss_growth_bytes_per_epoch, 72 * kMiBytes);
  if (!kTsanShadow) {
    EXPECT_LE(t.worker_rss_growth_bytes_per_epoch, 120 * kMiBytes);
  }
  EXPECT_GT(t.worker_rss_peak_bytes, t.worker_rss_start_bytes + 96 * kMiBytes);
  ASSERT_TRUE(results::GrowthFlagged(t));
  const std::string text = results::GrowthText(t);
  EXPECT_EQ(text.find("memory grows "), 0u) << text;
  EXPECT_NE(text.find(" MiB per epoch per worker: a cache or a leak; persistent_workers: false frees it at each epoch"),
            std::string::npos)
      << text;
}

TEST(WorkerMemoryTrial, AFlatWorkerIsNotFlagged) {
  const results::TrialRecord t = LeakTrial(0);
  ASSERT_EQ(t.status, results::TrialStatus::kOk) << t.error.value_or("");
  EXPECT_GE(t.worker_rss_samples, 4);
  EXPECT_GT(t.worker_rss_peak_bytes, 0);
  ASSERT_TRUE(std::isfinite(t.worker_rss_growth_bytes_per_epoch));
  EXPECT_LT(std::abs(t.worker_rss_growth_bytes_per_epoch), 16 * kMiBytes);
  EXPECT_FALSE(results::GrowthFlagged(t));
}

}  // namespace
}  // namespace feedtune::tuner
