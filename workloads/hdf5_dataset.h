// Hdf5Dataset: samples from datasets of an HDF5 file (workload.kind: hdf5),
// read with libhdf5's serial C API as h5py would: sample i is the hyperslab
// [i, :, ...] of `dataset` (one row along axis 0), in the file's own element
// type (no conversion, so the bytes are the stored bytes), followed, when
// `labels` is set, by row i of the labels dataset.
//
// Fork safety (pytorch#11887): an HDF5 file opened before a fork and used on
// both sides corrupts reads or hangs. So the constructor, which runs in the
// main process before the fork server exists, opens the file only to check
// it (datasets present, rank >= 1, fixed-size element type, labels long
// enough) and closes every handle again; the file is opened lazily, on the
// first Read() in each process (each worker process, or the consumer when
// num_workers is 0), and a handle found to belong to another process (a
// forked copy) is dropped without being touched. The fork server never reads.
//
// hdf5.chunk_cache_mb sets HDF5's raw-data chunk cache per open dataset, in
// each process (H5Pset_chunk_cache; the default is HDF5's own 1 MiB): a
// shuffled read of a sample whose compressed chunk does not fit inflates the
// whole chunk (workloads/format_inspect.h says when, and what it costs).
//
// Threads: Read() is safe from any thread (one mutex per process serialises
// this dataset's HDF5 calls; Debian's libhdf5 is built thread-safe with one
// global lock anyway, which is why the config refuses thread-mode workers for
// this kind). Every HDF5 id is owned by an RAII H5Id and closed by it.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "loader/dataset.h"
#include "workloads/options.h"
#include "workloads/sample_cost.h"

namespace feedtune::workloads {

// What one HDF5 dataset is, as `inspect` and the describer report it.
struct Hdf5DatasetInfo {
  std::string name;                  // "/images"
  std::vector<int64_t> dims;         // shape; empty for a scalar
  std::string dtype;                 // "uint8", "float32", "string[10]", ...
  int64_t item_bytes = 0;
  bool fixed_size = true;            // false: variable-length, references: no fixed row size
  std::vector<int64_t> chunk;        // chunk shape; empty when not chunked
  std::vector<std::string> filters;  // "deflate(4)", "shuffle", ...
  int64_t stored_bytes = 0;          // on disk (H5Dget_storage_size)
  int64_t row_bytes = 0;             // one sample: item_bytes x product of dims[1:]

  int64_t rows() const { return dims.empty() ? 0 : dims[0]; }
  // Samples per chunk along axis 0 (0 when not chunked).
  int64_t chunk_rows() const { return chunk.empty() ? 0 : chunk[0]; }
  // Bytes of one whole chunk once inflated (0 when not chunked).
  int64_t chunk_bytes() const;
  std::string ShapeText() const;
};

class Hdf5Dataset final : public loader::Dataset {
 public:
  // Uses path and cache of `files`; dataset, labels and hdf5_chunk_cache_mb of
  // `format`; the cost keys of `cost`. Throws DatasetNotFound (no such file,
  // not HDF5, no such dataset: the message lists the file's datasets) or
  // DatasetCorrupt (a truncated or damaged file, a rank-0 dataset, an
  // element type without a fixed size, too few labels), naming the file.
  Hdf5Dataset(const FilesOptions& files, const FormatOptions& format, const SyntheticOptions& cost,
              const CpuCalibration& calibration);
  ~Hdf5Dataset() override;
  Hdf5Dataset(const Hdf5Dataset&) = delete;
  Hdf5Dataset& operator=(const Hdf5Dataset&) = delete;

  int64_t size() const override { return images_.rows(); }
  int64_t max_sample_bytes() const override { return images_.row_bytes + labels_.row_bytes; }
  void InitWorker(int /*worker_id*/) const override { cost_.InitWorker(); }
  int64_t Read(int64_t index, std::span<std::byte> out) const override;
  loader::RepeatPreparation BeforeRepeat() const override;

  const Hdf5DatasetInfo& images() const { return images_; }
  const Hdf5DatasetInfo& labels() const { return labels_; }  // name empty: none
  std::string Describe() const;

  // Every dataset in the file at `path`, in name order, opened and closed here.
  // Throws DatasetNotFound / DatasetCorrupt as the constructor does.
  static std::vector<Hdf5DatasetInfo> ListDatasets(const std::string& path);
  // HDF5 objects (files, datasets, ...) this process holds open: 0 in the main
  // process and the fork server after construction (tests check it).
  static int64_t OpenObjectsInThisProcess();
  // The version of the libhdf5 linked in ("1.10.8").
  static std::string LibraryVersion();

 private:
  struct Handles;  // one process's open file, datasets and dataspaces

  Handles& HandlesForThisProcess() const;  // call with mu_ held

  const FilesOptions files_;
  const FormatOptions format_;
  const SampleCost cost_;
  // Constant after construction.
  Hdf5DatasetInfo images_;
  Hdf5DatasetInfo labels_;

  mutable std::mutex mu_;  // guards the members below and every HDF5 call of this dataset
  mutable pid_t handles_pid_ = 0;
  mutable std::unique_ptr<Handles> handles_;
};

// Writes `feedtune gen-data --layout hdf5`: /images of shape (samples,
// sample_bytes), uint8, chunked `chunk_samples` rows at a time, compressed
// with gzip level `gzip_level` (-1: none); /labels of shape (samples,),
// int64, label i = i % 1000. The file must not exist; an unfinished writer
// removes it. Used by one thread.
class Hdf5Writer {
 public:
  Hdf5Writer(std::string path, int64_t samples, int64_t sample_bytes, int64_t chunk_samples, int gzip_level);
  Hdf5Writer(const Hdf5Writer&) = delete;
  Hdf5Writer& operator=(const Hdf5Writer&) = delete;
  ~Hdf5Writer();

  void Add(std::span<const std::byte> row);
  // /labels as given (one per sample) instead of gen-data's i % 1000:
  // `feedtune convert` carries the source's labels (layout/convert.h).
  void SetLabels(std::vector<int64_t> labels);
  void Finish();
  int64_t bytes_written() const { return bytes_written_; }

  static int64_t Label(int64_t index) { return index % 1000; }

 private:
  struct Handles;
  void Flush();

  const std::string path_;
  const int64_t samples_;
  const int64_t sample_bytes_;
  const int64_t chunk_samples_;
  std::unique_ptr<Handles> handles_;
  std::vector<std::byte> pending_;  // rows not yet written, at most one chunk
  std::vector<int64_t> labels_;     // SetLabels's; empty: Label(i)
  int64_t rows_written_ = 0;
  int64_t rows_added_ = 0;
  int64_t bytes_written_ = 0;
  bool finished_ = false;
};

}  // namespace feedtune::workloads
