// LayoutKind: the layouts `feedtune convert` writes and `feedtune layout`
// measures (docs/layout.md), as one table: each kind's name (as --layout and
// the manifest write it), the file it is, how a sweep reads it, what it
// holds, and its writer and reader.
//
//   tar    WebDataset shards data-SSSSS-of-NNNNN.tar (written shard by shard:
//          layout/convert.cc's WriteShards, since a shard is a file of its own)
//   hdf5   data.h5    rows of one size   one file of rows each, written
//   npy    data.npy   rows of one size   through one interface (RowWriter)
//   lmdb   data.lmdb  any size
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "loader/dataset.h"

namespace feedtune::layout {

enum class LayoutKind { kTar, kHdf5, kNpy, kLmdb };

// A one-file layout's writer: row i of the file is the i-th Add, then Finish
// with every row's label. Written under a temporary name, which the caller
// renames when Finish returns.
class RowWriter {
 public:
  virtual ~RowWriter() = default;
  virtual void Add(std::span<const std::byte> row) = 0;
  virtual void Finish(std::vector<int64_t> labels) = 0;
};

// How a one-file layout's writer is sized: its rows, the bytes of each
// (the most for lmdb, where they differ), hdf5's chunk rows and gzip level (-1: none).
struct RowShape {
  int64_t rows = 0;
  int64_t row_bytes = 0;
  int64_t chunk_rows = 1;
  int gzip_level = -1;
};

struct LayoutInfo {
  LayoutKind kind;
  const char* name;            // "tar", "hdf5", ...
  const char* file;            // the one file (data.h5, ...) under DST; nullptr: tar's shards
  const char* workload_kind;   // a sweep config's workload.kind for it
  bool rows_of_one_size;       // hdf5 and npy hold rows of one size
  bool holds_any_size;         // tar and lmdb: decoded pixels (--pixels), samples of many sizes
  // A one-file layout's writer at `path`, and its reader (for the
  // verification: sample i is row i); nullptr for tar.
  std::unique_ptr<RowWriter> (*writer)(const std::string& path, const RowShape& shape);
  std::unique_ptr<loader::Dataset> (*reader)(const std::string& path);
};

// Every kind, in the order --help lists them.
const std::vector<LayoutInfo>& LayoutTable();
const LayoutInfo& InfoOf(LayoutKind kind);
const char* NameOf(LayoutKind kind);
// The kind --layout names ("tar", ...); nullopt for another word.
std::optional<LayoutKind> LayoutNamed(std::string_view name);
// "tar | hdf5 | npy | lmdb", for messages.
std::string LayoutNames();

}  // namespace feedtune::layout
