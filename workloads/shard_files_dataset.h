// What the sharded file formats (workload.kind tfrecord and tar) share as
// datasets: the options, the sample cost, the JPEG decoder of decode: jpeg,
// the shard files and where each one's samples start, and what follows from
// those alone: a shard per file for access: stream, the eviction of
// cache: cold, the end of Describe's line. TfRecordDataset and TarDataset add
// their own index of each file, Read and the rest of Describe.
//
// Immutable after construction, as the datasets built on it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "loader/dataset.h"
#include "workloads/format_io.h"
#include "workloads/jpeg_samples.h"
#include "workloads/options.h"
#include "workloads/sample_cost.h"

namespace feedtune::workloads {

class ShardFilesDataset : public loader::Dataset {
 public:
  int64_t size() const override { return sample_count_; }
  int64_t max_sample_bytes() const override { return jpeg_ ? jpeg_->sample_bytes() : max_stored_bytes_; }
  void InitWorker(int /*worker_id*/) const override { cost_.InitWorker(); }
  loader::RepeatPreparation BeforeRepeat() const override;  // cache: cold evicts every file
  void SetEpoch(int64_t epoch) const override;
  int64_t num_shards() const override;  // stream: one a file; random: none (map-style)
  int64_t shard_samples(int64_t shard) const override;
  // The shard's samples through Read, in order.
  std::unique_ptr<loader::ShardReader> OpenShard(int64_t shard) const override;

 protected:
  ShardFilesDataset(const FilesOptions& files, const FormatOptions& format, const SyntheticOptions& cost,
                    const CpuCalibration& calibration);

  // Opens a shard file read-only; *file_bytes is its size. Throws
  // DatasetNotFound for a file that does not open or is not a regular file.
  static UniqueFd OpenShardFile(const std::string& path, int64_t* file_bytes);
  // The next shard: `samples` samples in the file at `path`.
  void AddShard(const std::string& path, int64_t samples);
  // The shard that holds sample `index`.
  size_t ShardOf(int64_t index) const { return ShardOfSample(firsts_, index); }
  // How Describe's line ends: ", access stream (shuffle buffer N samples per
  // worker), cache warm".
  std::string AccessText() const;

  const FilesOptions files_;
  const FormatOptions format_;
  const SampleCost cost_;
  std::unique_ptr<const JpegSamples> jpeg_;  // decode: jpeg
  std::vector<int64_t> firsts_;              // each shard's first sample
  int64_t max_stored_bytes_ = 1;             // the largest sample as stored (without decode: jpeg)

 private:
  std::vector<std::string> paths_;  // the shard files, in order
  int64_t sample_count_ = 0;
};

}  // namespace feedtune::workloads
