// The on-disk format of a sharded dataset (`feedtune gen-data --layout shards`),
// and the writer for both layouts.
//
//   DIR/index.ftidx          the index, written last: its presence means complete
//   DIR/shard-00000.ftrec    records, packed back to back
//
// A shard file starts with a 16-byte header, then its records:
//   header  char magic[8] = "FTSHARD\0", u32 version = 1, u32 shard number
//   record  u32 length, u32 crc32c(payload), payload[length]
// The index:
//   header  char magic[8] = "FTINDEX\0", u32 version = 1, u32 shard count,
//           u64 record count, u64 max record length
//   entry   u32 shard, u32 length, u64 offset of the record header, u32 crc32c,
//           u32 reserved (0)                     -- one per record, in order
//   trailer u32 crc32c of everything before it
// Integers are little-endian. A record is self-describing (its header repeats
// length and checksum), so a shard can be checked without the index.
//
// The `files` layout is one file per sample: DIR/00000/000000000.bin,
// 1000 files per subdirectory, names in sample order.
//
// DatasetWriter is used by one thread. ReadShardIndex is a pure function.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "workloads/options.h"

namespace feedtune::workloads {

inline constexpr char kShardMagic[8] = {'F', 'T', 'S', 'H', 'A', 'R', 'D', '\0'};
inline constexpr char kIndexMagic[8] = {'F', 'T', 'I', 'N', 'D', 'E', 'X', '\0'};
inline constexpr uint32_t kFormatVersion = 1;
inline constexpr size_t kShardHeaderBytes = 16;
inline constexpr size_t kRecordHeaderBytes = 8;
inline constexpr size_t kIndexHeaderBytes = 32;
inline constexpr size_t kIndexEntryBytes = 24;
inline constexpr const char* kIndexFileName = "index.ftidx";

// The dataset at a path is missing, empty or not a dataset of the expected
// layout: the user's input is wrong (feedtune exits 2).
class DatasetNotFound : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The data is there but damaged (truncated, bad checksum, bad header).
class DatasetCorrupt : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

std::string ShardFileName(uint32_t shard);
// A tfrecord or tar shard that gen-data writes: DIR/data-SSSSS-of-NNNNN + extension.
std::string GenDataShardPath(const std::string& dir, int shard, int shards, const std::string& extension);
// Relative path of sample `index` in the files layout ("00001/000001234.bin").
std::string SampleFileName(int64_t index);

struct IndexEntry {
  uint32_t shard = 0;
  uint32_t length = 0;
  uint64_t offset = 0;  // of the record header in the shard file
  uint32_t crc = 0;
};

struct ShardIndex {
  std::vector<std::string> shard_paths;  // DIR/shard-NNNNN.ftrec
  std::vector<IndexEntry> entries;       // one per record, in sample order
  uint64_t max_length = 0;
};

// Reads and checks DIR/index.ftidx (magic, version, size, trailer checksum,
// entries within their shards). Throws DatasetNotFound when DIR or the index is
// missing, DatasetCorrupt when the index is damaged.
ShardIndex ReadShardIndex(const std::string& dir);

// Writes a dataset of either layout into `dir`, which must be absent or empty.
class DatasetWriter {
 public:
  // `shard_bytes`: a new shard starts when the current one would exceed it
  // (a record larger than that gets a shard of its own).
  DatasetWriter(std::string dir, FilesLayout layout, int64_t shard_bytes);
  DatasetWriter(const DatasetWriter&) = delete;
  DatasetWriter& operator=(const DatasetWriter&) = delete;
  ~DatasetWriter();

  void Add(std::span<const std::byte> payload);
  // Flushes, writes the index (shards), and syncs the file system so the data
  // can be evicted from the page cache later (dirty pages cannot be).
  void Finish();

  int64_t records() const { return records_; }
  int64_t bytes_written() const { return bytes_written_; }

 private:
  void OpenShard();
  void CloseShard();
  void WriteOrThrow(int fd, const void* data, size_t size, const std::string& what);

  const std::string dir_;
  const FilesLayout layout_;
  const int64_t shard_bytes_;
  int shard_fd_ = -1;
  uint32_t shard_number_ = 0;
  uint64_t shard_offset_ = 0;
  std::string shard_path_;
  std::vector<IndexEntry> entries_;
  uint64_t max_length_ = 0;
  int64_t records_ = 0;
  int64_t bytes_written_ = 0;
  bool finished_ = false;
};

}  // namespace feedtune::workloads
