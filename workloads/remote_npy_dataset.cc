#include "workloads/remote_npy_dataset.h"

#include <stdexcept>
#include <vector>

#include "workloads/remote_dataset.h"
#include "workloads/format_io.h"

namespace feedtune::workloads {

RemoteNpyDataset::RemoteNpyDataset(const FilesOptions& files, const SyntheticOptions& cost,
                                   const CpuCalibration& calibration, const storage::Environment& env)
    : client_(RemoteLocationOf(WorkloadKind::kNpy, files), storage::ResolveAwsConfig(env)),
      key_(client_.source().is_s3() ? client_.source().prefix : std::string()),
      cost_(cost, calibration),
      cold_(files.cache == CacheMode::kCold) {
  storage::ObjectClient& store = client_.Get();
  const std::string name = client_.source().ToString();
  object_bytes_ = store.Head(key_).size;
  // The fixed part first (magic, version, the header's length), then the
  // header whole where it did not fit: one round trip for a usual header.
  constexpr int64_t kFirstRead = 4096;
  std::vector<std::byte> first = store.Get(key_, storage::ByteRange{0, kFirstRead});
  const int64_t header_bytes = NpyHeaderBytes(first, name);
  if (header_bytes > static_cast<int64_t>(first.size()) && header_bytes <= object_bytes_) {
    first = store.Get(key_, storage::ByteRange{0, header_bytes});
  }
  header_ = ParseNpyHeader(first, name);
  const int64_t data_bytes = header_.samples * header_.sample_bytes;
  if (object_bytes_ < header_.data_offset + data_bytes) {
    throw DatasetCorrupt(name + ": " + std::to_string(object_bytes_) + " bytes, short of the " +
                         std::to_string(header_.data_offset + data_bytes) + " its shape " + header_.ShapeText() +
                         " of " + header_.descr + " needs (the upload was cut short?)");
  }
  if (header_.samples == 0) throw DatasetCorrupt(name + ": shape " + header_.ShapeText() + " has no rows");
}

void RemoteNpyDataset::InitWorker(int /*worker_id*/) const {
  cost_.InitWorker();
  client_.Get();  // the worker's own connections, before its first batch
}

loader::RepeatPreparation RemoteNpyDataset::BeforeRepeat() const {
  return {cold_ ? storage::ColdCacheNote(client_.source()) : "", std::nullopt};
}

std::optional<loader::StoreReads> RemoteNpyDataset::ReadsFromStore() const {
  return StoreReadsOf(client_.tally().Snapshot());
}

int64_t RemoteNpyDataset::Read(int64_t index, std::span<std::byte> out) const {
  return ReadOneThroughReadMany(*this, index, out);
}

void RemoteNpyDataset::ReadMany(std::span<const int64_t> indices, std::span<std::byte> slot, int64_t stride,
                                int concurrency, std::span<int64_t> bytes) const {
  std::vector<storage::GetRequest> requests;
  requests.reserve(indices.size());
  for (size_t i = 0; i < indices.size(); ++i) {
    if (indices[i] < 0 || indices[i] >= size()) {
      throw std::out_of_range("sample index " + std::to_string(indices[i]) + " outside [0, " +
                              std::to_string(size()) + ")");
    }
    cost_.BeforeRead(indices[i]);
    const storage::ByteRange row{header_.data_offset + indices[i] * header_.sample_bytes, header_.sample_bytes};
    requests.push_back({key_, row, slot.subspan(i * static_cast<size_t>(stride), static_cast<size_t>(row.length))});
  }
  const std::vector<int64_t> sizes = client_.Get().GetMany(requests, concurrency);
  for (size_t i = 0; i < indices.size(); ++i) {
    if (sizes[i] != header_.sample_bytes) {
      throw DatasetCorrupt(client_.source().ToString() + ": row " + std::to_string(indices[i]) + " came back " +
                           std::to_string(sizes[i]) + " bytes long, not " + std::to_string(header_.sample_bytes) +
                           " (the object changed since it was opened)");
    }
    bytes[i] = sizes[i];
    cost_.AfterRead(indices[i], requests[i].out);
  }
}

std::string RemoteNpyDataset::Describe() const {
  std::vector<int64_t> row_shape(header_.shape.begin() + 1, header_.shape.end());
  NpyHeader row = header_;
  row.shape = row_shape;
  return client_.source().ToString() + ": " + std::to_string(header_.samples) + " rows of shape " +
         row.ShapeText() + " " + header_.descr + ", " + FormatMegabytes(static_cast<double>(object_bytes_)) +
         ", a ranged GET per row (loader.fetch_concurrency in flight per worker); " + client_.DescribeAccess();
}

}  // namespace feedtune::workloads
