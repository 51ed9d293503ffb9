// `feedtune convert SRC DST --layout L`: the whole dataset at SRC, written in
// layout L at DST and verified sample by sample (layout/convert.h,
// docs/layout.md). This file is the command line around it: the options, the
// free-space check, the progress line and the summary.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <iostream>

#include <nlohmann/json.hpp>

#include "layout/convert.h"
#include "layout/source.h"
#include "results/units.h"
#include "storage/object_client.h"
#include "tuner/cli/cli_util.h"
#include "workloads/format_io.h"
#include "workloads/shard_format.h"

namespace feedtune::cli {
namespace {

constexpr const char* kConvertUsage = R"(Usage: feedtune convert SRC DST --layout tar|hdf5|npy|lmdb [options]

Writes the whole dataset at SRC in another on-disk layout at DST, then reads
every sample back and checks it against SRC (CRC32C, labels, counts). Sample i
of DST is sample i of SRC, with its label where SRC has one; DST's index
maps the numbering. feedtune.data.open(DST) reads the result in a training job
(docs/layout.md). SRC is opened read-only and never changed.

SRC is any dataset feedtune reads, its format told by its content: a folder
of files (JPEGs or others; with --labels folder, an ImageFolder tree whose
class is the folder under SRC), a folder of feedtune shards, a .npy file, an
HDF5 file (--dataset, and labels from /labels or --labels /NAME), an LMDB
environment, TFRecord shards (--feature), or WebDataset tar shards (labels
from their .cls members). SRC may also be an s3:// prefix of one object per
sample (--labels folder: the first folder of each key under it), or of tar
shards (indexed through ranged GETs, labels from their .cls members), read
16 objects or samples in flight at a time.

Layouts:
  tar    WebDataset shards DST/data-SSSSS-of-NNNNN.tar of about --shard-bytes,
         sample i as the members %09d.EXT and %09d.cls; --shuffle SEED deals the
         samples across the shards at random, for streaming readers
  hdf5   DST/data.h5: /images (N, B) uint8 chunked --chunk-samples rows at a
         time, --compression none|gzip:N, and /labels; samples of one size
  npy    DST/data.npy: (N, B) uint8; samples of one size
  lmdb   DST/data.lmdb: value i under the key %09d of i

--pixels (JPEG samples, tar or lmdb): each image is stored decoded, as raw
pixels (binary PPM, %09d.ppm in tar): more bytes on disk, no decode in the
job. The readers crop and resize them as they do JPEGs (decode: jpeg in a
config; feedtune.data.open(DST, decode=True)); `feedtune layout` measures
whether the trade pays on this box.

Safe to stop: each file is written under a temporary name, synced and
renamed, so an interrupted convert (Ctrl-C, kill -9, a full disk) leaves only
whole files under final names; run the same command with --resume to go on.

DST may be an s3:// prefix (--layout tar; credentials and endpoint as the
AWS tools take them, docs/storage.md). Each shard is written to a staging
folder (--staging, default $TMPDIR or /tmp) and put whole: one PUT, or a
multipart upload in parts of --part-bytes (default 8 MiB, at least 5 MiB)
when it is larger. No object is under a final key until it is whole; a
resumed upload sends only the parts the interrupted one had not (it checks
each part's CRC32C against what it wrote again). The verification reads
every shard back from the store. The object count and bytes to upload are
printed before the convert starts.
Free space is checked from an estimate before anything is written. A sample
that does not read (or, for JPEGs, does not decode) fails the convert, naming
it; --skip-bad leaves it out and lists it (in the summary and the manifest).

Output: progress on stderr (rate and time left); on stdout one line, or with
--format json one JSON object: {"dst", "layout", "samples", "bytes_on_disk",
"files", "resumed_files", "skipped": [{"source", "name", "error"}], ...}.
Exit codes: 0 done and verified, 1 a failure (a write, the verification),
2 bad input (SRC, DST, options, a bad sample), 130 interrupted (resume it).

Examples:
  feedtune convert data/jpeg data/jpeg-tar --layout tar --shard-bytes 100000000
  feedtune convert data/train data/train-tar --layout tar --labels folder --shuffle 7
  feedtune convert data/bad-chunks.h5 data/good.h5 --layout hdf5 --chunk-samples 1
  feedtune convert data/jpeg data/jpeg-pixels --layout tar --pixels
  feedtune convert data/jpeg data/jpeg-tar --layout tar --resume
  feedtune convert data/train s3://bucket/train-tar --layout tar --shard-bytes 500000000
  feedtune convert s3://bucket/jpegs s3://bucket/jpeg-tar --layout tar --labels folder)";

class ConvertProgressLine {
 public:
  explicit ConvertProgressLine(bool quiet) : quiet_(quiet), tty_(isatty(STDERR_FILENO) == 1) {}

  void Update(const layout::ConvertProgress& p) {
    if (quiet_ || p.total <= 0) return;
    const auto now = Clock::now();
    if (phase_ != p.phase) {  // rates are per phase
      if (tty_ && !phase_.empty()) std::fputc('\n', stderr);
      phase_ = p.phase;
      start_ = now;
      start_done_ = p.done > 0 ? p.done - 1 : 0;
      last_decile_ = -1;
    }
    const int decile = static_cast<int>(p.done * 10 / p.total);
    const bool end = p.done == p.total;
    if (tty_ ? (now - last_ < std::chrono::milliseconds(200) && !end) : (decile == last_decile_ && !end)) return;
    if (!tty_ && end && decile == last_decile_) return;
    last_ = now;
    last_decile_ = decile;
    const double elapsed = std::chrono::duration<double>(now - start_).count();
    const double rate = elapsed > 0 ? static_cast<double>(p.done - start_done_) / elapsed : 0;
    const double left = rate > 0 ? static_cast<double>(p.total - p.done) / rate : 0;
    std::fprintf(stderr, "%sconvert: %s %lld/%lld samples (%3.0f%%), %.1f MB read, %.0f samples/s, %.0f s left%s",
                 tty_ ? "\r" : "", p.phase, static_cast<long long>(p.done), static_cast<long long>(p.total),
                 100.0 * static_cast<double>(p.done) / static_cast<double>(p.total), static_cast<double>(p.bytes) / 1e6,
                 rate, left, tty_ ? "" : "\n");
    std::fflush(stderr);
  }
  void Finish() {
    if (!quiet_ && tty_ && !phase_.empty()) std::fputc('\n', stderr);
  }

 private:
  using Clock = std::chrono::steady_clock;
  const bool quiet_;
  const bool tty_;
  std::string phase_;
  Clock::time_point start_{}, last_{};
  int64_t start_done_ = 0;
  int last_decile_ = -1;
};

// "none" -> -1, "gzip:N" -> N; nullopt when malformed.
std::optional<int> ParseCompression(const std::string& text) {
  if (text == "none") return -1;
  if (text.size() == 6 && text.starts_with("gzip:") && text[5] >= '1' && text[5] <= '9') return text[5] - '0';
  return std::nullopt;
}

// The one line (or JSON object) on stdout that says what DST now holds.
void PrintSummary(const std::string& format_name, const std::string& src, const std::string& dst,
                  const layout::ConvertOptions& convert, const layout::SampleSource& source,
                  const layout::ConvertResult& result) {
  if (format_name == "json") {
    nlohmann::json skipped = nlohmann::json::array();
    for (const auto& s : result.skipped) skipped.push_back({{"source", s.source}, {"name", s.name}, {"error", s.error}});
    std::cout << nlohmann::json{{"dst", dst},
                                {"layout", layout::NameOf(convert.layout)},
                                {"source", src},
                                {"source_samples", source.size()},
                                {"samples", result.samples},
                                {"labels", source.has_labels()},
                                {"files", result.files},
                                {"resumed_files", result.resumed_files},
                                {"bytes_on_disk", result.bytes_on_disk},
                                {"pixels", convert.pixels},
                                {"upload", {{"objects", result.upload.objects},
                                            {"parts_sent", result.upload.parts_sent},
                                            {"parts_resumed", result.upload.parts_resumed},
                                            {"bytes_sent", result.upload.bytes_sent},
                                            {"bytes_read_back", result.upload.bytes_read_back}}},
                                {"verified", true},
                                {"skipped", skipped}}
                     .dump()
              << "\n";
  } else {
    std::printf("converted %lld samples%s of %s to %s (layout %s, %lld file%s, %s%s), verified%s\n",
                static_cast<long long>(result.samples), source.has_labels() ? " with labels" : "", src.c_str(),
                dst.c_str(), layout::NameOf(convert.layout), static_cast<long long>(result.files), result.files == 1 ? "" : "s",
                workloads::FormatMegabytes(static_cast<double>(result.bytes_on_disk)).c_str(),
                result.resumed_files > 0 ? (", " + std::to_string(result.resumed_files) + " from before").c_str() : "",
                result.skipped.empty() ? "" : ("; " + std::to_string(result.skipped.size()) + " bad samples skipped").c_str());
    const layout::UploadFigures& up = result.upload;
    if (up.objects > 0 || up.parts_resumed > 0) {
      std::printf("uploaded %lld objects, %s (%lld parts sent, %lld sent before and not again); read back %s\n",
                  static_cast<long long>(up.objects), workloads::FormatMegabytes(static_cast<double>(up.bytes_sent)).c_str(),
                  static_cast<long long>(up.parts_sent), static_cast<long long>(up.parts_resumed),
                  workloads::FormatMegabytes(static_cast<double>(up.bytes_read_back)).c_str());
    }
  }
}

}  // namespace

int RunConvert(const Args& args, const std::atomic<bool>& stop) {
  po::options_description options("Options");
  std::string src, dst, compression, format_name, layout_name;
  layout::ConvertOptions convert;
  layout::SourceOptions source_options;
  uint64_t seed = 0;
  options.add_options()("help,h", "this help")("src", po::value(&src)->required(), "the dataset to convert (a path, or an s3:// prefix of objects or tar shards)")(
      "dst", po::value(&dst)->required(), "a new or empty folder, or s3:// prefix, for the result")(
      "layout", po::value(&layout_name)->required(), layout::LayoutNames().c_str())(
      "shard-bytes", po::value(&convert.shard_bytes)->default_value(int64_t{256} << 20),
      "tar: about this many bytes per shard")("shuffle", po::value(&seed),
                                              "tar: deal the samples across the shards at random, by this seed")(
      "chunk-samples", po::value(&convert.chunk_samples)->default_value(1), "hdf5: samples per chunk")(
      "compression", po::value(&compression)->default_value("none"), "hdf5: none | gzip:N (N in 1-9)")(
      "labels", po::value(&source_options.labels)->default_value("auto"),
      "auto | none | folder (ImageFolder) | cls (tar) | /NAME (an HDF5 dataset)")(
      "dataset", po::value(&source_options.dataset)->default_value("/images"), "HDF5 SRC: the samples' dataset")(
      "feature", po::value(&source_options.feature)->default_value(""),
      "TFRecord SRC: a bytes feature of each Example (default: the whole record)")(
      "resume", "go on with an interrupted convert into DST")(
      "skip-bad", "leave out samples that do not read or decode, and list them")(
      "pixels", "JPEG samples: store them decoded, as raw pixels (PPM), for tar or lmdb")(
      "part-bytes", po::value(&convert.part_bytes)->default_value(layout::kDefaultPartBytes),
      "s3:// DST: a multipart upload's part size (at least 5 MiB)")(
      "staging", po::value(&convert.staging_dir), "s3:// DST: where a shard is written before its upload")(
      "format", po::value(&format_name)->default_value("table"), "the summary on stdout: table | json")(
      "quiet,q", "no progress");
  po::positional_options_description positional;
  positional.add("src", 1).add("dst", 1);
  int code = kExitOk;
  const auto vm = Parse(args, options, positional, kConvertUsage, &code);
  if (!vm) return code;
  if (format_name != "table" && format_name != "json") {
    return UsageError("convert", "--format: expected table or json, got '" + format_name + "'");
  }
  const std::optional<layout::LayoutKind> kind = layout::LayoutNamed(layout_name);
  if (!kind) return UsageError("convert", "--layout: expected " + layout::LayoutNames() + ", got '" + layout_name + "'");
  convert.layout = *kind;
  const layout::LayoutInfo& info = layout::InfoOf(*kind);
  const auto gzip = ParseCompression(compression);
  if (!gzip) {
    return UsageError("convert", "--compression: expected none or gzip:N with N in 1-9, got '" + compression + "'");
  }
  convert.gzip_level = *gzip;
  if (*kind != layout::LayoutKind::kHdf5 &&
      (!vm->at("chunk-samples").defaulted() || !vm->at("compression").defaulted())) {
    return UsageError("convert", "--chunk-samples and --compression are for --layout hdf5");
  }
  if (*kind != layout::LayoutKind::kTar && !vm->at("shard-bytes").defaulted()) {
    return UsageError("convert", "--shard-bytes is for --layout tar");
  }
  if (convert.shard_bytes < 1) return UsageError("convert", "--shard-bytes: expected an integer >= 1");
  if (convert.chunk_samples < 1) return UsageError("convert", "--chunk-samples: expected an integer >= 1");
  if (vm->count("shuffle") > 0) convert.shuffle_seed = seed;
  convert.resume = vm->count("resume") > 0;
  convert.skip_bad = vm->count("skip-bad") > 0;
  convert.pixels = vm->count("pixels") > 0;
  if (convert.pixels && !info.holds_any_size) {
    return UsageError("convert", "--pixels is for --layout tar or lmdb (decoded images differ in size; " +
                                     std::string(info.name) + " holds rows of one size)");
  }
  const bool quiet = vm->count("quiet") > 0;

  std::unique_ptr<layout::SampleSource> source, pixels;
  std::unique_ptr<layout::Destination> destination;
  try {
    source = layout::OpenSource(src, source_options);
    if (convert.pixels) pixels = layout::DecodedPixelsOf(*source);  // for the estimate; Convert decodes its own
    destination = layout::OpenDestination(dst, convert);
    layout::CheckDestination(*source, src, *destination, convert);
  } catch (const storage::StorageError& e) {  // a prefix that cannot be listed: the store's answer, named
    std::cerr << "feedtune convert: " << e.what() << "\n";
    return kExitFailure;
  } catch (const std::exception& e) {  // DatasetNotFound, DatasetCorrupt, invalid_argument, ConvertUsageError
    return UsageError("convert", e.what());
  }
  // The free space, from an estimate, before anything is written: DST's, or
  // for a store the staging folder's, which holds a shard at a time.
  const double estimate = layout::EstimateConvertBytes(pixels ? *pixels : *source, convert);
  const bool remote = destination->remote();
  const std::string staging = convert.staging_dir.empty() ? layout::DefaultStagingDir() : convert.staging_dir;
  const double staged = remote ? std::min<double>(estimate, 2.0 * static_cast<double>(convert.shard_bytes)) : estimate;
  const int64_t free_bytes = workloads::FreeBytesFor(remote ? staging : dst);
  if (!quiet) {
    const std::string free_text =
        free_bytes >= 0 ? workloads::FormatMegabytes(static_cast<double>(free_bytes)) : std::string("unknown");
    std::fprintf(stderr, "convert: %s (%s, %lld samples%s) -> %s, layout %s: ", src.c_str(), source->kind().c_str(),
                 static_cast<long long>(source->size()), source->has_labels() ? ", labelled" : "", dst.c_str(),
                 layout::NameOf(convert.layout));
    if (remote) {
      const int64_t shards = layout::ShardCount(pixels ? *pixels : *source, convert.shard_bytes);
      std::fprintf(stderr, "%lld shard objects + index and manifest, about %s to upload (staged a shard at a time in "
                           "%s, %s free there)\n",
                   static_cast<long long>(shards), workloads::FormatMegabytes(estimate).c_str(), staging.c_str(),
                   free_text.c_str());
    } else {
      std::fprintf(stderr, "about %s to write (%s free there)\n", workloads::FormatMegabytes(estimate).c_str(),
                   free_text.c_str());
    }
  }
  if (!workloads::FitsInFreeSpace(staged, free_bytes)) {
    return UsageError("convert", (remote ? "the staging folder " + staging : "DST " + dst) + ": about " +
                                     workloads::FormatMegabytes(staged) + " to write, but only " +
                                     workloads::FormatMegabytes(static_cast<double>(free_bytes)) +
                                     " free on that file system (a write plans on at most " +
                                     results::Format("%.0f%%", workloads::kUsableFreeFraction * 100) +
                                     " of it); free some space or choose another place" +
                                     (remote ? " (--staging)" : ""));
  }

  ConvertProgressLine line(quiet);
  layout::ConvertResult result;
  try {
    result = layout::Convert(*source, src, *destination, convert,
                             [&line](const layout::ConvertProgress& p) { line.Update(p); }, stop);
  } catch (const layout::ConvertUsageError& e) {
    line.Finish();
    return UsageError("convert", e.what());
  } catch (const std::exception& e) {
    line.Finish();
    std::cerr << "feedtune convert: " << e.what() << "\n";
    return kExitFailure;
  }
  line.Finish();
  for (const layout::SkippedSample& s : result.skipped) {
    std::cerr << "convert: skipped sample " << s.source << ": " << s.error << "\n";
  }
  if (result.interrupted) {
    std::cerr << "feedtune convert: interrupted; " << dst
              << " keeps the files finished so far: run the same command with --resume to go on\n";
    return kExitInterrupted;
  }
  PrintSummary(format_name, src, dst, convert, *source, result);
  return kExitOk;
}

}  // namespace feedtune::cli
