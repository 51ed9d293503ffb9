// Dataset: what the loader reads, sample by sample (torch's map-style
// Dataset), or shard by shard through a ShardReader (a streaming dataset,
// torch's IterableDataset over shards: loader/stream.h).
//
// Implementations must be safe to call from several threads at once (thread-mode
// workers share one instance) and from forked processes (process-mode workers
// inherit it), so Read() is const and keeps no per-call shared state.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace feedtune::loader {

// One shard of a streaming dataset, read front to back (loader/stream.h).
// Used by one thread of one process.
class ShardReader {
 public:
  virtual ~ShardReader() = default;
  // The shard's next sample into `sample` (resized to its bytes) and its
  // index in the whole dataset; false at the end of the shard. Throws on
  // damaged data, naming the file and the offset.
  virtual bool Next(std::vector<std::byte>* sample, int64_t* index) = 0;
};

// What a dataset did before a measurement window (Dataset::BeforeRepeat).
struct RepeatPreparation {
  std::string note;  // for the user, e.g. a cold cache's eviction; empty: nothing to say
  // A cold cache on local files: the share of the bytes checked that were
  // still in the page cache after the eviction (0: cold as said). None: not
  // evicted, or nothing local to count (a store's objects).
  std::optional<double> resident_fraction;
};

// What a dataset read from a remote store since it was made, counted in
// every process that reads it (Dataset::ReadsFromStore), so that the reads of
// a span of time are the difference of two. Plain counts: the store's own
// figures (storage/fetch_tally.h) in the loader's words.
struct StoreReads {
  // As the object client counts them (storage::FetchStats): HTTP requests,
  // tries included; retries by cause (503 SlowDown, 500/502/504, a
  // connection lost mid-answer); the object reads that succeeded, their bytes
  // and their seconds from the first byte to the last, summed.
  int64_t requests = 0, retries_slowdown = 0, retries_server_error = 0, retries_connection = 0;
  int64_t objects = 0, bytes = 0;
  double transfer_s = 0;
  // Object reads by their time from the request to the first byte:
  // first_byte_counts[i] of them took from first_byte_low_s[i] up to the next
  // bucket's low (the last bucket: any longer). The buckets are the same in
  // every count of one dataset.
  std::vector<int64_t> first_byte_counts;
  std::vector<double> first_byte_low_s;
};

class Dataset {
 public:
  virtual ~Dataset() = default;

  virtual int64_t size() const = 0;
  // Upper bound of any sample's size; the loader sizes its slots with it.
  virtual int64_t max_sample_bytes() const = 0;

  // Called once in each worker before its first sample (and in the consumer when
  // num_workers == 0), as torch's worker_init_fn / per-worker dataset set-up.
  virtual void InitWorker(int /*worker_id*/) const {}

  // Called by the trial runner, in the consumer process, before each
  // measurement window (a file-backed dataset evicts its files from the page
  // cache here). Returns what it did: nothing, by default.
  virtual RepeatPreparation BeforeRepeat() const { return {}; }

  // A dataset read from a remote store: what its readers in every process
  // read from it so far (the trial runner reads it at each window's edges).
  // None: a dataset that reads no store. Called in the consumer process.
  virtual std::optional<StoreReads> ReadsFromStore() const { return std::nullopt; }

  // Called by the DataLoader, in the consumer process, when epoch `epoch`
  // starts and before any of its samples is dispatched, so that a dataset
  // whose samples depend on the epoch (random crops, as torchvision's differ
  // every epoch) can draw them from it. Process workers are forked before
  // this call: a dataset that uses the epoch keeps it in memory shared with
  // them (a MAP_SHARED page made at construction).
  virtual void SetEpoch(int64_t /*epoch*/) const {}

  // Writes sample `index` (0 <= index < size()) into `out`, whose size is
  // max_sample_bytes(); returns the number of bytes written. Throws on failure.
  virtual int64_t Read(int64_t index, std::span<std::byte> out) const = 0;

  // Requests in flight per worker (loader.fetch_concurrency): a dataset whose
  // read waits on a round trip (an object store) answers true and reads a
  // batch's samples with up to `concurrency` requests at once in ReadMany, as
  // a thread pool inside each torch worker would. Others read one sample after
  // another through Read(): more in flight overlaps nothing on a local read,
  // and the loader never calls their ReadMany.
  virtual bool reads_concurrently() const { return false; }
  // Samples `indices` into `slot`, sample i at i * stride (stride =
  // max_sample_bytes()); each one's bytes into `bytes[i]`. Throws on the first
  // failure, naming the sample. Only when reads_concurrently().
  virtual void ReadMany(std::span<const int64_t> /*indices*/, std::span<std::byte> /*slot*/, int64_t /*stride*/,
                        int /*concurrency*/, std::span<int64_t> /*bytes*/) const {
    throw std::logic_error("ReadMany on a dataset that does not read concurrently");
  }

  // Streaming (torch's IterableDataset over shards, as webdataset reads tar
  // shards): a dataset that returns num_shards() > 0 is read by the loader
  // through OpenShard, each worker its own shards in order (loader/stream.h),
  // never through Read(). size() is then the samples of all shards together.
  virtual int64_t num_shards() const { return 0; }
  // Opens shard `shard` (0 <= shard < num_shards()) for one sequential pass.
  virtual std::unique_ptr<ShardReader> OpenShard(int64_t /*shard*/) const {
    throw std::logic_error("OpenShard on a map-style dataset");
  }
  // Samples in shard `shard`, known before it is read (an index, a scan at
  // open), so the loader knows each worker's batches before the epoch.
  virtual int64_t shard_samples(int64_t /*shard*/) const {
    throw std::logic_error("shard_samples on a map-style dataset");
  }
};

}  // namespace feedtune::loader
