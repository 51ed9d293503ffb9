#include "layout/convert.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <map>
#include <memory>
#include <random>
#include <span>

#include <nlohmann/json.hpp>

#include "layout/converted.h"
#include "layout/destination.h"
#include "layout/layout_kind.h"
#include "layout/source.h"
#include "workloads/cpu_work.h"
#include "workloads/crc32c.h"
#include "workloads/format_io.h"
#include "workloads/jpeg_image.h"
#include "workloads/remote_dataset.h"
#include "workloads/shard_format.h"
#include "workloads/tar_dataset.h"
#include "workloads/tar_format.h"

namespace feedtune::layout {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// The plan: the options and the source it was made for, and the order. What
// --resume compares: a resumed convert must write the same files.
json PlanOf(const SampleSource& source, const std::string& source_path, const ConvertOptions& o) {
  std::error_code ec;
  return json{{"format", "feedtune-convert-state"},
              {"version", 1},
              {"source", workloads::IsRemotePath(source_path) ? source_path
                                                              : fs::weakly_canonical(source_path, ec).string()},
              {"source_kind", source.kind()},
              {"source_samples", source.size()},
              {"layout", NameOf(o.layout)},
              {"shard_bytes", o.layout == LayoutKind::kTar ? json(o.shard_bytes) : json(nullptr)},
              {"chunk_samples", o.layout == LayoutKind::kHdf5 ? json(o.chunk_samples) : json(nullptr)},
              {"gzip_level", o.layout == LayoutKind::kHdf5 ? json(o.gzip_level) : json(nullptr)},
              {"shuffle_seed", o.shuffle_seed ? json(*o.shuffle_seed) : json(nullptr)},
              {"pixels", o.pixels},
              {"skip_bad", o.skip_bad}};
}

// Source indices in DST's write order: as the source, or shuffled by a
// Fisher-Yates pass over mt19937_64 (whose output the standard fixes, unlike
// std::shuffle's), so a resume on another build plans the same shards.
std::vector<int64_t> WriteOrder(int64_t samples, const std::optional<uint64_t>& seed) {
  std::vector<int64_t> order(static_cast<size_t>(samples));
  for (int64_t i = 0; i < samples; ++i) order[static_cast<size_t>(i)] = i;
  if (seed) {
    std::mt19937_64 rng(*seed);
    for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[rng() % i]);
  }
  return order;
}

int64_t SamplesPerShard(const SampleSource& source, int64_t shard_bytes) {
  const double mean = std::max(1.0, static_cast<double>(source.total_bytes()) / static_cast<double>(source.size()));
  return std::clamp<int64_t>(static_cast<int64_t>(static_cast<double>(shard_bytes) / (mean + 1024.0)), 1,
                             source.size());
}

std::string KeyOf(int64_t source_index) {
  char key[32];
  std::snprintf(key, sizeof key, "%09lld", static_cast<long long>(source_index));
  return key;
}

// Reads sample `index` and, for JPEG samples, decodes it small (DCT scaling
// makes that cheap): what the job will do with it. Returns the error, or empty.
std::string ReadChecked(const SampleSource& source, int64_t index, std::vector<std::byte>* bytes) {
  try {
    source.Read(index, bytes);
  } catch (const std::exception& e) {
    return e.what();
  }
  if (source.payload_extension() == "jpg") {
    workloads::JpegDecodeOptions options;
    options.crop = workloads::CropMode::kCenter;
    options.resize = 16;
    std::vector<std::byte> pixels(16 * 16 * 3);
    try {
      workloads::DecodeCropResize(*bytes, index, options, pixels);
    } catch (const std::exception& e) {
      return source.Name(index) + ": does not decode as a JPEG: " + e.what();
    }
  }
  return {};
}

// Samples a source is told of ahead of their reads (SampleSource::WillRead).
constexpr size_t kReadAhead = 64;

// One convert's state: the plan, the files, what was skipped so far.
class ConvertRun {
 public:
  ConvertRun(const SampleSource& source, const std::string& source_path, Destination& dst, const ConvertOptions& o,
             const std::function<void(const ConvertProgress&)>& progress, const std::atomic<bool>& stop)
      : source_(source), dest_(dst), dst_(dst.root()), o_(o), progress_(progress), stop_(stop),
        plan_(PlanOf(source, source_path, o)) {}

