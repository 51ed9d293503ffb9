#include "workloads/format_inspect.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <numeric>
#include <optional>
#include <random>

#include "workloads/files_dataset.h"
#include "workloads/format_io.h"
#include "workloads/jpeg_image.h"
#include "workloads/npy_dataset.h"
#include "workloads/shard_format.h"
#include "workloads/tar_dataset.h"
#include "workloads/tfrecord_dataset.h"

namespace feedtune::workloads {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;
// A shuffled read that inflates more than this many times its sample is a trap.
constexpr int64_t kInflationWarnFactor = 16;

std::string Mb(double bytes) { return FormatMegabytes(bytes); }

std::string Us(double us) {
  char buf[32];
  std::snprintf(buf, sizeof buf, us >= 1000 ? "%.2f ms" : "%.1f us", us >= 1000 ? us / 1000 : us);
  return buf;
}

std::string Join(const std::vector<std::string>& items, const char* sep) {
  std::string out;
  for (const std::string& item : items) out += (out.empty() ? "" : sep) + item;
  return out;
}

std::string ShapeText(const std::vector<int64_t>& dims) {
  std::string out = "(";
  for (size_t i = 0; i < dims.size(); ++i) out += (i > 0 ? ", " : "") + std::to_string(dims[i]);
  return out + (dims.size() == 1 ? ",)" : ")");
}

using Format = DetectedFormat;

bool IsTfRecordName(const std::string& name) { return name.ends_with(".tfrecord") || name.ends_with(".tfrec"); }

// A directory of shards is told by its files' names.
std::optional<Format> ShardDirFormat(const std::string& path) {
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(path, error)) {
    const std::string name = entry.path().filename().string();
    if (IsTfRecordName(name)) return Format::kTfRecord;
    if (name.ends_with(".tar")) return Format::kTar;
  }
  return std::nullopt;
}

Format Detect(const std::string& path) {
  struct stat st {};
  const bool glob = path.find_first_of("*?[") != std::string::npos;
  if (glob && IsTfRecordName(path)) return Format::kTfRecord;
  if (glob && path.ends_with(".tar")) return Format::kTar;
  if (::stat(path.c_str(), &st) != 0) throw DatasetNotFound(path + ": cannot open: " + ErrnoText(errno));
  if (S_ISREG(st.st_mode) && IsTfRecordName(path)) return Format::kTfRecord;
  if (S_ISREG(st.st_mode) && path.ends_with(".tar")) return Format::kTar;
  if (S_ISDIR(st.st_mode)) {
    if (::access((path + "/data.mdb").c_str(), F_OK) == 0) return Format::kLmdb;
    if (const auto sharded = ShardDirFormat(path)) return *sharded;
    return Format::kJpegDir;  // FilesDataset says when there is no JPEG in it
  }
  char magic[8] = {};
  const UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  int error = 0;
  const size_t got = fd.valid() ? PreadFull(fd.get(), std::as_writable_bytes(std::span(magic)), 0, &error) : 0;
  if (got >= 6 && std::memcmp(magic, kNpyMagic, 6) == 0) return Format::kNpy;
  if (got == 8 && std::memcmp(magic, "\x89HDF\r\n\x1a\n", 8) == 0) return Format::kHdf5;
  if (path.size() >= 4 && path.compare(path.size() - 4, 4, ".mdb") == 0) return Format::kLmdb;
  if (path.size() >= 3 && (path.ends_with(".h5") || path.ends_with(".hdf5"))) return Format::kHdf5;  // a user block
  throw DatasetNotFound(path + ": not a format inspect knows (a .npy file, an HDF5 file, an LMDB environment, "
                        "TFRecord or tar shards, or a directory of JPEGs)");
}

