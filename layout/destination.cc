#include "layout/destination.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cerrno>
#include <filesystem>
#include <map>
#include <span>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "layout/converted.h"
#include "storage/credentials.h"
#include "storage/location.h"
#include "storage/object_client.h"
#include "workloads/crc32c.h"
#include "workloads/format_io.h"

namespace feedtune::layout {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string ReadText(const std::string& path) {
  const workloads::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) throw std::runtime_error(path + ": cannot open: " + workloads::ErrnoText(errno));
  std::string text;
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw std::runtime_error(path + ": read failed: " + workloads::ErrnoText(errno));
    if (n == 0) break;
    text.append(buf, static_cast<size_t>(n));
  }
  return text;
}

int64_t BytesUnder(const std::string& path) {
  std::error_code ec;
  if (fs::is_regular_file(path, ec)) return static_cast<int64_t>(fs::file_size(path, ec));
  int64_t total = 0;
  for (auto it = fs::recursive_directory_iterator(path, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    if (it->is_regular_file(ec)) total += static_cast<int64_t>(it->file_size(ec));
  }
  return total;
}

class LocalFolder final : public Destination {
 public:
  explicit LocalFolder(std::string dst) : dst_(std::move(dst)) {}

  const std::string& root() const override { return dst_; }
  std::string Name(const std::string& file) const override { return (fs::path(dst_) / file).string(); }
  bool remote() const override { return false; }

  std::vector<std::string> Files() override {
    std::vector<std::string> files;
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(dst_, ec)) files.push_back(entry.path().filename().string());
    std::sort(files.begin(), files.end());
    return files;
  }
  bool Exists(const std::string& file) override {
    std::error_code ec;
    return fs::exists(Name(file), ec);
  }
  std::optional<std::string> ReadSmall(const std::string& file) override {
    if (!Exists(file)) return std::nullopt;
    return ReadText(Name(file));
  }
  void WriteSmall(const std::string& file, std::string_view bytes) override {
    MakeFolder();
    WriteFileAtomically(Name(file), bytes);
  }
  void Remove(const std::string& file) override {
    std::error_code ec;
    fs::remove(Name(file), ec);
  }
  void DropPartials() override {
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(dst_, ec)) {
      const std::string name = entry.path().filename().string();
      if (name.starts_with(".") && name.ends_with(".partial")) fs::remove_all(entry.path(), ec);
    }
  }
  std::string StagePath(const std::string& file) override {
    MakeFolder();
    return PartialName(Name(file));
  }
  void Commit(const std::string& file) override {
    const std::string staged = PartialName(Name(file));
    {
      const workloads::UniqueFd fd(::open(staged.c_str(), O_RDONLY | O_CLOEXEC));
      if (!fd.valid() || ::fsync(fd.get()) != 0) {
        throw std::runtime_error(staged + ": fsync failed: " + workloads::ErrnoText(errno));
      }
    }
    RenameDurably(staged, Name(file));
  }
  std::string Fetch(const std::string& file) override { return Name(file); }
  void Release(const std::string& /*file*/) override {}
  int64_t Bytes(const std::string& file) override { return BytesUnder(Name(file)); }
  void Sync() override { SyncDirectory(dst_); }

 private:
  void MakeFolder() {
    std::error_code ec;
    fs::create_directories(dst_, ec);
    if (ec) throw std::runtime_error(dst_ + ": cannot create the folder: " + ec.message());
  }

  const std::string dst_;
};

class StorePrefix final : public Destination {
 public:
  StorePrefix(std::string dst, storage::Location location, const std::string& staging_dir, int64_t part_bytes)
      : dst_(std::move(dst)), location_(location), prefix_(location.prefix), part_bytes_(part_bytes),
        client_(location, storage::ResolveAwsConfig(storage::ProcessEnvironment())) {
    if (!prefix_.empty() && prefix_.back() != '/') prefix_ += '/';
    // One folder per DST, so a run after kill -9 clears what the killed one staged.
    const std::string hash = workloads::Hex32(workloads::Crc32c(std::as_bytes(std::span(dst_))));
    staging_ = (fs::path(staging_dir) / ("feedtune-convert-" + hash)).string();
    std::error_code ec;
    fs::remove_all(staging_, ec);
    fs::create_directories(staging_, ec);
    if (ec) {
      throw std::runtime_error(staging_ + ": cannot make a staging folder for the upload: " + ec.message() +
                               "; set TMPDIR to a writable folder");
    }
  }
  ~StorePrefix() override {
    std::error_code ec;
    fs::remove_all(staging_, ec);
  }

  const std::string& root() const override { return dst_; }
  std::string Name(const std::string& file) const override { return client_.ObjectName(prefix_ + file); }
  bool remote() const override { return true; }

