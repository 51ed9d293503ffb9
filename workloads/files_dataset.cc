#include "workloads/files_dataset.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "workloads/crc32c.h"
#include "workloads/format_io.h"
#include "workloads/jpeg_image.h"
#include "workloads/synthetic_dataset.h"

namespace feedtune::workloads {
namespace {

namespace fs = std::filesystem;

constexpr size_t kMaxResidencyProbes = 256;  // files checked after an eviction (files layout)

}  // namespace

FilesDataset::FilesDataset(const FilesOptions& options, const SyntheticOptions& cost,
                           const CpuCalibration& calibration)
    : options_(options), cost_(cost, calibration) {
  const std::string& dir = options_.path;
  if (dir.empty()) throw DatasetNotFound("workload.path is empty: name the dataset's directory");
  const bool decode_jpeg = options_.decode == FilesDecode::kJpeg;
  if (decode_jpeg && options_.layout != FilesLayout::kFiles) {
    throw DatasetNotFound(dir + ": decode: jpeg reads one JPEG file per sample; set layout: files");
  }
  // Made first: it checks resize, and maps the page the epoch is shared in.
  if (decode_jpeg) jpeg_ = std::make_unique<JpegSamples>(options_, cost_.seed());
  if (options_.layout == FilesLayout::kShards) {
    index_ = ReadShardIndex(dir);
    for (const std::string& path : index_.shard_paths) {
      const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0) {
        const int error = errno;
        for (int open_fd : shard_fds_) ::close(open_fd);
        throw DatasetCorrupt(path + ": cannot open: " + ErrnoText(error));
      }
      shard_fds_.push_back(fd);
    }
    sizes_.reserve(index_.entries.size());
    for (const IndexEntry& e : index_.entries) sizes_.push_back(e.length);
  } else {
    std::error_code ec;
    if (!fs::exists(dir, ec)) throw DatasetNotFound(dir + ": no such directory");
    if (!fs::is_directory(dir, ec)) throw DatasetNotFound(dir + ": not a directory");
    std::vector<std::pair<std::string, int64_t>> found;
    auto it = fs::recursive_directory_iterator(dir, fs::directory_options::skip_permission_denied, ec);
    if (ec) throw DatasetNotFound(dir + ": cannot list: " + ec.message());
    for (; it != fs::recursive_directory_iterator(); it.increment(ec)) {
      if (ec) throw DatasetNotFound(dir + ": cannot list: " + ec.message());
      const std::string name = it->path().filename().string();
      if (!name.empty() && name[0] == '.') {
        if (it->is_directory(ec)) it.disable_recursion_pending();
        continue;
      }
      if (!it->is_regular_file(ec)) continue;
      if (decode_jpeg && !HasJpegExtension(name)) {
        ++skipped_files_;
        continue;
      }
      const auto bytes = it->file_size(ec);
      if (ec) throw DatasetNotFound(it->path().string() + ": cannot stat: " + ec.message());
      found.emplace_back(it->path().string(), static_cast<int64_t>(bytes));
    }
    if (found.empty() && decode_jpeg) {
      throw DatasetNotFound(dir + ": no JPEG images under it (decode: jpeg reads the files named *.jpg, *.jpeg or "
                            "*.jpe; " + std::to_string(skipped_files_) + " other files skipped); make some with "
                            "`feedtune gen-data --layout jpeg --out " + dir + " ...`");
    }
    if (found.empty()) {
      throw DatasetNotFound(dir + ": no files in the directory (layout files reads every file under it)");
    }
    std::sort(found.begin(), found.end());
    files_.reserve(found.size());
    sizes_.reserve(found.size());
    for (auto& [path, bytes] : found) {
      files_.push_back(std::move(path));
      sizes_.push_back(bytes);
    }
  }
  for (int64_t s : sizes_) {
    max_bytes_ = std::max(max_bytes_, s);
    total_bytes_ += s;
  }
  if (max_bytes_ == 0) {
    for (int fd : shard_fds_) ::close(fd);
    throw DatasetNotFound(dir + ": every sample is empty (0 bytes)");
  }
  if (jpeg_) max_bytes_ = jpeg_->sample_bytes();  // the decoded sample
}

FilesDataset::~FilesDataset() {
  for (int fd : shard_fds_) ::close(fd);
}

void FilesDataset::SetEpoch(int64_t epoch) const {
  if (jpeg_) jpeg_->SetEpoch(epoch);
}

int FilesDataset::file_count() const {
  return static_cast<int>(options_.layout == FilesLayout::kShards ? shard_fds_.size() : files_.size());
}

