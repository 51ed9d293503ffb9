// RemoteDataset: one object per sample in an object store (workload.kind:
// files, layout: files, path: s3://bucket/prefix), read as a PyTorch Dataset
// over boto3's get_object reads it, through storage/'s client (libcurl,
// SigV4, retries; docs/storage.md).
//
//   open      the prefix is listed once, in the consumer: sample i is the
//             i-th object in key order (objects of 0 bytes, a console's
//             "folders", are not samples)
//   Read      one GET of the whole object into the slot
//   ReadMany  a batch's samples with up to loader.fetch_concurrency GETs in
//             flight (reads_concurrently: a read waits a round trip, so
//             requests in flight overlap the waits, as threads inside a
//             torch worker would)
//   cache     cold means what it can remotely: nothing is cached on this box
//             (every read is a GET); the store's own cache is outside the
//             sweep's control, and BeforeRepeat says so
//
// decode: jpeg (crop, resize): the objects named .jpg, .jpeg or .jpe are the
// samples, as a local folder's files are (FilesDataset); each is fetched
// whole, then decoded, cropped and resized in the worker that fetched it, by
// the local datasets' own decoder (workloads/jpeg_samples.h), so the same
// seed, epoch and sample give the same bytes as from a local copy.
//
// After the bytes are in (decoded, with decode: jpeg), cpu_us_per_sample of
// CPU work is spent over them, as FilesDataset does (workloads/sample_cost.h).
//
// Each process, and each thread in it (worker_mode: thread), reads through a
// client of its own, made at its first read: connections never cross a fork.
// The listing and the options are immutable after construction; Read and
// ReadMany are safe from any thread or forked process.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "loader/dataset.h"
#include "storage/credentials.h"
#include "storage/location.h"
#include "storage/object_client.h"
#include "storage/process_client.h"
#include "workloads/jpeg_samples.h"
#include "workloads/options.h"
#include "workloads/sample_cost.h"

namespace feedtune::workloads {

// A store's tally in the loader's words (Dataset::ReadsFromStore): what
// every reader of a dataset's ProcessClient, in any process, read so far.
loader::StoreReads StoreReadsOf(const storage::TallySnapshot& tally);

class RemoteDataset final : public loader::Dataset {
 public:
  // Lists `files.path` (an s3:// location) with the AWS configuration of
  // `env`. Throws DatasetNotFound for an empty prefix (with decode: jpeg, one
  // without JPEG objects), storage::StorageError for a store that refuses
  // (its message names the object and the cause), std::invalid_argument for
  // a path or keys that do not fit.
  RemoteDataset(const FilesOptions& files, const SyntheticOptions& cost, const CpuCalibration& calibration,
                const storage::Environment& env);

  int64_t size() const override { return static_cast<int64_t>(objects_.size()); }
  // The largest object, or with decode: jpeg the decoded sample.
  int64_t max_sample_bytes() const override { return jpeg_ ? jpeg_->sample_bytes() : max_bytes_; }
  void InitWorker(int worker_id) const override;
  void SetEpoch(int64_t epoch) const override;
  int64_t Read(int64_t index, std::span<std::byte> out) const override;
  bool reads_concurrently() const override { return true; }
  void ReadMany(std::span<const int64_t> indices, std::span<std::byte> slot, int64_t stride, int concurrency,
                std::span<int64_t> bytes) const override;
  loader::RepeatPreparation BeforeRepeat() const override;
  std::optional<loader::StoreReads> ReadsFromStore() const override;

  const std::vector<storage::ObjectInfo>& objects() const { return objects_; }
  int64_t total_bytes() const { return total_bytes_; }
  const storage::Location& location() const { return client_.source(); }
  // "s3://bucket/train/: 3000 objects, 294.6 MB (98.2 KB each on average), credentials: ...".
  std::string Describe() const;

 private:
  const storage::ProcessClient client_;
  const SampleCost cost_;
  const bool cold_;
  std::unique_ptr<const JpegSamples> jpeg_;  // decode: jpeg
  std::vector<storage::ObjectInfo> objects_;
  int64_t skipped_objects_ = 0;  // decode: jpeg: objects not named as JPEGs
  int64_t max_bytes_ = 0;        // the largest object
  int64_t total_bytes_ = 0;
};

// Whether `path` names remote data (s3://, http://, https://).
bool IsRemotePath(const std::string& path);
// Read() of a remote dataset: sample `index` as a batch of one through its
// ReadMany (one request in flight), so one path fetches every sample.
int64_t ReadOneThroughReadMany(const loader::Dataset& dataset, int64_t index, std::span<std::byte> out);
// decode: jpeg of a sample fetched from a store: `jpeg`, sample `index` of
// `object` (its s3:// name or URL), decoded, cropped and resized into `out`
// by `decoder`, the local datasets' own. Returns the decoded bytes; throws
// DatasetCorrupt naming the object and the sample for bytes that do not decode.
int64_t DecodeFetchedJpeg(const JpegSamples& decoder, std::span<const std::byte> jpeg, int64_t index,
                          const std::string& object, std::span<std::byte> out);
// The location a remote dataset of `kind` reads `files` from: kind files
// (RemoteDataset: an s3:// prefix, one object per sample, layout files), tar
// (RemoteTarDataset: an s3:// prefix of shards or an http(s) URL of one) or
// npy (RemoteNpyDataset: the key of one .npy object, or an http(s) URL).
// Throws std::invalid_argument saying what does not fit and what to write
// instead (a URL that does not parse, an http(s) URL where a listing is
// needed, layout shards, a list of paths, another kind).
storage::Location RemoteLocationOf(WorkloadKind kind, const FilesOptions& files);

}  // namespace feedtune::workloads
