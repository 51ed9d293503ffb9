// FetchTally: what every ObjectClient of a source did, added up across the
// processes that read it, so that the consumer can read a trial's requests,
// retries and first bytes while the workers make them (docs/storage.md).
//
//   auto tally = std::make_shared<FetchTally>();     // in the consumer, before any fork
//   ClientOptions options;
//   options.tally = tally;                           // each client adds to it as requests complete
//   ...fork: the workers' clients add to the same counters...
//   TallySnapshot before = tally->Snapshot();
//   ...a measurement window...
//   TallySnapshot window = tally->Snapshot() - before;
//
// - The counters live in one MAP_SHARED | MAP_ANONYMOUS mapping made at
//   construction, so a process forked after it (the fork server, and the
//   workers it forks) adds to the same counters; made after a fork, a tally
//   is that process's own. Lock-free relaxed atomics: safe from any thread
//   and process, and a snapshot taken while requests complete is a moment
//   between two of them, not a torn figure.
// - Times to the first byte are counted in a fixed histogram
//   (kFirstByteBuckets: below 0.1 ms, log-spaced up to 60 s, above), so the
//   counters have a fixed size; a percentile from it is within one bucket,
//   4.2%, of the exact one (FirstByteBucketLow).
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>

namespace feedtune::storage {

// The first-byte histogram: bucket 0 holds times below 0.1 ms, buckets 1 ..
// kFirstByteBuckets - 2 split 0.1 ms .. 60 s into equal ratios (4.2% each),
// the last holds 60 s and more.
inline constexpr size_t kFirstByteBuckets = 322;
// The bucket a time falls in.
size_t FirstByteBucket(double seconds);
// The lowest time of bucket `bucket` (0 for the first); the highest is the
// next bucket's low, infinite for the last (bucket == kFirstByteBuckets).
double FirstByteBucketLow(size_t bucket);

// The tally's figures at one moment, or the difference of two.
struct TallySnapshot {
  int64_t requests = 0;              // HTTP requests sent, tries included (FetchStats::requests)
  int64_t retries_slowdown = 0;      // as FetchStats counts them
  int64_t retries_server_error = 0;
  int64_t retries_connection = 0;
  int64_t objects = 0;               // object reads that succeeded
  int64_t bytes = 0;                 // their bytes
  // Their seconds from the first byte to the last, summed: bytes over it is
  // MB/s on one connection, as the probe measures it.
  double transfer_s = 0;
  std::array<int64_t, kFirstByteBuckets> first_byte{};  // objects per bucket

  int64_t retries() const { return retries_slowdown + retries_server_error + retries_connection; }
  TallySnapshot& operator-=(const TallySnapshot& earlier);
  friend TallySnapshot operator-(TallySnapshot later, const TallySnapshot& earlier) { return later -= earlier; }
};

class FetchTally {
 public:
  // Maps the counters; throws std::system_error when it cannot.
  FetchTally();
  ~FetchTally();
  FetchTally(const FetchTally&) = delete;
  FetchTally& operator=(const FetchTally&) = delete;

  enum class Retry { kSlowDown, kServerError, kConnection };

  void AddRequest();
  void AddRetry(Retry cause);
  // One object read that succeeded: its bytes, its seconds from the request
  // sent to the first byte, and from the first byte to the last.
  void AddObject(int64_t bytes, double first_byte_s, double transfer_s);

  TallySnapshot Snapshot() const;

 private:
  struct Counters;
  Counters* counters_ = nullptr;  // the shared mapping
};

}  // namespace feedtune::storage
