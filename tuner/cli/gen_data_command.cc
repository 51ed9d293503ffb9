// `feedtune gen-data`: writes a file-backed dataset for `workload.kind: files`.
// Sample i holds the synthetic content of (seed, i), so reads can be checked
// byte for byte.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <optional>
#include <vector>

#include "tuner/cli/cli_util.h"
#include "workloads/shard_format.h"
#include "workloads/synthetic_dataset.h"

namespace feedtune::cli {
namespace {

constexpr const char* kGenDataUsage = R"(Usage: feedtune gen-data --out DIR --samples N --sample-bytes B [options]

Writes a dataset for `workload.kind: files` into DIR (which must not exist, or
be empty), with progress on stderr:
  --layout shards   packed record files (shard-NNNNN.ftrec) and an index
                    (index.ftidx): a header with magic and version, and per
                    record its length and CRC32C, checked on every read
  --layout files    one file per sample in a directory tree (NNNNN/NNNNNNNNN.bin,
                    1000 per folder): the "many small JPEGs" case
Sample i holds deterministic bytes of (seed, i). The data is synced to disk at
the end, so `cache: cold` can evict it.

Examples:
  feedtune gen-data --out data/shards --layout shards --samples 20000 --sample-bytes 110000
  feedtune gen-data --out data/small-files --layout files --samples 50000 --sample-bytes 16384)";

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

}  // namespace

int RunGenData(const Args& args, const std::atomic<bool>& stop) {
  po::options_description options("Options");
  std::string out, layout_name;
  int64_t samples = 0, sample_bytes = 0, shard_bytes = 0;
  uint64_t seed = 0;
  options.add_options()("help,h", "this help")("out", po::value(&out)->required(), "the dataset's directory")(
      "layout", po::value(&layout_name)->default_value("shards"), "shards | files")(
      "samples", po::value(&samples)->required(), "how many samples")(
      "sample-bytes", po::value(&sample_bytes)->required(), "bytes per sample")(
      "shard-bytes", po::value(&shard_bytes)->default_value(int64_t{128} << 20),
      "shards: a new shard file starts past this size")(
      "seed", po::value(&seed)->default_value(0), "content seed (sample i holds the bytes of (seed, i))")(
      "quiet,q", "no progress");
  int code = kExitOk;
  const auto vm = Parse(args, options, {}, kGenDataUsage, &code);
  if (!vm) return code;

  const auto usage_error = [](const std::string& what) {
    std::cerr << "feedtune gen-data: " << what << "\n";
    return kExitUsage;
  };
  workloads::FilesLayout layout;
  if (layout_name == "shards") {
    layout = workloads::FilesLayout::kShards;
  } else if (layout_name == "files") {
    layout = workloads::FilesLayout::kFiles;
  } else {
    return usage_error("--layout: expected shards or files, got '" + layout_name + "'");
  }
  if (samples < 1 || samples > kMaxSamples) {
    return usage_error("--samples: expected an integer in [1, " + std::to_string(kMaxSamples) + "], got " +
                       std::to_string(samples));
  }
  if (sample_bytes < 1 || sample_bytes > kMaxSampleBytes) {
    return usage_error("--sample-bytes: expected an integer in [1, " + std::to_string(kMaxSampleBytes) + "], got " +
                       std::to_string(sample_bytes));
  }
  if (shard_bytes < 1) {
    return usage_error("--shard-bytes: expected an integer >= 1, got " + std::to_string(shard_bytes));
  }

  std::optional<workloads::DatasetWriter> writer;
  try {
    writer.emplace(out, layout, shard_bytes);
  } catch (const std::exception& e) {
    return usage_error(e.what());
  }
  try {
    ProgressLine progress(samples, vm->count("quiet") > 0);
    std::vector<std::byte> buffer(static_cast<size_t>(sample_bytes));
    for (int64_t i = 0; i < samples; ++i) {
      if (stop.load(std::memory_order_relaxed)) {
        progress.Finish();
        std::cerr << "feedtune gen-data: interrupted after " << i << " samples; " << out << " is incomplete"
                  << (layout == workloads::FilesLayout::kShards ? " (it has no index, so it will not be read)" : "")
                  << "\n";
        return kExitInterrupted;
      }
      workloads::SyntheticDataset::FillContent(seed, i, buffer);
      writer->Add(buffer);
      progress.Update(i + 1, writer->bytes_written());
    }
    writer->Finish();
    progress.Finish();
    std::printf("wrote %lld samples of %lld bytes (%.1f MB, layout %s) to %s\n", static_cast<long long>(samples),
                static_cast<long long>(sample_bytes), static_cast<double>(writer->bytes_written()) / 1e6,
                layout_name.c_str(), out.c_str());
    return kExitOk;
  } catch (const std::exception& e) {
    std::cerr << "\nfeedtune gen-data: " << e.what() << "\n";
    return kExitFailure;
  }
}

}  // namespace feedtune::cli