  std::vector<std::string> Files() override {
    Listed();
    std::vector<std::string> files;
    for (const auto& [name, size] : sizes_) files.push_back(name);
    return files;
  }
  bool Exists(const std::string& file) override {
    Listed();
    return sizes_.count(file) > 0;
  }
  std::optional<std::string> ReadSmall(const std::string& file) override {
    if (!Exists(file)) return std::nullopt;
    const std::vector<std::byte> bytes = client_.Get(prefix_ + file);
    return std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  }
  void WriteSmall(const std::string& file, std::string_view bytes) override {
    const auto body = std::as_bytes(std::span(bytes.data(), bytes.size()));
    client_.Put(prefix_ + file, body);
    Listed();
    sizes_[file] = static_cast<int64_t>(bytes.size());
  }
  void Remove(const std::string& file) override {
    if (!Exists(file)) return;
    client_.Delete(prefix_ + file);
    sizes_.erase(file);
  }
  // An upload record beside a shard that is whole: the run stopped between
  // the completion and the record's removal. Nothing else is partial here.
  void DropPartials() override {
    for (const std::string& file : Files()) {
      if (file.starts_with(".") && file.ends_with(kUploadSuffix) &&
          Exists(file.substr(1, file.size() - 1 - std::string_view(kUploadSuffix).size()))) {
        Remove(file);
      }
    }
  }
  std::string StagePath(const std::string& file) override { return (fs::path(staging_) / file).string(); }

  void Commit(const std::string& file) override {
    const std::string staged = StagePath(file);
    const workloads::UniqueFd fd(::open(staged.c_str(), O_RDONLY | O_CLOEXEC));
    struct stat st {};
    if (!fd.valid() || ::fstat(fd.get(), &st) != 0) {
      throw std::runtime_error(staged + ": cannot open the staged shard: " + workloads::ErrnoText(errno));
    }
    const auto size = static_cast<int64_t>(st.st_size);
    if (size <= part_bytes_) {
      const std::vector<std::byte> body = ReadRange(fd.get(), staged, 0, size);
      client_.Put(prefix_ + file, body);
      figures_.bytes_sent += size;
    } else {
      UploadInParts(file, fd.get(), staged, size);
    }
    Listed();
    sizes_[file] = size;
    ++figures_.objects;
    ::unlink(staged.c_str());
  }

  // The object, read back in ranges of part_bytes, four in flight.
  std::string Fetch(const std::string& file) override {
    Listed();
    const int64_t size = sizes_.at(file);
    const std::string path = StagePath(file);
    workloads::UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    if (!fd.valid()) throw std::runtime_error(path + ": cannot create: " + workloads::ErrnoText(errno));
    constexpr int kInFlight = 4;
    std::vector<std::byte> buffer(static_cast<size_t>(std::min<int64_t>(size, kInFlight * part_bytes_)));
    for (int64_t offset = 0; offset < size;) {
      std::vector<storage::GetRequest> requests;
      int64_t at = 0;
      while (static_cast<int>(requests.size()) < kInFlight && offset + at < size) {
        const int64_t length = std::min(part_bytes_, size - offset - at);
        requests.push_back({prefix_ + file, storage::ByteRange{offset + at, length},
                            std::span(buffer).subspan(static_cast<size_t>(at), static_cast<size_t>(length))});
        at += length;
      }
      const std::vector<int64_t> got = client_.GetMany(requests, kInFlight);
      for (size_t i = 0; i < requests.size(); ++i) {
        if (got[i] != requests[i].range->length) {
          throw std::runtime_error("verification failed: " + Name(file) + " is shorter than its listed " +
                                   std::to_string(size) + " bytes (a range at " +
                                   std::to_string(requests[i].range->offset) + " gave " + std::to_string(got[i]) +
                                   "); did something else write under DST?");
        }
      }
      workloads::WriteFull(fd.get(), path, std::span(buffer).first(static_cast<size_t>(at)));
      offset += at;
      figures_.bytes_read_back += at;
    }
    return path;
  }
  void Release(const std::string& file) override { ::unlink(StagePath(file).c_str()); }
  int64_t Bytes(const std::string& file) override {
    Listed();
    const auto it = sizes_.find(file);
    return it == sizes_.end() ? 0 : it->second;
  }
  void Sync() override {}
  UploadFigures figures() const override { return figures_; }

 private:
  static constexpr const char* kUploadSuffix = ".upload.json";

  void Listed() {
    if (listed_) return;
    for (const storage::ObjectInfo& o : client_.List(prefix_)) sizes_[o.key.substr(prefix_.size())] = o.size;
    listed_ = true;
  }

