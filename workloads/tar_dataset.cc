#include "workloads/tar_dataset.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "workloads/jpeg_image.h"
#include "workloads/shard_format.h"

namespace feedtune::workloads {

size_t JpegMemberOf(const TarSample& sample, const std::string& shard) {
  for (size_t m = 0; m < sample.fields.size(); ++m) {
    if (HasJpegExtension(sample.fields[m].name) || HasPpmExtension(sample.fields[m].name)) return m;
  }
  std::string names;
  for (size_t m = 0; m < sample.fields.size() && m < 8; ++m) names += (m == 0 ? "" : ", ") + sample.fields[m].name;
  if (sample.fields.size() > 8) names += ", ... (" + std::to_string(sample.fields.size()) + " in all)";
  throw DatasetNotFound(shard + ": sample '" + sample.key + "' has no JPEG member (decode: jpeg reads the one named " +
                        "KEY.jpg or KEY.jpeg, any case, or raw pixels as KEY.ppm); its members: " + names +
                        "; write the images as KEY.jpg members (`feedtune gen-data --layout tar --jpeg` does), or "
                        "drop decode: jpeg");
}

std::vector<TarMember> ScanTarFile(const std::string& path, int fd, int64_t file_bytes) {
  TarScanner scanner(
      [fd](uint64_t offset, std::span<std::byte> out) {
        int error = 0;
        return PreadFull(fd, out, offset, &error);
      },
      static_cast<uint64_t>(file_bytes), path);
  std::vector<TarMember> members;
  TarMember member;
  while (scanner.Next(&member)) members.push_back(member);
  return members;
}

TarDataset::TarDataset(const FilesOptions& files, const FormatOptions& format, const SyntheticOptions& cost,
                       const CpuCalibration& calibration)
    : ShardFilesDataset(files, format, cost, calibration) {
  for (const std::string& path : ResolveShardPaths(files, ShardExtensions(WorkloadKind::kTar))) {
    int64_t file_bytes = 0;
    UniqueFd fd = OpenShardFile(path, &file_bytes);
    const std::vector<TarMember> members = ScanTarFile(path, fd.get(), file_bytes);
    const std::vector<TarSample> samples = GroupTarSamples(members);
    if (samples.empty()) {
      throw DatasetCorrupt(path + ": no complete sample (" + std::to_string(members.size()) +
                           " regular members, none named KEY.EXT as WebDataset shards are)");
    }
    TarShardInfo shard;
    shard.path = path;
    shard.samples = static_cast<int64_t>(samples.size());
    shard.members = static_cast<int64_t>(members.size());
    shard.file_bytes = file_bytes;
    std::string key, ext;
    for (const auto& field : samples.front().fields) {
      if (SplitTarKey(field.name, &key, &ext)) shard.fields.push_back(ext);
    }
    for (const TarSample& s : samples) {
      Sample sample{static_cast<uint32_t>(fds_.size()), -1, {}};
      if (jpeg_) sample.jpeg_field = static_cast<int32_t>(JpegMemberOf(s, path));
      for (const auto& f : s.fields) sample.fields.push_back({f.data_offset, f.size});
      max_stored_bytes_ = std::max(max_stored_bytes_, static_cast<int64_t>(s.bytes()));
      samples_.push_back(std::move(sample));
    }
    AddShard(path, shard.samples);
    fds_.push_back(std::move(fd));
    infos_.push_back(std::move(shard));
  }
}

int64_t TarDataset::DecodeJpegMember(int64_t index, std::span<std::byte> out) const {
  const Sample& sample = samples_[static_cast<size_t>(index)];
  const Extent& field = sample.fields[static_cast<size_t>(sample.jpeg_field)];
  const std::string& path = infos_[sample.shard].path;
  thread_local std::vector<std::byte> jpeg;
  jpeg.resize(field.bytes);
  int error = 0;
  if (PreadFull(fds_[sample.shard].get(), jpeg, field.offset, &error) != field.bytes) {
    throw DatasetCorrupt(path + ": sample " + std::to_string(index) + ": the member at byte " +
                         std::to_string(field.offset) + " is cut short (" +
                         (error != 0 ? ErrnoText(error) : std::string("the file shrank since it was opened")) + ")");
  }
  try {
    return jpeg_->Decode(jpeg, index, out);
  } catch (const JpegError& e) {
    // The member's name is not kept per sample (millions of them); the error
    // path finds it again by a scan of the shard's headers.
    std::string name;
    try {
      struct stat info {};
      if (::fstat(fds_[sample.shard].get(), &info) == 0) {
        for (const TarMember& m : ScanTarFile(path, fds_[sample.shard].get(), info.st_size)) {
          if (m.data_offset == field.offset) name = m.name;
        }
      }
    } catch (const std::exception&) {  // the decode error is the one to report
    }
    throw DatasetCorrupt(path + ": sample " + std::to_string(index) + ", member " +
                         (name.empty() ? std::string("at byte ") + std::to_string(field.offset)
                                       : "'" + name + "' at byte " + std::to_string(field.offset)) +
                         ": decode: jpeg: " + e.what());
  }
}

int64_t TarDataset::Read(int64_t index, std::span<std::byte> out) const {
  if (index < 0 || index >= size()) {
    throw std::out_of_range("sample index " + std::to_string(index) + " outside [0, " + std::to_string(size()) + ")");
  }
  cost_.BeforeRead(index);
  if (jpeg_) {
    const int64_t bytes = DecodeJpegMember(index, out);
    cost_.AfterRead(index, out.first(static_cast<size_t>(bytes)));
    return bytes;
  }
  const Sample& sample = samples_[static_cast<size_t>(index)];
  uint64_t at = 0;
  for (const Extent& field : sample.fields) {
    int error = 0;
    if (PreadFull(fds_[sample.shard].get(), out.subspan(at, field.bytes), field.offset, &error) != field.bytes) {
      throw DatasetCorrupt(infos_[sample.shard].path + ": sample " + std::to_string(index) + ": the member at byte " +
                           std::to_string(field.offset) + " is cut short (" +
                           (error != 0 ? ErrnoText(error) : std::string("the file shrank since it was opened")) +
                           ")");
    }
    at += field.bytes;
  }
  cost_.AfterRead(index, out.first(at));
  return static_cast<int64_t>(at);
}

int64_t TarDataset::stored_bytes(int64_t index) const {
  int64_t bytes = 0;
  for (const Extent& f : samples_[static_cast<size_t>(index)].fields) bytes += static_cast<int64_t>(f.bytes);
  return bytes;
}

std::string TarDataset::Describe() const {
  int64_t bytes = 0;
  for (const auto& info : infos_) bytes += info.file_bytes;
  std::string fields;
  for (const auto& f : infos_.front().fields) fields += (fields.empty() ? "" : ", ") + f;
  std::string text = PathText(files_) + ": " + std::to_string(infos_.size()) + " tar shard(s), " +
                     std::to_string(size()) + " samples of fields " + fields + ", " +
                     FormatMegabytes(static_cast<double>(bytes)) +
                     (jpeg_ ? ", the JPEG member of each" + jpeg_->Describe() : std::string());
  return text + AccessText();
}

TarWriter::TarWriter(std::string dir, int64_t samples, int shards, std::string payload_extension)
    : dir_(std::move(dir)),
      samples_(samples),
      shards_(std::clamp<int>(shards, 1, static_cast<int>(std::max<int64_t>(samples, 1)))),
      payload_extension_(std::move(payload_extension)) {
  std::error_code error;
  std::filesystem::create_directories(dir_, error);
  if (error) throw std::runtime_error(dir_ + ": cannot create: " + error.message());
}

std::string TarWriter::ClassText(int64_t index) { return std::to_string(index % 1000); }

void TarWriter::Add(std::span<const std::byte> payload) {
  const int shard = static_cast<int>(added_ * shards_ / std::max<int64_t>(samples_, 1));
  if (shard != shard_) {
    Flush(true);
    shard_ = shard;
    std::ofstream(GenDataShardPath(dir_, shard_, shards_, ".tar"), std::ios::binary | std::ios::trunc);
  }
  char key[32];
  std::snprintf(key, sizeof key, "%09lld", static_cast<long long>(added_));
  const std::string cls = ClassText(added_);
  AppendTarMember(std::string(key) + "." + payload_extension_, payload, &buffer_);
  AppendTarMember(std::string(key) + ".cls", std::as_bytes(std::span(cls.data(), cls.size())), &buffer_);
  ++added_;
  if (buffer_.size() >= (size_t{8} << 20)) Flush(false);  // written in 8 MiB pieces, not held whole
}

void TarWriter::Flush(bool end) {
  if (shard_ < 0) return;
  if (end) AppendTarEnd(&buffer_);
  const std::string path = GenDataShardPath(dir_, shard_, shards_, ".tar");
  std::ofstream out(path, std::ios::binary | std::ios::app);
  out.write(reinterpret_cast<const char*>(buffer_.data()), static_cast<std::streamsize>(buffer_.size()));
  if (!out) throw std::runtime_error(path + ": write failed");
  bytes_written_ += static_cast<int64_t>(buffer_.size());
  buffer_.clear();
}

void TarWriter::Finish() {
  Flush(true);
  shard_ = -1;
}

}  // namespace feedtune::workloads
