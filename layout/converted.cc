#include "layout/converted.h"

#include <fcntl.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <span>
#include <stdexcept>

#include "workloads/format_io.h"
#include "workloads/shard_format.h"

namespace feedtune::layout {
namespace {

// The index is read by numpy as little-endian fields; so is this host.
static_assert(std::endian::native == std::endian::little, "index.ftmap is written as the host's little-endian bytes");

constexpr char kIndexMagic[8] = {'F', 'T', 'M', 'A', 'P', '\0', '\0', '\1'};
constexpr size_t kIndexHeaderBytes = 16;
constexpr size_t kIndexRecordBytes = 48;

}  // namespace

std::string PartialName(const std::string& path) {
  const std::filesystem::path p(path);
  std::string name = ".";  // appended, not "." + ...: GCC 12 warns falsely (-Wrestrict) on that
  name += p.filename().string();
  name += ".partial";
  return (p.parent_path() / name).string();
}

void SyncDirectory(const std::string& dir) {
  const workloads::UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd.valid() || ::fsync(fd.get()) != 0) {
    throw std::runtime_error(dir + ": cannot sync the folder: " + workloads::ErrnoText(errno));
  }
}

void RenameDurably(const std::string& from, const std::string& to) {
  if (::rename(from.c_str(), to.c_str()) != 0) {
    throw std::runtime_error(from + ": cannot rename to " + to + ": " + workloads::ErrnoText(errno));
  }
  SyncDirectory(std::filesystem::path(to).parent_path().string());
}

void WriteFileAtomically(const std::string& path, std::string_view text) {
  const std::string partial = PartialName(path);
  {
    const workloads::UniqueFd fd(::open(partial.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    if (!fd.valid()) throw std::runtime_error(partial + ": cannot create: " + workloads::ErrnoText(errno));
    workloads::WriteFull(fd.get(), partial, std::as_bytes(std::span(text)));
    if (::fsync(fd.get()) != 0) throw std::runtime_error(partial + ": fsync failed: " + workloads::ErrnoText(errno));
  }
  RenameDurably(partial, path);
}

std::string IndexBytes(const std::vector<IndexRecord>& records) {
  std::string bytes(kIndexHeaderBytes + records.size() * kIndexRecordBytes, '\0');
  std::memcpy(bytes.data(), kIndexMagic, 8);
  const uint64_t count = records.size();
  std::memcpy(bytes.data() + 8, &count, 8);
  char* at = bytes.data() + kIndexHeaderBytes;
  for (const IndexRecord& r : records) {
    const int64_t fields[5] = {r.source, r.file, r.offset, r.bytes, r.label};
    std::memcpy(at, fields, sizeof fields);
    std::memcpy(at + 40, &r.crc32c, 4);
    at += kIndexRecordBytes;
  }
  return bytes;
}

std::vector<IndexRecord> ReadIndex(const std::string& path) {
  const workloads::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) throw workloads::DatasetCorrupt(path + ": cannot open: " + workloads::ErrnoText(errno));
  char header[kIndexHeaderBytes];
  int error = 0;
  if (workloads::PreadFull(fd.get(), std::as_writable_bytes(std::span(header)), 0, &error) != sizeof header ||
      std::memcmp(header, kIndexMagic, 8) != 0) {
    throw workloads::DatasetCorrupt(path + ": not a feedtune index (no FTMAP header)");
  }
  uint64_t count = 0;
  std::memcpy(&count, header + 8, 8);
  std::vector<char> body(count * kIndexRecordBytes);
  if (workloads::PreadFull(fd.get(), std::as_writable_bytes(std::span(body)), kIndexHeaderBytes, &error) !=
      body.size()) {
    throw workloads::DatasetCorrupt(path + ": truncated: the header says " + std::to_string(count) + " records");
  }
  std::vector<IndexRecord> records(count);
  for (size_t i = 0; i < count; ++i) {
    int64_t fields[5];
    std::memcpy(fields, body.data() + i * kIndexRecordBytes, sizeof fields);
    records[i] = {fields[0], fields[1], fields[2], fields[3], fields[4], 0};
    std::memcpy(&records[i].crc32c, body.data() + i * kIndexRecordBytes + 40, 4);
  }
  return records;
}

}  // namespace feedtune::layout
