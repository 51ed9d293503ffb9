// The format describer behind `feedtune inspect PATH` and the warnings `sweep`
// prints before its first trial: what a data file is (npy: shape, dtype,
// sample bytes; a directory of JPEGs: count, file sizes and dimensions
// (quantiles); HDF5: every dataset's shape, dtype, chunk shape and filters,
// and the bytes a shuffled read of one sample inflates with the configured
// chunk cache; LMDB: entries, value sizes, map size, file system; TFRecord and
// tar shards: the files, their records or samples and sizes, the index), the
// traps found in it, in words (too few shards for the readers, a cache that
// cannot hold a chunk, ...), and a short single-threaded measurement of read
// (for JPEGs read + decode + crop + resize) per sample on this machine.
//
// The HDF5 model, for a random (shuffled) sample of a chunked dataset with
// chunks of C bytes (inflated), M chunks, and a chunk cache of K bytes:
//   C > K, filtered (gzip...)  every read inflates the whole chunk: C bytes
//   C > K, unfiltered          HDF5 reads just the selection: a row
//   C <= K                     a hit when the chunk is cached: the cache holds
//                              floor(K / C) of M chunks, so a read inflates
//                              (or reads) C x (1 - min(1, floor(K / C) / M))
// (HDF5 1.10's chunk cache; hash-slot collisions make it slightly worse.)
//
// Plain functions; they open the data in the calling process and close it
// before returning, so they are safe to call before the fork server starts.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "workloads/hdf5_dataset.h"
#include "workloads/lmdb_dataset.h"
#include "workloads/options.h"

namespace feedtune::workloads {

struct InspectOptions {
  int usable_cpus = 1;              // tfrecord, tar: the workers this box could run (the shards trap)
  std::string dataset = "/images";  // hdf5: the samples (others are described too)
  std::string labels;               // hdf5: read with each sample when set
  int64_t chunk_cache_mb = kHdf5DefaultChunkCacheMb;
  bool lmdb_readahead = false;
  CropMode crop = CropMode::kRandom;  // jpeg: as workload.crop
  int64_t resize = kDefaultResize;    // jpeg: as workload.resize
  int64_t max_headers = 1000;         // jpeg: image headers read for the dimensions, spread over the files
  double measure_seconds = 1.0;     // 0: no measurement
  int64_t max_measured_samples = 256;
};

// The HDF5 prediction for one dataset under a chunk cache of `cache_mb` MiB.
struct Hdf5ReadCost {
  int64_t bytes_per_sample = 0;  // inflated (filtered) or read (unfiltered) per random sample
  bool inflates = false;         // the chunks are filtered, so reads decompress
  double cache_hit_rate = 0;     // of random reads
};
Hdf5ReadCost PredictHdf5ReadCost(const Hdf5DatasetInfo& info, int64_t cache_mb);

// The traps in the samples' dataset, each one line for the user (empty: none).
std::vector<std::string> Hdf5Warnings(const Hdf5DatasetInfo& info, int64_t cache_mb);
std::vector<std::string> LmdbWarnings(const LmdbInfo& info, bool readahead);

// The streaming trap: each reader (a worker of a rank) reads whole shards, so
// fewer shards than ranks x the workers the box could run leaves readers
// idle. The warning, or empty when the shards are enough. `usable_cpus` per
// rank stands for the workers the box could use.
std::string FewShardsWarning(int64_t shards, int ranks, int usable_cpus);

struct InspectReport {
  std::string path;
  std::string format;               // "npy", "hdf5", "lmdb", "jpeg"
  std::vector<std::pair<std::string, std::string>> facts;  // in print order
  nlohmann::json json_facts = nlohmann::json::object();  // the same, typed
  std::vector<std::string> warnings;
  std::string measured_what = "read";  // "read", or "read + decode" (jpeg)
  int64_t measured_samples = 0;     // 0: not measured
  double read_us_median = 0;        // per sample, single-threaded, warm or as the cache stands
  double read_us_p90 = 0;
  double mb_per_s = 0;

  std::string ToText() const;
  std::string ToJson() const;
};

// The format at `path`, told by its content as Inspect tells it (kJpegDir:
// a directory that is neither an LMDB environment nor a folder of shards, a
// folder of files). Throws DatasetNotFound for a path that is none of them.
// `feedtune convert` opens its source by it (layout/source.h).
enum class DetectedFormat { kNpy, kHdf5, kLmdb, kJpegDir, kTfRecord, kTar };
DetectedFormat DetectFormat(const std::string& path);

// Inspects the npy file, HDF5 file, LMDB environment, TFRecord or tar shards
// (a file, a directory of them or a glob) or directory of JPEGs at
// `path` (the format is told by its content; a directory without data.mdb is
// a folder of images). Throws DatasetNotFound for a path that is none of
// them, DatasetNotFound / DatasetCorrupt as the datasets do.
InspectReport Inspect(const std::string& path, const InspectOptions& options);

}  // namespace feedtune::workloads
