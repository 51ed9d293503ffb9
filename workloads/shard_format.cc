#include "workloads/shard_format.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "workloads/crc32c.h"
#include "workloads/format_io.h"

namespace feedtune::workloads {
namespace {

namespace fs = std::filesystem;

void PutU32(std::byte* p, uint32_t v) { std::memcpy(p, &v, 4); }
void PutU64(std::byte* p, uint64_t v) { std::memcpy(p, &v, 8); }
uint32_t GetU32(const std::byte* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
uint64_t GetU64(const std::byte* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

// Reads all of a file (the index: 24 bytes per record, small next to the data).
std::vector<std::byte> ReadWholeFile(const std::string& path) {
  UniqueFd file(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!file.valid()) {
    const int error = errno;
    if (error == ENOENT) throw DatasetNotFound(path + ": " + ErrnoText(error));
    throw DatasetCorrupt(path + ": cannot open: " + ErrnoText(error));
  }
  struct stat st {};
  if (::fstat(file.get(), &st) != 0) throw DatasetCorrupt(path + ": cannot stat: " + ErrnoText(errno));
  std::vector<std::byte> data(static_cast<size_t>(st.st_size));
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::pread(file.get(), data.data() + done, data.size() - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      throw DatasetCorrupt(path + ": read failed at byte offset " + std::to_string(done) + ": " + ErrnoText(errno));
    }
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  data.resize(done);
  return data;
}

}  // namespace

std::string GenDataShardPath(const std::string& dir, int shard, int shards, const std::string& extension) {
  char name[64];
  std::snprintf(name, sizeof name, "/data-%05d-of-%05d", shard, shards);
  return dir + name + extension;
}

std::string ShardFileName(uint32_t shard) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "shard-%05" PRIu32 ".ftrec", shard);
  return buf;
}

std::string SampleFileName(int64_t index) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%05lld/%09lld.bin", static_cast<long long>(index / 1000),
                static_cast<long long>(index));
  return buf;
}

ShardIndex ReadShardIndex(const std::string& dir) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) throw DatasetNotFound(dir + ": no such directory");
  if (!fs::is_directory(dir, ec)) throw DatasetNotFound(dir + ": not a directory");
  const std::string index_path = (fs::path(dir) / kIndexFileName).string();
  if (!fs::exists(index_path, ec)) {
    if (fs::is_empty(dir, ec)) throw DatasetNotFound(dir + ": the directory is empty");
    throw DatasetNotFound(dir + ": no " + kIndexFileName + ", so not a sharded dataset");
  }
  const std::vector<std::byte> data = ReadWholeFile(index_path);
  const auto corrupt = [&](const std::string& what) { return DatasetCorrupt(index_path + ": " + what); };
  if (data.size() < kIndexHeaderBytes + 4) {
    throw corrupt("truncated: " + std::to_string(data.size()) + " bytes, shorter than the header");
  }
  if (std::memcmp(data.data(), kIndexMagic, sizeof kIndexMagic) != 0) {
    throw corrupt("not a feedtune index (bad magic at byte offset 0)");
  }
  const uint32_t version = GetU32(data.data() + 8);
  if (version != kFormatVersion) {
    throw corrupt("format version " + std::to_string(version) + ", this feedtune reads version " +
                  std::to_string(kFormatVersion) + "; regenerate the dataset");
  }
  const uint32_t shard_count = GetU32(data.data() + 12);
  const uint64_t record_count = GetU64(data.data() + 16);
  ShardIndex index;
  index.max_length = GetU64(data.data() + 24);
  const uint64_t expected = kIndexHeaderBytes + record_count * kIndexEntryBytes + 4;
  if (record_count > (uint64_t{1} << 40) || data.size() != expected) {
    throw corrupt("truncated or padded: " + std::to_string(data.size()) + " bytes, the header promises " +
                  std::to_string(record_count) + " records (" + std::to_string(expected) + " bytes)");
  }
  const uint32_t stored_crc = GetU32(data.data() + data.size() - 4);
  const uint32_t crc = Crc32c(std::span(data).first(data.size() - 4));
  if (crc != stored_crc) {
    throw corrupt("index checksum mismatch (CRC32C " + Hex32(crc) + ", stored " + Hex32(stored_crc) +
                  " at byte offset " + std::to_string(data.size() - 4) + ")");
  }
  if (record_count == 0) throw DatasetNotFound(dir + ": the dataset has no records");
  // Every shard holds at least one record. Checked before anything is built
  // per shard, so a damaged count cannot cost minutes and gigabytes.
  if (shard_count == 0 || shard_count > record_count) {
    throw corrupt("the header claims " + std::to_string(shard_count) + " shards for " +
                  std::to_string(record_count) + " records (byte offset 12); regenerate the dataset");
  }

  for (uint32_t s = 0; s < shard_count; ++s) index.shard_paths.push_back((fs::path(dir) / ShardFileName(s)).string());
  std::vector<uint64_t> shard_sizes(shard_count);
  for (uint32_t s = 0; s < shard_count; ++s) {
    const std::string& path = index.shard_paths[s];
    UniqueFd file(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!file.valid()) throw DatasetCorrupt(path + ": cannot open shard listed in the index: " + ErrnoText(errno));
    struct stat st {};
    if (::fstat(file.get(), &st) != 0) throw DatasetCorrupt(path + ": cannot stat: " + ErrnoText(errno));
    shard_sizes[s] = static_cast<uint64_t>(st.st_size);
    std::byte header[kShardHeaderBytes];
    if (::pread(file.get(), header, sizeof header, 0) != static_cast<ssize_t>(sizeof header)) {
      throw DatasetCorrupt(path + ": truncated: shorter than the 16-byte shard header");
    }
    if (std::memcmp(header, kShardMagic, sizeof kShardMagic) != 0) {
      throw DatasetCorrupt(path + ": not a feedtune shard (bad magic at byte offset 0)");
    }
    if (GetU32(header + 8) != kFormatVersion || GetU32(header + 12) != s) {
      throw DatasetCorrupt(path + ": shard header says version " + std::to_string(GetU32(header + 8)) + ", shard " +
                           std::to_string(GetU32(header + 12)) + "; expected version " +
                           std::to_string(kFormatVersion) + ", shard " + std::to_string(s));
    }
  }

  index.entries.resize(record_count);
  std::vector<uint64_t> in_shard(shard_count, 0);
  for (uint64_t r = 0; r < record_count; ++r) {
    const std::byte* p = data.data() + kIndexHeaderBytes + r * kIndexEntryBytes;
    IndexEntry& e = index.entries[r];
    e.shard = GetU32(p);
    e.length = GetU32(p + 4);
    e.offset = GetU64(p + 8);
    e.crc = GetU32(p + 16);
    if (e.shard >= shard_count || e.offset < kShardHeaderBytes || e.length > index.max_length) {
      throw corrupt("entry of record " + std::to_string(r) + " at byte offset " +
                    std::to_string(kIndexHeaderBytes + r * kIndexEntryBytes) + " is invalid (shard " +
                    std::to_string(e.shard) + " of " + std::to_string(shard_count) + ", offset " +
                    std::to_string(e.offset) + ", length " + std::to_string(e.length) + ")");
    }
    // In the shard, without the sum overflowing: an offset near 2^64 wrapped
    // it past the check (the shard fuzzer's regression-offset-wraps).
    const uint64_t end = e.offset + kRecordHeaderBytes + e.length;
    if (e.offset > shard_sizes[e.shard] || shard_sizes[e.shard] - e.offset < kRecordHeaderBytes + e.length) {
      throw DatasetCorrupt(index.shard_paths[e.shard] + ": record " + std::to_string(r) + " (record " +
                           std::to_string(in_shard[e.shard]) + " of this shard) at byte offset " +
                           std::to_string(e.offset) + " is truncated: it ends at byte " + std::to_string(end) +
                           ", the file at byte " + std::to_string(shard_sizes[e.shard]));
    }
    ++in_shard[e.shard];
  }
  return index;
}

