#include "workloads/npy_dataset.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "workloads/shard_format.h"

namespace feedtune::workloads {
namespace {

// Opens `path` for reading; throws DatasetNotFound for what the user named wrong.
UniqueFd OpenDataFile(const std::string& path, int64_t* file_bytes) {
  if (path.empty()) throw DatasetNotFound("workload.path is empty: name the .npy file");
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) throw DatasetNotFound(path + ": cannot open: " + ErrnoText(errno));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) throw DatasetNotFound(path + ": cannot stat: " + ErrnoText(errno));
  if (S_ISDIR(st.st_mode)) throw DatasetNotFound(path + ": a directory; workload.path names the .npy file");
  if (!S_ISREG(st.st_mode)) throw DatasetNotFound(path + ": not a regular file");
  *file_bytes = st.st_size;
  return fd;
}

NpyHeader ReadAndCheckHeader(int fd, const std::string& path, int64_t file_bytes) {
  std::vector<std::byte> prefix(12);
  int error = 0;
  prefix.resize(PreadFull(fd, prefix, 0, &error));
  if (error != 0) throw DatasetCorrupt(path + ": cannot read the header: " + ErrnoText(error));
  const int64_t header_bytes = NpyHeaderBytes(prefix, path);
  prefix.resize(static_cast<size_t>(std::min(header_bytes, file_bytes)));
  prefix.resize(PreadFull(fd, prefix, 0, &error));
  if (error != 0) throw DatasetCorrupt(path + ": cannot read the header: " + ErrnoText(error));
  NpyHeader header = ParseNpyHeader(prefix, path);
  const int64_t data_bytes = header.samples * header.sample_bytes;  // bounded by ParseNpyHeader
  if (file_bytes - header.data_offset < data_bytes) {
    throw DatasetCorrupt(path + ": shape " + header.ShapeText() + " of dtype '" + header.descr + "' needs " +
                         std::to_string(data_bytes) + " bytes after the " + std::to_string(header.data_offset) +
                         "-byte header, the file has " + std::to_string(file_bytes - header.data_offset) +
                         ": it is truncated, or its header announces more rows than were written");
  }
  return header;
}


}  // namespace

NpyHeader NpyDataset::ReadHeader(const std::string& path, int64_t* file_bytes) {
  const UniqueFd fd = OpenDataFile(path, file_bytes);
  return ReadAndCheckHeader(fd.get(), path, *file_bytes);
}

NpyDataset::NpyDataset(const FilesOptions& files, const SyntheticOptions& cost, const CpuCalibration& calibration)
    : files_(files), cost_(cost, calibration) {
  fd_ = OpenDataFile(files_.path, &file_bytes_);
  header_ = ReadAndCheckHeader(fd_.get(), files_.path, file_bytes_);
}

std::string NpyDataset::Describe() const {
  std::string text = files_.path + ": .npy " + std::to_string(header_.major) + ".0, shape " + header_.ShapeText() +
                     ", dtype '" + header_.descr + "', " + std::to_string(header_.samples) + " samples of " +
                     std::to_string(header_.sample_bytes) + " bytes, read with " + FilesIoName(files_.io) +
                     ", cache " + CacheModeName(files_.cache);
  if (files_.cache == CacheMode::kCold) text += " (evicted with posix_fadvise DONTNEED before each repeat)";
  return text;
}

int64_t NpyDataset::Read(int64_t index, std::span<std::byte> out) const {
  if (index < 0 || index >= size()) {
    throw std::out_of_range("sample index " + std::to_string(index) + " outside [0, " + std::to_string(size()) + ")");
  }
  const auto bytes = static_cast<size_t>(header_.sample_bytes);
  if (out.size() < bytes) {
    throw std::length_error("sample " + std::to_string(index) + " needs " + std::to_string(bytes) +
                            " bytes, the slot has " + std::to_string(out.size()));
  }
  cost_.BeforeRead(index);
  const uint64_t offset = static_cast<uint64_t>(header_.data_offset) + static_cast<uint64_t>(index) * bytes;
  const auto fail = [&](const std::string& what) {
    throw DatasetCorrupt(files_.path + " (sample " + std::to_string(index) + ", byte offset " +
                         std::to_string(offset) + "): " + what);
  };
  if (files_.io == FilesIo::kMmap) {
    struct stat st {};
    if (::fstat(fd_.get(), &st) != 0) fail("cannot stat: " + ErrnoText(errno));
    // Touching a mapped page past the end of the file raises SIGBUS: check first.
    if (static_cast<uint64_t>(st.st_size) < offset + bytes) {
      fail("truncated since it was opened: the file now ends at byte " + std::to_string(st.st_size));
    }
    const FileMapping map(fd_.get(), offset, bytes);
    if (!map.ok()) fail("mmap failed: " + ErrnoText(map.error()));
    std::memcpy(out.data(), map.data(), bytes);
  } else {
    int error = 0;
    const size_t got = PreadFull(fd_.get(), out.first(bytes), offset, &error);
    if (error != 0) fail("read failed: " + ErrnoText(error));
    if (got < bytes) fail("truncated since it was opened: the file now ends at byte " + std::to_string(offset + got));
  }
  cost_.AfterRead(index, out.first(bytes));
  return header_.sample_bytes;
}

loader::RepeatPreparation NpyDataset::BeforeRepeat() const {
  if (files_.cache != CacheMode::kCold) return {};
  return EvictFromPageCache({files_.path});
}

}  // namespace feedtune::workloads
