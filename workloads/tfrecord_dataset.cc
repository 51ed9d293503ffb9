#include "workloads/tfrecord_dataset.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "workloads/jpeg_image.h"
#include "workloads/shard_format.h"

namespace feedtune::workloads {
namespace {

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// Builds the index by one scan of the file's record headers: the file is
// mapped, and only the pages that hold a header are touched.
std::vector<TfRecordEntry> ScanFile(const std::string& path, int fd, int64_t file_bytes) {
  if (file_bytes == 0) return {};
  void* map = ::mmap(nullptr, static_cast<size_t>(file_bytes), PROT_READ, MAP_PRIVATE, fd, 0);
  if (map == MAP_FAILED) throw DatasetCorrupt(path + ": cannot map it to scan its records: " + ErrnoText(errno));
  std::vector<TfRecordEntry> entries;
  try {
    entries = ScanTfRecords(std::span<const std::byte>(static_cast<const std::byte*>(map),
                                                       static_cast<size_t>(file_bytes)),
                            path);
  } catch (...) {
    ::munmap(map, static_cast<size_t>(file_bytes));
    throw;
  }
  ::munmap(map, static_cast<size_t>(file_bytes));
  return entries;
}

// An index matches its file when its records tile the file exactly and the
// length fields of the first and last record agree with it.
std::string Mismatch(const std::vector<TfRecordEntry>& entries, int fd, int64_t file_bytes) {
  uint64_t end = 0;
  for (size_t i = 0; i < entries.size(); ++i) {
    if (entries[i].offset != end) return "record " + std::to_string(i) + " starts at byte " +
                                         std::to_string(entries[i].offset) + ", the previous ends at " +
                                         std::to_string(end);
    end += entries[i].size;
  }
  if (end != static_cast<uint64_t>(file_bytes)) {
    return "its records end at byte " + std::to_string(end) + ", the file has " + std::to_string(file_bytes);
  }
  if (entries.empty()) return {};
  for (const size_t i : {size_t{0}, entries.size() - 1}) {
    uint64_t length = 0;
    int error = 0;
    if (PreadFull(fd, std::as_writable_bytes(std::span(&length, 1)), entries[i].offset, &error) != sizeof length ||
        length + kTfRecordFraming != entries[i].size) {
      return "record " + std::to_string(i) + "'s length field disagrees with it";
    }
  }
  return {};
}

// Writes `text` to `path` through a temporary file and a rename, so a reader
// never sees half an index. Returns false (errno set) when it cannot.
bool WriteAtomically(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp" + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return false;
  const bool written = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  const int error = errno;
  ::close(fd);
  if (!written || ::rename(tmp.c_str(), path.c_str()) != 0) {
    ::unlink(tmp.c_str());
    errno = written ? errno : error;
    return false;
  }
  return true;
}

// The cached index's name: the data file's absolute path, made a file name.
std::string CachedIndexPath(const std::string& cache_dir, const std::string& path) {
  std::string name = std::filesystem::absolute(path).lexically_normal().string();
  std::replace(name.begin(), name.end(), '/', '%');
  return cache_dir + "/" + name + ".idx";
}

}  // namespace

std::string TfRecordIndexCacheDir(const std::string& configured) {
  if (!configured.empty()) return configured;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && *xdg != '\0') {
    return std::string(xdg) + "/feedtune/tfrecord-idx";
  }
  const char* home = std::getenv("HOME");
  return std::string(home != nullptr ? home : "/tmp") + "/.cache/feedtune/tfrecord-idx";
}

