#include "workloads/synthetic_dataset.h"

#include <gtest/gtest.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "workloads/cpu_work.h"

namespace feedtune::workloads {
namespace {

TEST(SyntheticDataset, ContentIsDeterministicInSeedAndIndex) {
  SyntheticOptions o;
  o.samples = 10;
  o.sample_bytes = 37;
  o.cpu_us_per_sample = 0;
  o.seed = 3;
  SyntheticDataset d(o);
  std::vector<std::byte> a(37), b(37);
  EXPECT_EQ(d.Read(4, a), 37);
  d.Read(4, b);
  EXPECT_EQ(a, b);
  for (int64_t off = 0; off < 37; ++off) {
    EXPECT_EQ(a[static_cast<size_t>(off)], SyntheticDataset::ExpectedByte(3, 4, off));
  }
  d.Read(5, b);
  EXPECT_NE(a, b);
}

TEST(SyntheticDataset, SpendsTheRequestedCpuTime) {
  SyntheticOptions o;
  o.samples = 10;
  o.sample_bytes = 150528;
  o.cpu_us_per_sample = 2000;
  o.jitter = 0;
  SyntheticDataset d(o);
  std::vector<std::byte> out(150528);
  timespec t0{}, t1{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
  for (int i = 0; i < 10; ++i) d.Read(i, out);
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t1);
  const double cpu_ms = (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6;
  EXPECT_GE(cpu_ms, 20.0);
  EXPECT_LT(cpu_ms, 40.0);  // generous: filling the content costs a little too
}

TEST(SyntheticDataset, IoWaitUsesNoCpu) {
  SyntheticOptions o;
  o.samples = 5;
  o.sample_bytes = 64;
  o.cpu_us_per_sample = 0;
  o.io_us_per_sample = 10000;
  o.jitter = 0;
  SyntheticDataset d(o);
  std::vector<std::byte> out(64);
  timespec c0{}, c1{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 5; ++i) d.Read(i, out);
  const auto wall = std::chrono::steady_clock::now() - start;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
  EXPECT_GE(wall, std::chrono::milliseconds(50));
  EXPECT_LT((c1.tv_sec - c0.tv_sec) * 1e3 + (c1.tv_nsec - c0.tv_nsec) / 1e6, 10.0);
}

TEST(SyntheticDataset, JitterStaysInItsBand) {
  SyntheticOptions o;
  o.jitter = 0.25;
  SyntheticDataset d(o);
  double lo = 2, hi = 0;
  for (int i = 0; i < 1000; ++i) {
    lo = std::min(lo, d.CostFactor(i));
    hi = std::max(hi, d.CostFactor(i));
  }
  EXPECT_GE(lo, 0.75);
  EXPECT_LE(hi, 1.25);
  EXPECT_LT(lo, 0.8);
  EXPECT_GT(hi, 1.2);
}

TEST(SyntheticDataset, EveryByteOfEverySizeIsDeterministic) {
  SyntheticOptions o;
  o.samples = 50;
  o.size = {.dist = SizeDist::kUniform, .mean = 0, .sigma = 0, .min = 1, .max = 3001};
  o.sample_bytes = 3001;
  o.cpu_us_per_sample = 0;
  o.seed = 11;
  SyntheticDataset d(o);
  std::vector<std::byte> out(3001);
  for (int64_t i = 0; i < o.samples; ++i) {
    const int64_t n = d.Read(i, out);
    ASSERT_EQ(n, d.SampleBytes(i));
    ASSERT_EQ(n, SyntheticDataset::DrawSize(o.size, o.sample_bytes, 11, i));
    for (int64_t off = 0; off < n; ++off) {
      ASSERT_EQ(out[static_cast<size_t>(off)], SyntheticDataset::ExpectedByte(11, i, off)) << i << " " << off;
    }
  }
}

TEST(SyntheticDataset, LognormalSizesHaveTheConfiguredMean) {
  SampleSize size{.dist = SizeDist::kLognormal, .mean = 150528, .sigma = 0.5, .min = 1, .max = 981566};
  double sum = 0;
  int64_t lo = size.max, hi = 0;
  constexpr int kDraws = 20000;
  for (int i = 0; i < kDraws; ++i) {
    const int64_t n = SyntheticDataset::DrawSize(size, size.max, 7, i);
    sum += static_cast<double>(n);
    lo = std::min(lo, n);
    hi = std::max(hi, n);
  }
  EXPECT_NEAR(sum / kDraws, 150528, 150528 * 0.03);
  EXPECT_GE(lo, 1);
  EXPECT_LE(hi, size.max);
  EXPECT_LT(lo, 150528 / 2);  // it does spread
  EXPECT_GT(hi, 150528 * 2);
  // Clamped to [min, max].
  size.min = 100000;
  size.max = 200000;
  for (int i = 0; i < 1000; ++i) {
    const int64_t n = SyntheticDataset::DrawSize(size, size.max, 7, i);
    EXPECT_GE(n, 100000);
    EXPECT_LE(n, 200000);
  }
}

TEST(SyntheticDataset, UniformSizesCoverTheirRange) {
  const SampleSize size{.dist = SizeDist::kUniform, .mean = 0, .sigma = 0, .min = 1000, .max = 2000};
  double sum = 0;
  int64_t lo = 5000, hi = 0;
  for (int i = 0; i < 10000; ++i) {
    const int64_t n = SyntheticDataset::DrawSize(size, 2000, 3, i);
    sum += static_cast<double>(n);
    lo = std::min(lo, n);
    hi = std::max(hi, n);
  }
  EXPECT_NEAR(sum / 10000, 1500, 15);
  EXPECT_EQ(lo, 1000);
  EXPECT_EQ(hi, 2000);
}

// The CPU cost is what was asked for, within 20% (measured in this thread's
// CPU time, which other load on the machine does not inflate).
TEST(CpuCalibration, RequestedCpuTimeIsSpent) {
  const CpuCalibration c = Calibrate();
  EXPECT_GT(c.clock_read_ns, 0);
  EXPECT_GT(c.work_bytes_per_s, 1e8);  // any machine checksums faster than 100 MB/s
  EXPECT_GE(c.chunk_bytes, 256u);
  EXPECT_LT(c.clock_overhead, 0.2);
  EXPECT_GE(c.check_spent_us, c.check_requested_us * 0.8);
  EXPECT_LE(c.check_spent_us, c.check_requested_us * 1.2);

  // Per sample, this thread's CPU time for a read of `us` of CPU work: the
  // least of three passes. The fill and the work only ever gain from noise (a
  // page fault on the first touch, a cold cache), so the least pass is theirs.
  const auto spent_per_read_us = [&c](int64_t us) {
    SyntheticOptions o;
    o.samples = 20;
    o.sample_bytes = 4096;
    o.cpu_us_per_sample = us;
    o.jitter = 0;
    SyntheticDataset d(o, c);
    std::vector<std::byte> out(4096);
    double least = 1e18;
    for (int pass = 0; pass < 3; ++pass) {
      const int64_t t0 = ThreadCpuNs();
      for (int i = 0; i < 20; ++i) d.Read(i, out);
      least = std::min(least, static_cast<double>(ThreadCpuNs() - t0) / 1e3 / 20);
    }
    return least;
  };
  // What a read costs without CPU work (the content fill): a few us in a
  // release build, tens under ASan, so it is measured, not assumed. At CI's
  // stop 43 a single cold pass read the fill 11 us high under ASan, which is
  // more than the 20% the 50 us case allows.
  const double fill_us = spent_per_read_us(0);
  for (int64_t us : {50, 1000, 5000}) {
    const double work_us = spent_per_read_us(us) - fill_us;
    EXPECT_GE(work_us, static_cast<double>(us) * 0.8) << us << " us asked; the fill took " << fill_us;
    // At most one chunk of work past the deadline (cpu_work.h).
    EXPECT_LE(work_us, static_cast<double>(us) * 1.2 + c.chunk_us) << us << " us asked; the fill took " << fill_us;
  }
}

TEST(SyntheticDataset, FaultThrowsAtItsSample) {
  SyntheticOptions o;
  o.samples = 10;
  o.sample_bytes = 16;
  o.cpu_us_per_sample = 0;
  o.fault = {.kind = FaultKind::kThrow, .at_sample = 3};
  SyntheticDataset d(o);
  std::vector<std::byte> out(16);
  EXPECT_EQ(d.Read(2, out), 16);
  try {
    d.Read(3, out);
    FAIL() << "no fault";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "injected fault at sample 3");
  }
}

// Destructive faults never take the tool down: outside a worker process they throw.
TEST(SyntheticDataset, DestructiveFaultsThrowInTheMainProcess) {
  for (FaultKind kind : {FaultKind::kExit, FaultKind::kAbort, FaultKind::kSegv, FaultKind::kHang}) {
    SyntheticOptions o;
    o.samples = 10;
    o.sample_bytes = 16;
    o.cpu_us_per_sample = 0;
    o.fault = {.kind = kind, .at_sample = 0};
    SyntheticDataset d(o);
    std::vector<std::byte> out(16);
    try {
      d.Read(0, out);
      FAIL() << "no fault";
    } catch (const std::runtime_error& e) {
      EXPECT_EQ(std::string(e.what()),
                std::string("injected fault at sample 0 (fault kind '") + FaultKindName(kind) +
                    "' is simulated as an exception outside a worker process, so feedtune itself does "
                    "not die; use process-mode workers to see the real thing)");
    }
  }
}

}  // namespace
}  // namespace feedtune::workloads
