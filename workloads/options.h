// WorkloadOptions: what a trial loads (docs/workloads.md). The kinds:
//   synthetic  samples whose size and cost are configured (SyntheticOptions)
//   files      a dataset on disk, shards or one file per sample (FilesOptions;
//              the per-sample CPU cost, jitter, worker set-up, seed and fault
//              of SyntheticOptions apply to it too)
//   command    the user's own PyTorch pipeline, one process per repeat or one
//              serving process per sweep (CommandOptions, docs/command-protocol.md)
//   npy, hdf5, lmdb, tfrecord, tar
//              data in a real format (docs/formats.md): FilesOptions names
//              the file or the shards (path, path_list; io, cache and decode
//              apply as for files), FormatOptions the rest (the HDF5
//              dataset, LMDB readahead, the TFRecord feature and index
//              cache, the shards' access and shuffle buffer); the per-sample
//              CPU cost keys apply as for files
// Plain values, no behaviour beyond naming the enums and the path.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace feedtune::workloads {

// New kinds go last: the order is the config's "one of ..." order.
enum class WorkloadKind { kSynthetic, kFiles, kCommand, kNpy, kHdf5, kLmdb, kTfRecord, kTar };
inline constexpr WorkloadKind kLastWorkloadKind = WorkloadKind::kTar;

// A native dataset read from a file in a real format (npy, hdf5, lmdb, tfrecord, tar).
inline bool IsFormatKind(WorkloadKind kind) {
  return kind == WorkloadKind::kNpy || kind == WorkloadKind::kHdf5 || kind == WorkloadKind::kLmdb ||
         kind == WorkloadKind::kTfRecord || kind == WorkloadKind::kTar;
}

// How a sharded format (tfrecord, tar) is read. kRandom: a map-style dataset
// over an index of its records (any order, the sampler's). kStream: torch's
// IterableDataset: each worker reads its own shards in order, through a
// shuffle buffer (loader/stream.h).
enum class ShardAccess { kRandom, kStream };

// How sample sizes spread. kFixed: every sample is SyntheticOptions::sample_bytes.
// kLognormal: exp(N(mu, sigma)) with mu chosen so the mean is `mean`, clamped
// to [min, max]. kUniform: uniform in [min, max]. Sizes are deterministic in
// (seed, index).
enum class SizeDist { kFixed, kLognormal, kUniform };

struct SampleSize {
  SizeDist dist = SizeDist::kFixed;
  int64_t mean = 0;    // lognormal only
  double sigma = 0;    // lognormal only: of the underlying normal
  int64_t min = 1;
  int64_t max = 0;     // also SyntheticOptions::sample_bytes, the slot bound
};

// An injected failure, for tests and drills: when sample `at_sample` is read,
// kThrow throws; kExit, kAbort, kSegv and kHang act only inside a worker
// process (elsewhere they throw, so feedtune itself never dies).
enum class FaultKind { kNone, kThrow, kExit, kAbort, kSegv, kHang };

struct FaultOptions {
  FaultKind kind = FaultKind::kNone;
  int64_t at_sample = 0;

  bool operator==(const FaultOptions&) const = default;
};

enum class TorchCostsMode { kAuto, kOff };

struct SyntheticOptions {
  int64_t samples = 4096;            // per epoch
  int64_t sample_bytes = 150528;     // fixed size; with a distribution, its max (the slot size)
  SampleSize size;                   // kFixed unless a distribution is configured
  int64_t cpu_us_per_sample = 200;   // real CPU work per sample
  // Threads that CPU work is split over, as OpenCV or OpenMP inside a transform
  // split theirs (workloads/cpu_work.h: BurnCpuThreads); Knobs::worker_threads
  // overrides it per trial.
  int cpu_threads = 1;
  int64_t io_us_per_sample = 0;      // waiting per sample, no CPU
  double jitter = 0.1;               // relative spread of per-sample cost, in [0, 1]
  int64_t worker_init_us = 0;        // per-worker set-up cost, paid at each worker start
  // Memory each Read keeps on purpose, written so it is resident, for the life
  // of the reading process: a leak (or a per-sample cache) to drill the
  // worker-memory growth flag (docs/measurement.md). 0: none.
  int64_t leak_bytes_per_sample = 0;
  FaultOptions fault;
  uint64_t seed = 0;                 // content, size and cost are deterministic in (seed, index)
  // kAuto: each sample and worker also pays this host's torch DataLoader
  // costs when the results file holds them (`feedtune calibrate`,
  // tuner/measure/torch_cost_dataset.h); kOff: the native core's own costs.
  TorchCostsMode torch_costs = TorchCostsMode::kAuto;
};