// Reads up to `max` shuffled samples for up to `seconds`, one at a time.
// skip_corrupt (a folder of images, where one bad file is common): a sample
// that fails is counted in a warning and the measurement goes on.
void Measure(const loader::Dataset& dataset, const InspectOptions& options, InspectReport* report,
             bool skip_corrupt = false) {
  if (options.measure_seconds <= 0) return;
  std::vector<int64_t> order(static_cast<size_t>(dataset.size()));
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), std::mt19937_64(1));
  std::vector<std::byte> slot(static_cast<size_t>(dataset.max_sample_bytes()));
  std::vector<double> us;
  int64_t bytes = 0;
  const auto start = std::chrono::steady_clock::now();
  int64_t failed = 0;
  std::string first_failure;
  for (int64_t index : order) {
    const auto t0 = std::chrono::steady_clock::now();
    try {
      bytes += dataset.Read(index, slot);
    } catch (const DatasetCorrupt& e) {
      if (!skip_corrupt) throw;
      if (failed++ == 0) first_failure = e.what();
      if (failed >= options.max_measured_samples) break;
      continue;
    }
    const auto t1 = std::chrono::steady_clock::now();
    us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
    if (static_cast<int64_t>(us.size()) >= options.max_measured_samples ||
        std::chrono::duration<double>(t1 - start).count() >= options.measure_seconds) {
      break;
    }
  }
  if (failed > 0) {
    report->warnings.push_back(std::to_string(failed) + " of the samples measured failed (first: " + first_failure +
                               "): a trial fails on the first one it reads");
  }
  if (us.empty()) return;
  const double total_us = std::accumulate(us.begin(), us.end(), 0.0);
  std::sort(us.begin(), us.end());
  report->measured_samples = static_cast<int64_t>(us.size());
  report->read_us_median = us[us.size() / 2];
  report->read_us_p90 = us[std::min(us.size() - 1, us.size() * 9 / 10)];
  report->mb_per_s = total_us > 0 ? static_cast<double>(bytes) / total_us : 0;  // bytes/us = MB/s
}

// "min 12.0 KB, p50 98.1 KB, p90 ..., max ..." of sorted values.
template <typename T, typename F>
std::string QuantileText(const std::vector<T>& sorted, F format) {
  const auto at = [&](double q) { return sorted[std::min(sorted.size() - 1, static_cast<size_t>(q * static_cast<double>(sorted.size())))]; };
  return "min " + format(sorted.front()) + ", p10 " + format(at(0.1)) + ", p50 " + format(at(0.5)) + ", p90 " +
         format(at(0.9)) + ", max " + format(sorted.back());
}

template <typename T>
nlohmann::json QuantileJson(const std::vector<T>& sorted) {
  const auto at = [&](double q) { return sorted[std::min(sorted.size() - 1, static_cast<size_t>(q * static_cast<double>(sorted.size())))]; };
  return {{"min", sorted.front()}, {"p10", at(0.1)}, {"p50", at(0.5)}, {"p90", at(0.9)}, {"max", sorted.back()}};
}

std::string Kb(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f KB", static_cast<double>(bytes) / 1e3);
  return buf;
}

SyntheticOptions NoCost() {
  SyntheticOptions cost;
  cost.cpu_us_per_sample = 0;
  cost.jitter = 0;
  return cost;
}

}  // namespace

Hdf5ReadCost PredictHdf5ReadCost(const Hdf5DatasetInfo& info, int64_t cache_mb) {
  Hdf5ReadCost cost;
  cost.inflates = !info.filters.empty();
  const int64_t chunk = info.chunk_bytes();
  if (chunk <= 0) {  // contiguous: a read is the row
    cost.bytes_per_sample = info.row_bytes;
    return cost;
  }
  const int64_t cache = cache_mb * kMiB;
  if (chunk > cache) {
    cost.bytes_per_sample = cost.inflates ? chunk : info.row_bytes;
    return cost;
  }
  const int64_t rows = std::max<int64_t>(1, info.chunk_rows());
  const int64_t chunks = (info.rows() + rows - 1) / rows;
  cost.cache_hit_rate = std::min(1.0, static_cast<double>(cache / chunk) / static_cast<double>(std::max<int64_t>(1, chunks)));
  cost.bytes_per_sample = static_cast<int64_t>(std::llround(static_cast<double>(chunk) * (1 - cost.cache_hit_rate)));
  return cost;
}