std::vector<TfRecordEntry> TfRecordIndexFor(const std::string& path, int fd, int64_t file_bytes,
                                            const std::string& cache_dir, std::string* index_path,
                                            std::string* status) {
  const std::string beside = path + ".idx";
  if (::access(beside.c_str(), F_OK) == 0) {
    auto entries = ParseTfRecordIndex(ReadText(beside), beside);
    if (const std::string why = Mismatch(entries, fd, file_bytes); !why.empty()) {
      throw DatasetCorrupt(beside + ": a stale index, it does not match " + path + " (" + why +
                           "); delete it and feedtune rebuilds it");
    }
    *index_path = beside;
    *status = "found beside the data";
    return entries;
  }
  const std::string cached = CachedIndexPath(cache_dir, path);
  if (::access(cached.c_str(), F_OK) == 0) {
    auto entries = ParseTfRecordIndex(ReadText(cached), cached);
    if (Mismatch(entries, fd, file_bytes).empty()) {
      *index_path = cached;
      *status = "found in the cache folder";
      return entries;
    }  // the data changed since: our own cache, so rebuilt below
  }
  auto entries = ScanFile(path, fd, file_bytes);
  const std::string text = TfRecordIndexText(entries);
  if (WriteAtomically(beside, text)) {
    *index_path = beside;
    *status = "built, written beside the data";
    return entries;
  }
  std::error_code ignored;
  std::filesystem::create_directories(cache_dir, ignored);
  if (WriteAtomically(cached, text)) {
    *index_path = cached;
    *status = "built, written to the cache folder (the data's folder is read-only)";
  } else {
    index_path->clear();
    *status = "built in memory (neither the data's folder nor " + cache_dir + " is writable)";
  }
  return entries;
}

TfRecordDataset::TfRecordDataset(const FilesOptions& files, const FormatOptions& format, const SyntheticOptions& cost,
                                 const CpuCalibration& calibration)
    : ShardFilesDataset(files, format, cost, calibration) {
  const std::string cache_dir = TfRecordIndexCacheDir(format.index_cache);
  for (const std::string& path : ResolveShardPaths(files, ShardExtensions(WorkloadKind::kTfRecord))) {
    TfRecordShardInfo shard_info;
    shard_info.path = path;
    Shard shard;
    shard.fd = OpenShardFile(path, &shard_info.file_bytes);
    shard.entries = TfRecordIndexFor(path, shard.fd.get(), shard_info.file_bytes, cache_dir, &shard_info.index_path,
                                     &shard_info.index_status);
    shard.first = size();
    shard_info.records = static_cast<int64_t>(shard.entries.size());
    AddShard(path, shard_info.records);
    // An extracted feature is at most its record's size: the slot bound holds.
    for (const auto& e : shard.entries) {
      max_stored_bytes_ = std::max(max_stored_bytes_, static_cast<int64_t>(e.data_bytes()));
    }
    shards_.push_back(std::move(shard));
    infos_.push_back(std::move(shard_info));
  }
  if (size() == 0) {
    throw DatasetCorrupt(PathText(files) + ": no records in " + std::to_string(shards_.size()) + " file(s)");
  }
}

int64_t TfRecordDataset::SampleOf(int64_t shard, int64_t record, std::span<const std::byte> framed,
                                  std::span<std::byte> out) const {
  const Shard& s = shards_[static_cast<size_t>(shard)];
  const std::string& path = infos_[static_cast<size_t>(shard)].path;
  const auto& entry = s.entries[static_cast<size_t>(record)];
  const auto data = CheckTfRecord(framed, path, record, entry.offset);
  const auto where = [&] {
    return path + ": record " + std::to_string(record) + " at byte " + std::to_string(entry.offset);
  };
  std::string value;  // the feature's bytes
  std::span<const std::byte> sample = data;
  if (!format_.feature.empty()) {
    value = ExampleBytesFeature(data, format_.feature, where());
    sample = std::as_bytes(std::span(value.data(), value.size()));
  }
  if (jpeg_) {
    try {
      return jpeg_->Decode(sample, s.first + record, out);
    } catch (const JpegError& e) {
      throw DatasetCorrupt(where() + (format_.feature.empty() ? "" : ", feature '" + format_.feature + "'") +
                           ": decode: jpeg: " + e.what());
    }
  }
  std::memcpy(out.data(), sample.data(), sample.size());
  return static_cast<int64_t>(sample.size());
}