enum class FilesLayout { kShards, kFiles };
enum class FilesIo { kPread, kMmap };
enum class CacheMode { kWarm, kCold };
// What a files-layout sample is: the file's bytes (kNone), or the file decoded
// as a JPEG, cropped and resized to resize x resize RGB (kJpeg, workloads/jpeg_image.h).
enum class FilesDecode { kNone, kJpeg };
// kRandom: torchvision's RandomResizedCrop window (scale 0.08-1, ratio 3/4-4/3);
// kCenter: the central square of 0.875 of the short side (Resize(256) + CenterCrop(224)).
enum class CropMode { kRandom, kCenter };

inline constexpr int64_t kDefaultResize = 224;

struct FilesOptions {
  std::string path;                     // a directory (made by `feedtune gen-data`, or your files);
                                        // for npy and hdf5 the file, for lmdb the environment;
                                        // for tfrecord and tar a file, directory or glob of shards
  FilesLayout layout = FilesLayout::kShards;
  FilesIo io = FilesIo::kPread;
  CacheMode cache = CacheMode::kWarm;   // kCold: evict from the page cache before each repeat
  FilesDecode decode = FilesDecode::kNone;  // kJpeg: files (layout files only), tfrecord, tar
  CropMode crop = CropMode::kRandom;        // decode jpeg only
  int64_t resize = kDefaultResize;          // decode jpeg only: the sample is resize x resize x 3 bytes
  // tfrecord and tar: the shards as a list (workload.path given as a YAML
  // list), each entry a file, directory or glob, read in list order; path is
  // then empty. Empty: path names them.
  std::vector<std::string> path_list = {};
};

// HDF5's own default chunk cache per open dataset: 1 MiB (H5Pset_chunk_cache).
inline constexpr int64_t kHdf5DefaultChunkCacheMb = 1;

// The keys of the format kinds beyond path, io and cache.
struct FormatOptions {
  std::string dataset = "/images";  // hdf5: the samples, one per index along axis 0
  std::string labels;               // hdf5: optional; its row i follows sample i's bytes
  int64_t hdf5_chunk_cache_mb = kHdf5DefaultChunkCacheMb;  // per dataset, per process (MiB)
  bool lmdb_readahead = false;      // false: MDB_NORDAHEAD
  std::string feature;              // tfrecord: a bytes feature of a tf.train.Example; empty: the whole record
  ShardAccess access = ShardAccess::kRandom;  // tfrecord, tar
  int64_t shuffle_buffer = 1000;    // access: stream: samples per worker (webdataset's shuffle(1000))
  std::string index_cache;          // tfrecord: where indexes go when the data's folder is read-only
                                    // (empty: $XDG_CACHE_HOME or ~/.cache, then feedtune/tfrecord-idx)
};

// How feedtune talks to a command (docs/command-protocol.md). kRun: one process
// per repeat, knobs in argv/environment, one result line. kServe: one process
// per sweep, a JSON request line per trial on stdin, a line per window back.
enum class CommandProtocol { kRun, kServe };

inline const char* CommandProtocolName(CommandProtocol protocol) {
  return protocol == CommandProtocol::kServe ? "serve" : "run";
}

struct CommandOptions {
  std::vector<std::string> argv;  // placeholders {num_workers} ... substituted per trial (run)
  double timeout_s = 300;         // per run of the command (run), per trial (serve)
  CommandProtocol protocol = CommandProtocol::kRun;
  // The command's dataset reads an object store with requests in flight it
  // can set (feedtune.data.open("s3://...") takes fetch_concurrency): the
  // sweep tunes fetch_concurrency with num_workers, as for a remote dataset
  // of its own (tuner/search/fetch.cc), and sends it with each trial.
  bool remote_reads = false;
};

struct WorkloadOptions {
  WorkloadKind kind = WorkloadKind::kSynthetic;
  SyntheticOptions synthetic;
  FilesOptions files;
  CommandOptions command;
  FormatOptions format;
};

// workload.path for messages: path, or path_list's entries as "[a, b, c]".
std::string PathText(const FilesOptions& files);

const char* WorkloadKindName(WorkloadKind kind);
const char* SizeDistName(SizeDist dist);
const char* FaultKindName(FaultKind kind);
const char* FilesLayoutName(FilesLayout layout);
const char* FilesIoName(FilesIo io);
const char* CacheModeName(CacheMode mode);
const char* FilesDecodeName(FilesDecode decode);
const char* CropModeName(CropMode mode);
const char* ShardAccessName(ShardAccess access);
const char* TorchCostsModeName(TorchCostsMode mode);

}  // namespace feedtune::workloads