  static std::vector<std::byte> ReadRange(int fd, const std::string& path, int64_t offset, int64_t length) {
    std::vector<std::byte> bytes(static_cast<size_t>(length));
    int error = 0;
    if (workloads::PreadFull(fd, bytes, static_cast<uint64_t>(offset), &error) != bytes.size()) {
      throw std::runtime_error(path + ": short read at byte " + std::to_string(offset) +
                               (error ? ": " + workloads::ErrnoText(error) : ""));
    }
    return bytes;
  }

  // The shard in parts of part_bytes. The record, rewritten after each part,
  // is what a resumed run trusts: a part it lists with the same bytes and
  // CRC32C is not sent again.
  void UploadInParts(const std::string& file, int fd, const std::string& staged, int64_t size) {
    const std::string key = prefix_ + file;
    const std::string record_file = "." + file + kUploadSuffix;
    json record;
    if (auto text = ReadSmall(record_file)) {
      try {
        record = json::parse(*text);
        if (record.at("part_bytes") != part_bytes_ || record.at("bytes") != size) record = json();
      } catch (const std::exception&) {
        record = json();  // unreadable: start the upload over
      }
    }
    for (int attempt = 0;; ++attempt) {
      if (record.is_null()) {
        record = {{"upload_id", client_.CreateMultipartUpload(key)}, {"part_bytes", part_bytes_}, {"bytes", size},
                  {"parts", json::object()}};
        WriteSmall(record_file, record.dump());
      }
      const std::string upload_id = record.at("upload_id");
      std::vector<storage::UploadedPart> parts;
      bool differs = false;
      const int64_t count = (size + part_bytes_ - 1) / part_bytes_;
      for (int64_t n = 1; n <= count && !differs; ++n) {
        const int64_t offset = (n - 1) * part_bytes_;
        const std::vector<std::byte> body = ReadRange(fd, staged, offset, std::min(part_bytes_, size - offset));
        const uint32_t crc = workloads::Crc32c(body);
        const json& recorded = record.at("parts");
        if (const auto sent = recorded.find(std::to_string(n)); sent != recorded.end()) {
          if (sent->at("crc32c") == crc && sent->at("bytes") == static_cast<int64_t>(body.size())) {
            parts.push_back({static_cast<int>(n), sent->at("etag")});
            ++figures_.parts_resumed;
            continue;
          }
          differs = true;  // the shard written again is not the one the upload began with
          break;
        }
        const std::string etag = client_.UploadPart(key, upload_id, static_cast<int>(n), body);
        record["parts"][std::to_string(n)] = {{"etag", etag}, {"bytes", body.size()}, {"crc32c", crc}};
        WriteSmall(record_file, record.dump());
        parts.push_back({static_cast<int>(n), etag});
        ++figures_.parts_sent;
        figures_.bytes_sent += static_cast<int64_t>(body.size());
      }
      if (!differs) {
        try {
          client_.CompleteMultipartUpload(key, upload_id, parts);
          Remove(record_file);
          return;
        } catch (const storage::StorageError& e) {
          // NoSuchUpload: aborted, or cleared by a lifecycle rule since it was recorded.
          if (e.kind() != storage::StorageError::Kind::kNotFound || attempt > 0) throw;
        }
      } else {
        try {
          client_.AbortMultipartUpload(key, upload_id);
        } catch (const storage::StorageError&) {
          // Gone already: the new upload replaces it either way.
        }
      }
      if (attempt > 0) {
        throw std::runtime_error(Name(file) + ": the upload was started over and still does not match its record");
      }
      record = json();
    }
  }

  const std::string dst_;
  const storage::Location location_;
  std::string prefix_;  // the key prefix, ending in '/' unless the whole bucket
  const int64_t part_bytes_;
  storage::ObjectClient client_;
  std::string staging_;
  bool listed_ = false;
  std::map<std::string, int64_t> sizes_;  // DST's objects, by name relative to it
  UploadFigures figures_;
};

}  // namespace

std::string DefaultStagingDir() {
  const char* tmp = std::getenv("TMPDIR");
  return tmp != nullptr && *tmp != '\0' ? tmp : "/tmp";
}

std::unique_ptr<Destination> LocalDestination(const std::string& dst) { return std::make_unique<LocalFolder>(dst); }

std::unique_ptr<Destination> StoreDestination(const std::string& dst, const std::string& staging_dir,
                                              int64_t part_bytes) {
  const storage::Location location = storage::ParseLocation(dst);
  if (!location.is_s3()) {
    throw std::invalid_argument("DST " + dst + ": convert writes to a local folder or an s3:// prefix; an http(s) "
                                "server is read-only");
  }
  if (part_bytes < kMinPartBytes) {
    throw std::invalid_argument("--part-bytes: S3 takes parts of at least 5 MiB (5242880), got " +
                                std::to_string(part_bytes));
  }
  return std::make_unique<StorePrefix>(dst, location, staging_dir, part_bytes);
}

}  // namespace feedtune::layout
