#include "tuner/measure/stage_dataset.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <new>
#include <system_error>

#include "workloads/format_io.h"

namespace feedtune::tuner {

Eviction EvictFiles(const std::vector<std::string>& paths) {
  Eviction e;
  for (const std::string& path : paths) {
    workloads::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    struct stat st {};
    if (!fd.valid() || ::fstat(fd.get(), &st) != 0) {
      ++e.failures;
      continue;
    }
    // Dirty pages are not dropped by DONTNEED: write them back first.
    if (::fdatasync(fd.get()) != 0 || ::posix_fadvise(fd.get(), 0, 0, POSIX_FADV_DONTNEED) != 0) ++e.failures;
    e.bytes += st.st_size;
    e.resident_bytes += workloads::ResidentBytes(fd.get(), st.st_size);
  }
  return e;
}

double WarmFiles(const std::vector<std::string>& paths) {
  std::vector<std::byte> buffer(1 << 20);
  int64_t total = 0, resident = 0;
  for (const std::string& path : paths) {
    workloads::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    struct stat st {};
    if (!fd.valid() || ::fstat(fd.get(), &st) != 0) continue;
    uint64_t offset = 0;
    int error = 0;
    while (true) {
      const size_t got = workloads::PreadFull(fd.get(), buffer, offset, &error);
      offset += got;
      if (got < buffer.size() || error != 0) break;
    }
    total += st.st_size;
    resident += workloads::ResidentBytes(fd.get(), st.st_size);
  }
  return total > 0 ? static_cast<double>(resident) / static_cast<double>(total) : 1.0;
}

std::vector<std::string> DataFiles(const std::string& path) {
  namespace fs = std::filesystem;
  std::vector<std::string> files;
  std::error_code ec;
  if (fs::is_regular_file(path, ec)) return {path};
  for (fs::recursive_directory_iterator it(path, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->is_regular_file(ec)) files.push_back(it->path().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

StageDataset::StageDataset(std::shared_ptr<const loader::Dataset> inner) : inner_(std::move(inner)) {
  void* page = ::mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (page == MAP_FAILED) {
    throw std::system_error(errno, std::generic_category(), "stage switch: mmap of one shared page");
  }
  shared_ = new (page) Shared{};
  shared_->mode.store(static_cast<int>(ReadMode::kReal));
  shared_->transport_bytes.store(0);
}

StageDataset::~StageDataset() {
  shared_->~Shared();
  ::munmap(shared_, sizeof(Shared));
}

int64_t StageDataset::Read(int64_t index, std::span<std::byte> out) const {
  if (shared_->mode.load(std::memory_order_relaxed) == static_cast<int>(ReadMode::kTransport)) {
    const size_t bytes = std::min(out.size(), static_cast<size_t>(shared_->transport_bytes.load(
                                                  std::memory_order_relaxed)));
    std::memset(out.data(), 0, bytes);  // the sample's pages are touched, as a real read touches them
    return static_cast<int64_t>(bytes);
  }
  return inner_->Read(index, out);
}

void StageDataset::ReadMany(std::span<const int64_t> indices, std::span<std::byte> slot, int64_t stride,
                            int concurrency, std::span<int64_t> bytes) const {
  if (shared_->mode.load(std::memory_order_relaxed) != static_cast<int>(ReadMode::kTransport)) {
    inner_->ReadMany(indices, slot, stride, concurrency, bytes);
    return;
  }
  for (size_t i = 0; i < indices.size(); ++i) {
    bytes[i] = Read(indices[i], slot.subspan(i * static_cast<size_t>(stride), static_cast<size_t>(stride)));
  }
}

std::unique_ptr<loader::ShardReader> StageDataset::OpenShard(int64_t shard) const {
  if (shared_->mode.load(std::memory_order_relaxed) != static_cast<int>(ReadMode::kTransport)) {
    return inner_->OpenShard(shard);
  }
  class Zeros final : public loader::ShardReader {
   public:
    Zeros(int64_t samples, size_t bytes) : left_(samples), bytes_(bytes) {}
    bool Next(std::vector<std::byte>* sample, int64_t* index) override {
      if (left_ == 0) return false;
      sample->assign(bytes_, std::byte{0});
      *index = next_++;
      --left_;
      return true;
    }

   private:
    int64_t left_;
    size_t bytes_;
    int64_t next_ = 0;
  };
  return std::make_unique<Zeros>(inner_->shard_samples(shard),
                                 static_cast<size_t>(std::min(inner_->max_sample_bytes(),
                                                              shared_->transport_bytes.load(std::memory_order_relaxed))));
}

loader::RepeatPreparation StageDataset::BeforeRepeat() const {
  switch (policy_) {
    case CachePolicy::kAsConfigured:
      return inner_->BeforeRepeat();
    case CachePolicy::kKeepWarm:
      return {};
    case CachePolicy::kEvict:
      last_eviction_ = EvictFiles(files_);
      return {};
  }
  return {};
}

void StageDataset::SetReadMode(ReadMode mode, int64_t transport_bytes) {
  shared_->transport_bytes.store(transport_bytes);
  shared_->mode.store(static_cast<int>(mode));
}

void StageDataset::SetCachePolicy(CachePolicy policy, std::vector<std::string> files) {
  policy_ = policy;
  files_ = std::move(files);
}

Eviction StageDataset::last_eviction() const { return last_eviction_; }

}  // namespace feedtune::tuner