DatasetWriter::DatasetWriter(std::string dir, FilesLayout layout, int64_t shard_bytes)
    : dir_(std::move(dir)), layout_(layout), shard_bytes_(shard_bytes) {
  std::error_code ec;
  if (fs::exists(dir_, ec) && !(fs::is_directory(dir_, ec) && fs::is_empty(dir_, ec))) {
    throw std::runtime_error(dir_ + ": exists and is not an empty directory; choose another --out or remove it");
  }
  fs::create_directories(dir_, ec);
  if (ec) throw std::runtime_error(dir_ + ": cannot create the directory: " + ec.message());
}

DatasetWriter::~DatasetWriter() {
  if (shard_fd_ >= 0) ::close(shard_fd_);
}

void DatasetWriter::WriteOrThrow(int fd, const void* data, size_t size, const std::string& what) {
  const auto* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::write(fd, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw std::runtime_error(what + ": write failed: " + ErrnoText(errno));
    p += n;
    size -= static_cast<size_t>(n);
  }
}

void DatasetWriter::OpenShard() {
  shard_path_ = (fs::path(dir_) / ShardFileName(shard_number_)).string();
  shard_fd_ = ::open(shard_path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (shard_fd_ < 0) throw std::runtime_error(shard_path_ + ": cannot create: " + ErrnoText(errno));
  std::byte header[kShardHeaderBytes];
  std::memcpy(header, kShardMagic, sizeof kShardMagic);
  PutU32(header + 8, kFormatVersion);
  PutU32(header + 12, shard_number_);
  WriteOrThrow(shard_fd_, header, sizeof header, shard_path_);
  shard_offset_ = kShardHeaderBytes;
  bytes_written_ += static_cast<int64_t>(sizeof header);
}

void DatasetWriter::CloseShard() {
  if (shard_fd_ < 0) return;
  const int fd = shard_fd_;
  shard_fd_ = -1;
  if (::close(fd) != 0) throw std::runtime_error(shard_path_ + ": close failed: " + ErrnoText(errno));
  ++shard_number_;
}

void DatasetWriter::Add(std::span<const std::byte> payload) {
  if (finished_) throw std::logic_error("DatasetWriter::Add after Finish");
  if (payload.size() > UINT32_MAX) throw std::invalid_argument("a record must be smaller than 4 GiB");
  const uint32_t length = static_cast<uint32_t>(payload.size());
  if (layout_ == FilesLayout::kFiles) {
    const fs::path path = fs::path(dir_) / SampleFileName(records_);
    if (records_ % 1000 == 0) {
      std::error_code ec;
      fs::create_directories(path.parent_path(), ec);
      if (ec) throw std::runtime_error(path.parent_path().string() + ": cannot create: " + ec.message());
    }
    UniqueFd file(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
    if (!file.valid()) throw std::runtime_error(path.string() + ": cannot create: " + ErrnoText(errno));
    WriteOrThrow(file.get(), payload.data(), payload.size(), path.string());
    const int fd = file.Release();
    if (::close(fd) != 0) throw std::runtime_error(path.string() + ": close failed: " + ErrnoText(errno));
  } else {
    const uint64_t record_bytes = kRecordHeaderBytes + length;
    if (shard_fd_ >= 0 && shard_offset_ > kShardHeaderBytes &&
        shard_offset_ + record_bytes > static_cast<uint64_t>(shard_bytes_)) {
      CloseShard();
    }
    if (shard_fd_ < 0) OpenShard();
    IndexEntry e;
    e.shard = shard_number_;
    e.length = length;
    e.offset = shard_offset_;
    e.crc = Crc32c(payload);
    std::byte header[kRecordHeaderBytes];
    PutU32(header, e.length);
    PutU32(header + 4, e.crc);
    iovec iov[2] = {{header, sizeof header}, {const_cast<std::byte*>(payload.data()), payload.size()}};
    size_t left = record_bytes;
    ssize_t n = ::writev(shard_fd_, iov, 2);
    while (n < 0 && errno == EINTR) n = ::writev(shard_fd_, iov, 2);
    if (n < 0) throw std::runtime_error(shard_path_ + ": write failed: " + ErrnoText(errno));
    left -= static_cast<size_t>(n);
    if (left > 0) {  // a short write: finish from where it stopped
      const size_t done = static_cast<size_t>(n);
      if (done < sizeof header) {
        WriteOrThrow(shard_fd_, header + done, sizeof header - done, shard_path_);
        WriteOrThrow(shard_fd_, payload.data(), payload.size(), shard_path_);
      } else {
        WriteOrThrow(shard_fd_, payload.data() + (done - sizeof header), left, shard_path_);
      }
    }
    shard_offset_ += record_bytes;
    entries_.push_back(e);
  }
  max_length_ = std::max<uint64_t>(max_length_, length);
  bytes_written_ += static_cast<int64_t>(payload.size() + (layout_ == FilesLayout::kShards ? kRecordHeaderBytes : 0));
  ++records_;
}

void DatasetWriter::Finish() {
  if (finished_) return;
  finished_ = true;
  if (layout_ == FilesLayout::kShards) {
    CloseShard();
    std::vector<std::byte> index(kIndexHeaderBytes + entries_.size() * kIndexEntryBytes + 4);
    std::memcpy(index.data(), kIndexMagic, sizeof kIndexMagic);
    PutU32(index.data() + 8, kFormatVersion);
    PutU32(index.data() + 12, shard_number_);
    PutU64(index.data() + 16, entries_.size());
    PutU64(index.data() + 24, max_length_);
    for (size_t r = 0; r < entries_.size(); ++r) {
      std::byte* p = index.data() + kIndexHeaderBytes + r * kIndexEntryBytes;
      PutU32(p, entries_[r].shard);
      PutU32(p + 4, entries_[r].length);
      PutU64(p + 8, entries_[r].offset);
      PutU32(p + 16, entries_[r].crc);
      PutU32(p + 20, 0);
    }
    PutU32(index.data() + index.size() - 4, Crc32c(std::span(index).first(index.size() - 4)));
    // Written under a temporary name and renamed: an index that exists is whole.
    const std::string final_path = (fs::path(dir_) / kIndexFileName).string();
    const std::string tmp_path = final_path + ".tmp";
    {
      UniqueFd file(::open(tmp_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
      if (!file.valid()) throw std::runtime_error(tmp_path + ": cannot create: " + ErrnoText(errno));
      WriteOrThrow(file.get(), index.data(), index.size(), tmp_path);
    }
    if (::rename(tmp_path.c_str(), final_path.c_str()) != 0) {
      throw std::runtime_error(final_path + ": rename failed: " + ErrnoText(errno));
    }
    bytes_written_ += static_cast<int64_t>(index.size());
  }
  UniqueFd dir(::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir.valid() && ::syncfs(dir.get()) != 0) throw std::runtime_error(dir_ + ": sync failed: " + ErrnoText(errno));
}

}  // namespace feedtune::workloads
