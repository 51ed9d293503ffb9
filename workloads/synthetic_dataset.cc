#include "workloads/synthetic_dataset.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <memory>
#include <mutex>
#include <numbers>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace feedtune::workloads {
namespace {

uint64_t Mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

// Word w of sample `index`: a counter-based generator, so any byte can be
// recomputed on its own.
uint64_t ContentWord(uint64_t seed, int64_t index, int64_t word) {
  return Mix(seed * 0x9E3779B97F4A7C15ULL + static_cast<uint64_t>(index) * 0xD1B54A32D192ED03ULL +
             static_cast<uint64_t>(word));
}

// workload.leak_bytes_per_sample: keeps `bytes` for the life of this
// process, every page written so that it is resident. Process-local on
// purpose, as a real leak is: each worker process grows its own, and thread
// workers (or num_workers 0) grow the consumer. Thread workers read at once,
// hence the lock.
void Leak(int64_t bytes) {
  static std::mutex mu;
  static std::vector<std::unique_ptr<std::byte[]>> kept;
  auto block = std::make_unique_for_overwrite<std::byte[]>(static_cast<size_t>(bytes));
  std::memset(block.get(), 0xA5, static_cast<size_t>(bytes));
  std::lock_guard lock(mu);
  kept.push_back(std::move(block));
}

// A uniform double in [0, 1) from 53 bits of Mix(x).
double Unit(uint64_t x) { return static_cast<double>(Mix(x) >> 11) * 0x1.0p-53; }

}  // namespace

SyntheticDataset::SyntheticDataset(const SyntheticOptions& options, const CpuCalibration& calibration)
    : options_(options), calibration_(calibration), fault_(options.fault) {
  IntraOpThreads();  // makes the shared setting now, before any fork server of this dataset exists
  if (options.samples < 1 || options.sample_bytes < 1) throw std::invalid_argument("synthetic dataset: empty");
  if (options.size.dist != SizeDist::kFixed &&
      (options.size.min < 1 || options.size.max < options.size.min || options.size.max != options.sample_bytes)) {
    throw std::invalid_argument("synthetic dataset: size distribution needs 1 <= min <= max == sample_bytes");
  }
}

SyntheticDataset::SyntheticDataset(const SyntheticOptions& options) : SyntheticDataset(options, Calibrate()) {}

void SyntheticDataset::InitWorker(int /*worker_id*/) const {
  if (options_.worker_init_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(options_.worker_init_us));
}

double SyntheticDataset::JitterFactor(double jitter, uint64_t seed, int64_t index) {
  if (jitter <= 0) return 1.0;
  const double u = Unit(seed ^ (static_cast<uint64_t>(index) + 0x51ED27));
  return 1.0 + jitter * (2.0 * u - 1.0);
}

double SyntheticDataset::CostFactor(int64_t index) const {
  return JitterFactor(options_.jitter, options_.seed, index);
}

int64_t SyntheticDataset::DrawSize(const SampleSize& size, int64_t fixed_bytes, uint64_t seed, int64_t index) {
  const uint64_t key = seed * 0xA24BAED4963EE407ULL + static_cast<uint64_t>(index) * 0x9FB21C651E98DF25ULL;
  double bytes = 0;
  switch (size.dist) {
    case SizeDist::kFixed:
      return fixed_bytes;
    case SizeDist::kUniform:
      bytes = static_cast<double>(size.min) + Unit(key) * static_cast<double>(size.max - size.min + 1);
      break;
    case SizeDist::kLognormal: {
      // Box-Muller from two independent uniforms; mu puts the mean at `mean`.
      const double u1 = 1.0 - Unit(key ^ 0x5851F42D4C957F2DULL);  // (0, 1]: log() stays finite
      const double u2 = Unit(key ^ 0x14057B7EF767814FULL);
      const double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
      const double mu = std::log(static_cast<double>(size.mean)) - size.sigma * size.sigma / 2;
      bytes = std::round(std::exp(mu + size.sigma * z));
      break;
    }
  }
  return std::clamp(static_cast<int64_t>(std::min(bytes, 9e18)), size.min, size.max);
}

int64_t SyntheticDataset::SampleBytes(int64_t index) const {
  return DrawSize(options_.size, options_.sample_bytes, options_.seed, index);
}

std::byte SyntheticDataset::ExpectedByte(uint64_t seed, int64_t index, int64_t offset) {
  const uint64_t w = ContentWord(seed, index, offset / 8);
  return static_cast<std::byte>(w >> (8 * (offset % 8)));
}

void SyntheticDataset::FillContent(uint64_t seed, int64_t index, std::span<std::byte> out) {
  const int64_t bytes = static_cast<int64_t>(out.size());
  const int64_t words = bytes / 8;
  for (int64_t w = 0; w < words; ++w) {
    const uint64_t v = ContentWord(seed, index, w);
    std::memcpy(out.data() + w * 8, &v, 8);
  }
  for (int64_t off = words * 8; off < bytes; ++off) out[static_cast<size_t>(off)] = ExpectedByte(seed, index, off);
}

int64_t SyntheticDataset::Read(int64_t index, std::span<std::byte> out) const {
  if (index < 0 || index >= options_.samples) {
    throw std::out_of_range("sample index " + std::to_string(index) + " outside [0, " +
                            std::to_string(options_.samples) + ")");
  }
  fault_.OnRead(index);
  const int64_t bytes = SampleBytes(index);
  if (static_cast<int64_t>(out.size()) < bytes) {
    throw std::length_error("sample " + std::to_string(index) + " needs " + std::to_string(bytes) +
                            " bytes, the slot has " + std::to_string(out.size()));
  }
  const auto sample = out.first(static_cast<size_t>(bytes));
  FillContent(options_.seed, index, sample);
  if (options_.leak_bytes_per_sample > 0) Leak(options_.leak_bytes_per_sample);

  const double factor = CostFactor(index);
  BurnCpuThreads(static_cast<int64_t>(static_cast<double>(options_.cpu_us_per_sample) * 1000.0 * factor), sample,
                 calibration_, IntraOpThreadsOr(options_.cpu_threads));
  if (options_.io_us_per_sample > 0) {
    std::this_thread::sleep_for(std::chrono::nanoseconds(
        static_cast<int64_t>(static_cast<double>(options_.io_us_per_sample) * 1000.0 * factor)));
  }
  return bytes;
}

}  // namespace feedtune::workloads