std::vector<std::string> Hdf5Warnings(const Hdf5DatasetInfo& info, int64_t cache_mb) {
  std::vector<std::string> warnings;
  const Hdf5ReadCost cost = PredictHdf5ReadCost(info, cache_mb);
  if (cost.inflates && cost.bytes_per_sample > kInflationWarnFactor * info.row_bytes) {
    const int64_t rows = std::max<int64_t>(1, info.chunk_rows());
    const int64_t chunks = (info.rows() + rows - 1) / rows;
    const int64_t all_mb = (chunks * info.chunk_bytes() + kMiB - 1) / kMiB;
    warnings.push_back("dataset '" + info.name + "': each shuffled sample inflates a " +
                       Mb(static_cast<double>(info.chunk_bytes())) + " chunk (" + std::to_string(rows) +
                       " samples per chunk, " + Join(info.filters, ", ") + ") to use " +
                       Mb(static_cast<double>(info.row_bytes)) + ": rechunk to 1-16 samples per chunk, or raise "
                       "chunk_cache_mb to " + std::to_string(all_mb) + " (every chunk cached; that much memory in "
                       "each worker process)");
  }
  return warnings;
}

std::vector<std::string> LmdbWarnings(const LmdbInfo& info, bool readahead) {
  std::vector<std::string> warnings;
  if (info.network_fs && !readahead) {
    warnings.push_back(info.path + " is on a network file system (" + info.fs_type +
                       "): reads without readahead pay a round trip per page; try lmdb.readahead: true");
  }
  if (!info.network_fs && readahead) {
    const int64_t memory = static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGESIZE);
    if (info.file_bytes > memory) {
      warnings.push_back(info.path + " (" + Mb(static_cast<double>(info.file_bytes)) +
                         ") is larger than this machine's memory and local: readahead fills the page cache with "
                         "pages no sample needs; set lmdb.readahead: false");
    }
  }
  return warnings;
}

namespace {

// The facts of a report, each as a line of text and a JSON value (inspect --json).
class FactSheet {
 public:
  explicit FactSheet(InspectReport* report) : report_(report) {}
  void Add(const std::string& key, const std::string& text, nlohmann::json value) {
    report_->facts.emplace_back(key, text);
    json_[key] = std::move(value);
  }
  // A fact whose JSON value is not one line of text (HDF5's dataset list).
  void AddJson(const std::string& key, nlohmann::json value) { json_[key] = std::move(value); }
  const nlohmann::json& Json() const { return json_; }