  ConvertResult Run() {
    Begin();
    const bool done = o_.layout == LayoutKind::kTar ? WriteShards() : WriteOneFile();
    result_.upload = dest_.figures();
    if (!done) {
      result_.interrupted = true;
      return result_;
    }
    Verify();
    result_.upload = dest_.figures();
    return result_;
  }

 private:
  // Creates DST and its state file, or (resume) reads the state back.
  void Begin() {
    if (o_.resume) {
      json state;
      try {
        state = json::parse(dest_.ReadSmall(kStateName).value_or(""));
      } catch (const std::exception& e) {
        throw ConvertUsageError("--resume: " + dest_.Name(kStateName) + " does not read (" + e.what() +
                                "); remove " + dst_ + " and convert again");
      }
      json saved = state;
      saved.erase("skipped");
      if (saved != plan_) {
        throw ConvertUsageError("--resume: " + dst_ + " holds a convert started as " + saved.dump() +
                                ", not as " + plan_.dump() +
                                "; resume with the same source and options, or remove it to start over");
      }
      for (const json& s : state.value("skipped", json::array())) {
        result_.skipped.push_back({s.at("source").get<int64_t>(), s.at("name"), s.at("error")});
      }
    } else {
      try {
        SaveState();
      } catch (const std::runtime_error& e) {
        throw ConvertUsageError(e.what());  // a folder that cannot be made, a prefix that cannot be written
      }
    }
    // A temporary file of an interrupted run is never whole: it is written again.
    dest_.DropPartials();
  }

  void SaveState() {
    json state = plan_;
    json skipped = json::array();
    for (const SkippedSample& s : result_.skipped) {
      skipped.push_back({{"source", s.source}, {"name", s.name}, {"error", s.error}});
    }
    state["skipped"] = skipped;
    dest_.WriteSmall(kStateName, state.dump(1));
  }

  // A sample that fails: the convert stops naming it, or (skip_bad) goes on.
  void Bad(int64_t index, const std::string& error) {
    if (!o_.skip_bad) {
      throw ConvertUsageError("sample " + std::to_string(index) + " (" + source_.Name(index) + "): " + error +
                              "\n  --skip-bad leaves such samples out and lists them; DST keeps the files "
                              "finished so far, and --resume goes on");
    }
    result_.skipped.push_back({index, source_.Name(index), error});
  }

  // Tells the source which samples come next, kReadAhead at a time from
  // position `at` of `order` (not past `end`): a remote source fetches each
  // window together. Called at every position; acts at a window's start.
  void ReadAhead(std::span<const int64_t> order, size_t at, size_t end, size_t window_start = 0) const {
    if ((at - window_start) % kReadAhead != 0) return;
    source_.WillRead(order.subspan(at, std::min(end, at + kReadAhead) - at));
  }

  void Report(const char* phase, int64_t done, int64_t total, int64_t bytes) {
    if (progress_) progress_(ConvertProgress{phase, done, total, bytes});
  }

