#include "layout/candidates.h"

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>

#include "layout/converted.h"
#include "storage/credentials.h"
#include "storage/location.h"
#include "storage/object_client.h"
#include "workloads/format_inspect.h"
#include "workloads/format_io.h"
#include "workloads/hdf5_dataset.h"
#include "workloads/remote_dataset.h"
#include "workloads/remote_tar_dataset.h"
#include "workloads/shard_format.h"

namespace feedtune::layout {
namespace {

namespace fs = std::filesystem;

// A shuffled read's bytes of one sample, read or inflated, per byte of it:
// HDF5's from inspect's chunk-cache model (at HDF5's default 1 MiB cache, as
// the trials read); the other layouts read a sample's own bytes (1).
double Hdf5Amplification(const std::string& file) {
  for (const workloads::Hdf5DatasetInfo& info : workloads::Hdf5Dataset::ListDatasets(file)) {
    if (info.name != "/images" || info.row_bytes <= 0) continue;
    const auto cost = workloads::PredictHdf5ReadCost(info, workloads::kHdf5DefaultChunkCacheMb);
    return std::max(1.0, static_cast<double>(cost.bytes_per_sample) / static_cast<double>(info.row_bytes));
  }
  return 1;
}

int64_t BytesOnDisk(const std::string& path) {
  std::error_code ec;
  int64_t total = 0;
  if (fs::is_regular_file(path, ec)) return static_cast<int64_t>(fs::file_size(path, ec));
  for (auto it = fs::recursive_directory_iterator(path, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    const std::string name = it->path().filename().string();
    // convert's own index and manifest are not the layout's bytes.
    if (it->is_regular_file(ec) && name != kIndexName && name != kManifestName) {
      total += static_cast<int64_t>(it->file_size(ec));
    }
  }
  return total;
}

// The gzip level of an HDF5 dataset's filters, as Hdf5DatasetInfo words
// them ("gzip(4)"), -1 for none. Another filter (szip, shuffle) is not one
// convert writes: the as-is copy then lacks it, and its name says so.
int GzipLevel(const std::vector<std::string>& filters) {
  for (const std::string& f : filters) {
    int level = 0;
    if (std::sscanf(f.c_str(), "gzip(%d)", &level) == 1) return level;
  }
  return -1;
}

std::string Quoted(const std::string& path) {
  std::string out = "\"";
  for (char c : path) out += (c == '"' || c == '\\') ? std::string("\\") + c : std::string(1, c);
  return out + "\"";
}

Candidate Converted(const std::string& name, const std::string& scratch, const std::string& slug,
                    const ConvertOptions& options) {
  Candidate c;
  c.name = name;
  c.data = (fs::path(scratch) / slug).string();
  c.convert = options;
  const LayoutInfo& info = InfoOf(options.layout);
  c.workload_yaml = std::string("  kind: ") + info.workload_kind + "\n  path: " +
                    Quoted(info.file != nullptr ? c.data + "/" + info.file : c.data) + "\n";
  if (options.layout == LayoutKind::kHdf5) c.workload_yaml += "  dataset: /images\n";
  return c;
}

// A candidate on a store: its objects under `scratch` + `slug` + "/" (the
// slash ends the prefix, so that "tar/" does not list "tar-64/" too).
Candidate OnStore(const std::string& name, const std::string& scratch, const std::string& slug,
                  const ConvertOptions& options, bool streamed) {
  Candidate c;
  c.name = name;
  c.data = scratch + slug + "/";
  c.convert = options;
  c.on_store = true;
  c.streamed = streamed;
  c.workload_yaml = "  kind: tar\n  path: " + Quoted(c.data) + "\n" + (streamed ? "  access: stream\n" : "");
  return c;
}

// Streamed shard sizes on a store, as parts of the sample (see candidates.h).
constexpr int kStoreShardParts[] = {16, 64, 256};

// The workload keys that read a candidate as the job reads JPEG samples
// (decode_images): decoded, a random crop, resized to 224x224.
constexpr const char* kDecodeYaml = "  decode: jpeg\n  crop: random\n  resize: 224\n";

// Raw pixels (`convert --pixels`): JPEG samples decoded once, cropped and
// resized by the reader without a decode (workloads/jpeg_image.h): the bytes
// read against the decode's CPU. In shards of `shard_bytes`, streamed.
ConvertOptions PixelsInShardsOf(int64_t shard_bytes) {
  ConvertOptions pixels;
  pixels.layout = LayoutKind::kTar;
  pixels.shard_bytes = shard_bytes;
  pixels.pixels = true;
  return pixels;
}
constexpr const char* kPixelsName = "tar, raw pixels, 16 shards, streamed";

}  // namespace

std::vector<Candidate> PlanStoreCandidates(const SampleSource& source, const std::string& source_path,
                                           const std::string& scratch, bool jpegs, bool decode_images,
                                           std::vector<std::string>* left_out) {
  std::vector<Candidate> out;
  const std::string kind = source.kind();
  if (kind == "folder" || kind == "imagefolder") {
    Candidate as_is;
    as_is.name = "as-is: an object per sample";
    as_is.as_is = true;
    as_is.copy_files = true;
    as_is.on_store = true;
    as_is.data = scratch + "as-is/";
    as_is.workload_yaml = "  kind: files\n  layout: files\n  path: " + Quoted(as_is.data) + "\n";
    out.push_back(as_is);
  } else if (kind == "tar") {
    ConvertOptions o;  // the source's shards, written again from the sample at their size
    o.layout = LayoutKind::kTar;
    o.shard_bytes = std::max<int64_t>(1, source.total_bytes() / std::max<int64_t>(1, source.shard_count()));
    Candidate c = OnStore("as-is: tar", scratch, "as-is", o, false);
    c.as_is = true;
    out.push_back(c);
  } else {
    throw std::invalid_argument(source_path + " (" + kind + ") is read from local paths only, so on a store its "
                                "layout as it is would not be measured beside the others; on a store layout "
                                "measures a folder of files, an ImageFolder tree or tar shards (convert this one "
                                "first: feedtune convert " + source_path + " DST --layout tar), or give a local "
                                "--scratch to measure it on this box");
  }
  ConvertOptions tar;
  tar.layout = LayoutKind::kTar;
  tar.shard_bytes = std::max<int64_t>(1, source.total_bytes() / kStoreShardParts[0]);
  out.push_back(OnStore("tar, 16 shards, map-style", scratch, "tar", tar, false));
  for (const int parts : kStoreShardParts) {
    ConvertOptions o = tar;
    o.shard_bytes = std::max<int64_t>(1, source.total_bytes() / parts);
    const std::string slug = parts == kStoreShardParts[0] ? "tar" : "tar-" + std::to_string(parts);
    out.push_back(OnStore("tar, " + std::to_string(parts) + " shards, streamed", scratch, slug, o, true));
  }
  left_out->push_back("lmdb, hdf5 and npy: read from local paths only (a store is read as an object per sample or "
                      "as tar shards), so not candidates on a store");
  if (decode_images) {
    // Raw pixels in the shard size of the JPEGs' "tar, 16 shards, streamed"
    // (a sixteenth of the JPEG sample's bytes, the local candidate's size),
    // not in shards of the 8 MiB stream window: the two rows then differ
    // only in what the pixels change, their bytes (about 5.7x the JPEGs', so
    // about 5.7x the shards and the GETs) and the decode they save. Shards
    // of the window's size would save GETs only where a sixteenth is under
    // the window (a small sample), and there they would be a few shards that
    // starve the streamed readers; past the window a shard saves no GET.
    out.push_back(OnStore(kPixelsName, scratch, "tar-pixels", PixelsInShardsOf(tar.shard_bytes), true));
    for (Candidate& c : out) c.workload_yaml += kDecodeYaml;
  } else if (jpegs) {
    left_out->push_back("tar, raw pixels: the JPEGs are measured undecoded (--decode none), and decoded pixels, "
                        "whose point is the decode they save, are measured only where the job decodes (leave "
                        "--decode out)");
  }
  return out;
}

int64_t RequestsPerEpoch(const Candidate& candidate, const SampleSource& source, int64_t bytes) {
  if (!candidate.streamed) return source.size();
  // The shards convert writes: of the samples as the layout stores them.
  const std::unique_ptr<SampleSource> pixels = candidate.convert.pixels ? DecodedPixelsOf(source) : nullptr;
  const int64_t shards = ShardCount(pixels ? *pixels : source, candidate.convert.shard_bytes);
  const int64_t shard_bytes = (bytes + shards - 1) / shards;
  const int64_t window = workloads::RemoteTarDataset::kStreamWindow;
  return shards * std::max<int64_t>(1, (shard_bytes + window - 1) / window);
}

std::vector<Candidate> PlanCandidates(const SampleSource& source, const std::string& source_path,
                                      const std::string& scratch, bool decode_images) {
  std::vector<Candidate> out;
  const std::string kind = source.kind();
  // The source as it is.
  Candidate as_is;
  as_is.as_is = true;
  if (kind == "folder" || kind == "imagefolder") {
    as_is.name = "as-is: a file per sample";
    as_is.copy_files = true;
    as_is.data = (fs::path(scratch) / "as-is").string();
    as_is.workload_yaml = "  kind: files\n  layout: files\n  path: " + Quoted(as_is.data) + "\n";
    out.push_back(as_is);
  } else if (kind == "hdf5") {
    ConvertOptions o;
    o.layout = LayoutKind::kHdf5;
    for (const auto& info : workloads::Hdf5Dataset::ListDatasets(source_path)) {
      if (info.rows() == source.size() && info.row_bytes == source.fixed_sample_bytes() && info.name != "/labels") {
        o.chunk_samples = std::max<int64_t>(1, info.chunk_rows());
        o.gzip_level = GzipLevel(info.filters);
        break;
      }
    }
    Candidate c = Converted("as-is: hdf5, chunk " + std::to_string(o.chunk_samples) +
                                (o.gzip_level >= 0 ? ", gzip:" + std::to_string(o.gzip_level) : ""),
                            scratch, "as-is", o);
    c.as_is = true;
    out.push_back(c);
  } else if (const std::optional<LayoutKind> same = LayoutNamed(kind); same && *same != LayoutKind::kHdf5) {
    ConvertOptions o;  // npy, lmdb, tar: the source's own layout, written again from the sample
    o.layout = *same;
    if (*same == LayoutKind::kTar) {
      o.shard_bytes = std::max<int64_t>(1, source.total_bytes() / std::max<int64_t>(1, source.shard_count()));
    }
    Candidate c = Converted("as-is: " + kind, scratch, "as-is", o);
    c.as_is = true;
    out.push_back(c);
  } else {  // tfrecord, feedtune shards: read where they are
    as_is.name = "as-is: " + kind + " (in place)";
    as_is.in_place = true;
    as_is.data = source_path;
    as_is.workload_yaml = kind == "tfrecord" ? "  kind: tfrecord\n  path: " + Quoted(source_path) + "\n"
                                             : "  kind: files\n  layout: shards\n  path: " + Quoted(source_path) + "\n";
    out.push_back(as_is);
  }
  // Tar shards of two sizes: a sixteenth of the sample each, so 16 readers
  // have one each, read map-style and streamed from one copy; and a
  // sixty-fourth, streamed (more, smaller files: more readers kept busy, more
  // opens and shorter sequential runs). Larger shards than a sixteenth are
  // not measured: a sample's few shards would starve the streamed readers,
  // which the whole dataset's many shards of that size would not.
  ConvertOptions tar;
  tar.layout = LayoutKind::kTar;
  tar.shard_bytes = std::max<int64_t>(1, source.total_bytes() / 16);
  Candidate random = Converted("tar, 16 shards, map-style", scratch, "tar", tar);
  Candidate stream = random;
  stream.name = "tar, 16 shards, streamed";
  stream.workload_yaml += "  access: stream\n";
  stream.streamed = true;
  out.push_back(random);
  out.push_back(stream);
  ConvertOptions small_shards = tar;
  small_shards.shard_bytes = std::max<int64_t>(1, source.total_bytes() / 64);
  Candidate small = Converted("tar, 64 shards, streamed", scratch, "tar-64", small_shards);
  small.workload_yaml += "  access: stream\n";
  small.streamed = true;
  out.push_back(small);
  if (decode_images) {
    Candidate raw = Converted(kPixelsName, scratch, "tar-pixels", PixelsInShardsOf(tar.shard_bytes));
    raw.workload_yaml += "  access: stream\n";
    raw.streamed = true;
    out.push_back(raw);
  }
  if (kind != "lmdb") {
    ConvertOptions lmdb;
    lmdb.layout = LayoutKind::kLmdb;
    out.push_back(Converted("lmdb", scratch, "lmdb", lmdb));
  }
  // HDF5 and npy hold rows of one size, and their readers do not decode.
  if (source.fixed_sample_bytes() > 0 && !decode_images) {
    for (int64_t chunk : {int64_t{1}, int64_t{32}}) {
      for (int gzip : {-1, 4}) {
        ConvertOptions h;
        h.layout = LayoutKind::kHdf5;
        h.chunk_samples = chunk;
        h.gzip_level = gzip;
        const std::string slug = "hdf5-chunk" + std::to_string(chunk) + (gzip >= 0 ? "-gzip4" : "");
        out.push_back(Converted("hdf5, chunk " + std::to_string(chunk) + (gzip >= 0 ? ", gzip:4" : ""), scratch,
                                slug, h));
      }
    }
    if (kind != "npy") {
      ConvertOptions n;
      n.layout = LayoutKind::kNpy;
      out.push_back(Converted("npy", scratch, "npy", n));
    }
  }
  if (decode_images) {
    for (Candidate& c : out) c.workload_yaml += kDecodeYaml;
  }
  return out;
}

std::string ConvertArguments(const Candidate& candidate) {
  const ConvertOptions& o = candidate.convert;
  std::string out = std::string("--layout ") + NameOf(o.layout);
  if (o.layout == LayoutKind::kTar) out += " --shard-bytes " + std::to_string(o.shard_bytes);
  if (o.layout == LayoutKind::kHdf5) {
    out += " --chunk-samples " + std::to_string(o.chunk_samples);
    if (o.gzip_level >= 0) out += " --compression gzip:" + std::to_string(o.gzip_level);
  }
  if (o.pixels) out += " --pixels";
  return out;
}

namespace {

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// The sampled objects (or files) copied under the candidate's prefix as
// they are, one PUT each, under the same names below the source; a remote
// source's samples fetched ahead in batches (WillRead).
WrittenCandidate CopyToStore(const Candidate& candidate, const SampleSource& sample, const std::atomic<bool>& stop) {
  constexpr int64_t kBatch = 64;
  const auto start = std::chrono::steady_clock::now();
  const storage::Location at = storage::ParseLocation(candidate.data);
  storage::ObjectClient client(at, storage::ResolveAwsConfig(storage::ProcessEnvironment()));
  WrittenCandidate w;
  std::vector<std::byte> bytes;
  for (int64_t first = 0; first < sample.size(); first += kBatch) {
    std::vector<int64_t> batch;
    for (int64_t i = first; i < std::min(sample.size(), first + kBatch); ++i) batch.push_back(i);
    sample.WillRead(batch);
    for (const int64_t i : batch) {
      if (stop.load()) throw std::runtime_error("interrupted");
      sample.Read(i, &bytes);
      client.Put(at.prefix + sample.copy_name(i), bytes);
      w.bytes_on_disk += static_cast<int64_t>(bytes.size());
    }
  }
  w.write_seconds = SecondsSince(start);
  return w;
}

// Written by Convert to the candidate's prefix (a StoreDestination): its
// shards' bytes as the convert counted them, and its write time without the
// verification, which reads every shard back.
WrittenCandidate ConvertToStore(const Candidate& candidate, const SampleSource& sample, const std::atomic<bool>& stop) {
  const auto start = std::chrono::steady_clock::now();
  double verify_started = -1;
  const auto progress = [&](const ConvertProgress& p) {
    if (verify_started < 0 && std::string(p.phase) == "verify") verify_started = SecondsSince(start);
  };
  const ConvertResult r = Convert(sample, sample.root(), candidate.data, candidate.convert, progress, stop);
  if (r.interrupted) throw std::runtime_error("interrupted");
  WrittenCandidate w;
  w.write_seconds = verify_started >= 0 ? verify_started : SecondsSince(start);
  w.bytes_on_disk = r.bytes_on_disk;
  return w;
}

}  // namespace

WrittenCandidate WriteCandidate(const Candidate& candidate, const SampleSource& sample, const std::atomic<bool>& stop) {
  if (candidate.on_store) {
    return candidate.copy_files ? CopyToStore(candidate, sample, stop) : ConvertToStore(candidate, sample, stop);
  }
  WrittenCandidate w;
  std::error_code ec;
  const auto start = std::chrono::steady_clock::now();
  if (candidate.in_place) {
    w.bytes_on_disk = static_cast<int64_t>(static_cast<double>(BytesOnDisk(candidate.data)));
    w.write_seconds = 0;
    return w;
  }
  const bool written = fs::exists(fs::path(candidate.data) / kManifestName, ec) ||
                       (candidate.copy_files && fs::exists(candidate.data, ec));
  if (!written && candidate.copy_files) {
    // The sampled files as they are, under the same names below the source.
    std::vector<std::byte> bytes;
    for (int64_t i = 0; i < sample.size(); ++i) {
      if (stop.load()) throw std::runtime_error("interrupted");
      const fs::path to = fs::path(candidate.data) / sample.copy_name(i);
      fs::create_directories(to.parent_path(), ec);
      sample.Read(i, &bytes);
      const workloads::UniqueFd fd(::open(to.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
      if (!fd.valid()) throw std::runtime_error(to.string() + ": cannot create: " + workloads::ErrnoText(errno));
      workloads::WriteFull(fd.get(), to.string(), bytes);
    }
    // Synced, so that the cold windows can evict them (dirty pages stay).
    const workloads::UniqueFd dir(::open(candidate.data.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (dir.valid()) ::syncfs(dir.get());
    w.write_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  } else if (!written) {
    double verify_started = -1;
    const auto progress = [&](const ConvertProgress& p) {
      if (verify_started < 0 && std::string(p.phase) == "verify") {
        verify_started = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      }
    };
    const ConvertResult r = Convert(sample, sample.root(), candidate.data, candidate.convert, progress, stop);
    if (r.interrupted) throw std::runtime_error("interrupted");
    w.write_seconds = verify_started >= 0
                          ? verify_started
                          : std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  w.bytes_on_disk = BytesOnDisk(candidate.data);
  if (candidate.convert.layout == LayoutKind::kHdf5 && !candidate.copy_files) {
    w.read_amplification = Hdf5Amplification(candidate.data + "/data.h5");
  }
  return w;
}

}  // namespace feedtune::layout
