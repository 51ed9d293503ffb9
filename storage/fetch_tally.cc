#include "storage/fetch_tally.h"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <limits>
#include <new>
#include <system_error>

namespace feedtune::storage {
namespace {

constexpr double kLowest = 1e-4;   // s: the top of bucket 0
constexpr double kHighest = 60;    // s: the bottom of the last bucket
constexpr size_t kLogBuckets = kFirstByteBuckets - 2;

double LogStep() { return std::log(kHighest / kLowest) / static_cast<double>(kLogBuckets); }

}  // namespace

size_t FirstByteBucket(double seconds) {
  if (!(seconds >= kLowest)) return 0;  // NaN too
  if (seconds >= kHighest) return kFirstByteBuckets - 1;
  const auto step = static_cast<size_t>(std::log(seconds / kLowest) / LogStep());
  return 1 + std::min(step, kLogBuckets - 1);
}

double FirstByteBucketLow(size_t bucket) {
  if (bucket == 0) return 0;
  if (bucket >= kFirstByteBuckets) return std::numeric_limits<double>::infinity();
  if (bucket == kFirstByteBuckets - 1) return kHighest;
  return kLowest * std::exp(LogStep() * static_cast<double>(bucket - 1));
}

TallySnapshot& TallySnapshot::operator-=(const TallySnapshot& earlier) {
  requests -= earlier.requests;
  retries_slowdown -= earlier.retries_slowdown;
  retries_server_error -= earlier.retries_server_error;
  retries_connection -= earlier.retries_connection;
  objects -= earlier.objects;
  bytes -= earlier.bytes;
  transfer_s -= earlier.transfer_s;
  for (size_t i = 0; i < first_byte.size(); ++i) first_byte[i] -= earlier.first_byte[i];
  return *this;
}

struct FetchTally::Counters {
  std::atomic<int64_t> requests{0};
  std::atomic<int64_t> retries_slowdown{0};
  std::atomic<int64_t> retries_server_error{0};
  std::atomic<int64_t> retries_connection{0};
  std::atomic<int64_t> objects{0};
  std::atomic<int64_t> bytes{0};
  std::atomic<int64_t> transfer_ns{0};
  std::array<std::atomic<int64_t>, kFirstByteBuckets> first_byte{};
};

FetchTally::FetchTally() {
  static_assert(std::atomic<int64_t>::is_always_lock_free, "the tally's counters must be lock-free across processes");
  void* mapped = ::mmap(nullptr, sizeof(Counters), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (mapped == MAP_FAILED) throw std::system_error(errno, std::generic_category(), "mapping the store's tally");
  counters_ = new (mapped) Counters{};
}

FetchTally::~FetchTally() {
  counters_->~Counters();
  ::munmap(counters_, sizeof(Counters));
}

void FetchTally::AddRequest() { counters_->requests.fetch_add(1, std::memory_order_relaxed); }

void FetchTally::AddRetry(Retry cause) {
  std::atomic<int64_t>& counter = cause == Retry::kSlowDown      ? counters_->retries_slowdown
                                  : cause == Retry::kServerError ? counters_->retries_server_error
                                                                 : counters_->retries_connection;
  counter.fetch_add(1, std::memory_order_relaxed);
}

void FetchTally::AddObject(int64_t bytes, double first_byte_s, double transfer_s) {
  counters_->objects.fetch_add(1, std::memory_order_relaxed);
  counters_->bytes.fetch_add(bytes, std::memory_order_relaxed);
  counters_->transfer_ns.fetch_add(std::llround(std::max(0.0, transfer_s) * 1e9), std::memory_order_relaxed);
  counters_->first_byte[FirstByteBucket(first_byte_s)].fetch_add(1, std::memory_order_relaxed);
}

TallySnapshot FetchTally::Snapshot() const {
  const Counters& c = *counters_;
  TallySnapshot s;
  s.requests = c.requests.load(std::memory_order_relaxed);
  s.retries_slowdown = c.retries_slowdown.load(std::memory_order_relaxed);
  s.retries_server_error = c.retries_server_error.load(std::memory_order_relaxed);
  s.retries_connection = c.retries_connection.load(std::memory_order_relaxed);
  s.objects = c.objects.load(std::memory_order_relaxed);
  s.bytes = c.bytes.load(std::memory_order_relaxed);
  s.transfer_s = static_cast<double>(c.transfer_ns.load(std::memory_order_relaxed)) / 1e9;
  for (size_t i = 0; i < kFirstByteBuckets; ++i) s.first_byte[i] = c.first_byte[i].load(std::memory_order_relaxed);
  return s;
}

}  // namespace feedtune::storage
