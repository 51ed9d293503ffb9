#include "workloads/remote_tar_dataset.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "workloads/format_io.h"
#include "workloads/remote_dataset.h"
#include "workloads/shard_format.h"
#include "workloads/tar_dataset.h"
#include "workloads/tar_format.h"

namespace feedtune::workloads {

WindowedObjectReader::WindowedObjectReader(storage::ObjectClient& client, std::string key, int64_t object_bytes,
                                           int64_t window)
    : client_(client),
      key_(std::move(key)),
      object_bytes_(static_cast<uint64_t>(object_bytes)),
      window_(static_cast<uint64_t>(std::max<int64_t>(window, 1))) {}

size_t WindowedObjectReader::Read(uint64_t offset, std::span<std::byte> out) {
  if (offset >= object_bytes_ || out.empty()) return 0;
  const uint64_t end = std::min<uint64_t>(object_bytes_, offset + out.size());
  if (offset < start_ || end > start_ + buffer_.size()) {
    const uint64_t length = std::min<uint64_t>(object_bytes_ - offset, std::max<uint64_t>(window_, out.size()));
    buffer_ = client_.Get(key_, storage::ByteRange{static_cast<int64_t>(offset), static_cast<int64_t>(length)});
    start_ = offset;
    ++requests_;
  }
  const uint64_t at = offset - start_;
  const size_t n = static_cast<size_t>(std::min<uint64_t>(end - offset, buffer_.size() > at ? buffer_.size() - at : 0));
  std::memcpy(out.data(), buffer_.data() + at, n);
  return n;
}

std::vector<RemoteTarDataset::Shard> ListRemoteTarShards(const storage::ProcessClient& client) {
  storage::ObjectClient& store = client.Get();
  const storage::Location& source = client.source();
  std::vector<RemoteTarDataset::Shard> shards;
  if (!source.is_s3()) {
    const storage::ObjectInfo info = store.Head("");
    shards.push_back({"", source.url, info.size});
    return shards;
  }
  for (const storage::ObjectInfo& object : store.List(source.prefix)) {
    const std::string& key = object.key;
    if (object.size > 0 && key.size() > 4 && key.compare(key.size() - 4, 4, ".tar") == 0) {
      shards.push_back({key, store.ObjectName(key), object.size});
    }
  }
  if (shards.empty()) {
    throw DatasetNotFound(source.ToString() + ": no *.tar objects under this prefix (with " +
                          client.config().DescribeKeys() +
                          "); upload the shards there (`feedtune gen-data --layout tar` writes them), or check the "
                          "prefix");
  }
  return shards;
}

void ScanRemoteTarShards(const storage::ProcessClient& client, std::vector<RemoteTarDataset::Shard>* shards,
                         const RemoteTarMemberFn& on_member) {
  std::atomic<size_t> next{0};
  std::exception_ptr failure;
  std::mutex failure_mutex;
  const auto scan = [&] {
    for (size_t s = next++; s < shards->size(); s = next++) {
      try {
        RemoteTarDataset::Shard& info = (*shards)[s];
        WindowedObjectReader reader(client.Get(), info.key, info.bytes, RemoteTarDataset::kScanWindow);
        TarScanner scanner([&reader](uint64_t offset, std::span<std::byte> out) { return reader.Read(offset, out); },
                           static_cast<uint64_t>(info.bytes), info.name);
        TarMember member;
        while (scanner.Next(&member)) on_member(s, member, reader);
        info.index_requests = reader.requests();
      } catch (...) {
        const std::lock_guard<std::mutex> lock(failure_mutex);
        if (!failure) failure = std::current_exception();
        next = shards->size();
      }
    }
  };
  std::vector<std::thread> threads;
  const size_t thread_count = std::min<size_t>(RemoteTarDataset::kScanThreads, shards->size());
  for (size_t t = 1; t < thread_count; ++t) threads.emplace_back(scan);
  scan();
  for (std::thread& thread : threads) thread.join();
  if (failure) std::rethrow_exception(failure);
}

RemoteTarDataset::RemoteTarDataset(const FilesOptions& files, const FormatOptions& format,
                                   const SyntheticOptions& cost, const CpuCalibration& calibration,
                                   const storage::Environment& env)
    : client_(RemoteLocationOf(WorkloadKind::kTar, files), storage::ResolveAwsConfig(env)),
      access_(format.access),
      shuffle_buffer_(format.shuffle_buffer),
      cost_(cost, calibration),
      cold_(files.cache == CacheMode::kCold) {
  // Made before the index, which finds each sample's JPEG member with it;
  // it checks resize, and maps the page the epoch is shared in before any
  // worker forks.
  if (files.decode == FilesDecode::kJpeg) jpeg_ = std::make_unique<const JpegSamples>(files, cost_.seed());
  shards_ = ListRemoteTarShards(client_);
  // The shards are indexed side by side, a client per thread; their samples
  // are numbered through the shards in order afterwards.
  std::vector<std::vector<TarMember>> members(shards_.size());
  ScanRemoteTarShards(client_, &shards_,
                      [&members](size_t shard, const TarMember& member, WindowedObjectReader&) {
                        members[shard].push_back(member);
                      });
  std::vector<std::vector<Sample>> per_shard(shards_.size());
  std::vector<std::vector<std::string>> shard_fields(shards_.size());
  for (size_t s = 0; s < shards_.size(); ++s) IndexShard(s, members[s], &per_shard[s], &shard_fields[s]);
  fields_ = shard_fields.front();
  for (size_t s = 0; s < shards_.size(); ++s) {
    shards_[s].first_sample = static_cast<int64_t>(samples_.size());
    shards_[s].samples = static_cast<int64_t>(per_shard[s].size());
    for (Sample& sample : per_shard[s]) {
      uint64_t bytes = 0;  // the fields' data; the headers between them stay in the span's buffer
      for (const Extent& field : sample.fields) bytes += field.bytes;
      max_bytes_ = std::max<int64_t>(max_bytes_, static_cast<int64_t>(bytes));
      samples_.push_back(std::move(sample));
    }
  }
}

void RemoteTarDataset::IndexShard(size_t shard, const std::vector<TarMember>& members, std::vector<Sample>* samples,
                                  std::vector<std::string>* fields) const {
  const Shard& info = shards_[shard];
  const std::vector<TarSample> grouped = GroupTarSamples(members);
  if (grouped.empty()) {
    throw DatasetCorrupt(info.name + ": no complete sample (" + std::to_string(members.size()) +
                         " regular members, none named KEY.EXT as WebDataset shards are)");
  }
  std::string key, ext;
  for (const TarMember& field : grouped.front().fields) {
    if (SplitTarKey(field.name, &key, &ext)) fields->push_back(ext);
  }
  samples->reserve(grouped.size());
  for (const TarSample& s : grouped) {
    Sample sample{static_cast<uint32_t>(shard), -1, {}};
    if (jpeg_) sample.jpeg_field = static_cast<int32_t>(JpegMemberOf(s, info.name));
    for (const TarMember& f : s.fields) sample.fields.push_back({f.data_offset, f.size});
    samples->push_back(std::move(sample));
  }
}

void RemoteTarDataset::InitWorker(int /*worker_id*/) const {
  cost_.InitWorker();
  client_.Get();  // the worker's own connections, before its first batch
}

void RemoteTarDataset::SetEpoch(int64_t epoch) const {
  if (jpeg_) jpeg_->SetEpoch(epoch);
}

std::optional<loader::StoreReads> RemoteTarDataset::ReadsFromStore() const {
  return StoreReadsOf(client_.tally().Snapshot());
}

loader::RepeatPreparation RemoteTarDataset::BeforeRepeat() const { return {cold_ ? storage::ColdCacheNote(client_.source()) : "", std::nullopt}; }

int64_t RemoteTarDataset::SampleFrom(int64_t index, std::span<const std::byte> span, std::span<std::byte> out) const {
  const Sample& sample = samples_[static_cast<size_t>(index)];
  if (jpeg_) return DecodeFetchedJpeg(*jpeg_, span, index, shards_[sample.shard].name, out);
  uint64_t at = 0;
  for (const Extent& field : sample.fields) {
    std::memcpy(out.data() + at, span.data() + (field.offset - sample.begin()), field.bytes);
    at += field.bytes;
  }
  return static_cast<int64_t>(at);
}

void RemoteTarDataset::ThrowCutShort(int64_t index, size_t got) const {
  const Sample& sample = samples_[static_cast<size_t>(index)];
  throw DatasetCorrupt(shards_[sample.shard].name + ": sample " + std::to_string(index) + ": bytes " +
                       std::to_string(sample.begin()) + " to " + std::to_string(sample.end()) + " came back " +
                       std::to_string(got) + " bytes long (the object changed since it was indexed)");
}

int64_t RemoteTarDataset::Read(int64_t index, std::span<std::byte> out) const {
  return ReadOneThroughReadMany(*this, index, out);
}

void RemoteTarDataset::ReadMany(std::span<const int64_t> indices, std::span<std::byte> slot, int64_t stride,
                                int concurrency, std::span<int64_t> bytes) const {
  // Each sample's span lands in one buffer; its fields are copied out, or its JPEG decoded, after.
  thread_local std::vector<std::byte> spans;
  std::vector<size_t> at(indices.size() + 1, 0);
  for (size_t i = 0; i < indices.size(); ++i) {
    if (indices[i] < 0 || indices[i] >= size()) {
      throw std::out_of_range("sample index " + std::to_string(indices[i]) + " outside [0, " +
                              std::to_string(size()) + ")");
    }
    const Sample& sample = samples_[static_cast<size_t>(indices[i])];
    at[i + 1] = at[i] + (sample.end() - sample.begin());
  }
  spans.resize(at.back());
  std::vector<storage::GetRequest> requests;
  requests.reserve(indices.size());
  for (size_t i = 0; i < indices.size(); ++i) {
    cost_.BeforeRead(indices[i]);
    const Sample& sample = samples_[static_cast<size_t>(indices[i])];
    requests.push_back({shards_[sample.shard].key,
                        storage::ByteRange{static_cast<int64_t>(sample.begin()),
                                           static_cast<int64_t>(sample.end() - sample.begin())},
                        std::span<std::byte>(spans).subspan(at[i], at[i + 1] - at[i])});
  }
  const std::vector<int64_t> got = client_.Get().GetMany(requests, concurrency);
  for (size_t i = 0; i < indices.size(); ++i) {
    if (static_cast<size_t>(got[i]) != at[i + 1] - at[i]) ThrowCutShort(indices[i], static_cast<size_t>(got[i]));
    const std::span<std::byte> out = slot.subspan(i * static_cast<size_t>(stride), static_cast<size_t>(stride));
    bytes[i] = SampleFrom(indices[i], requests[i].out, out);
    cost_.AfterRead(indices[i], out.first(static_cast<size_t>(bytes[i])));
  }
}

int64_t RemoteTarDataset::num_shards() const {
  return access_ == ShardAccess::kStream ? static_cast<int64_t>(shards_.size()) : 0;
}

int64_t RemoteTarDataset::shard_samples(int64_t shard) const { return shards_.at(static_cast<size_t>(shard)).samples; }

std::unique_ptr<loader::ShardReader> RemoteTarDataset::OpenShard(int64_t shard) const {
  // The shard in order through windows of kStreamWindow: one GET per window.
  class Reader final : public loader::ShardReader {
   public:
    Reader(const RemoteTarDataset& dataset, const Shard& shard)
        : dataset_(dataset),
          reader_(dataset.client_.Get(), shard.key, shard.bytes, kStreamWindow),
          next_(shard.first_sample),
          end_(shard.first_sample + shard.samples) {}
    bool Next(std::vector<std::byte>* sample, int64_t* index) override {
      if (next_ >= end_) return false;
      const Sample& s = dataset_.samples_[static_cast<size_t>(next_)];
      dataset_.cost_.BeforeRead(next_);
      // The span from the window, as ReadMany's GET would give it, then the
      // sample from it: its fields, or its JPEG decoded.
      span_.resize(s.end() - s.begin());
      const size_t got = reader_.Read(s.begin(), span_);
      if (got != span_.size()) dataset_.ThrowCutShort(next_, got);
      sample->resize(static_cast<size_t>(dataset_.max_sample_bytes()));
      sample->resize(static_cast<size_t>(dataset_.SampleFrom(next_, span_, *sample)));
      dataset_.cost_.AfterRead(next_, *sample);
      *index = next_++;
      return true;
    }

   private:
    const RemoteTarDataset& dataset_;
    WindowedObjectReader reader_;
    std::vector<std::byte> span_;  // the sample's bytes as fetched
    int64_t next_;
    const int64_t end_;
  };
  return std::make_unique<Reader>(*this, shards_.at(static_cast<size_t>(shard)));
}

std::string RemoteTarDataset::Describe() const {
  int64_t bytes = 0;
  int64_t index_requests = 0;
  for (const Shard& shard : shards_) {
    bytes += shard.bytes;
    index_requests += shard.index_requests;
  }
  std::string fields;
  for (const std::string& f : fields_) fields += (fields.empty() ? "" : ", ") + f;
  std::string text = client_.source().ToString() + ": " + std::to_string(shards_.size()) + " tar shard(s), " +
                     std::to_string(size()) + " samples of fields " + fields + ", " +
                     FormatMegabytes(static_cast<double>(bytes)) + ", indexed in " +
                     std::to_string(index_requests) + " ranged GETs of their headers";
  if (access_ == ShardAccess::kStream) {
    text += ", access stream (each shard in order, in ranged GETs of " + FormatMegabytes(kStreamWindow) +
            "; shuffle buffer " + std::to_string(shuffle_buffer_) + " samples per worker)";
  } else {
    text += ", access random (one ranged GET per sample, loader.fetch_concurrency in flight per worker)";
  }
  if (jpeg_) text += ", the JPEG member of each" + jpeg_->Describe() + " in the worker that fetched it";
  return text + ", cache " + CacheModeName(cold_ ? CacheMode::kCold : CacheMode::kWarm) + "; " +
         client_.DescribeAccess();
}

}  // namespace feedtune::workloads