 private:
  InspectReport* report_;
  nlohmann::json json_ = nlohmann::json::object();
};

void InspectNpy(const FilesOptions& files, const InspectOptions& options, FactSheet& fact, InspectReport* report) {
  report->format = "npy";
  const NpyDataset dataset(files, NoCost(), CpuCalibration{});
  const NpyHeader& h = dataset.header();
  fact.Add("version", std::to_string(h.major) + ".0", std::to_string(h.major) + ".0");
  fact.Add("shape", h.ShapeText(), h.shape);
  fact.Add("dtype", h.descr, h.descr);
  fact.Add("samples", std::to_string(h.samples), h.samples);
  fact.Add("sample_bytes", std::to_string(h.sample_bytes), h.sample_bytes);
  fact.Add("data_offset", std::to_string(h.data_offset), h.data_offset);
  fact.Add("file_bytes", Mb(static_cast<double>(dataset.file_bytes())), dataset.file_bytes());
  Measure(dataset, options, report);
}

void InspectHdf5(const FilesOptions& files, const InspectOptions& options, FactSheet& fact, InspectReport* report) {
  report->format = "hdf5";
  nlohmann::json list = nlohmann::json::array();
  for (const Hdf5DatasetInfo& info : Hdf5Dataset::ListDatasets(files.path)) {
    std::string text = ShapeText(info.dims) + " " + info.dtype;
    text += info.chunk.empty() ? ", contiguous" : ", chunks " + ShapeText(info.chunk) + " (" +
                                                     Mb(static_cast<double>(info.chunk_bytes())) + ")";
    text += info.filters.empty() ? ", no filters" : ", " + Join(info.filters, ", ");
    text += ", " + Mb(static_cast<double>(info.stored_bytes)) + " stored";
    report->facts.emplace_back("dataset " + info.name, text);
    list.push_back({{"name", info.name},
                    {"shape", info.dims},
                    {"dtype", info.dtype},
                    {"chunk", info.chunk},
                    {"chunk_bytes", info.chunk_bytes()},
                    {"filters", info.filters},
                    {"stored_bytes", info.stored_bytes},
                    {"row_bytes", info.row_bytes}});
  }
  fact.AddJson("datasets", list);
  FormatOptions format;
  format.dataset = options.dataset;
  format.labels = options.labels;
  format.hdf5_chunk_cache_mb = options.chunk_cache_mb;
  const Hdf5Dataset dataset(files, format, NoCost(), CpuCalibration{});
  const Hdf5ReadCost cost = PredictHdf5ReadCost(dataset.images(), options.chunk_cache_mb);
  fact.Add("samples", options.dataset + ": " + std::to_string(dataset.size()) + " of " +
                          std::to_string(dataset.images().row_bytes) + " bytes",
           dataset.size());
  fact.Add("sample_bytes", std::to_string(dataset.max_sample_bytes()), dataset.max_sample_bytes());
  fact.Add("chunk_cache_mb",
           std::to_string(options.chunk_cache_mb) + " MiB" +
               (options.chunk_cache_mb == kHdf5DefaultChunkCacheMb ? " (HDF5's default)" : ""),
           options.chunk_cache_mb);
  fact.Add(cost.inflates ? "inflated_bytes_per_sample" : "read_bytes_per_sample",
           Mb(static_cast<double>(cost.bytes_per_sample)) + " per shuffled sample (cache hit rate " +
               std::to_string(static_cast<int>(std::lround(cost.cache_hit_rate * 100))) + "%)",
           cost.bytes_per_sample);
  fact.Add("library", "libhdf5 " + Hdf5Dataset::LibraryVersion(), Hdf5Dataset::LibraryVersion());
  report->warnings = Hdf5Warnings(dataset.images(), options.chunk_cache_mb);
  Measure(dataset, options, report);
}

void InspectLmdb(const FilesOptions& files, const InspectOptions& options, FactSheet& fact, InspectReport* report) {
  report->format = "lmdb";
  FormatOptions format;
  format.lmdb_readahead = options.lmdb_readahead;
  const LmdbDataset dataset(files, format, NoCost(), CpuCalibration{});
  const LmdbInfo& info = dataset.info();
  const int64_t mean = info.total_value_bytes / std::max<int64_t>(1, info.entries);
  fact.Add("entries", std::to_string(info.entries), info.entries);
  fact.Add("value_bytes",
           std::to_string(info.min_value_bytes) + " to " + std::to_string(info.max_value_bytes) + ", mean " +
               std::to_string(mean),
           {{"min", info.min_value_bytes}, {"max", info.max_value_bytes}, {"mean", mean}});
  fact.Add("map_size", Mb(static_cast<double>(info.map_size)), info.map_size);
  fact.Add("file_bytes", Mb(static_cast<double>(info.file_bytes)), info.file_bytes);
  fact.Add("page_size", std::to_string(info.page_size), info.page_size);
  fact.Add("file_system", info.fs_type + (info.network_fs ? " (network)" : " (local)"),
           {{"type", info.fs_type}, {"network", info.network_fs}});
  fact.Add("keys", info.gen_data_keys ? "gen-data's (\"%09d\")" : "indexed by a cursor walk",
           info.gen_data_keys ? "gen-data" : "cursor-walk");
  report->warnings = LmdbWarnings(info, options.lmdb_readahead);
  Measure(dataset, options, report);
}

// What the headers of up to max_headers JPEG files, spread evenly, say.
struct JpegHeaderSample {
  int64_t headers = 0;  // read
  std::vector<int> widths, heights;  // sorted, of those that decode
  std::vector<int64_t> pixels;       // sorted
  int64_t scaled = 0;  // decoded with DCT scaling at the crop and resize
  int64_t bad = 0;     // do not decode
  std::string first_bad;
};

JpegHeaderSample SampleJpegHeaders(const FilesDataset& dataset, const InspectOptions& options) {
  JpegHeaderSample out;
  const int64_t count = dataset.size();
  out.headers = std::min(count, std::max<int64_t>(1, options.max_headers));
  for (int64_t k = 0; k < out.headers; ++k) {
    const int64_t i = k * count / out.headers;
    const std::string& file = dataset.files()[static_cast<size_t>(i)];
    const UniqueFd fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC));
    std::vector<std::byte> bytes(static_cast<size_t>(dataset.file_bytes(i)));
    int error = 0;
    const size_t got = fd.valid() ? PreadFull(fd.get(), bytes, 0, &error) : 0;
    try {
      const JpegHeader h = ReadJpegHeader(std::span(bytes).first(got));
      out.widths.push_back(h.width);
      out.heights.push_back(h.height);
      out.pixels.push_back(int64_t{h.width} * h.height);
      const CropWindow crop = CropWindowFor(options.crop, h.width, h.height, 0, 0, i);
      out.scaled += !(ChooseScale(crop.width, crop.height, static_cast<int>(options.resize)) == JpegScale{1, 1});
    } catch (const JpegError& e) {
      if (out.bad++ == 0) out.first_bad = file + ": " + e.what();
    }
  }
  std::sort(out.widths.begin(), out.widths.end());
  std::sort(out.heights.begin(), out.heights.end());
  std::sort(out.pixels.begin(), out.pixels.end());
  return out;
}

