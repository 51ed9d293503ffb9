#include "layout/layout_kind.h"

#include <algorithm>
#include <stdexcept>

#include "layout/converted.h"
#include "layout/source.h"
#include "workloads/cpu_work.h"
#include "workloads/hdf5_dataset.h"
#include "workloads/lmdb_dataset.h"
#include "workloads/npy_dataset.h"
#include "workloads/npy_format.h"

namespace feedtune::layout {
namespace {

class Hdf5Rows final : public RowWriter {
 public:
  Hdf5Rows(const std::string& path, const RowShape& s)
      : writer_(path, s.rows, s.row_bytes, std::min(s.chunk_rows, s.rows), s.gzip_level) {}
  void Add(std::span<const std::byte> row) override { writer_.Add(row); }
  void Finish(std::vector<int64_t> labels) override {
    writer_.SetLabels(std::move(labels));  // /labels, beside /images
    writer_.Finish();
  }

 private:
  workloads::Hdf5Writer writer_;
};

class NpyRows final : public RowWriter {
 public:
  NpyRows(const std::string& path, const RowShape& s) : writer_(path, s.rows, s.row_bytes) {}
  void Add(std::span<const std::byte> row) override { writer_.Add(row); }
  void Finish(std::vector<int64_t> /*labels*/) override { writer_.Finish(); }  // (N, B) uint8 only: the index keeps them

 private:
  workloads::NpyWriter writer_;
};

class LmdbRows final : public RowWriter {
 public:
  // LmdbWriter sizes its map from the samples' bytes: row_bytes (the mean,
  // for varied sizes) twice over, with room to spare.
  LmdbRows(const std::string& path, const RowShape& s) : writer_(path, s.rows, 2 * s.row_bytes + 4096), dir_(path) {}
  void Add(std::span<const std::byte> row) override { writer_.Add(row); }
  void Finish(std::vector<int64_t> /*labels*/) override {
    writer_.Finish();
    SyncDirectory(dir_);  // an environment is a folder: its files' names too
  }

 private:
  workloads::LmdbWriter writer_;
  std::string dir_;
};

template <typename W>
std::unique_ptr<RowWriter> Make(const std::string& path, const RowShape& shape) {
  return std::make_unique<W>(path, shape);
}

workloads::FilesOptions FileAt(const std::string& path) {
  workloads::FilesOptions files;
  files.path = path;
  return files;
}

std::unique_ptr<loader::Dataset> ReadHdf5(const std::string& path) {
  // Rows are read in order: a cache of one chunk inflates each chunk once.
  workloads::FormatOptions format;
  for (const auto& info : workloads::Hdf5Dataset::ListDatasets(path)) {
    if (info.name == format.dataset) {
      format.hdf5_chunk_cache_mb = std::max<int64_t>(1, info.chunk_bytes() / (int64_t{1} << 20) + 1);
    }
  }
  return std::make_unique<workloads::Hdf5Dataset>(FileAt(path), format, NoSourceCost(), workloads::CpuCalibration{});
}

std::unique_ptr<loader::Dataset> ReadNpy(const std::string& path) {
  return std::make_unique<workloads::NpyDataset>(FileAt(path), NoSourceCost(), workloads::CpuCalibration{});
}

std::unique_ptr<loader::Dataset> ReadLmdb(const std::string& path) {
  return std::make_unique<workloads::LmdbDataset>(FileAt(path), workloads::FormatOptions{}, NoSourceCost(),
                                                  workloads::CpuCalibration{});
}

}  // namespace

const std::vector<LayoutInfo>& LayoutTable() {
  static const std::vector<LayoutInfo> table = {
      {LayoutKind::kTar, "tar", nullptr, "tar", false, true, nullptr, nullptr},
      {LayoutKind::kHdf5, "hdf5", "data.h5", "hdf5", true, false, Make<Hdf5Rows>, ReadHdf5},
      {LayoutKind::kNpy, "npy", "data.npy", "npy", true, false, Make<NpyRows>, ReadNpy},
      {LayoutKind::kLmdb, "lmdb", "data.lmdb", "lmdb", false, true, Make<LmdbRows>, ReadLmdb},
  };
  return table;
}

const LayoutInfo& InfoOf(LayoutKind kind) {
  for (const LayoutInfo& info : LayoutTable()) {
    if (info.kind == kind) return info;
  }
  throw std::logic_error("a LayoutKind without a row in LayoutTable");
}

const char* NameOf(LayoutKind kind) { return InfoOf(kind).name; }

std::optional<LayoutKind> LayoutNamed(std::string_view name) {
  for (const LayoutInfo& info : LayoutTable()) {
    if (name == info.name) return info.kind;
  }
  return std::nullopt;
}

std::string LayoutNames() {
  std::string names;
  for (const LayoutInfo& info : LayoutTable()) names += (names.empty() ? "" : " | ") + std::string(info.name);
  return names;
}

}  // namespace feedtune::layout