  bool WriteShards() {
    const std::vector<int64_t> order = WriteOrder(source_.size(), o_.shuffle_seed);
    const int64_t per_shard = SamplesPerShard(source_, o_.shard_bytes);
    const int64_t shards = ShardCount(source_, o_.shard_bytes);
    files_.clear();
    int64_t done = 0, bytes = 0;
    std::vector<std::byte> sample, block;
    for (int64_t k = 0; k < shards; ++k) {
      const std::string file =
          fs::path(workloads::GenDataShardPath(".", static_cast<int>(k), static_cast<int>(shards), ".tar"))
              .filename()
              .string();
      files_.push_back(file);
      const int64_t first = k * per_shard;
      const int64_t last = std::min(source_.size(), first + per_shard);
      if (dest_.Exists(file)) {  // written whole by an earlier run
        ++result_.resumed_files;
        done += last - first;
        Report("write", done, source_.size(), bytes);
        continue;
      }
      const std::string partial = dest_.StagePath(file);
      workloads::UniqueFd fd(::open(partial.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
      if (!fd.valid()) throw std::runtime_error(partial + ": cannot create: " + workloads::ErrnoText(errno));
      const size_t skipped_before = result_.skipped.size();
      for (int64_t n = first; n < last; ++n) {
        if (stop_.load(std::memory_order_relaxed)) {
          fd = workloads::UniqueFd();
          ::unlink(partial.c_str());
          result_.skipped.resize(skipped_before);
          return false;
        }
        ReadAhead(order, static_cast<size_t>(n), static_cast<size_t>(last), static_cast<size_t>(first));
        const int64_t index = order[static_cast<size_t>(n)];
        const std::string error = ReadChecked(source_, index, &sample);
        if (!error.empty()) {
          try {
            Bad(index, error);
          } catch (...) {
            fd = workloads::UniqueFd();
            ::unlink(partial.c_str());
            throw;
          }
        } else {
          block.clear();
          workloads::AppendTarMember(KeyOf(index) + "." + source_.payload_extension(), sample, &block);
          if (source_.has_labels()) {
            const std::string cls = std::to_string(source_.label(index));
            workloads::AppendTarMember(KeyOf(index) + ".cls", std::as_bytes(std::span(cls)), &block);
          }
          workloads::WriteFull(fd.get(), partial, block);
          bytes += static_cast<int64_t>(sample.size());
        }
        Report("write", ++done, source_.size(), bytes);
      }
      block.clear();
      workloads::AppendTarEnd(&block);
      workloads::WriteFull(fd.get(), partial, block);
      if (::close(fd.Release()) != 0) {
        throw std::runtime_error(partial + ": close failed: " + workloads::ErrnoText(errno));
      }
      dest_.Commit(file);
      if (result_.skipped.size() != skipped_before) SaveState();
    }
    return true;
  }

  // hdf5, npy, lmdb: one file, written whole under its temporary name by its RowWriter.
  bool WriteOneFile() {
    const LayoutInfo& info = InfoOf(o_.layout);
    const std::string path = dest_.Name(info.file);  // a local folder (a store takes tar only)
    files_ = {info.file};
    std::error_code ec;
    std::vector<std::byte> sample;
    if (fs::exists(path, ec)) {
      ++result_.resumed_files;
      return true;
    }
    if (info.rows_of_one_size && source_.fixed_sample_bytes() == 0) {
      throw ConvertUsageError("the samples of the source differ in size, and --layout " + std::string(info.name) +
                              " stores rows of one size; use --layout tar or lmdb");
    }
    // The file's row count comes first: with skip_bad, the bad samples are
    // found by a pass of their own before it is made.
    if (o_.skip_bad) {
      result_.skipped.clear();
      int64_t bytes = 0;
      const std::vector<int64_t> all = WriteOrder(source_.size(), std::nullopt);
      for (int64_t i = 0; i < source_.size(); ++i) {
        if (stop_.load(std::memory_order_relaxed)) return false;
        ReadAhead(all, static_cast<size_t>(i), all.size());
        const std::string error = ReadChecked(source_, i, &sample);
        if (!error.empty()) Bad(i, error);
        bytes += static_cast<int64_t>(sample.size());
        Report("check", i + 1, source_.size(), bytes);
      }
      SaveState();
    }
    std::vector<bool> skip(static_cast<size_t>(source_.size()), false);
    for (const SkippedSample& s : result_.skipped) skip[static_cast<size_t>(s.source)] = true;
    std::vector<int64_t> kept;
    for (int64_t i = 0; i < source_.size(); ++i) {
      if (!skip[static_cast<size_t>(i)]) kept.push_back(i);
    }
    const int64_t rows = static_cast<int64_t>(kept.size());
    if (rows == 0) throw ConvertUsageError("every sample of the source was skipped as bad; nothing to write");
    const std::string partial = PartialName(path);
    fs::remove_all(partial, ec);
    // Varied sizes (lmdb only): the mean stands for them where a writer sizes by one.
    RowShape shape;
    shape.rows = rows;
    shape.row_bytes = source_.fixed_sample_bytes() > 0 ? source_.fixed_sample_bytes()
                                                       : std::max<int64_t>(1, source_.total_bytes() / source_.size());
    shape.chunk_rows = o_.chunk_samples;
    shape.gzip_level = o_.gzip_level;
    std::unique_ptr<RowWriter> writer = info.writer(partial, shape);
    const auto abandon = [&] {
      writer.reset();
      fs::remove_all(partial, ec);
    };
    std::vector<int64_t> labels;
    int64_t bytes = 0;
    for (int64_t i = 0; i < source_.size(); ++i) {
      if (stop_.load(std::memory_order_relaxed)) {
        abandon();
        return false;
      }
      if (skip[static_cast<size_t>(i)]) continue;
      ReadAhead(kept, labels.size(), kept.size());
      const std::string error = ReadChecked(source_, i, &sample);
      if (!error.empty()) {
        abandon();
        Bad(i, error);  // throws: skip_bad found every bad sample before
      }
      writer->Add(sample);
      labels.push_back(source_.label(i));
      bytes += static_cast<int64_t>(sample.size());
      Report("write", i + 1, source_.size(), bytes);
    }
    writer->Finish(std::move(labels));
    writer.reset();
    RenameDurably(partial, path);
    return true;
  }

  // The records of tar shard k (held at `path`), from its headers: which
  // source sample each holds (its key), where, and its label (.cls).
  std::vector<IndexRecord> ScanShard(size_t k, const std::string& path, int fd) const {
    struct stat st {};
    if (::fstat(fd, &st) != 0) throw std::runtime_error(path + ": cannot stat: " + workloads::ErrnoText(errno));
    std::vector<IndexRecord> records;
    for (const workloads::TarSample& s : workloads::GroupTarSamples(workloads::ScanTarFile(path, fd, st.st_size))) {
      IndexRecord r;
      r.file = static_cast<int64_t>(k);
      size_t used = 0;
      try {
        r.source = std::stoll(s.key, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used != s.key.size() || r.source < 0 || r.source >= source_.size()) {
        throw std::runtime_error("verification failed: " + dest_.Name(files_[k]) + " holds a sample '" + s.key +
                                 "' that is no sample of the source; remove " + dst_ + " and convert again");
      }
      for (const workloads::TarMember& m : s.fields) {
        std::string key, ext;
        workloads::SplitTarKey(m.name, &key, &ext);
        if (ext == "cls") {
          std::string text(m.size, '\0');
          int error = 0;
          workloads::PreadFull(fd, std::as_writable_bytes(std::span(text)), m.data_offset, &error);
          r.label = std::atoll(text.c_str());
        } else {
          r.offset = static_cast<int64_t>(m.data_offset);
          r.bytes = static_cast<int64_t>(m.size);
        }
      }
      records.push_back(r);
    }
    return records;
  }

  // Sample r.source as DST holds it (`ours`) against the source: bytes, CRC32C, label.
  void CheckSample(IndexRecord& r, const std::vector<std::byte>& ours, const std::string& where) {
    source_.Read(r.source, &theirs_);
    const uint32_t want = workloads::Crc32c(theirs_);
    const uint32_t got = workloads::Crc32c(ours);
    if (got != want || ours.size() != theirs_.size()) {
      throw std::runtime_error("verification failed: sample " + std::to_string(r.source) + " (" +
                               source_.Name(r.source) + "): " + where + " holds " + std::to_string(ours.size()) +
                               " bytes with CRC32C " + workloads::Hex32(got) + ", the source " +
                               std::to_string(theirs_.size()) + " bytes with " + workloads::Hex32(want) +
                               "; DST has no manifest: remove " + dst_ + " and convert again");
    }
    if (o_.layout == LayoutKind::kTar && r.label != source_.label(r.source)) {
      throw std::runtime_error("verification failed: sample " + std::to_string(r.source) + " (" +
                               source_.Name(r.source) + "): label " + std::to_string(r.label) + " in " + where +
                               ", " + std::to_string(source_.label(r.source)) + " in the source");
    }
    r.label = source_.label(r.source);
    r.bytes = static_cast<int64_t>(ours.size());
    r.crc32c = got;
  }

  // Every sample of DST read back (a store's shard by shard, each into
  // staging and gone when checked) against the source; then the counts:
  // every sample the source has, but the skipped, once.
  void Verify() {
    std::vector<bool> skip(static_cast<size_t>(source_.size()), false);
    for (const SkippedSample& s : result_.skipped) skip[static_cast<size_t>(s.source)] = true;
    const int64_t expected = source_.size() - static_cast<int64_t>(result_.skipped.size());
    std::vector<IndexRecord> records;
    std::vector<std::byte> ours;
    int64_t bytes = 0;
    if (o_.layout == LayoutKind::kTar) {
      std::map<int64_t, IndexRecord> found;
      for (size_t k = 0; k < files_.size(); ++k) {
        const std::string path = dest_.Fetch(files_[k]);
        const workloads::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
        if (!fd.valid()) throw std::runtime_error(path + ": cannot open: " + workloads::ErrnoText(errno));
        std::vector<IndexRecord> shard = ScanShard(k, path, fd.get());
        std::vector<int64_t> sources;
        for (const IndexRecord& r : shard) sources.push_back(r.source);
        for (size_t j = 0; j < shard.size(); ++j) {
          IndexRecord& r = shard[j];
          ReadAhead(sources, j, sources.size());
          if (found.count(r.source) > 0) {
            throw std::runtime_error("verification failed: sample " + std::to_string(r.source) + " (" +
                                     source_.Name(r.source) + ") is in DST twice (again in " +
                                     dest_.Name(files_[k]) + ")");
          }
          ours.resize(static_cast<size_t>(r.bytes));
          int error = 0;
          if (workloads::PreadFull(fd.get(), ours, static_cast<uint64_t>(r.offset), &error) != ours.size()) {
            throw std::runtime_error(dest_.Name(files_[k]) + ": short read at byte " + std::to_string(r.offset) +
                                     (error ? ": " + workloads::ErrnoText(error) : ""));
          }
          CheckSample(r, ours, dest_.Name(files_[k]) + " member " + KeyOf(r.source) + "." +
                                   source_.payload_extension());
          bytes += r.bytes;
          found.emplace(r.source, r);
          Report("verify", static_cast<int64_t>(found.size()), expected, bytes);
        }
        dest_.Release(files_[k]);
      }
      for (auto& [index, r] : found) records.push_back(r);
    } else {
      int64_t row = 0;
      for (int64_t i = 0; i < source_.size(); ++i) {
        if (!skip[static_cast<size_t>(i)]) records.push_back({i, 0, row++, 0, -1, 0});
      }
      const std::unique_ptr<loader::Dataset> reader = InfoOf(o_.layout).reader(dest_.Name(files_.front()));
      std::vector<int64_t> sources;
      for (const IndexRecord& r : records) sources.push_back(r.source);
      for (size_t j = 0; j < records.size(); ++j) {
        IndexRecord& r = records[j];
        ReadAhead(sources, j, sources.size());
        ours.resize(static_cast<size_t>(reader->max_sample_bytes()));
        ours.resize(static_cast<size_t>(reader->Read(r.offset, ours)));
        CheckSample(r, ours, dest_.Name(files_.front()) + " row " + std::to_string(r.offset));
        bytes += r.bytes;
        Report("verify", static_cast<int64_t>(j) + 1, expected, bytes);
      }
    }
    size_t at = 0;
    for (int64_t i = 0; i < source_.size(); ++i) {
      if (skip[static_cast<size_t>(i)]) continue;
      if (at >= records.size() || records[at].source != i) {
        throw std::runtime_error("verification failed: sample " + std::to_string(i) + " (" + source_.Name(i) +
                                 ") is missing from " + dst_ + " (it holds " + std::to_string(records.size()) +
                                 " samples; the source " + std::to_string(expected) + " to convert)");
      }
      ++at;
    }
    if (static_cast<int64_t>(records.size()) != expected) {
      throw std::runtime_error("verification failed: " + dst_ + " holds " + std::to_string(records.size()) +
                               " samples, the source " + std::to_string(expected));
    }
    Finish(records);
  }

  // The index, then the manifest (its presence says DST is whole), then the
  // state goes.
  void Finish(const std::vector<IndexRecord>& records) {
    dest_.WriteSmall(kIndexName, IndexBytes(records));
    json files = json::array();
    for (const std::string& f : files_) files.push_back(f);
    json skipped = json::array();
    for (const SkippedSample& s : result_.skipped) {
      skipped.push_back({{"source", s.source}, {"name", s.name}, {"error", s.error}});
    }
    result_.samples = static_cast<int64_t>(records.size());
    result_.files = static_cast<int64_t>(files_.size());
    int64_t bytes = 0;
    for (const std::string& f : files_) bytes += dest_.Bytes(f);
    result_.bytes_on_disk = bytes;
    json manifest{{"format", kManifestFormat},
                  {"version", kManifestVersion},
                  {"layout", NameOf(o_.layout)},
                  {"samples", result_.samples},
                  {"labels", source_.has_labels()},
                  {"payload", source_.payload_extension()},
                  {"files", files},
                  {"bytes_on_disk", bytes},
                  {"order", o_.shuffle_seed ? json{{"shuffle_seed", *o_.shuffle_seed}} : json("source")},
                  {"source", {{"path", plan_.at("source")}, {"kind", source_.kind()}, {"samples", source_.size()}}},
                  {"skipped", skipped},
                  {"index", {{"file", kIndexName}, {"header_bytes", 16}, {"record_bytes", 48},
                             {"fields", {"source:i8", "file:i8", "offset:i8", "bytes:i8", "label:i8", "crc32c:u4",
                                         "zero:u4"}}}}};
    if (o_.layout == LayoutKind::kHdf5) {
      manifest["hdf5"] = {{"dataset", "/images"}, {"labels", "/labels"}, {"chunk_samples", o_.chunk_samples},
                          {"compression", o_.gzip_level < 0 ? "none" : "gzip:" + std::to_string(o_.gzip_level)}};
    }
    if (InfoOf(o_.layout).rows_of_one_size) manifest["sample_bytes"] = source_.fixed_sample_bytes();
    dest_.WriteSmall(kManifestName, manifest.dump(1) + "\n");
    dest_.Remove(kStateName);
    dest_.Sync();
  }

  const SampleSource& source_;
  Destination& dest_;
  const std::string dst_;  // as the user wrote it, for messages
  const ConvertOptions o_;
  const std::function<void(const ConvertProgress&)>& progress_;
  const std::atomic<bool>& stop_;
  const json plan_;
  std::vector<std::string> files_;  // DST's data files, relative to it
  std::vector<std::byte> theirs_;   // the source's copy of the sample being checked
  ConvertResult result_;
};

}  // namespace

int64_t ShardCount(const SampleSource& source, int64_t shard_bytes) {
  const int64_t per_shard = SamplesPerShard(source, shard_bytes);
  return (source.size() + per_shard - 1) / per_shard;
}

double EstimateConvertBytes(const SampleSource& source, const ConvertOptions& options) {
  const auto n = static_cast<double>(source.size());
  double bytes = static_cast<double>(source.total_bytes()) + 48.0 * n + 4096.0;  // + the index and manifest
  switch (options.layout) {
    case LayoutKind::kTar: bytes += n * (512.0 + 256.0 + (source.has_labels() ? 1024.0 : 0.0)); break;
    case LayoutKind::kHdf5: bytes += n * 8.0 + 64.0 * 1024; break;  // labels, metadata
    case LayoutKind::kLmdb: bytes += n * (4096.0 / 2 + 64.0); break;  // overflow pages end half empty, on average
    case LayoutKind::kNpy: break;
  }
  return bytes;
}

std::unique_ptr<Destination> OpenDestination(const std::string& dst, const ConvertOptions& options) {
  if (!workloads::IsRemotePath(dst)) return LocalDestination(dst);
  if (options.layout != LayoutKind::kTar) {
    throw ConvertUsageError("DST " + dst + ": a store takes --layout tar (WebDataset shards, which training jobs "
                            "and sweeps read by ranges or stream); " + NameOf(options.layout) +
                            " is read from local paths only, so convert to a local folder");
  }
  try {
    return StoreDestination(dst, options.staging_dir.empty() ? DefaultStagingDir() : options.staging_dir,
                            options.part_bytes);
  } catch (const std::invalid_argument& e) {
    throw ConvertUsageError(e.what());
  }
}

void CheckDestination(const SampleSource& /*source*/, const std::string& source_path, Destination& dest,
                      const ConvertOptions& options) {
  const std::string& dst = dest.root();
  const char* what = dest.remote() ? "prefix" : "folder";
  if (!dest.remote()) {
    std::error_code ec;
    const fs::path src = fs::weakly_canonical(source_path, ec);
    const fs::path out = fs::weakly_canonical(dst, ec);
    const auto [s_end, o_it] = std::mismatch(src.begin(), src.end(), out.begin(), out.end());
    if (s_end == src.end()) {
      throw ConvertUsageError("DST " + dst + " is " +
                              (o_it == out.end() ? "SRC itself" : "inside SRC " + source_path) +
                              ": the converted files would change the source (which convert never writes); "
                              "choose a DST outside it");
    }
    if (!fs::exists(out, ec)) {
      if (options.resume) {
        throw ConvertUsageError("--resume: " + dst + " does not exist, so there is no convert to go on with; "
                                "leave out --resume to start one");
      }
      return;
    }
    if (!fs::is_directory(out, ec)) {
      throw ConvertUsageError("DST " + dst + " exists and is not a folder; convert writes a new or empty folder");
    }
  } else if (workloads::IsRemotePath(source_path) && source_path == dst) {
    throw ConvertUsageError("DST " + dst + " is SRC itself: convert never writes the source; choose another prefix");
  }
  const std::vector<std::string> files = dest.Files();
  const auto holds = [&files](const std::string& name) {
    return std::find(files.begin(), files.end(), name) != files.end();
  };
  if (holds(kManifestName)) {
    std::string held;
    try {
      const json m = json::parse(dest.ReadSmall(kManifestName).value_or(""));
      held = " (" + std::to_string(m.at("samples").get<int64_t>()) + " samples of " +
             m.at("source").at("path").get<std::string>() + ", layout " + m.at("layout").get<std::string>() + ")";
    } catch (const std::exception&) {
    }
    throw ConvertUsageError("DST " + dst + " already holds a converted dataset" + held +
                            "; remove it or choose another DST");
  }
  const bool interrupted = holds(kStateName);
  if (interrupted && !options.resume) {
    throw ConvertUsageError("DST " + dst + " holds an interrupted convert (" + kStateName +
                            "); add --resume to go on where it stopped, or remove it to start over");
  }
  if (!interrupted && options.resume) {
    throw ConvertUsageError("--resume: " + dst + " holds no interrupted convert (no " + std::string(kStateName) +
                            "); leave out --resume to convert into a new or empty " + what);
  }
  if (!interrupted && !files.empty()) {
    throw ConvertUsageError("DST " + dst + " holds other " + (dest.remote() ? "objects" : "files") + " (" +
                            files.front() + "...); convert writes into a new or empty " + what +
                            ": choose another DST");
  }
}

ConvertResult Convert(const SampleSource& source, const std::string& source_path, Destination& dst,
                      const ConvertOptions& options, const std::function<void(const ConvertProgress&)>& progress,
                      const std::atomic<bool>& stop) {
  if (options.shuffle_seed && options.layout != LayoutKind::kTar) {
    throw ConvertUsageError("--shuffle is for --layout tar (streaming readers read shards front to back); " +
                            std::string(NameOf(options.layout)) + " is read by index, in any order");
  }
  if (dst.remote() && options.layout != LayoutKind::kTar) {
    throw ConvertUsageError("DST " + dst.root() + ": a store takes --layout tar; " + NameOf(options.layout) +
                            " is read from local paths only");
  }
  std::unique_ptr<SampleSource> pixels;
  if (options.pixels) {
    try {
      pixels = DecodedPixelsOf(source);
    } catch (const std::invalid_argument& e) {
      throw ConvertUsageError(e.what());
    }
  }
  const SampleSource& samples = pixels ? *pixels : source;
  CheckDestination(samples, source_path, dst, options);
  ConvertRun run(samples, source_path, dst, options, progress, stop);
  return run.Run();
}

ConvertResult Convert(const SampleSource& source, const std::string& source_path, const std::string& dst,
                      const ConvertOptions& options, const std::function<void(const ConvertProgress&)>& progress,
                      const std::atomic<bool>& stop) {
  const std::unique_ptr<Destination> dest = OpenDestination(dst, options);
  return Convert(source, source_path, *dest, options, progress, stop);
}

}  // namespace feedtune::layout
