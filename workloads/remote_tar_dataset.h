// RemoteTarDataset: WebDataset tar shards in an object store or on a web
// server (workload.kind: tar, path: s3://bucket/prefix or http(s)://host/x.tar),
// read through storage/'s client (libcurl, SigV4, retries; docs/storage.md).
//
//   shards   s3://: the prefix's *.tar objects, listed once, in key order
//            (s3://bucket/dir/ or one shard's key); http(s)://: the one
//            shard the URL names (a plain server gives no listing)
//   open     each shard's member index (workloads/tar_format.h) built from
//            its headers, read through ranged GETs of kScanWindow bytes: a
//            window holds the headers of every sample smaller than it, so
//            the open costs about shard bytes / window round trips (a
//            shard of samples larger than the window: one per sample),
//            kScanThreads shards at a time
//   random   one ranged GET per sample, from its first member's data to
//            its last's (the headers between are dropped), up to
//            loader.fetch_concurrency in flight per worker (ReadMany)
//   stream   each shard read in order, in ranged GETs of kStreamWindow
//            bytes, as webdataset streams a shard from a URL: the requests
//            in flight are the workers'
//   cache    cold: nothing is cached on this box (every read is a GET);
//            the store's own cache is outside the sweep's control
//
// decode: jpeg: each sample's JPEG member (JpegMemberOf, as a local shard's;
// raw pixels as .ppm too) is what is fetched, its range alone, by index or
// in the stream's windows, and it is decoded, cropped and resized in the
// worker that fetched it by the local datasets' own decoder
// (workloads/jpeg_samples.h): the same bytes as TarDataset gives for the
// same seed, epoch and sample. After the bytes are in (decoded, with decode:
// jpeg), cpu_us_per_sample of CPU work is spent over them (workloads/sample_cost.h).
// Immutable after construction; Read, ReadMany and OpenShard are safe from
// any thread or forked process (storage/process_client.h).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "loader/dataset.h"
#include "storage/credentials.h"
#include "storage/object_client.h"
#include "storage/process_client.h"
#include "workloads/jpeg_samples.h"
#include "workloads/options.h"
#include "workloads/sample_cost.h"
#include "workloads/tar_format.h"

namespace feedtune::workloads {

// Reads an object's bytes at any offset through ranged GETs of at least
// `window` bytes, served from the last one while they fall inside it: a
// sequential reader (a tar scan, a stream) pays a round trip per window,
// not per read. One thread's, as the client it reads through.
class WindowedObjectReader {
 public:
  WindowedObjectReader(storage::ObjectClient& client, std::string key, int64_t object_bytes, int64_t window);
  // Up to out.size() bytes at `offset`; fewer only at the object's end.
  size_t Read(uint64_t offset, std::span<std::byte> out);
  int64_t requests() const { return requests_; }

 private:
  storage::ObjectClient& client_;
  const std::string key_;
  const uint64_t object_bytes_;
  const uint64_t window_;
  uint64_t start_ = 0;
  std::vector<std::byte> buffer_;
  int64_t requests_ = 0;
};

class RemoteTarDataset final : public loader::Dataset {
 public:
  // The index's read-ahead at open, and the stream's range per GET.
  static constexpr int64_t kScanWindow = int64_t{1} << 20;
  static constexpr int64_t kStreamWindow = int64_t{8} << 20;
  static constexpr int kScanThreads = 8;

  // Lists and indexes the shards of `files.path` with the AWS configuration
  // of `env`. Throws DatasetNotFound (no *.tar there), DatasetCorrupt (a
  // shard that is not a tar, or has no sample), storage::StorageError (a
  // store that refuses: the message names the object and the cause),
  // std::invalid_argument (a path or options that do not fit).
  RemoteTarDataset(const FilesOptions& files, const FormatOptions& format, const SyntheticOptions& cost,
                   const CpuCalibration& calibration, const storage::Environment& env);

