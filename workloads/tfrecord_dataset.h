// TfRecordDataset: the records of TFRecord shards (workload.kind: tfrecord),
// read natively (workloads/tfrecord_format.h for the framing and the index).
//
//   path      a file, a glob ("data/train-*.tfrecord") or a directory (its
//             *.tfrecord and *.tfrec files), in name order; or a list of
//             those (FilesOptions::path_list), read in list order
//   feature   empty: the sample is the record's data; NAME: the first value
//             of bytes feature NAME of the record's tf.train.Example
//             (parsed by libprotobuf)
//   access    random: a map-style dataset over the records of every shard,
//             numbered through the shards, one pread per sample;
//             stream: an IterableDataset whose shards are the files
//   decode    jpeg: the record's data (or the feature) is a JPEG, decoded,
//             cropped and resized to the sample (workloads/jpeg_samples.h),
//             in Read, which both accesses go through; one that does not
//             decode is named by file, record and byte offset
//
// The constructor finds or builds each file's index (one scan of the file's
// record headers) and checks every entry tiles the file; a read checks both
// CRCs of its record. Errors name the file and the record or byte offset:
// DatasetNotFound (nothing there), DatasetCorrupt (damaged, a stale index, a
// record that is not an Example while feature is set).
// Immutable after construction; Read() is safe from any thread or a forked
// process (pread on descriptors opened once, no library state).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "workloads/options.h"
#include "workloads/shard_files_dataset.h"
#include "workloads/tfrecord_format.h"

namespace feedtune::workloads {

// What `inspect` reports of one shard.
struct TfRecordShardInfo {
  std::string path;
  std::string index_path;
  std::string index_status;  // "found beside the data", "built, written beside the data", ...
  int64_t records = 0;
  int64_t file_bytes = 0;
  int64_t records_or_samples() const { return records; }
};

class TfRecordDataset final : public ShardFilesDataset {
 public:
  TfRecordDataset(const FilesOptions& files, const FormatOptions& format, const SyntheticOptions& cost,
                  const CpuCalibration& calibration);

  int64_t Read(int64_t index, std::span<std::byte> out) const override;

  const std::vector<TfRecordShardInfo>& shards() const { return infos_; }
  // Sample `index`'s record size on disk (its data, without framing).
  int64_t stored_bytes(int64_t index) const;
  std::string Describe() const;

  // The sample of record `record` of shard `shard`, whose framed bytes are
  // `framed`, into `out` (checks the CRCs, extracts the feature, decodes the
  // JPEG).
  int64_t SampleOf(int64_t shard, int64_t record, std::span<const std::byte> framed, std::span<std::byte> out) const;

 private:
  struct Shard {
    UniqueFd fd;
    int64_t first = 0;  // the dataset index of its first record
    std::vector<TfRecordEntry> entries;
  };

  std::vector<Shard> shards_;
  std::vector<TfRecordShardInfo> infos_;
};

// The index of the TFRecord file `path` (size `file_bytes`, open as `fd`):
// found beside it or in `cache_dir` and checked, or built by a scan and
// written beside it, or in `cache_dir` when its folder is read-only.
// *status says which.
std::vector<TfRecordEntry> TfRecordIndexFor(const std::string& path, int fd, int64_t file_bytes,
                                            const std::string& cache_dir, std::string* index_path,
                                            std::string* status);

// The folder for indexes of read-only data: `configured`, else
// $XDG_CACHE_HOME/feedtune/tfrecord-idx, else ~/.cache/feedtune/tfrecord-idx.
std::string TfRecordIndexCacheDir(const std::string& configured);

// Writes `feedtune gen-data --layout tfrecord`: `shards` files
// DIR/data-SSSSS-of-NNNNN.tfrecord, samples dealt in runs (sample i in
// shard i * shards / samples), each record a tf.train.Example with the
// payload under "data" and the sample's number under "index", and each
// file's .idx beside it.
class TfRecordWriter {
 public:
  TfRecordWriter(std::string dir, int64_t samples, int shards);
  void Add(std::span<const std::byte> payload);
  void Finish();
  int64_t bytes_written() const { return bytes_written_; }

 private:
  void CloseShard();

  const std::string dir_;
  const int64_t samples_;
  const int shards_;
  int64_t added_ = 0;
  int shard_ = -1;
  std::vector<std::byte> buffer_;  // the open shard's records
  std::vector<TfRecordEntry> entries_;
  int64_t bytes_written_ = 0;
};

}  // namespace feedtune::workloads
