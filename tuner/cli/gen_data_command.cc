// `feedtune gen-data`: writes a dataset for `workload.kind: files` (shards or
// one file per sample, or JPEG images for decode: jpeg) or for the format
// kinds (npy, hdf5, lmdb, tfrecord and tar; the last two with JPEG samples
// too, --jpeg). Sample i holds the synthetic content of (seed, i), so reads
// can be checked byte for byte (JPEG: image i is the picture of (seed, i),
// workloads/jpeg_image.h).
#include <fcntl.h>
#include <unistd.h>

#include <filesystem>
#include <memory>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <optional>
#include <utility>
#include <vector>

#include "tuner/cli/cli_util.h"
#include "workloads/format_io.h"
#include "workloads/hdf5_dataset.h"
#include "workloads/jpeg_image.h"
#include "workloads/lmdb_dataset.h"
#include "workloads/npy_format.h"
#include "workloads/shard_format.h"
#include "workloads/synthetic_dataset.h"
#include "workloads/tar_dataset.h"
#include "workloads/tfrecord_dataset.h"

namespace feedtune::cli {
namespace {

constexpr const char* kGenDataUsage = R"(Usage: feedtune gen-data --out PATH --samples N --sample-bytes B [options]
       feedtune gen-data --out DIR --layout jpeg --samples N [--image-size WxH] [--quality Q]
       feedtune gen-data --out DIR --layout tfrecord|tar --jpeg --samples N [--image-size WxH] [--quality Q]

Writes a dataset to PATH (which must not exist; a directory may exist empty),
with a size estimate first (refused when the file system lacks the space) and
progress on stderr:
  --layout shards   workload.kind files: packed record files (shard-NNNNN.ftrec)
                    and an index (index.ftidx): a header with magic and version,
                    and per record its length and CRC32C, checked on every read
  --layout files    workload.kind files: one file per sample in a directory tree
                    (NNNNN/NNNNNNNNN.bin, 1000 per folder): the "many small JPEGs" case
  --layout npy      workload.kind npy: PATH is one NumPy .npy file of shape
                    (N, B), dtype uint8
  --layout hdf5     workload.kind hdf5: PATH is one HDF5 file with /images of
                    shape (N, B), uint8, chunked --chunk-samples rows at a time
                    and compressed per --compression, and /labels (N,), int64,
                    label i = i % 1000
  --layout lmdb     workload.kind lmdb: PATH is an LMDB environment (a
                    directory): value i under key "%09d" of i, and a
                    "__feedtune__" entry with the count
  --layout jpeg     workload.kind files with decode: jpeg: one JPEG per sample
                    (NNNNN/NNNNNNNNN.jpg, 1000 per folder), --image-size pixels
                    (default 500x375, ImageNet's typical size) at --quality
                    (default 90), 4:2:0, with photo-like content (gradients,
                    soft-edged shapes, texture, noise): about 100 KB each at the
                    defaults; --sample-bytes does not apply
  --layout tfrecord workload.kind tfrecord: --shards files data-SSSSS-of-NNNNN.tfrecord
                    (samples dealt in runs), each record a tf.train.Example with
                    the sample under "data" (bytes) and its number under "index"
                    (int64), and each file's index beside it (.idx, DALI's format)
  --layout tar      workload.kind tar: --shards WebDataset tar files
                    data-SSSSS-of-NNNNN.tar; sample i is the members %09d.bin
                    (its bytes) and %09d.cls (i % 1000 in decimal)
  --jpeg            tfrecord, tar: each sample a JPEG image, as --layout jpeg
                    writes them (--image-size, --quality), for decode: jpeg:
                    the "data" feature of each record, the member %09d.jpg of
                    each tar sample (not .bin); --sample-bytes does not apply
Sample i holds deterministic bytes of (seed, i). The data is synced to disk at
the end, so `cache: cold` can evict it.

Examples:
  feedtune gen-data --out data/shards --layout shards --samples 20000 --sample-bytes 110000
  feedtune gen-data --out data/small-files --layout files --samples 50000 --sample-bytes 16384
  feedtune gen-data --out data/images.npy --layout npy --samples 20000 --sample-bytes 150528
  feedtune gen-data --out data/images.h5 --layout hdf5 --samples 20000 --sample-bytes 150528 --chunk-samples 1
  feedtune gen-data --out data/bad-chunks.h5 --layout hdf5 --samples 3000 --sample-bytes 150528 \
                    --chunk-samples 1000 --compression gzip:4
  feedtune gen-data --out data/images.lmdb --layout lmdb --samples 20000 --sample-bytes 110000
  feedtune gen-data --out data/tfrecords --layout tfrecord --shards 16 --samples 20000 --sample-bytes 110000
  feedtune gen-data --out data/tars --layout tar --shards 16 --samples 20000 --sample-bytes 110000
  feedtune gen-data --out data/jpeg --layout jpeg --samples 5000
  feedtune gen-data --out data/jpeg-tars --layout tar --jpeg --shards 16 --samples 20000)";

constexpr int64_t kMaxSamples = 100'000'000;
constexpr int64_t kMaxSampleBytes = int64_t{1} << 30;

class ProgressLine {
 public:
  ProgressLine(int64_t total, bool quiet) : total_(total), quiet_(quiet), tty_(isatty(STDERR_FILENO) == 1) {}

