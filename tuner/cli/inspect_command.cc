// `feedtune inspect PATH`: what a data file (or a folder of JPEGs) is, before any trial, over the
// describer in workloads/format_inspect.h: its layout in the format's own
// terms, the traps found in it in words, and a short single-threaded read
// measurement on this machine.
#include <algorithm>
#include <iostream>

#include "results/fingerprint.h"
#include "storage/object_client.h"
#include "storage/probe.h"
#include "tuner/cli/cli_util.h"
#include "workloads/format_inspect.h"
#include "workloads/shard_format.h"

namespace feedtune::cli {
namespace {

constexpr const char* kInspectUsage = R"(Usage: feedtune inspect PATH [options]

Describes a .npy file, an HDF5 file, an LMDB environment or a directory of
JPEGs (the format is told by its content), says what will make it slow to
read shuffled, and reads samples in shuffled order on one thread for a moment
to say what one costs here:
  npy    shape, dtype, bytes per sample
  hdf5   every dataset's shape, dtype, chunk shape and filters, and the bytes a
         shuffled read of one sample inflates with the given chunk cache (a
         gzip chunk larger than the cache is inflated whole for every sample)
  lmdb   entries, value sizes, map size, page size, file system
  jpeg   (a directory) images, file sizes and dimensions (quantiles), how many
         decode with DCT scaling; the measurement reads, decodes, crops and
         resizes each, as workload.decode: jpeg does

A remote PATH (s3://bucket/prefix, or an http(s):// URL of a server that
answers Range requests) is the store as seen from this box (docs/storage.md):
the time to the first byte (p50, p99), MB/s on one connection, and objects/s
at 1, 2, 4, ... requests in flight until it stops rising: the curve a user
would otherwise measure by hand, and where loader.fetch_concurrency's knee
lies. Credentials, region and endpoint as the AWS tools take them
(AWS_ACCESS_KEY_ID, AWS_REGION, AWS_ENDPOINT_URL, ~/.aws/credentials...).

Examples:
  feedtune inspect s3://my-bucket/train/ --format json
  feedtune inspect data/images.h5 --chunk-cache-mb 1
  feedtune inspect data/images.lmdb --format json
  feedtune inspect data/jpeg --crop center --resize 224)";

}  // namespace

int RunInspect(const Args& args) {
  po::options_description options("Options");
  std::string path, format_name, dataset, labels, crop;
  int64_t resize = workloads::kDefaultResize;
  int64_t chunk_cache_mb = workloads::kHdf5DefaultChunkCacheMb;
  double measure_seconds = 1.0;
  options.add_options()("help,h", "this help")("path", po::value(&path)->required(), "the data to inspect")(
      "format", po::value(&format_name)->default_value("table"), "table | json")(
      "dataset", po::value(&dataset)->default_value("/images"), "hdf5: the samples' dataset")(
      "labels", po::value(&labels)->default_value(""), "hdf5: a labels dataset read with each sample")(
      "chunk-cache-mb", po::value(&chunk_cache_mb)->default_value(workloads::kHdf5DefaultChunkCacheMb),
      "hdf5: the chunk cache per dataset (MiB), as workload.hdf5.chunk_cache_mb")(
      "readahead", "lmdb: measure with readahead on, as workload.lmdb.readahead: true")(
      "crop", po::value(&crop)->default_value("random"), "jpeg: random | center, as workload.crop")(
      "resize", po::value(&resize)->default_value(workloads::kDefaultResize), "jpeg: as workload.resize")(
      "measure-seconds", po::value(&measure_seconds)->default_value(1.0), "how long to read for (0: no measurement)");
  po::positional_options_description positional;
  positional.add("path", 1);
  int code = kExitOk;
  const auto vm = Parse(args, options, positional, kInspectUsage, &code);
  if (!vm) return code;
  if (format_name != "table" && format_name != "json") {
    std::cerr << "feedtune inspect: --format: expected table or json, got '" << format_name << "'\n";
    return kExitUsage;
  }
  if (chunk_cache_mb < 0 || chunk_cache_mb > (int64_t{1} << 20)) {
    std::cerr << "feedtune inspect: --chunk-cache-mb: expected an integer in [0, 1048576], got " << chunk_cache_mb
              << "\n";
    return kExitUsage;
  }
  if (crop != "random" && crop != "center") {
    std::cerr << "feedtune inspect: --crop: expected random or center, got '" << crop << "'\n";
    return kExitUsage;
  }
  if (resize < 1 || resize > 4096) {
    std::cerr << "feedtune inspect: --resize: expected an integer in [1, 4096], got " << resize << "\n";
    return kExitUsage;
  }
  if (!(measure_seconds >= 0 && measure_seconds <= 600)) {
    std::cerr << "feedtune inspect: --measure-seconds: expected a number in [0, 600]\n";
    return kExitUsage;
  }
  workloads::InspectOptions inspect;
  inspect.dataset = dataset;
  inspect.labels = labels;
  inspect.chunk_cache_mb = chunk_cache_mb;
  inspect.lmdb_readahead = vm->count("readahead") > 0;
  inspect.measure_seconds = measure_seconds;
  inspect.crop = crop == "center" ? workloads::CropMode::kCenter : workloads::CropMode::kRandom;
  inspect.resize = resize;
  inspect.usable_cpus = results::ReadFingerprint().usable_cpus;
  if (storage::IsRemote(path)) {
    try {
      storage::ObjectClient client(storage::ParseLocation(path),
                                   storage::ResolveAwsConfig(storage::ProcessEnvironment()));
      storage::ProbeOptions probe;
      if (measure_seconds > 0) probe.budget_s = std::max(probe.budget_s, measure_seconds);
      const storage::ProbeResult result = storage::ProbeStore(client, probe);
      std::cout << (format_name == "json" ? storage::ProbeJson(result).dump() + "\n" : storage::ProbeText(result));
      return kExitOk;
    } catch (const std::invalid_argument& e) {  // a URL or credentials that do not fit
      std::cerr << "feedtune inspect: " << e.what() << "\n";
      return kExitUsage;
    } catch (const storage::StorageError& e) {
      std::cerr << "feedtune inspect: " << e.what() << "\n";
      return kExitFailure;
    }
  }
  try {
    const workloads::InspectReport report = workloads::Inspect(path, inspect);
    std::cout << (format_name == "json" ? report.ToJson() + "\n" : report.ToText());
    return kExitOk;
  } catch (const workloads::DatasetNotFound& e) {
    std::cerr << "feedtune inspect: " << e.what() << "\n";
    return kExitUsage;
  } catch (const workloads::DatasetCorrupt& e) {
    std::cerr << "feedtune inspect: " << e.what() << "\n";
    return kExitUsage;
  }
}

}  // namespace feedtune::cli