void InspectJpegFolder(FilesOptions files, const InspectOptions& options, FactSheet& fact, InspectReport* report) {
  report->format = "jpeg";
  files.layout = FilesLayout::kFiles;
  files.decode = FilesDecode::kJpeg;
  files.crop = options.crop;
  files.resize = options.resize;
  std::unique_ptr<FilesDataset> dataset;
  try {
    dataset = std::make_unique<FilesDataset>(files, NoCost(), CpuCalibration{});
  } catch (const DatasetNotFound& e) {
    throw DatasetNotFound(std::string(e.what()) + " (inspect reads .npy, HDF5, LMDB and folders of JPEGs)");
  }
  const int64_t count = dataset->size();
  const int64_t skipped = dataset->skipped_files();
  fact.Add("images",
           std::to_string(count) + (skipped > 0 ? " (" + std::to_string(skipped) + " other files skipped)" : ""),
           count);
  std::vector<int64_t> sizes;
  for (int64_t i = 0; i < count; ++i) sizes.push_back(dataset->file_bytes(i));
  std::sort(sizes.begin(), sizes.end());
  fact.Add("file_bytes", QuantileText(sizes, Kb) + "; " + Mb(static_cast<double>(dataset->total_bytes())) + " in all",
           QuantileJson(sizes));
  const JpegHeaderSample h = SampleJpegHeaders(*dataset, options);
  if (!h.widths.empty()) {
    const auto px = [](int v) { return std::to_string(v) + " px"; };
    fact.Add("width", QuantileText(h.widths, px), QuantileJson(h.widths));
    fact.Add("height", QuantileText(h.heights, px), QuantileJson(h.heights));
    const auto mp = [](int64_t v) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.2f MP", static_cast<double>(v) / 1e6);
      return std::string(buf);
    };
    fact.Add("pixels", QuantileText(h.pixels, mp), QuantileJson(h.pixels));
  }
  fact.Add("headers_read", std::to_string(h.headers) + " of " + std::to_string(count) + " images", h.headers);
  const std::string side = std::to_string(options.resize);
  fact.Add("decode", std::string("crop ") + CropModeName(options.crop) + ", resize " + side + "x" + side + ": " +
                         std::to_string(h.scaled) + " of " + std::to_string(h.widths.size()) +
                         " decoded with DCT scaling (the crop is at least twice the target)",
           {{"crop", CropModeName(options.crop)},
            {"resize", options.resize},
            {"dct_scaled", h.scaled},
            {"of", h.widths.size()}});
  if (h.bad > 0) {
    report->warnings.push_back(std::to_string(h.bad) + " of " + std::to_string(h.headers) +
                               " headers read do not decode (" + h.first_bad +
                               "): a trial fails on the first such sample; remove or re-encode them");
  }
  if (!h.pixels.empty()) {
    const int median_width = h.widths[h.widths.size() / 2];
    const int median_height = h.heights[h.heights.size() / 2];
    if (std::min(median_width, median_height) >= 4 * options.resize) {
      report->warnings.push_back(
          "the median image is " + std::to_string(median_width) + " x " + std::to_string(median_height) +
          " for a " + side + " px sample: decoding reads far more pixels than training uses; resize the data "
          "set once, offline, to a short side near " + std::to_string(options.resize * 8 / 7) + "-" +
          std::to_string(options.resize * 3 / 2) + " px");
    }
  }
  report->measured_what = "read + decode";
  Measure(*dataset, options, report, /*skip_corrupt=*/true);
}