  void Update(int64_t done, int64_t bytes) {
    if (quiet_) return;
    const auto now = Clock::now();
    const int decile = static_cast<int>(done * 10 / total_);
    // On a terminal: one line redrawn a few times a second; in a log: every 10%.
    if (tty_ ? (now - last_ < std::chrono::milliseconds(200) && done != total_) : (decile == last_decile_)) return;
    last_ = now;
    last_decile_ = decile;
    const double elapsed = std::chrono::duration<double>(now - start_).count();
    std::fprintf(stderr, "%sgen-data: %lld/%lld samples (%3.0f%%), %.1f MB, %.1f MB/s%s", tty_ ? "\r" : "",
                 static_cast<long long>(done), static_cast<long long>(total_),
                 100.0 * static_cast<double>(done) / static_cast<double>(total_), static_cast<double>(bytes) / 1e6,
                 elapsed > 0 ? static_cast<double>(bytes) / 1e6 / elapsed : 0.0, tty_ ? "" : "\n");
    std::fflush(stderr);
  }

  void Finish() {
    if (!quiet_ && tty_) std::fputc('\n', stderr);
  }

 private:
  using Clock = std::chrono::steady_clock;
  const int64_t total_;
  const bool quiet_;
  const bool tty_;
  const Clock::time_point start_ = Clock::now();
  Clock::time_point last_{};
  int last_decile_ = -1;
};

// Where the samples go: one writer per layout behind one interface.
class SampleSink {
 public:
  virtual ~SampleSink() = default;
  virtual void Add(std::span<const std::byte> sample) = 0;
  virtual void Finish() = 0;
  virtual int64_t bytes_written() const = 0;
  // Said when the writing is interrupted: what is left at --out.
  virtual std::string IncompleteNote() const = 0;
};

class ShardsSink final : public SampleSink {
 public:
  ShardsSink(const std::string& out, workloads::FilesLayout layout, int64_t shard_bytes)
      : writer_(out, layout, shard_bytes), layout_(layout) {}
  void Add(std::span<const std::byte> sample) override { writer_.Add(sample); }
  void Finish() override { writer_.Finish(); }
  int64_t bytes_written() const override { return writer_.bytes_written(); }
  std::string IncompleteNote() const override {
    return layout_ == workloads::FilesLayout::kShards ? " (it has no index, so it will not be read)" : "";
  }

 private:
  workloads::DatasetWriter writer_;
  const workloads::FilesLayout layout_;
};

// tfrecord and tar: shard files, each written whole before the next starts.
template <typename Writer>
class ShardFilesSink final : public SampleSink {
 public:
  template <typename... Extra>
  ShardFilesSink(const std::string& out, int64_t samples, int shards, Extra&&... extra)
      : writer_(out, samples, shards, std::forward<Extra>(extra)...) {}
  void Add(std::span<const std::byte> sample) override { writer_.Add(sample); }
  void Finish() override { writer_.Finish(); }
  int64_t bytes_written() const override { return writer_.bytes_written(); }
  std::string IncompleteNote() const override { return " (its last shard is cut short, and fails to open)"; }

