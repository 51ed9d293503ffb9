#include "workloads/remote_dataset.h"

#include <algorithm>
#include <cstdio>
#include <stdexcept>

#include "workloads/jpeg_image.h"
#include "workloads/shard_format.h"

namespace feedtune::workloads {
namespace {

std::string Megabytes(int64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f MB", static_cast<double>(bytes) / 1e6);
  return text;
}

}  // namespace

storage::Location RemoteLocationOf(WorkloadKind kind, const FilesOptions& files) {
  if (kind != WorkloadKind::kFiles && kind != WorkloadKind::kTar && kind != WorkloadKind::kNpy) {
    throw std::invalid_argument(files.path + ": kind " + WorkloadKindName(kind) +
                                " is read from local paths only (a FUSE mount of the bucket reads as one); from an "
                                "object store feedtune reads one object per sample (kind files), tar shards "
                                "(kind tar) or a .npy file's rows (kind npy)");
  }
  storage::Location location = storage::ParseLocation(files.path);
  if (kind == WorkloadKind::kNpy && location.is_s3() && (location.prefix.empty() || location.prefix.back() == '/')) {
    throw std::invalid_argument(files.path + ": kind npy reads one .npy object; name its key "
                                "(s3://bucket/path/data.npy), not a prefix");
  }
  if (kind == WorkloadKind::kFiles && !location.is_s3()) {
    throw std::invalid_argument(files.path +
                                ": one object per sample needs a listing, which a plain http(s) server does not "
                                "give; put the samples in an s3:// prefix, or name tar shards (kind: tar)");
  }
  if (kind == WorkloadKind::kFiles && files.layout != FilesLayout::kFiles) {
    throw std::invalid_argument(files.path + ": layout shards (an index.ftidx) is not read from an object store; "
                                             "use layout: files (one object per sample), or tar shards (kind: tar)");
  }
  if (!files.path_list.empty()) {
    throw std::invalid_argument("a list of remote paths is not read yet; name one s3:// prefix that holds the shards");
  }
  return location;
}

bool IsRemotePath(const std::string& path) { return storage::IsRemote(path); }

int64_t DecodeFetchedJpeg(const JpegSamples& decoder, std::span<const std::byte> jpeg, int64_t index,
                          const std::string& object, std::span<std::byte> out) {
  try {
    return decoder.Decode(jpeg, index, out);
  } catch (const JpegError& e) {
    throw DatasetCorrupt(object + " (sample " + std::to_string(index) + "): decode: jpeg: " + e.what());
  }
}

RemoteDataset::RemoteDataset(const FilesOptions& files, const SyntheticOptions& cost,
                             const CpuCalibration& calibration, const storage::Environment& env)
    : client_(RemoteLocationOf(WorkloadKind::kFiles, files), storage::ResolveAwsConfig(env)),
      cost_(cost, calibration),
      cold_(files.cache == CacheMode::kCold) {
  // Made first, as FilesDataset makes it: it checks resize, and maps the
  // page the epoch is shared in before any worker forks.
  if (files.decode == FilesDecode::kJpeg) jpeg_ = std::make_unique<const JpegSamples>(files, cost_.seed());
  for (storage::ObjectInfo& object : client_.Get().List(location().prefix)) {
    if (object.size == 0) continue;
    if (jpeg_ && !HasJpegExtension(object.key)) {
      ++skipped_objects_;
      continue;
    }
    objects_.push_back(std::move(object));
  }
  if (objects_.empty() && jpeg_) {
    throw DatasetNotFound(location().ToString() + ": no JPEG images under this prefix (decode: jpeg reads the "
                          "objects named *.jpg, *.jpeg or *.jpe; " + std::to_string(skipped_objects_) +
                          " other objects skipped; with " + client_.config().DescribeKeys() +
                          "); upload some (`feedtune gen-data --layout jpeg` writes them), or check the prefix");
  }
  if (objects_.empty()) {
    throw DatasetNotFound(location().ToString() + ": no objects under this prefix (with " +
                          client_.config().DescribeKeys() +
                          "); upload the samples there, one object each, or check the prefix");
  }
  for (const storage::ObjectInfo& object : objects_) {
    max_bytes_ = std::max(max_bytes_, object.size);
    total_bytes_ += object.size;
  }
}

void RemoteDataset::InitWorker(int /*worker_id*/) const {
  cost_.InitWorker();
  client_.Get();  // the worker's own connections, before its first batch
}

void RemoteDataset::SetEpoch(int64_t epoch) const {
  if (jpeg_) jpeg_->SetEpoch(epoch);
}

int64_t ReadOneThroughReadMany(const loader::Dataset& dataset, int64_t index, std::span<std::byte> out) {
  const int64_t indices[1] = {index};
  int64_t bytes = 0;
  dataset.ReadMany(indices, out, static_cast<int64_t>(out.size()), 1, std::span<int64_t>(&bytes, 1));
  return bytes;
}

int64_t RemoteDataset::Read(int64_t index, std::span<std::byte> out) const {
  return ReadOneThroughReadMany(*this, index, out);
}

void RemoteDataset::ReadMany(std::span<const int64_t> indices, std::span<std::byte> slot, int64_t stride,
                             int concurrency, std::span<int64_t> bytes) const {
  // Each object lands in its place in the slot; with decode: jpeg, in a
  // buffer of this thread's, to be decoded into the slot once they are in.
  thread_local std::vector<std::byte> fetched;
  std::vector<size_t> at(indices.size() + 1, 0);
  for (size_t i = 0; i < indices.size(); ++i) {
    const storage::ObjectInfo& object = objects_.at(static_cast<size_t>(indices[i]));
    at[i + 1] = jpeg_ ? at[i] + static_cast<size_t>(object.size) : (i + 1) * static_cast<size_t>(stride);
  }
  std::span<std::byte> landing = slot;
  if (jpeg_) {
    fetched.resize(at.back());
    landing = fetched;
  }
  std::vector<storage::GetRequest> requests;
  requests.reserve(indices.size());
  for (size_t i = 0; i < indices.size(); ++i) {
    cost_.BeforeRead(indices[i]);
    const storage::ObjectInfo& object = objects_[static_cast<size_t>(indices[i])];
    requests.push_back({object.key, std::nullopt, landing.subspan(at[i], static_cast<size_t>(object.size))});
  }
  const std::vector<int64_t> sizes = client_.Get().GetMany(requests, concurrency);
  for (size_t i = 0; i < indices.size(); ++i) {
    std::span<std::byte> sample = requests[i].out.first(static_cast<size_t>(sizes[i]));
    if (jpeg_) {
      const std::span<std::byte> out = slot.subspan(i * static_cast<size_t>(stride), static_cast<size_t>(stride));
      const std::string& key = objects_[static_cast<size_t>(indices[i])].key;
      sample = out.first(static_cast<size_t>(
          DecodeFetchedJpeg(*jpeg_, sample, indices[i], client_.Get().ObjectName(key), out)));
    }
    bytes[i] = static_cast<int64_t>(sample.size());
    cost_.AfterRead(indices[i], sample);
  }
}

loader::StoreReads StoreReadsOf(const storage::TallySnapshot& tally) {
  loader::StoreReads reads;
  reads.requests = tally.requests;
  reads.retries_slowdown = tally.retries_slowdown;
  reads.retries_server_error = tally.retries_server_error;
  reads.retries_connection = tally.retries_connection;
  reads.objects = tally.objects;
  reads.bytes = tally.bytes;
  reads.transfer_s = tally.transfer_s;
  reads.first_byte_counts.assign(tally.first_byte.begin(), tally.first_byte.end());
  reads.first_byte_low_s.resize(tally.first_byte.size());
  for (size_t i = 0; i < tally.first_byte.size(); ++i) reads.first_byte_low_s[i] = storage::FirstByteBucketLow(i);
  return reads;
}

std::optional<loader::StoreReads> RemoteDataset::ReadsFromStore() const {
  return StoreReadsOf(client_.tally().Snapshot());
}

loader::RepeatPreparation RemoteDataset::BeforeRepeat() const {
  if (!cold_) return {};
  return {storage::ColdCacheNote(location()), std::nullopt};
}

std::string RemoteDataset::Describe() const {
  std::string text = location().ToString() + ": " + std::to_string(objects_.size()) + " objects, " +
                     Megabytes(total_bytes_) + " (" + Megabytes(total_bytes_ / static_cast<int64_t>(objects_.size())) +
                     " each on average), one GET per sample (loader.fetch_concurrency in flight per worker)";
  if (jpeg_) {
    text += jpeg_->Describe() + " in the worker that fetched it";
    if (skipped_objects_ > 0) text += "; " + std::to_string(skipped_objects_) + " objects not named .jpg/.jpeg skipped";
  }
  return text + "; " + client_.DescribeAccess();
}

}  // namespace feedtune::workloads
