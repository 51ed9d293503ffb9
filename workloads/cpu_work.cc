#include "workloads/cpu_work.h"

#include <sys/mman.h>
#include <time.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

namespace feedtune::workloads {
namespace {

using Clock = std::chrono::steady_clock;

// Clock reads should cost at most this share of the spent time...
constexpr double kClockShare = 0.02;
// ... but a chunk stays short, so the last one overshoots the request by little.
constexpr double kMaxChunkNs = 20'000;
constexpr double kMinChunkNs = 1'000;
constexpr size_t kMinChunkBytes = 256;

// What a burn without data of its own works over. Filled at compile time:
// filled per call, it cost a short burn more than it asked (80 us a call
// under ThreadSanitizer at -O0, before the clock starts), and a static filled
// at first use takes a guard that a worker forked mid-fill would wait on.
constexpr std::array<std::byte, 4096> kScratch = [] {
  std::array<std::byte, 4096> s{};
  for (size_t i = 0; i < s.size(); ++i) s[i] = static_cast<std::byte>(i * 131);
  return s;
}();

// One pass of the work loop: a multiply-xor checksum over 8-byte words (the
// tail shorter than a word is left out, as SIMD decoders do with theirs).
uint64_t Work(const std::byte* p, size_t n, uint64_t acc) {
  for (size_t i = 0; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    acc = (acc ^ w) * 0x100000001B3ULL;
  }
  return acc;
}

double Ns(Clock::duration d) { return std::chrono::duration<double, std::nano>(d).count(); }

// The shared word behind SetIntraOpThreads/IntraOpThreads. A mapping, not a
// plain global: it must be shared with processes forked after it exists.
std::atomic<int>* IntraOpWord() {
  static std::atomic<int>* word = [] {
    void* p = mmap(nullptr, sizeof(std::atomic<int>), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    // Without a shared mapping (never seen), the setting stays in this process.
    if (p == MAP_FAILED) return new std::atomic<int>(0);
    return new (p) std::atomic<int>(0);
  }();
  return word;
}

}  // namespace

void SetIntraOpThreads(int threads) { IntraOpWord()->store(std::max(0, threads), std::memory_order_relaxed); }
int IntraOpThreads() { return IntraOpWord()->load(std::memory_order_relaxed); }

uint64_t BurnCpuThreads(int64_t ns, std::span<const std::byte> data, const CpuCalibration& calibration,
                        int threads) {
  if (threads <= 1 || ns <= 0) return BurnCpu(ns, data, calibration);
  const int64_t share = ns / threads;
  std::atomic<int> done{0};
  std::atomic<uint64_t> acc{0};
  std::vector<std::thread> helpers;
  helpers.reserve(static_cast<size_t>(threads - 1));
  for (int i = 1; i < threads; ++i) {
    helpers.emplace_back([&] {
      acc.fetch_xor(BurnCpu(share, data, calibration), std::memory_order_relaxed);
      done.fetch_add(1, std::memory_order_release);
    });
  }
  uint64_t mine = BurnCpu(share, data, calibration);
  // OpenMP's active wait at the region's end: spin, burning CPU, then block.
  const auto spin_until = Clock::now() + std::chrono::microseconds(200);
  while (done.load(std::memory_order_acquire) < threads - 1 && Clock::now() < spin_until) {
  }
  for (std::thread& t : helpers) t.join();
  return mine ^ acc.load(std::memory_order_relaxed);
}

int64_t ThreadCpuNs() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

uint64_t BurnCpu(int64_t ns, std::span<const std::byte> data, const CpuCalibration& calibration) {
  if (ns <= 0) return 0;
  if (data.size() < 64) data = kScratch;
  const double bytes_per_ns = calibration.work_bytes_per_s > 0 ? calibration.work_bytes_per_s / 1e9 : 1.0;
  const size_t chunk = std::max(kMinChunkBytes, calibration.chunk_bytes);
  const int64_t until = ThreadCpuNs() + ns;
  uint64_t acc = 0;
  size_t pos = 0;
  for (;;) {
    const int64_t left = until - ThreadCpuNs();
    if (left <= 0) break;
    // Near the end, work only as long as is left, so the overshoot is one clock read.
    size_t budget = std::clamp(static_cast<size_t>(static_cast<double>(left) * bytes_per_ns), size_t{64}, chunk);
    while (budget > 0) {
      const size_t n = std::min(budget, data.size() - pos);
      acc = Work(data.data() + pos, n, acc);
      budget -= n;
      pos += n;
      if (pos + 8 > data.size()) pos = 0;
    }
    asm volatile("" : : "r"(acc) : "memory");
  }
  return acc;
}

CpuCalibration Calibrate() {
  const auto start = Clock::now();
  CpuCalibration c;

  // One clock read: the best of a few rounds, timed in this thread's CPU
  // time, so a preemption does not count (in wall time, on a box at load 24
  // every round of 1 ms was preempted, and the chunk came out at its cap).
  double best_read = 1e9;
  for (int round = 0; round < 5; ++round) {
    constexpr int kReads = 2000;
    int64_t sink = 0;
    const int64_t t0 = ThreadCpuNs();
    for (int i = 0; i < kReads; ++i) sink += ThreadCpuNs();
    const double each = static_cast<double>(ThreadCpuNs() - t0) / kReads;
    asm volatile("" : : "r"(sink) : "memory");
    if (each > 0) best_read = std::min(best_read, each);
  }
  c.clock_read_ns = best_read;

  // The work loop's rate over a buffer that stays in cache, as a sample being
  // decoded mostly does. Measured in thread CPU time; the best of a few rounds.
  std::vector<std::byte> buffer(64 * 1024);
  for (size_t i = 0; i < buffer.size(); ++i) buffer[i] = static_cast<std::byte>(i * 2654435761u >> 13);
  double best_rate = 0;
  uint64_t acc = 0;
  for (int round = 0; round < 5; ++round) {
    constexpr int kPasses = 32;
    const int64_t t0 = ThreadCpuNs();
    for (int p = 0; p < kPasses; ++p) acc = Work(buffer.data(), buffer.size(), acc);
    const int64_t spent = ThreadCpuNs() - t0;
    asm volatile("" : : "r"(acc) : "memory");
    if (spent > 0) {
      const double bytes = static_cast<double>(buffer.size()) * kPasses;
      best_rate = std::max(best_rate, bytes / (static_cast<double>(spent) / 1e9));
    }
  }
  c.work_bytes_per_s = best_rate > 0 ? best_rate : 1e9;

  const double chunk_ns = std::clamp(c.clock_read_ns / kClockShare, kMinChunkNs, kMaxChunkNs);
  const double bytes = c.work_bytes_per_s / 1e9 * chunk_ns;
  c.chunk_bytes = std::max(kMinChunkBytes, static_cast<size_t>(bytes) / 64 * 64);
  c.chunk_us = static_cast<double>(c.chunk_bytes) / c.work_bytes_per_s * 1e6;
  c.clock_overhead = c.clock_read_ns / (c.clock_read_ns + c.chunk_us * 1e3);

  // Self-check: ask for 2 ms and measure what was spent.
  c.check_requested_us = 2000;
  const int64_t t0 = ThreadCpuNs();
  BurnCpu(static_cast<int64_t>(c.check_requested_us * 1e3), buffer, c);
  c.check_spent_us = static_cast<double>(ThreadCpuNs() - t0) / 1e3;

  c.calibration_s = Ns(Clock::now() - start) / 1e9;
  return c;
}

}  // namespace feedtune::workloads