std::string FilesDataset::Describe() const {
  std::string text = options_.path + ": " + std::to_string(size()) + " samples, " +
                     FormatMegabytes(static_cast<double>(total_bytes_)) + " in " + std::to_string(file_count()) +
                     (options_.layout == FilesLayout::kShards ? " shards" : " files") +
                     ", read with " + FilesIoName(options_.io) + ", cache " + CacheModeName(options_.cache);
  if (options_.cache == CacheMode::kCold) text += " (evicted with posix_fadvise DONTNEED before each repeat)";
  if (jpeg_) {
    text += jpeg_->Describe();
    if (skipped_files_ > 0) text += "; " + std::to_string(skipped_files_) + " files not named .jpg/.jpeg skipped";
  }
  return text;
}

void FilesDataset::InitWorker(int /*worker_id*/) const {
  cost_.InitWorker();
}

void FilesDataset::FailRecord(int64_t index, const std::string& what) const {
  if (options_.layout == FilesLayout::kFiles) {
    throw DatasetCorrupt(files_[static_cast<size_t>(index)] + " (sample " + std::to_string(index) + "): " + what);
  }
  const IndexEntry& e = index_.entries[static_cast<size_t>(index)];
  int64_t in_shard = 0;
  for (int64_t r = 0; r < index; ++r) in_shard += index_.entries[static_cast<size_t>(r)].shard == e.shard;
  throw DatasetCorrupt(index_.shard_paths[e.shard] + ": record " + std::to_string(index) + " (record " +
                       std::to_string(in_shard) + " of this shard) at byte offset " + std::to_string(e.offset) +
                       ": " + what);
}

void FilesDataset::ReadShardRecord(int64_t index, std::span<std::byte> out) const {
  const IndexEntry& e = index_.entries[static_cast<size_t>(index)];
  const int fd = shard_fds_[e.shard];
  std::byte header[kRecordHeaderBytes];
  const auto payload = out.first(e.length);
  if (options_.io == FilesIo::kMmap) {
    struct stat st {};
    if (::fstat(fd, &st) != 0) FailRecord(index, "cannot stat the shard: " + ErrnoText(errno));
    const uint64_t end = e.offset + kRecordHeaderBytes + e.length;
    // Touching a mapped page past the end of the file raises SIGBUS: check first.
    if (static_cast<uint64_t>(st.st_size) < end) {
      FailRecord(index, "truncated: the record ends at byte " + std::to_string(end) + ", the file at byte " +
                            std::to_string(st.st_size));
    }
    FileMapping map(fd, e.offset, kRecordHeaderBytes + e.length);
    if (!map.ok()) FailRecord(index, "mmap failed: " + ErrnoText(map.error()));
    std::memcpy(header, map.data(), kRecordHeaderBytes);
    std::memcpy(payload.data(), map.data() + kRecordHeaderBytes, e.length);
  } else {
    iovec iov[2] = {{header, sizeof header}, {payload.data(), payload.size()}};
    const size_t want = sizeof header + payload.size();
    ssize_t n = ::preadv(fd, iov, 2, static_cast<off_t>(e.offset));
    while (n < 0 && errno == EINTR) n = ::preadv(fd, iov, 2, static_cast<off_t>(e.offset));
    if (n < 0) FailRecord(index, "read failed: " + ErrnoText(errno));
    size_t got = static_cast<size_t>(n);
    if (got < want) {  // short read: finish with plain preads, then judge
      int error = 0;
      if (got < sizeof header) {
        got += PreadFull(fd, std::span<std::byte>(header + got, sizeof header - got), e.offset + got, &error);
      }
      if (got >= sizeof header && got < want) {
        got += PreadFull(fd, payload.subspan(got - sizeof header), e.offset + got, &error);
      }
      if (error != 0) FailRecord(index, "read failed: " + ErrnoText(error));
      if (got < want) {
        FailRecord(index, "truncated: the record ends at byte " + std::to_string(e.offset + want) +
                              ", the file at byte " + std::to_string(e.offset + got));
      }
    }
  }
  uint32_t length, stored_crc;
  std::memcpy(&length, header, 4);
  std::memcpy(&stored_crc, header + 4, 4);
  if (length != e.length) {
    FailRecord(index, "corrupt record header: length " + std::to_string(length) + ", the index says " +
                          std::to_string(e.length));
  }
  const uint32_t crc = Crc32c(payload);
  if (crc != stored_crc || crc != e.crc) {
    FailRecord(index, "corrupt: CRC32C of the payload is " + Hex32(crc) + ", the record header says " +
                          Hex32(stored_crc) + " and the index " + Hex32(e.crc));
  }
}