// What the shards of a tfrecord or tar dataset hold: per-shard samples and
// bytes, per-sample bytes, and the streaming trap.
template <typename ShardedDataset>
void AddShardFacts(const ShardedDataset& dataset, const InspectOptions& options, FactSheet& fact,
                   InspectReport* report) {
  std::vector<int64_t> per_shard, shard_bytes, sample_bytes;
  for (const auto& shard : dataset.shards()) {
    per_shard.push_back(shard.records_or_samples());
    shard_bytes.push_back(shard.file_bytes);
  }
  for (int64_t i = 0; i < dataset.size(); ++i) sample_bytes.push_back(dataset.stored_bytes(i));
  std::sort(per_shard.begin(), per_shard.end());
  std::sort(shard_bytes.begin(), shard_bytes.end());
  std::sort(sample_bytes.begin(), sample_bytes.end());
  const auto count = [](int64_t v) { return std::to_string(v); };
  fact.Add("shards", std::to_string(per_shard.size()), static_cast<int64_t>(per_shard.size()));
  fact.Add("samples", std::to_string(dataset.size()), dataset.size());
  fact.Add("samples_per_shard", QuantileText(per_shard, count), QuantileJson(per_shard));
  fact.Add("sample_bytes", QuantileText(sample_bytes, Kb), QuantileJson(sample_bytes));
  fact.Add("shard_bytes", QuantileText(shard_bytes, Mb), QuantileJson(shard_bytes));
  if (const std::string w = FewShardsWarning(static_cast<int64_t>(per_shard.size()), 1, options.usable_cpus);
      !w.empty()) {
    report->warnings.push_back(w);
  }
}

void InspectTfRecord(FilesOptions files, const InspectOptions& options, FactSheet& fact, InspectReport* report) {
  report->format = "tfrecord";
  const TfRecordDataset dataset(files, FormatOptions{}, NoCost(), CpuCalibration{});
  AddShardFacts(dataset, options, fact, report);
  std::map<std::string, int64_t> statuses;
  for (const auto& shard : dataset.shards()) ++statuses[shard.index_status];
  std::string text;
  nlohmann::json json = nlohmann::json::object();
  for (const auto& [status, n] : statuses) {
    text += (text.empty() ? "" : "; ") + std::to_string(n) + " " + status;
    json[status] = n;
  }
  fact.Add("index", text + " (DALI's tfrecord2idx format)", json);
  Measure(dataset, options, report);
}

