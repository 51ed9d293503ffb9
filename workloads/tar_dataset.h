// TarDataset: WebDataset tar shards (workload.kind: tar; workloads/tar_format.h
// for the format and what a sample is).
//
//   path     a .tar file, a glob or a directory (its *.tar files), in name
//            order; or a list of those (FilesOptions::path_list), in list order
//   access   random: a map-style dataset over the samples of every shard,
//            numbered through the shards, read with one pread per field from
//            a member index built once at open (header reads only);
//            stream: an IterableDataset whose shards are the files
//   decode   jpeg: the sample is its JPEG member (the first named .jpg,
//            .jpeg or .jpe, any case, or raw pixels named .ppm, as
//            `convert --pixels` writes them) decoded, cropped and resized
//            (workloads/jpeg_samples.h), in Read, which both accesses go
//            through; the other members are not read. A sample without one
//            fails the open, naming the file, the key and its members; a
//            JPEG that does not decode fails its read, naming the file, the
//            sample and the member
//
// Errors name the file and the byte offset: DatasetNotFound (nothing there),
// DatasetCorrupt (a bad header, a member cut short, a shard with no sample).
// Immutable after construction; Read() is safe from any thread or a forked
// process (pread on descriptors opened once).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "workloads/options.h"
#include "workloads/shard_files_dataset.h"
#include "workloads/tar_format.h"

namespace feedtune::workloads {

// What `inspect` reports of one shard.
struct TarShardInfo {
  std::string path;
  int64_t samples = 0;
  int64_t members = 0;   // regular files, those outside any sample included
  int64_t file_bytes = 0;
  std::vector<std::string> fields;  // the extensions of its first sample
  int64_t records_or_samples() const { return samples; }
};

class TarDataset final : public ShardFilesDataset {
 public:
  TarDataset(const FilesOptions& files, const FormatOptions& format, const SyntheticOptions& cost,
             const CpuCalibration& calibration);

  int64_t Read(int64_t index, std::span<std::byte> out) const override;

  const std::vector<TarShardInfo>& shards() const { return infos_; }
  // Sample `index`'s bytes: its fields' data together.
  int64_t stored_bytes(int64_t index) const;
  std::string Describe() const;

 private:
  struct Extent {
    uint64_t offset = 0;
    uint64_t bytes = 0;
  };
  struct Sample {
    uint32_t shard = 0;
    int32_t jpeg_field = -1;  // decode: jpeg: which of `fields` is the JPEG
    std::vector<Extent> fields;
  };

  int64_t DecodeJpegMember(int64_t index, std::span<std::byte> out) const;

  std::vector<UniqueFd> fds_;  // one per shard
  std::vector<TarShardInfo> infos_;
  std::vector<Sample> samples_;
};

// decode: jpeg's member of tar sample `sample`, as an index into its fields:
// the first named .jpg, .jpeg or .jpe (any case), or raw pixels named .ppm
// (`convert --pixels`). A local shard and one on a store
// (workloads/remote_tar_dataset.h) pick the same. Throws DatasetNotFound
// naming `shard` (its path or URL), the key and its members when it has none.
size_t JpegMemberOf(const TarSample& sample, const std::string& shard);

// The members of the tar file open as `fd` (`file_bytes` long), read by
// headers only. Throws DatasetCorrupt naming `path`.
std::vector<TarMember> ScanTarFile(const std::string& path, int fd, int64_t file_bytes);

// Writes `feedtune gen-data --layout tar`: `shards` files
// DIR/data-SSSSS-of-NNNNN.tar, samples dealt in runs as for tfrecord; sample
// i is the members KEY.EXT (the payload; EXT is `payload_extension`, "bin",
// or "jpg" for JPEG payloads) and KEY.cls (i % 1000 in decimal), KEY its
// number in nine digits.
class TarWriter {
 public:
  TarWriter(std::string dir, int64_t samples, int shards, std::string payload_extension = "bin");
  void Add(std::span<const std::byte> payload);
  void Finish();
  int64_t bytes_written() const { return bytes_written_; }

  static std::string ClassText(int64_t index);  // KEY.cls's bytes

 private:
  void Flush(bool end);

  const std::string dir_;
  const int64_t samples_;
  const int shards_;
  const std::string payload_extension_;
  int64_t added_ = 0;
  int shard_ = -1;
  std::vector<std::byte> buffer_;
  int64_t bytes_written_ = 0;
};

}  // namespace feedtune::workloads