 private:
  Writer writer_;
};

class NpySink final : public SampleSink {
 public:
  NpySink(const std::string& out, int64_t samples, int64_t sample_bytes) : writer_(out, samples, sample_bytes) {}
  void Add(std::span<const std::byte> sample) override { writer_.Add(sample); }
  void Finish() override { writer_.Finish(); }
  int64_t bytes_written() const override { return writer_.bytes_written(); }
  std::string IncompleteNote() const override { return " (removed: a partial .npy would announce rows it lacks)"; }

 private:
  workloads::NpyWriter writer_;
};

class Hdf5Sink final : public SampleSink {
 public:
  Hdf5Sink(const std::string& out, int64_t samples, int64_t sample_bytes, int64_t chunk_samples, int gzip_level)
      : writer_(out, samples, sample_bytes, chunk_samples, gzip_level) {}
  void Add(std::span<const std::byte> sample) override { writer_.Add(sample); }
  void Finish() override { writer_.Finish(); }
  int64_t bytes_written() const override { return writer_.bytes_written(); }
  std::string IncompleteNote() const override { return " (removed)"; }

 private:
  workloads::Hdf5Writer writer_;
};

class LmdbSink final : public SampleSink {
 public:
  LmdbSink(const std::string& out, int64_t samples, int64_t sample_bytes) : writer_(out, samples, sample_bytes) {}
  void Add(std::span<const std::byte> sample) override { writer_.Add(sample); }
  void Finish() override { writer_.Finish(); }
  int64_t bytes_written() const override { return writer_.bytes_written(); }
  std::string IncompleteNote() const override {
    return " (it has no __feedtune__ entry, so a reader indexes what is there by a cursor walk)";
  }

