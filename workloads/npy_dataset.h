// NpyDataset: the rows of a NumPy .npy file (workload.kind: npy), as a
// numpy.memmap-backed torch Dataset reads them: sample i is the bytes of
// row i, at the header's end + i x sample bytes (workloads/npy_format.h).
//
//   io pread   one pread per sample into the slot
//   io mmap    the sample's pages mapped, copied and unmapped per read (the
//              data comes in by page faults; nothing stays mapped, so a cold
//              cache stays cold)
//
// The constructor parses and checks the header and that the file holds every
// row the shape announces (errors name the file: DatasetNotFound for a
// missing file or a directory, DatasetCorrupt for a bad header or a file
// shorter than its shape). It keeps one read-only descriptor, shared by
// forked workers: pread has no file position and no library state comes
// with it, so unlike HDF5 and LMDB nothing needs reopening after fork.
// Immutable after construction; Read() is safe from any thread or process;
// BeforeRepeat() is called by the consumer process only.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "loader/dataset.h"
#include "workloads/format_io.h"
#include "workloads/npy_format.h"
#include "workloads/options.h"
#include "workloads/sample_cost.h"

namespace feedtune::workloads {

class NpyDataset final : public loader::Dataset {
 public:
  // Uses path, io and cache of `files`, and the cost keys of `cost`.
  NpyDataset(const FilesOptions& files, const SyntheticOptions& cost, const CpuCalibration& calibration);
  NpyDataset(const NpyDataset&) = delete;
  NpyDataset& operator=(const NpyDataset&) = delete;

  int64_t size() const override { return header_.samples; }
  int64_t max_sample_bytes() const override { return header_.sample_bytes; }
  void InitWorker(int /*worker_id*/) const override { cost_.InitWorker(); }
  int64_t Read(int64_t index, std::span<std::byte> out) const override;
  loader::RepeatPreparation BeforeRepeat() const override;

  const NpyHeader& header() const { return header_; }
  int64_t file_bytes() const { return file_bytes_; }
  // One line for the user: what was opened and how it will be read.
  std::string Describe() const;

  // Reads and checks the header of `path` (the same checks as the
  // constructor, without keeping the file open). *file_bytes gets its size.
  static NpyHeader ReadHeader(const std::string& path, int64_t* file_bytes);

 private:
  const FilesOptions files_;
  const SampleCost cost_;
  // Constant after construction.
  NpyHeader header_;
  int64_t file_bytes_ = 0;
  UniqueFd fd_;
};

}  // namespace feedtune::workloads
