// FilesDataset: samples read from disk, the way a PyTorch Dataset over real
// files reads them.
//
//   layout shards  records of the shard files listed in DIR/index.ftidx
//                  (workloads/shard_format.h); every read checks the record's
//                  header and CRC32C, and a bad one fails with the file, the
//                  record number and its byte offset
//   layout files   every regular file under DIR (recursively, dot-files
//                  skipped), sorted by path: sample i is the i-th file. Works on
//                  your own directory of JPEGs as well as on gen-data's output.
//
//   io pread       one preadv per record (shards: into the slot, header
//                  alongside), or open + pread + close per file
//   io mmap        the record's pages are mapped, copied and unmapped per read,
//                  so the data comes in by page faults; mappings are not kept,
//                  so a cold cache stays cold
//
// decode jpeg (layout files only): only the JPEG files under DIR (.jpg, .jpeg,
// .jpe, any case) are samples; each is read whole (pread, or mapped for io
// mmap) and decoded, cropped and resized by workloads/jpeg_samples.h, and the
// resize x resize x 3 RGB bytes are the sample, its crop drawn from (workload
// seed, epoch, index). A JPEG that does not decode fails the read with the
// file named.
//
// After the bytes are in, cpu_us_per_sample of CPU work is spent over them
// (decode stand-in, workloads/cpu_work.h), scaled by the jitter factor; the
// fault of the options fires as in SyntheticDataset.
//
// cache cold: BeforeRepeat() evicts every file from the page cache with
// posix_fadvise(POSIX_FADV_DONTNEED), then checks with mincore how much stayed
// resident (on tmpfs, everything does) and says so.
//
// Opening reads the index (or walks the tree and stats every file). Shard file
// descriptors are opened once and shared with forked workers (pread needs no
// file position). Immutable after construction; Read() is safe from any thread
// or process; BeforeRepeat() is called by the consumer process only.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "loader/dataset.h"
#include "workloads/cpu_work.h"
#include "workloads/fault.h"
#include "workloads/jpeg_samples.h"
#include "workloads/options.h"
#include "workloads/sample_cost.h"
#include "workloads/shard_format.h"

namespace feedtune::workloads {

class FilesDataset final : public loader::Dataset {
 public:
  // Uses cpu_us_per_sample, jitter, worker_init_us, seed and fault of `cost`.
  // Throws DatasetNotFound (missing, empty, not a dataset: the user's input)
  // or DatasetCorrupt (damaged data).
  FilesDataset(const FilesOptions& options, const SyntheticOptions& cost, const CpuCalibration& calibration);
  ~FilesDataset() override;
  FilesDataset(const FilesDataset&) = delete;
  FilesDataset& operator=(const FilesDataset&) = delete;

  int64_t size() const override { return static_cast<int64_t>(sizes_.size()); }
  int64_t max_sample_bytes() const override { return max_bytes_; }
  void InitWorker(int worker_id) const override;
  int64_t Read(int64_t index, std::span<std::byte> out) const override;
  loader::RepeatPreparation BeforeRepeat() const override;
  void SetEpoch(int64_t epoch) const override;

  // The bytes of the files (for decode jpeg, the compressed files).
  int64_t total_bytes() const { return total_bytes_; }
  // decode jpeg: files under DIR that are not JPEGs by name, and not read.
  int64_t skipped_files() const { return skipped_files_; }
  int file_count() const;
  // layout files: the files, in sample order, and each one's bytes.
  const std::vector<std::string>& files() const { return files_; }
  int64_t file_bytes(int64_t index) const { return sizes_[static_cast<size_t>(index)]; }
  // One line for the user: what was opened and how it will be read.
  std::string Describe() const;

 private:
  void ReadShardRecord(int64_t index, std::span<std::byte> out) const;
  void ReadWholeFile(int64_t index, std::span<std::byte> out) const;
  void DecodeJpegFile(int64_t index, std::span<std::byte> out) const;
  [[noreturn]] void FailRecord(int64_t index, const std::string& what) const;

  const FilesOptions options_;
  const SampleCost cost_;
  // Constant after construction.
  ShardIndex index_;                // shards layout
  std::vector<int> shard_fds_;      // shards layout, one per shard, closed by the destructor
  std::vector<std::string> files_;  // files layout, in sample order
  std::vector<int64_t> sizes_;      // bytes of each sample
  int64_t max_bytes_ = 0;
  int64_t total_bytes_ = 0;
  int64_t skipped_files_ = 0;
  // decode jpeg: the decoder, with the epoch the crops are drawn for in a
  // MAP_SHARED page that forked workers share.
  std::unique_ptr<JpegSamples> jpeg_;
};

}  // namespace feedtune::workloads