void InspectTar(FilesOptions files, const InspectOptions& options, FactSheet& fact, InspectReport* report) {
  report->format = "tar";
  const TarDataset dataset(files, FormatOptions{}, NoCost(), CpuCalibration{});
  AddShardFacts(dataset, options, fact, report);
  std::string fields;
  for (const auto& f : dataset.shards().front().fields) fields += (fields.empty() ? "" : ", ") + f;
  fact.Add("fields", fields + " (the first sample's, WebDataset keys)", dataset.shards().front().fields);
  Measure(dataset, options, report);
}

}  // namespace

std::string FewShardsWarning(int64_t shards, int ranks, int usable_cpus) {
  const int64_t readers = static_cast<int64_t>(std::max(ranks, 1)) * std::max(usable_cpus, 1);
  if (shards >= readers) return {};
  return std::to_string(shards) + " shard(s) for " + (ranks > 1 ? std::to_string(ranks) + " ranks x " : "") +
         std::to_string(usable_cpus) + " usable CPUs: streamed (access: stream), each worker reads whole shards, "
         "so at most " + std::to_string(std::max<int64_t>(1, shards / std::max(ranks, 1))) +
         " worker(s) per rank have data and the rest sit idle; reshard into at least " + std::to_string(readers) +
         " shards, or read it map-style (access: random)";
}

DetectedFormat DetectFormat(const std::string& path) { return Detect(path); }

InspectReport Inspect(const std::string& path, const InspectOptions& options) {
  InspectReport report;
  report.path = path;
  FactSheet facts(&report);
  FilesOptions files;
  files.path = path;
  switch (Detect(path)) {
    case Format::kNpy:
      InspectNpy(files, options, facts, &report);
      break;
    case Format::kHdf5:
      InspectHdf5(files, options, facts, &report);
      break;
    case Format::kLmdb:
      InspectLmdb(files, options, facts, &report);
      break;
    case Format::kJpegDir:
      InspectJpegFolder(files, options, facts, &report);
      break;
    case Format::kTfRecord:
      InspectTfRecord(files, options, facts, &report);
      break;
    case Format::kTar:
      InspectTar(files, options, facts, &report);
      break;
  }
  report.json_facts = facts.Json();
  return report;
}

std::string InspectReport::ToText() const {
  std::string out = path + ": " + format + "\n";
  size_t width = 0;
  for (const auto& [key, text] : facts) width = std::max(width, key.size());
  for (const auto& [key, text] : facts) out += "  " + key + std::string(width - key.size() + 2, ' ') + text + "\n";
  for (const std::string& w : warnings) out += "warning: " + w + "\n";
  if (measured_samples > 0) {
    char line[256];
    std::snprintf(line, sizeof line, "%s, one thread, shuffled: %s per sample (median; p90 %s) over %lld samples, %.1f MB/s\n",
                  measured_what.c_str(), Us(read_us_median).c_str(), Us(read_us_p90).c_str(),
                  static_cast<long long>(measured_samples), mb_per_s);
    out += line;
  }
  return out;
}

std::string InspectReport::ToJson() const {
  nlohmann::json out = {{"path", path}, {"format", format}, {"facts", json_facts},
                        {"warnings", warnings}};
  if (measured_samples > 0) {
    out["measurement"] = {{"what", measured_what},
                          {"samples", measured_samples},
                          {"read_us_median", read_us_median},
                          {"read_us_p90", read_us_p90},
                          {"mb_per_s", mb_per_s}};
  } else {
    out["measurement"] = nullptr;
  }
  return out.dump(2);
}

}  // namespace feedtune::workloads