  int64_t size() const override { return static_cast<int64_t>(samples_.size()); }
  // The largest sample's fields, or with decode: jpeg the decoded sample.
  int64_t max_sample_bytes() const override { return jpeg_ ? jpeg_->sample_bytes() : max_bytes_; }
  void InitWorker(int worker_id) const override;
  void SetEpoch(int64_t epoch) const override;
  loader::RepeatPreparation BeforeRepeat() const override;
  std::optional<loader::StoreReads> ReadsFromStore() const override;
  int64_t Read(int64_t index, std::span<std::byte> out) const override;
  // Random access reads a batch's samples concurrently; a stream's requests
  // in flight are its workers (one window each), so fetch_concurrency is not its knob.
  bool reads_concurrently() const override { return access_ == ShardAccess::kRandom; }
  void ReadMany(std::span<const int64_t> indices, std::span<std::byte> slot, int64_t stride, int concurrency,
                std::span<int64_t> bytes) const override;
  int64_t num_shards() const override;  // stream: one a shard; random: none (map-style)
  int64_t shard_samples(int64_t shard) const override;
  std::unique_ptr<loader::ShardReader> OpenShard(int64_t shard) const override;

  struct Shard {
    std::string key;   // "" for an http(s) source
    std::string name;  // s3://bucket/key or the URL, for messages
    int64_t bytes = 0;
    int64_t first_sample = 0;
    int64_t samples = 0;
    int64_t index_requests = 0;  // ranged GETs the open's scan took
  };
  const std::vector<Shard>& shards() const { return shards_; }
  // "s3://bucket/shards/: 4 tar shards, 400 samples of fields bin, cls, 41.2 MB, ...".
  std::string Describe() const;

 private:
  struct Extent {
    uint64_t offset = 0;
    uint64_t bytes = 0;
  };
  struct Sample {
    uint32_t shard = 0;
    int32_t jpeg_field = -1;     // decode: jpeg: which of `fields` is the JPEG
    std::vector<Extent> fields;  // in member order
    // The bytes a read fetches: from the first field's data to the last's
    // (the headers between are dropped), or with decode: jpeg the JPEG member's.
    const Extent& first() const { return jpeg_field >= 0 ? fields[static_cast<size_t>(jpeg_field)] : fields.front(); }
    const Extent& last() const { return jpeg_field >= 0 ? fields[static_cast<size_t>(jpeg_field)] : fields.back(); }
    uint64_t begin() const { return first().offset; }
    uint64_t end() const { return last().offset + last().bytes; }
  };

  // Shard `shard`'s samples from its `members` (as scanned, in order).
  void IndexShard(size_t shard, const std::vector<TarMember>& members, std::vector<Sample>* samples,
                  std::vector<std::string>* fields) const;
  // Sample `index` from `span`, its bytes from begin() to end(), into `out`:
  // its fields' bytes, or with decode: jpeg its JPEG decoded. Returns the
  // bytes written.
  int64_t SampleFrom(int64_t index, std::span<const std::byte> span, std::span<std::byte> out) const;
  [[noreturn]] void ThrowCutShort(int64_t index, size_t got) const;

  const storage::ProcessClient client_;
  const ShardAccess access_;
  const int64_t shuffle_buffer_;
  const SampleCost cost_;
  const bool cold_;
  std::unique_ptr<const JpegSamples> jpeg_;  // decode: jpeg
  std::vector<Shard> shards_;
  std::vector<Sample> samples_;
  std::vector<std::string> fields_;  // the extensions of the first sample
  int64_t max_bytes_ = 1;
};

// The shards `client`'s source names: an s3:// prefix's *.tar objects in key
// order, or the one file of an http(s) URL. Throws DatasetNotFound for a
// prefix without one (naming the keys used), storage::StorageError for a
// store that refuses.
std::vector<RemoteTarDataset::Shard> ListRemoteTarShards(const storage::ProcessClient& client);

// Called for each member of shard `shard` in order, on the thread scanning
// it; `reader` is that shard's, so a small member's data (a label) is read
// from the window that just held its header, without a round trip of its own.
using RemoteTarMemberFn = std::function<void(size_t shard, const TarMember& member, WindowedObjectReader& reader)>;

// Scans `shards`' members from their headers through ranged GETs of
// RemoteTarDataset::kScanWindow bytes, kScanThreads shards side by side,
// each thread through its own client, and sets each shard's index_requests.
// The first failure (DatasetCorrupt naming the shard and offset, a
// StorageError, or what `on_member` throws) stops the others and is
// rethrown once all have stopped.
void ScanRemoteTarShards(const storage::ProcessClient& client, std::vector<RemoteTarDataset::Shard>* shards,
                         const RemoteTarMemberFn& on_member);

}  // namespace feedtune::workloads
