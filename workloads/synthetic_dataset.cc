#include "workloads/synthetic_dataset.h"

#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>

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

int64_t ThreadCpuNs() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// Burns `ns` of this thread's CPU time doing work over `data` (a checksum the
// compiler cannot drop), like a decode or augment step would.
void BurnCpu(int64_t ns, std::span<const std::byte> data) {
  if (ns <= 0) return;
  const int64_t until = ThreadCpuNs() + ns;
  uint64_t acc = 0;
  size_t pos = 0;
  constexpr size_t kChunk = 4096;  // about a microsecond of work between clock reads
  do {
    const size_t n = std::min(kChunk, data.size() - pos);
    for (size_t i = 0; i + 8 <= n; i += 8) {
      uint64_t w;
      std::memcpy(&w, data.data() + pos + i, 8);
      acc = (acc ^ w) * 0x100000001B3ULL;
    }
    pos = data.size() > kChunk ? (pos + n) % (data.size() - kChunk + 1) : 0;
    asm volatile("" : : "r"(acc) : "memory");
  } while (ThreadCpuNs() < until);
}

}  // namespace

SyntheticDataset::SyntheticDataset(const SyntheticOptions& options) : options_(options) {
  if (options.samples < 1 || options.sample_bytes < 1) throw std::invalid_argument("synthetic dataset: empty");
}

void SyntheticDataset::InitWorker(int /*worker_id*/) const {
  if (options_.worker_init_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(options_.worker_init_us));
}

double SyntheticDataset::CostFactor(int64_t index) const {
  if (options_.jitter <= 0) return 1.0;
  const double u = static_cast<double>(Mix(options_.seed ^ (static_cast<uint64_t>(index) + 0x51ED27)) >> 11) * 0x1.0p-53;
  return 1.0 + options_.jitter * (2.0 * u - 1.0);
}

std::byte SyntheticDataset::ExpectedByte(uint64_t seed, int64_t index, int64_t offset) {
  const uint64_t w = ContentWord(seed, index, offset / 8);
  return static_cast<std::byte>(w >> (8 * (offset % 8)));
}

int64_t SyntheticDataset::Read(int64_t index, std::span<std::byte> out) const {
  if (index < 0 || index >= options_.samples) {
    throw std::out_of_range("sample index " + std::to_string(index) + " outside [0, " +
                            std::to_string(options_.samples) + ")");
  }
  const int64_t bytes = options_.sample_bytes;
  const int64_t words = bytes / 8;
  for (int64_t w = 0; w < words; ++w) {
    const uint64_t v = ContentWord(options_.seed, index, w);
    std::memcpy(out.data() + w * 8, &v, 8);
  }
  for (int64_t off = words * 8; off < bytes; ++off) out[static_cast<size_t>(off)] = ExpectedByte(options_.seed, index, off);

  const double factor = CostFactor(index);
  BurnCpu(static_cast<int64_t>(static_cast<double>(options_.cpu_us_per_sample) * 1000.0 * factor),
          out.first(static_cast<size_t>(bytes)));
  if (options_.io_us_per_sample > 0) {
    std::this_thread::sleep_for(std::chrono::nanoseconds(
        static_cast<int64_t>(static_cast<double>(options_.io_us_per_sample) * 1000.0 * factor)));
  }
  return bytes;
}

}  // namespace feedtune::workloads
