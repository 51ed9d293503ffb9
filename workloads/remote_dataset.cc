#include "workloads/remote_dataset.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <stdexcept>
#include <thread>

#include "workloads/shard_format.h"

namespace feedtune::workloads {
namespace {

std::string Megabytes(int64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f MB", static_cast<double>(bytes) / 1e6);
  return text;
}

}  // namespace

storage::Location RemoteLocationOf(const FilesOptions& files) {
  storage::Location location = storage::ParseLocation(files.path);
  if (!location.is_s3()) {
    throw std::invalid_argument(files.path +
                                ": one object per sample needs a listing, which a plain http(s) server does not "
                                "give; put the samples in an s3:// prefix, or name tar shards (kind: tar)");
  }
  if (files.layout != FilesLayout::kFiles) {
    throw std::invalid_argument(files.path + ": layout shards (an index.ftidx) is not read from an object store; "
                                             "use layout: files (one object per sample)");
  }
  if (files.decode != FilesDecode::kNone) {
    throw std::invalid_argument(files.path + ": decode: jpeg is not read from an object store yet; "
                                             "measure the raw objects (decode: none) and give the decode's CPU "
                                             "as cpu_us_per_sample");
  }
  return location;
}

bool IsRemotePath(const std::string& path) { return storage::IsRemote(path); }

RemoteDataset::RemoteDataset(const FilesOptions& files, const SyntheticOptions& cost,
                             const CpuCalibration& calibration, const storage::Environment& env)
    : location_(RemoteLocationOf(files)),
      config_(storage::ResolveAwsConfig(env)),
      cost_(cost, calibration),
      cold_(files.cache == CacheMode::kCold) {
  storage::ObjectClient client(location_, config_);
  for (storage::ObjectInfo& object : client.List(location_.prefix)) {
    if (object.size > 0) objects_.push_back(std::move(object));
  }
  if (objects_.empty()) {
    throw DatasetNotFound(location_.ToString() + ": no objects under this prefix (with " + config_.DescribeKeys() +
                          "); upload the samples there, one object each, or check the prefix");
  }
  for (const storage::ObjectInfo& object : objects_) {
    max_bytes_ = std::max(max_bytes_, object.size);
    total_bytes_ += object.size;
  }
}

storage::ObjectClient& RemoteDataset::Client() const {
  // One per process and thread: a client's connections never cross a fork
  // (storage/object_client.h), and it is one thread's.
  struct Mine {
    const RemoteDataset* owner = nullptr;
    pid_t pid = 0;
    std::unique_ptr<storage::ObjectClient> client;
  };
  thread_local Mine mine;
  const pid_t pid = getpid();
  if (mine.owner != this || mine.pid != pid || !mine.client) {
    // The parent's client, in a forked child: destroying it closes nothing of the parent's.
    mine.client = std::make_unique<storage::ObjectClient>(location_, config_);
    mine.owner = this;
    mine.pid = pid;
  }
  return *mine.client;
}

void RemoteDataset::InitWorker(int /*worker_id*/) const {
  cost_.InitWorker();
  Client();  // the worker's own connections, before its first batch
}

int64_t RemoteDataset::Read(int64_t index, std::span<std::byte> out) const {
  const int64_t bytes[1] = {index};
  int64_t size = 0;
  ReadMany(bytes, out, static_cast<int64_t>(out.size()), 1, std::span<int64_t>(&size, 1));
  return size;
}

void RemoteDataset::ReadMany(std::span<const int64_t> indices, std::span<std::byte> slot, int64_t stride,
                             int concurrency, std::span<int64_t> bytes) const {
  std::vector<storage::GetRequest> requests;
  requests.reserve(indices.size());
  for (size_t i = 0; i < indices.size(); ++i) {
    cost_.BeforeRead(indices[i]);
    const storage::ObjectInfo& object = objects_.at(static_cast<size_t>(indices[i]));
    requests.push_back({object.key, std::nullopt,
                        slot.subspan(i * static_cast<size_t>(stride), static_cast<size_t>(object.size))});
  }
  const std::vector<int64_t> sizes = Client().GetMany(requests, concurrency);
  for (size_t i = 0; i < indices.size(); ++i) {
    bytes[i] = sizes[i];
    cost_.AfterRead(indices[i], requests[i].out.first(static_cast<size_t>(sizes[i])));
  }
}

std::string RemoteDataset::BeforeRepeat() const {
  if (!cold_) return "";
  return "cache cold: nothing of " + location_.ToString() +
         " is cached on this box (every read is a GET); the store's own cache is outside the sweep's control";
}

std::string RemoteDataset::Describe() const {
  return location_.ToString() + ": " + std::to_string(objects_.size()) + " objects, " + Megabytes(total_bytes_) +
         " (" + Megabytes(total_bytes_ / static_cast<int64_t>(objects_.size())) + " each on average), one GET per "
         "sample (loader.fetch_concurrency in flight per worker); " + config_.DescribeKeys() + ", region " +
         config_.region.value + (config_.endpoint_url ? ", endpoint " + config_.endpoint_url->value : "");
}

}  // namespace feedtune::workloads