 private:
  workloads::LmdbWriter writer_;
};

// JPEG files, one per sample, in the files layout's tree with a .jpg name.
class JpegSink final : public SampleSink {
 public:
  explicit JpegSink(std::string out) : dir_(std::move(out)) {
    namespace fs = std::filesystem;
    std::error_code ec;
    if (fs::exists(dir_, ec) && !(fs::is_directory(dir_, ec) && fs::is_empty(dir_, ec))) {
      throw std::runtime_error(dir_ + ": exists and is not an empty directory; choose another --out or remove it");
    }
    fs::create_directories(dir_, ec);
    if (ec) throw std::runtime_error(dir_ + ": cannot create the directory: " + ec.message());
  }
  void Add(std::span<const std::byte> jpeg) override {
    namespace fs = std::filesystem;
    std::string name = workloads::SampleFileName(count_);
    name.replace(name.size() - 4, 4, ".jpg");
    const fs::path path = fs::path(dir_) / name;
    if (count_ % 1000 == 0) {
      std::error_code ec;
      fs::create_directories(path.parent_path(), ec);
      if (ec) throw std::runtime_error(path.parent_path().string() + ": cannot create: " + ec.message());
    }
    workloads::UniqueFd file(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
    if (!file.valid()) throw std::runtime_error(path.string() + ": cannot create: " + workloads::ErrnoText(errno));
    workloads::WriteFull(file.get(), path.string(), jpeg);
    if (::close(file.Release()) != 0) {
      throw std::runtime_error(path.string() + ": close failed: " + workloads::ErrnoText(errno));
    }
    bytes_ += static_cast<int64_t>(jpeg.size());
    ++count_;
  }
  // Syncs the file system, so `cache: cold` can evict the files later.
  void Finish() override {
    const workloads::UniqueFd dir(::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (dir.valid() && ::syncfs(dir.get()) != 0) {
      throw std::runtime_error(dir_ + ": sync failed: " + workloads::ErrnoText(errno));
    }
  }
  int64_t bytes_written() const override { return bytes_; }
  std::string IncompleteNote() const override { return " (the images written so far are whole and readable)"; }

 private:
  const std::string dir_;
  int64_t count_ = 0;
  int64_t bytes_ = 0;
};

// "500x375" -> {500, 375}; nullopt when malformed.
std::optional<std::pair<int, int>> ParseImageSize(const std::string& text) {
  int w = 0, h = 0;
  char x = 0, rest = 0;
  if (std::sscanf(text.c_str(), "%d%c%d%c", &w, &x, &h, &rest) != 3 || x != 'x') return std::nullopt;
  if (w < 1 || h < 1 || w > 16384 || h > 16384) return std::nullopt;
  return std::pair{w, h};
}

std::string Mb(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MB", bytes / 1e6);
  return buf;
}

// What the command line asked for, once checked: the options as given, plus
// what follows from them (the image's size, the gzip level), so each step
// below takes one argument instead of a dozen.
struct GenDataRequest {
  std::string out, layout_name, compression, image_size;
  int64_t samples = 0, sample_bytes = 0, shard_bytes = 0, chunk_samples = 1;
  int shards = 8;  // tfrecord, tar
  int quality = 90;
  uint64_t seed = 0;
  bool quiet = false;
  bool jpeg = false;           // the samples are JPEG images: --layout jpeg, or --jpeg
  int width = 0, height = 0;  // jpeg only
  int gzip_level = -1;        // hdf5: -1 = no compression
};

void AddGenDataOptions(po::options_description& options, GenDataRequest& r) {
  options.add_options()("help,h", "this help")("out", po::value(&r.out)->required(), "the dataset's directory")(
      "layout", po::value(&r.layout_name)->default_value("shards"),
      "shards | files | npy | hdf5 | lmdb | jpeg | tfrecord | tar")(
      "samples", po::value(&r.samples)->required(), "how many samples")(
      "sample-bytes", po::value(&r.sample_bytes), "bytes per sample (all layouts but jpeg)")(
      "jpeg", "tfrecord, tar: each sample a JPEG image (for decode: jpeg)")(
      "image-size", po::value(&r.image_size)->default_value("500x375"), "jpeg: WxH pixels")(
      "quality", po::value(&r.quality)->default_value(90), "jpeg: quality, 1-100")(
      "shard-bytes", po::value(&r.shard_bytes)->default_value(int64_t{128} << 20),
      "shards: a new shard file starts past this size")(
      "shards", po::value(&r.shards)->default_value(8), "tfrecord, tar: how many shard files")(
      "chunk-samples", po::value(&r.chunk_samples)->default_value(1), "hdf5: samples per chunk")(
      "compression", po::value(&r.compression)->default_value("none"), "hdf5: none | gzip:N (N in 1-9)")(
      "seed", po::value(&r.seed)->default_value(0), "content seed (sample i holds the bytes of (seed, i))")(
      "quiet,q", "no progress");
}

// Checks the parsed options and fills in what follows from them. Returns the
// first problem (the order is the one users have always seen), or nullopt.
std::optional<std::string> CheckGenDataRequest(const po::variables_map& vm, GenDataRequest& r) {
  r.quiet = vm.count("quiet") > 0;
  const std::vector<std::string> layouts = {"shards", "files", "npy", "hdf5", "lmdb", "jpeg", "tfrecord", "tar"};
  if (std::find(layouts.begin(), layouts.end(), r.layout_name) == layouts.end()) {
    std::string known;
    for (const std::string& l : layouts) known += (known.empty() ? "" : " | ") + l;
    return "--layout: expected " + known + ", got '" + r.layout_name + "'";
  }
  if (r.samples < 1 || r.samples > kMaxSamples) {
    return "--samples: expected an integer in [1, " + std::to_string(kMaxSamples) + "], got " +
           std::to_string(r.samples);
  }
  const bool shard_files = r.layout_name == "tfrecord" || r.layout_name == "tar";
  if (vm.count("jpeg") > 0 && !shard_files) {
    return "--jpeg is for --layout tfrecord and tar" +
           std::string(r.layout_name == "files" ? " (for one JPEG file per sample, use --layout jpeg)" : "");
  }
  r.jpeg = r.layout_name == "jpeg" || vm.count("jpeg") > 0;
  if (r.jpeg && vm.count("sample-bytes") > 0) {
    return std::string("--sample-bytes is not for ") + (r.layout_name == "jpeg" ? "--layout jpeg" : "--jpeg") +
           ": an image's size follows from --image-size and --quality";
  }
  if (!r.jpeg && (!vm.at("image-size").defaulted() || !vm.at("quality").defaulted())) {
    return "--image-size and --quality are for --layout jpeg and --jpeg";
  }
  if (!r.jpeg && vm.count("sample-bytes") == 0) return "the option '--sample-bytes' is required but missing";
  const auto size = ParseImageSize(r.image_size);
  if (r.jpeg && !size) {
    return "--image-size: expected WxH with each side in [1, 16384], got '" + r.image_size + "'";
  }
  if (r.jpeg && (r.quality < 1 || r.quality > 100)) {
    return "--quality: expected an integer in [1, 100], got " + std::to_string(r.quality);
  }
  if (r.jpeg) {
    r.width = size->first;
    r.height = size->second;
    r.sample_bytes = int64_t{r.width} * r.height * 3;  // the pixels, for the buffer
  }
  if (r.sample_bytes < 1 || r.sample_bytes > kMaxSampleBytes) {
    return "--sample-bytes: expected an integer in [1, " + std::to_string(kMaxSampleBytes) + "], got " +
           std::to_string(r.sample_bytes);
  }
  if (r.shard_bytes < 1) return "--shard-bytes: expected an integer >= 1, got " + std::to_string(r.shard_bytes);
  if (!shard_files && !vm.at("shards").defaulted()) return "--shards is for --layout tfrecord and tar";
  if (shard_files && (r.shards < 1 || r.shards > r.samples)) {
    return "--shards: expected an integer in [1, --samples], got " + std::to_string(r.shards);
  }
  if (r.layout_name != "hdf5" && (!vm.at("chunk-samples").defaulted() || !vm.at("compression").defaulted())) {
    return "--chunk-samples and --compression are for --layout hdf5";
  }
  if (r.chunk_samples < 1 || r.chunk_samples > r.samples) {
    return "--chunk-samples: expected an integer in [1, --samples], got " + std::to_string(r.chunk_samples);
  }
  if (r.compression != "none") {
    const bool gzip = r.compression.size() == 6 && r.compression.starts_with("gzip:") && r.compression[5] >= '1' &&
                      r.compression[5] <= '9';
    if (!gzip) return "--compression: expected none or gzip:N with N in 1-9, got '" + r.compression + "'";
    r.gzip_level = r.compression[5] - '0';
  }
  return std::nullopt;
}

// The bytes the dataset will take: the payload, plus what each layout adds
// (record headers and index; a file system block per file; headers).
double EstimateBytes(const GenDataRequest& r) {
  double estimate = static_cast<double>(r.samples) * static_cast<double>(r.sample_bytes);
  if (r.layout_name == "shards") estimate += static_cast<double>(r.samples) * 32.0;
  if (r.layout_name == "tfrecord") estimate += static_cast<double>(r.samples) * 64.0;  // framing, Example, index
  if (r.layout_name == "tar") estimate += static_cast<double>(r.samples) * 2048.0;    // two headers, padding
  if (r.layout_name == "files") estimate += static_cast<double>(r.samples) * 4096.0 / 2;
  if (r.jpeg) {
    // Measured on gen-data's content, 4:2:0: 0.52 bytes per pixel at
    // quality 90 (98 KB for 500x375), about half that at 75; scaled by the
    // quality's quantisation step, plus half a block per file.
    const double step = r.quality >= 50 ? (100.0 - r.quality) / 50.0 : 50.0 / r.quality;
    const double per_pixel = 0.52 * std::pow(std::max(step, 0.02) / 0.2, -0.55);
    estimate = static_cast<double>(r.samples) * (per_pixel * r.width * r.height + 2048.0);
  }
  return estimate;
}

// Says the estimate, and refuses (a message) when the file system lacks the
// space: better now than a full disk half way through.
std::optional<std::string> CheckFreeSpace(const GenDataRequest& r) {
  const double estimate = EstimateBytes(r);
  const int64_t free_bytes = workloads::FreeBytesFor(r.out);
  if (!r.quiet) {
    std::fprintf(stderr, "gen-data: about %s to write (%s free there)\n", Mb(estimate).c_str(),
                 free_bytes >= 0 ? Mb(static_cast<double>(free_bytes)).c_str() : "unknown");
  }
  if (!workloads::FitsInFreeSpace(estimate, free_bytes)) {
    return "--out " + r.out + ": about " + Mb(estimate) + " to write, but only " +
           Mb(static_cast<double>(free_bytes)) + " free on that file system; choose fewer --samples or another place";
  }
  return std::nullopt;
}

// The writer for the layout; throws when --out cannot be created.
std::unique_ptr<SampleSink> MakeSink(const GenDataRequest& r) {
  if (r.layout_name == "jpeg") return std::make_unique<JpegSink>(r.out);
  if (r.layout_name == "npy") return std::make_unique<NpySink>(r.out, r.samples, r.sample_bytes);
  if (r.layout_name == "hdf5") {
    return std::make_unique<Hdf5Sink>(r.out, r.samples, r.sample_bytes, r.chunk_samples, r.gzip_level);
  }
  if (r.layout_name == "lmdb") return std::make_unique<LmdbSink>(r.out, r.samples, r.sample_bytes);
  if (r.layout_name == "tfrecord") {
    return std::make_unique<ShardFilesSink<workloads::TfRecordWriter>>(r.out, r.samples, r.shards);
  }
  if (r.layout_name == "tar") {
    return std::make_unique<ShardFilesSink<workloads::TarWriter>>(r.out, r.samples, r.shards, r.jpeg ? "jpg" : "bin");
  }
  return std::make_unique<ShardsSink>(
      r.out, r.layout_name == "files" ? workloads::FilesLayout::kFiles : workloads::FilesLayout::kShards,
      r.shard_bytes);
}

// The one line on stdout that says what was written.
void PrintSummary(const GenDataRequest& r, const SampleSink& writer) {
  if (r.jpeg) {
    std::printf("wrote %lld JPEG images of %dx%d at quality %d (%.1f MB, %.1f KB each on average%s%s) to %s\n",
                static_cast<long long>(r.samples), r.width, r.height, r.quality,
                static_cast<double>(writer.bytes_written()) / 1e6,
                static_cast<double>(writer.bytes_written()) / 1e3 / static_cast<double>(r.samples),
                r.layout_name == "jpeg" ? "" : ", layout ", r.layout_name == "jpeg" ? "" : r.layout_name.c_str(),
                r.out.c_str());
  } else {
    std::printf("wrote %lld samples of %lld bytes (%.1f MB, layout %s) to %s\n", static_cast<long long>(r.samples),
                static_cast<long long>(r.sample_bytes), static_cast<double>(writer.bytes_written()) / 1e6,
                r.layout_name.c_str(), r.out.c_str());
  }
}

// Writes sample after sample, stopping cleanly (with a note on what is left
// at --out) when `stop` is set. A write error is a failure, not a usage error.
int WriteSamples(const GenDataRequest& r, SampleSink& writer, const std::atomic<bool>& stop) {
  try {
    ProgressLine progress(r.samples, r.quiet);
    std::vector<std::byte> buffer(static_cast<size_t>(r.sample_bytes));
    for (int64_t i = 0; i < r.samples; ++i) {
      if (stop.load(std::memory_order_relaxed)) {
        progress.Finish();
        std::cerr << "feedtune gen-data: interrupted after " << i << " samples; " << r.out << " is incomplete"
                  << writer.IncompleteNote() << "\n";
        return kExitInterrupted;
      }
      if (r.jpeg) {
        const std::span<uint8_t> rgb(reinterpret_cast<uint8_t*>(buffer.data()), buffer.size());
        workloads::SynthesizeImage(r.seed, i, r.width, r.height, rgb);
        writer.Add(workloads::EncodeJpeg(rgb, r.width, r.height, r.quality));
      } else {
        workloads::SyntheticDataset::FillContent(r.seed, i, buffer);
        writer.Add(buffer);
      }
      progress.Update(i + 1, writer.bytes_written());
    }
    writer.Finish();
    progress.Finish();
    PrintSummary(r, writer);
    return kExitOk;
  } catch (const std::exception& e) {
    std::cerr << "\nfeedtune gen-data: " << e.what() << "\n";
    return kExitFailure;
  }
}

}  // namespace

int RunGenData(const Args& args, const std::atomic<bool>& stop) {
  po::options_description options("Options");
  GenDataRequest request;
  AddGenDataOptions(options, request);
  int code = kExitOk;
  const auto vm = Parse(args, options, {}, kGenDataUsage, &code);
  if (!vm) return code;

  if (const auto problem = CheckGenDataRequest(*vm, request)) return UsageError("gen-data", *problem);
  if (const auto problem = CheckFreeSpace(request)) return UsageError("gen-data", *problem);

  std::unique_ptr<SampleSink> writer;
  try {
    writer = MakeSink(request);
  } catch (const std::exception& e) {
    return UsageError("gen-data", e.what());
  }
  return WriteSamples(request, *writer, stop);
}

}  // namespace feedtune::cli
