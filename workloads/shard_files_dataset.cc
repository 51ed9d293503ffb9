#include "workloads/shard_files_dataset.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <cerrno>

#include "workloads/shard_format.h"

namespace feedtune::workloads {

ShardFilesDataset::ShardFilesDataset(const FilesOptions& files, const FormatOptions& format,
                                     const SyntheticOptions& cost, const CpuCalibration& calibration)
    : files_(files), format_(format), cost_(cost, calibration) {
  if (files.decode == FilesDecode::kJpeg) jpeg_ = std::make_unique<const JpegSamples>(files, cost.seed);
}

UniqueFd ShardFilesDataset::OpenShardFile(const std::string& path, int64_t* file_bytes) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) throw DatasetNotFound(path + ": cannot open: " + ErrnoText(errno));
  struct stat info {};
  if (::fstat(fd.get(), &info) != 0 || !S_ISREG(info.st_mode)) throw DatasetNotFound(path + ": not a regular file");
  *file_bytes = info.st_size;
  return fd;
}

void ShardFilesDataset::AddShard(const std::string& path, int64_t samples) {
  paths_.push_back(path);
  firsts_.push_back(sample_count_);
  sample_count_ += samples;
}

int64_t ShardFilesDataset::num_shards() const {
  return format_.access == ShardAccess::kStream ? static_cast<int64_t>(paths_.size()) : 0;
}

int64_t ShardFilesDataset::shard_samples(int64_t shard) const {
  const auto s = static_cast<size_t>(shard);
  return (s + 1 < firsts_.size() ? firsts_[s + 1] : sample_count_) - firsts_[s];
}

std::unique_ptr<loader::ShardReader> ShardFilesDataset::OpenShard(int64_t shard) const {
  return ReadSamplesInOrder(*this, firsts_[static_cast<size_t>(shard)], shard_samples(shard));
}

void ShardFilesDataset::SetEpoch(int64_t epoch) const {
  if (jpeg_) jpeg_->SetEpoch(epoch);
}

loader::RepeatPreparation ShardFilesDataset::BeforeRepeat() const {
  if (files_.cache != CacheMode::kCold) return {};
  return EvictFromPageCache(paths_);
}

std::string ShardFilesDataset::AccessText() const {
  std::string text = std::string(", access ") + ShardAccessName(format_.access);
  if (format_.access == ShardAccess::kStream) {
    text += " (shuffle buffer " + std::to_string(format_.shuffle_buffer) + " samples per worker)";
  }
  return text + ", cache " + CacheModeName(files_.cache);
}

}  // namespace feedtune::workloads
