// RemoteNpyDataset: the rows of a NumPy .npy file in an object store or on a
// web server (workload.kind: npy, path: s3://bucket/key.npy or an http(s)
// URL of a server that answers Range requests), read through storage/'s
// client (libcurl, SigV4, retries; docs/storage.md) as NpyDataset reads a
// local one: sample i is the bytes of row i, at the header's end + i x
// sample bytes (workloads/npy_format.h).
//
//   open      one HEAD (the object's size) and a ranged GET of its first
//             bytes, then of the whole header where it is longer; the same
//             checks as a local file: a bad header, or an object shorter
//             than its shape, is DatasetCorrupt naming it
//   Read      one ranged GET of the row into the slot
//   ReadMany  a batch's rows with up to loader.fetch_concurrency ranged GETs
//             in flight (reads_concurrently), as threads inside a torch
//             worker would
//   cache     cold: nothing is cached on this box (every read is a GET);
//             the store's own cache is outside the sweep's control
//
// After a row is in, cpu_us_per_sample of CPU work is spent over it, as
// NpyDataset does (workloads/sample_cost.h). Each process and thread reads
// through a client of its own (storage/process_client.h). Immutable after
// construction; Read and ReadMany are safe from any thread or forked process.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "loader/dataset.h"
#include "storage/credentials.h"
#include "storage/process_client.h"
#include "workloads/npy_format.h"
#include "workloads/options.h"
#include "workloads/sample_cost.h"

namespace feedtune::workloads {

class RemoteNpyDataset final : public loader::Dataset {
 public:
  // Opens `files.path` with the AWS configuration of `env`. Throws
  // DatasetCorrupt (a header that does not parse, an object shorter than
  // its shape), storage::StorageError (a store that refuses: 404, 403, ...,
  // naming the object and the cause), std::invalid_argument (a path that
  // does not fit).
  RemoteNpyDataset(const FilesOptions& files, const SyntheticOptions& cost, const CpuCalibration& calibration,
                   const storage::Environment& env);

  int64_t size() const override { return header_.samples; }
  int64_t max_sample_bytes() const override { return header_.sample_bytes; }
  void InitWorker(int worker_id) const override;
  int64_t Read(int64_t index, std::span<std::byte> out) const override;
  bool reads_concurrently() const override { return true; }
  void ReadMany(std::span<const int64_t> indices, std::span<std::byte> slot, int64_t stride, int concurrency,
                std::span<int64_t> bytes) const override;
  loader::RepeatPreparation BeforeRepeat() const override;
  std::optional<loader::StoreReads> ReadsFromStore() const override;

  const NpyHeader& header() const { return header_; }
  int64_t object_bytes() const { return object_bytes_; }
  // "s3://bucket/x.npy: 1000 rows of shape (3, 224, 224) |u1, 150.5 MB, a ranged GET per row ...; credentials ...".
  std::string Describe() const;

 private:
  const storage::ProcessClient client_;
  const std::string key_;  // the object's key; "" for an http(s) URL
  const SampleCost cost_;
  const bool cold_;
  NpyHeader header_;
  int64_t object_bytes_ = 0;
};

}  // namespace feedtune::workloads
