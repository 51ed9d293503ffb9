// Small POSIX helpers shared by the format datasets: an owned file
// descriptor, a read-only mapping, a full pread, page-cache eviction with a
// residency check, the file system a path lives on, and the shard files of a
// sharded format with the reader of one shard.
//
// Plain functions and two RAII types; no state. Safe from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "loader/dataset.h"
#include "workloads/options.h"

namespace feedtune::workloads {

// Owns one file descriptor; closes it on destruction. Move-only.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.Release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept;
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd();

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int Release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }

 private:
  int fd_ = -1;
};

// A read-only mapping of [offset, offset + length) of `fd` (page-aligned
// inside); unmapped on destruction. A failed mmap leaves error() set.
class FileMapping {
 public:
  FileMapping(int fd, uint64_t offset, size_t length);
  FileMapping(const FileMapping&) = delete;
  FileMapping& operator=(const FileMapping&) = delete;
  ~FileMapping();

  bool ok() const { return error_ == 0; }
  int error() const { return error_; }  // errno of the failed mmap, else 0
  const std::byte* data() const { return base_ + skip_; }

 private:
  const std::byte* base_ = nullptr;
  size_t skip_ = 0;
  size_t size_ = 0;
  int error_ = 0;
};

// The text of an errno value ("No such file or directory").
std::string ErrnoText(int error);

// Reads out.size() bytes at `offset`, retrying short reads and EINTR. Returns
// the bytes read (fewer only at end of file); sets *error to errno on failure.
size_t PreadFull(int fd, std::span<std::byte> out, uint64_t offset, int* error);

// Writes all of `data` at `fd`'s offset, retrying short writes and EINTR.
// Throws std::runtime_error "PATH: write failed: REASON" (ENOSPC, EFBIG, ...).
void WriteFull(int fd, const std::string& path, std::span<const std::byte> data);

// Bytes of `fd`'s first `size` bytes that are in the page cache (mincore).
int64_t ResidentBytes(int fd, int64_t size);

// Evicts each file from the page cache (posix_fadvise DONTNEED) and says, in
// one line for the user, how much stayed resident (tmpfs keeps everything):
// CacheColdNote, and that share as a number.
loader::RepeatPreparation EvictFromPageCache(const std::vector<std::string>& paths);

// The line a cold cache's eviction says: "cache cold: 30.1 MB in 2 files
// evicted from the page cache before each repeat (posix_fadvise DONTNEED); 12%
// stayed resident", why when more than half of it stayed (`stayed`: the share
// of the bytes checked that are still resident), and how many of the files
// could not be evicted (`failures`).
std::string CacheColdNote(double bytes, size_t files, double stayed, int64_t failures);

// "ext4", "xfs", "tmpfs", "nfs", ... for the file system holding `path`, or
// "unknown (0x...)"; *network is set for NFS, CIFS/SMB, Lustre, GPFS, CephFS,
// FUSE and the like, where readahead and caching behave differently.
std::string FileSystemType(const std::string& path, bool* network);

// For a local `path` on a network or FUSE file system (NFS, Lustre, CIFS,
// a bucket's FUSE mount such as Mountpoint for S3 or gcsfuse: FileSystemType's
// network ones, FUSE named by its subtype from /proc/self/mountinfo), one
// line that names it remote and says what cache: cold means there; empty for
// a local disk, a remote URL or an empty path.
std::string NetworkFileSystemNote(const std::string& path);

// Free bytes for an unprivileged writer on the file system that will hold
// `path` (its nearest existing ancestor); -1 when it cannot be told. The
// free-space checks of gen-data and convert read it.
int64_t FreeBytesFor(const std::string& path);

// Of a file system's free bytes, the most a write may plan to take (convert's
// output, layout's candidates, gen-data's dataset): the rest stays for the
// file system's own blocks, the results file and whatever else writes there
// meanwhile. One margin for every command that writes data.
inline constexpr double kUsableFreeFraction = 0.9;
// Whether about `need` bytes fit in `free_bytes` by that margin (free_bytes < 0: unknown, so they are tried).
inline bool FitsInFreeSpace(double need, int64_t free_bytes) {
  return free_bytes < 0 || need <= static_cast<double>(free_bytes) * kUsableFreeFraction;
}
// "1.5 MB" (decimal megabytes, as the rest of feedtune prints sizes).
std::string FormatMegabytes(double bytes);

// The shard files `path` names, sorted: the file itself; a glob pattern's
// matches (glob(3): *, ? and [...]); or a directory's regular files whose
// names end in one of `extensions` (".tfrecord", ...; index files never).
// Throws DatasetNotFound naming `path` when it names none.
std::vector<std::string> ResolveShardPaths(const std::string& path, const std::vector<std::string>& extensions);

// The endings of a directory's shard files for `kind`: tfrecord .tfrecord
// and .tfrec, tar .tar (none for the other kinds).
std::vector<std::string> ShardExtensions(WorkloadKind kind);

// The shard files of a tfrecord or tar workload: those of files.path, or of
// each entry of files.path_list in list order (each entry's own sorted).
// Throws DatasetNotFound naming the entry ("entry [1] of the list, ...") that
// names none, or a file that two entries name (a shard is read once an epoch).
std::vector<std::string> ResolveShardPaths(const FilesOptions& files, const std::vector<std::string>& extensions);

// A shard of a sharded format read front to back: samples first..first+count-1
// of `dataset` through its Read(), in order (the offsets grow, so the
// kernel's readahead sees a sequential reader). `dataset` must outlive it.
std::unique_ptr<loader::ShardReader> ReadSamplesInOrder(const loader::Dataset& dataset, int64_t first, int64_t count);

// The index of the shard holding sample `index`, given each shard's first
// sample (ascending, firsts[0] == 0).
size_t ShardOfSample(const std::vector<int64_t>& firsts, int64_t index);

}  // namespace feedtune::workloads
