// Converter: the whole of a source dataset written in a named layout
// (`feedtune convert`, docs/layout.md), in three steps:
//
//   1. plan     which source samples go to which DST file, in source order or
//               shuffled across the tar shards by a seed (a Fisher-Yates pass
//               over mt19937_64, the same on every build, so --resume finds
//               the same plan); kept in DST/convert-state.json
//   2. write    each DST file under a temporary name, synced and renamed
//               (layout/converted.h); a file whose final name exists is done,
//               so a resumed convert (after Ctrl-C, kill -9, a full disk)
//               goes on with the first file not written
//   3. verify   every sample read back from DST and from the source, their
//               CRC32C and labels compared, the counts checked; then the
//               index and the manifest are written, the manifest last
//
// A sample that cannot be read (or, for JPEG samples, does not decode) fails
// the convert, naming it; with skip_bad it is left out, listed in the
// manifest and reported. The source is opened read-only and never written.
//
// Used by one thread; `stop` (Ctrl-C) is checked between samples.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "layout/destination.h"
#include "layout/layout_kind.h"
#include "layout/source.h"

namespace feedtune::layout {

struct ConvertOptions {
  LayoutKind layout = LayoutKind::kTar;
  int64_t shard_bytes = int64_t{256} << 20;  // tar: a shard holds about this much
  int64_t chunk_samples = 1;                // hdf5
  int gzip_level = -1;                      // hdf5: -1 none, else 1-9
  std::optional<uint64_t> shuffle_seed;     // tar: samples shuffled across the shards
  bool pixels = false;                      // JPEG samples stored decoded, as raw pixels (DecodedPixelsOf)
  bool resume = false;
  bool skip_bad = false;
  // An s3:// DST (layout/destination.h): shards larger than part_bytes go up
  // in parts of it, each staged in staging_dir first (empty: $TMPDIR, else /tmp).
  int64_t part_bytes = kDefaultPartBytes;
  std::string staging_dir;
};

struct ConvertProgress {
  const char* phase = "write";  // "check" (skip_bad's count before a one-file layout), "write", "verify"
  int64_t done = 0;
  int64_t total = 0;
  int64_t bytes = 0;            // read from the source so far in this phase
};

struct SkippedSample {
  int64_t source = 0;
  std::string name;
  std::string error;
};

struct ConvertResult {
  int64_t samples = 0;          // in DST
  int64_t bytes_on_disk = 0;    // DST's files
  int64_t resumed_files = 0;    // written by an earlier, interrupted run
  int64_t files = 0;
  std::vector<SkippedSample> skipped;
  bool interrupted = false;     // `stop` was raised; DST holds the files finished so far
  UploadFigures upload;         // an s3:// DST's requests (zero for a folder)
};

// A problem with the user's input (the source, DST, the options): exit code 2.
class ConvertUsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The tar shards of about shard_bytes that the source fills.
int64_t ShardCount(const SampleSource& source, int64_t shard_bytes);

// Bytes DST will take: the samples plus what each layout adds per sample.
double EstimateConvertBytes(const SampleSource& source, const ConvertOptions& options);

// DST, a local folder or an s3:// prefix (a store takes --layout tar only).
// Throws ConvertUsageError.
std::unique_ptr<Destination> OpenDestination(const std::string& dst, const ConvertOptions& options);

// Checks DST against the source and the options before anything is written:
// DST not the source nor inside it, not holding another dataset or files of
// its own, --resume only over an interrupted convert. Throws ConvertUsageError
// (and storage::StorageError when a store's prefix cannot be listed).
void CheckDestination(const SampleSource& source, const std::string& source_path, Destination& dst,
                      const ConvertOptions& options);

// Runs the three steps. Throws ConvertUsageError (bad input: a sample that
// fails without skip_bad, sizes npy/hdf5 cannot hold, a resume that does not
// match) or std::runtime_error (a write or a verification that fails, naming
// the file or the sample).
ConvertResult Convert(const SampleSource& source, const std::string& source_path, Destination& dst,
                      const ConvertOptions& options, const std::function<void(const ConvertProgress&)>& progress,
                      const std::atomic<bool>& stop);
// The same into OpenDestination(dst, options).
ConvertResult Convert(const SampleSource& source, const std::string& source_path, const std::string& dst,
                      const ConvertOptions& options, const std::function<void(const ConvertProgress&)>& progress,
                      const std::atomic<bool>& stop);

}  // namespace feedtune::layout