void FilesDataset::ReadWholeFile(int64_t index, std::span<std::byte> out) const {
  const std::string& path = files_[static_cast<size_t>(index)];
  const size_t expected = static_cast<size_t>(sizes_[static_cast<size_t>(index)]);
  UniqueFd file(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!file.valid()) FailRecord(index, "cannot open: " + ErrnoText(errno));
  size_t got = 0;
  if (options_.io == FilesIo::kMmap) {
    struct stat st {};
    if (::fstat(file.get(), &st) != 0) FailRecord(index, "cannot stat: " + ErrnoText(errno));
    got = std::min(expected, static_cast<size_t>(st.st_size));
    if (got > 0) {
      FileMapping map(file.get(), 0, got);
      if (!map.ok()) FailRecord(index, "mmap failed: " + ErrnoText(map.error()));
      std::memcpy(out.data(), map.data(), got);
    }
  } else {
    int error = 0;
    got = PreadFull(file.get(), out.first(expected), 0, &error);
    if (error != 0) FailRecord(index, "read failed at byte offset " + std::to_string(got) + ": " + ErrnoText(error));
  }
  if (got < expected) {
    FailRecord(index, "truncated since the dataset was opened: " + std::to_string(expected) +
                          " bytes then, the file ends at byte offset " + std::to_string(got));
  }
}

void FilesDataset::DecodeJpegFile(int64_t index, std::span<std::byte> out) const {
  const std::string& path = files_[static_cast<size_t>(index)];
  const size_t expected = static_cast<size_t>(sizes_[static_cast<size_t>(index)]);
  UniqueFd file(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!file.valid()) FailRecord(index, "cannot open: " + ErrnoText(errno));
  struct stat st {};
  if (::fstat(file.get(), &st) != 0) FailRecord(index, "cannot stat: " + ErrnoText(errno));
  const size_t size = static_cast<size_t>(st.st_size);
  if (size == 0) FailRecord(index, "not a JPEG: the file is empty");
  try {
    if (options_.io == FilesIo::kMmap) {
      FileMapping map(file.get(), 0, size);
      if (!map.ok()) FailRecord(index, "mmap failed: " + ErrnoText(map.error()));
      jpeg_->Decode(std::span<const std::byte>(map.data(), size), index, out);
    } else {
      std::vector<std::byte> jpeg(std::max(size, expected));
      int error = 0;
      const size_t got = PreadFull(file.get(), jpeg, 0, &error);
      if (error != 0) FailRecord(index, "read failed at byte offset " + std::to_string(got) + ": " + ErrnoText(error));
      jpeg_->Decode(std::span<const std::byte>(jpeg.data(), got), index, out);
    }
  } catch (const JpegError& e) {
    FailRecord(index, e.what());
  }
}

int64_t FilesDataset::Read(int64_t index, std::span<std::byte> out) const {
  if (index < 0 || index >= size()) {
    throw std::out_of_range("sample index " + std::to_string(index) + " outside [0, " + std::to_string(size()) + ")");
  }
  cost_.BeforeRead(index);
  if (jpeg_) {
    DecodeJpegFile(index, out);
    cost_.AfterRead(index, out.first(static_cast<size_t>(max_bytes_)));
    return max_bytes_;
  }
  const int64_t bytes = sizes_[static_cast<size_t>(index)];
  if (static_cast<int64_t>(out.size()) < bytes) {
    throw std::length_error("sample " + std::to_string(index) + " needs " + std::to_string(bytes) +
                            " bytes, the slot has " + std::to_string(out.size()));
  }
  if (options_.layout == FilesLayout::kShards) {
    ReadShardRecord(index, out);
  } else {
    ReadWholeFile(index, out);
  }
  cost_.AfterRead(index, out.first(static_cast<size_t>(bytes)));
  return bytes;
}

loader::RepeatPreparation FilesDataset::BeforeRepeat() const {
  if (options_.cache != CacheMode::kCold) return {};
  int64_t probed = 0, resident = 0, failures = 0;
  if (options_.layout == FilesLayout::kShards) {
    for (size_t s = 0; s < shard_fds_.size(); ++s) {
      if (::posix_fadvise(shard_fds_[s], 0, 0, POSIX_FADV_DONTNEED) != 0) ++failures;
      struct stat st {};
      if (::fstat(shard_fds_[s], &st) == 0) {
        probed += st.st_size;
        resident += ResidentBytes(shard_fds_[s], st.st_size);
      }
    }
  } else {
    const size_t stride = std::max<size_t>(1, files_.size() / kMaxResidencyProbes);
    for (size_t i = 0; i < files_.size(); ++i) {
      UniqueFd file(::open(files_[i].c_str(), O_RDONLY | O_CLOEXEC));
      if (!file.valid() || ::posix_fadvise(file.get(), 0, 0, POSIX_FADV_DONTNEED) != 0) {
        ++failures;
        continue;
      }
      if (i % stride == 0) {
        probed += sizes_[i];
        resident += ResidentBytes(file.get(), sizes_[i]);
      }
    }
  }
  const double stayed = probed > 0 ? static_cast<double>(resident) / static_cast<double>(probed) : 0;
  return {CacheColdNote(static_cast<double>(total_bytes_), static_cast<size_t>(file_count()), stayed, failures),
          probed > 0 ? std::optional<double>(stayed) : std::nullopt};
}

}  // namespace feedtune::workloads
