#include "workloads/synthetic_dataset.h"

#include <gtest/gtest.h>
#include <time.h>

#include <chrono>
#include <vector>

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
  for (int64_t off = 0; off < 37; ++off) EXPECT_EQ(a[static_cast<size_t>(off)], SyntheticDataset::ExpectedByte(3, 4, off));
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

}  // namespace
}  // namespace feedtune::workloads