int64_t TfRecordDataset::Read(int64_t index, std::span<std::byte> out) const {
  if (index < 0 || index >= size()) {
    throw std::out_of_range("sample index " + std::to_string(index) + " outside [0, " + std::to_string(size()) + ")");
  }
  cost_.BeforeRead(index);
  const size_t shard = ShardOf(index);
  const auto it = shards_.begin() + static_cast<std::ptrdiff_t>(shard);
  const int64_t record = index - it->first;
  const auto& entry = it->entries[static_cast<size_t>(record)];
  thread_local std::vector<std::byte> framed;
  framed.resize(entry.size);
  int error = 0;
  if (PreadFull(it->fd.get(), framed, entry.offset, &error) != entry.size) {
    throw DatasetCorrupt(infos_[shard].path + ": record " + std::to_string(record) +
                         " at byte " + std::to_string(entry.offset) + ": truncated (" +
                         (error != 0 ? ErrnoText(error) : std::string("the file ends inside it")) + ")");
  }
  const int64_t bytes = SampleOf(static_cast<int64_t>(shard), record, framed, out);
  cost_.AfterRead(index, out.first(static_cast<size_t>(bytes)));
  return bytes;
}

int64_t TfRecordDataset::stored_bytes(int64_t index) const {
  const Shard& s = shards_[ShardOf(index)];
  return static_cast<int64_t>(s.entries[static_cast<size_t>(index - s.first)].data_bytes());
}

std::string TfRecordDataset::Describe() const {
  int64_t bytes = 0;
  for (const auto& info : infos_) bytes += info.file_bytes;
  std::string text = PathText(files_) + ": " + std::to_string(infos_.size()) + " TFRecord file(s), " +
                     std::to_string(size()) + " records, " + FormatMegabytes(static_cast<double>(bytes)) + ", " +
                     (format_.feature.empty() ? std::string("whole records")
                                              : "feature '" + format_.feature + "' of each tf.train.Example") +
                     (jpeg_ ? jpeg_->Describe() : std::string());
  return text + AccessText();
}

TfRecordWriter::TfRecordWriter(std::string dir, int64_t samples, int shards)
    : dir_(std::move(dir)), samples_(samples), shards_(std::clamp<int>(shards, 1, static_cast<int>(std::max<int64_t>(samples, 1)))) {
  std::error_code error;
  std::filesystem::create_directories(dir_, error);
  if (error) throw std::runtime_error(dir_ + ": cannot create: " + error.message());
}


void TfRecordWriter::Add(std::span<const std::byte> payload) {
  const int shard = static_cast<int>(added_ * shards_ / std::max<int64_t>(samples_, 1));
  if (shard != shard_) {
    CloseShard();
    shard_ = shard;
    std::ofstream(GenDataShardPath(dir_, shard_, shards_, ".tfrecord"), std::ios::binary | std::ios::trunc);  // a rerun starts afresh
  }
  const std::string record = ExampleRecord("data", payload, "index", added_);
  const uint64_t offset = entries_.empty() ? 0 : entries_.back().offset + entries_.back().size;
  AppendTfRecord(std::as_bytes(std::span(record.data(), record.size())), &buffer_);
  entries_.push_back({offset, record.size() + kTfRecordFraming});
  ++added_;
  if (buffer_.size() >= (size_t{8} << 20)) {  // written in 8 MiB pieces, not held whole
    std::ofstream out(GenDataShardPath(dir_, shard_, shards_, ".tfrecord"), std::ios::binary | std::ios::app);
    out.write(reinterpret_cast<const char*>(buffer_.data()), static_cast<std::streamsize>(buffer_.size()));
    if (!out) throw std::runtime_error(GenDataShardPath(dir_, shard_, shards_, ".tfrecord") + ": write failed");
    bytes_written_ += static_cast<int64_t>(buffer_.size());
    buffer_.clear();
  }
}

void TfRecordWriter::CloseShard() {
  if (shard_ < 0) return;
  const std::string path = GenDataShardPath(dir_, shard_, shards_, ".tfrecord");
  std::ofstream out(path, std::ios::binary | std::ios::app);
  out.write(reinterpret_cast<const char*>(buffer_.data()), static_cast<std::streamsize>(buffer_.size()));
  std::ofstream index(path + ".idx");
  index << TfRecordIndexText(entries_);
  if (!out || !index) throw std::runtime_error(path + ": write failed");
  bytes_written_ += static_cast<int64_t>(buffer_.size());
  buffer_.clear();
  entries_.clear();
}

void TfRecordWriter::Finish() {
  CloseShard();
  shard_ = -1;
}

}  // namespace feedtune::workloads
