// The key table: every leaf key of a sweep config, declared once (its dotted
// path, its type and range, accessors into SweepConfig), and the walks over
// its paths that parsing, `--set`, ToYaml, WorkloadHash and the key reference
// share. The scalar readers and the wording of errors are in scalars.cc.
#include "tuner/config/keys.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

namespace feedtune::tuner {
namespace config_internal {
namespace {

using device::BackendChoice;
using loader::WorkerMode;

// Accessors are generated from a chain of pointers to members, e.g.
// <&SweepConfig::loader, &LoaderOptions::knobs, &Knobs::batch_size>, so each
// table row names its field once and the table stays constexpr.
template <auto... kMembers, typename C>
auto& FieldOf(C& config) {
  // clang-format off
  return (config .* ... .* kMembers);  // a left fold: ((config.*m1).*m2)...
  // clang-format on
}

template <auto... kMembers>
int64_t GetInt(const SweepConfig& c) {
  return static_cast<int64_t>(FieldOf<kMembers...>(c));
}
template <auto... kMembers>
void SetInt(SweepConfig& c, int64_t v) {
  auto& field = FieldOf<kMembers...>(c);
  field = static_cast<std::remove_reference_t<decltype(field)>>(v);
}
template <auto... kMembers>
uint64_t GetUint(const SweepConfig& c) {
  return FieldOf<kMembers...>(c);
}
template <auto... kMembers>
void SetUint(SweepConfig& c, uint64_t v) {
  FieldOf<kMembers...>(c) = v;
}
template <auto... kMembers>
double GetReal(const SweepConfig& c) {
  return FieldOf<kMembers...>(c);
}
template <auto... kMembers>
void SetReal(SweepConfig& c, double v) {
  FieldOf<kMembers...>(c) = v;
}
template <auto... kMembers>
bool GetBool(const SweepConfig& c) {
  return FieldOf<kMembers...>(c);
}
template <auto... kMembers>
void SetBool(SweepConfig& c, bool v) {
  FieldOf<kMembers...>(c) = v;
}
template <auto... kMembers>
const std::string& GetString(const SweepConfig& c) {
  return FieldOf<kMembers...>(c);
}
template <auto... kMembers>
void SetString(SweepConfig& c, std::string v) {
  FieldOf<kMembers...>(c) = std::move(v);
}
template <auto... kMembers>
const std::vector<int>& GetList(const SweepConfig& c) {
  return FieldOf<kMembers...>(c);
}
template <auto... kMembers>
void SetList(SweepConfig& c, std::vector<int> v) {
  FieldOf<kMembers...>(c) = std::move(v);
}
template <auto... kMembers>
const std::vector<std::string>& GetStrings(const SweepConfig& c) {
  return FieldOf<kMembers...>(c);
}
template <auto... kMembers>
void SetStrings(SweepConfig& c, std::vector<std::string> v) {
  FieldOf<kMembers...>(c) = std::move(v);
}
template <typename T, auto... kMembers>
const T& GetObject(const SweepConfig& c) {
  return FieldOf<kMembers...>(c);
}
template <typename T, auto... kMembers>
T& MutObject(SweepConfig& c) {
  return FieldOf<kMembers...>(c);
}
template <typename Enum, const char* (*kName)(Enum)>
const char* EnumName(int value) {
  return kName(static_cast<Enum>(value));
}

template <auto... kM>
constexpr IntKey Int(int64_t lo, int64_t hi) {
  return {lo, hi, &GetInt<kM...>, &SetInt<kM...>};
}
template <auto... kM>
constexpr AutoIntKey AutoInt(int64_t lo, int64_t hi) {
  return {lo, hi, &GetInt<kM...>, &SetInt<kM...>};
}
template <auto... kM>
constexpr SeedKey Seed() {
  return {&GetUint<kM...>, &SetUint<kM...>};
}
template <auto... kM>
constexpr RealKey Real(double lo, bool lo_open, double hi, bool hi_open) {
  return {lo, lo_open, hi, hi_open, &GetReal<kM...>, &SetReal<kM...>};
}
template <auto... kM>
constexpr BoolKey Bool() {
  return {&GetBool<kM...>, &SetBool<kM...>};
}
template <auto... kM>
constexpr LabelKey Label() {
  return {&GetString<kM...>, &SetString<kM...>};
}
template <auto... kM>
constexpr IntListKey IntList(int64_t lo, int64_t hi) {
  return {lo, hi, &GetList<kM...>, &SetList<kM...>};
}
template <auto... kM>
constexpr EnumKey Enum(int count, const char* (*name)(int), std::string_view planned = {}) {
  return {count, name, planned, &GetInt<kM...>, &SetInt<kM...>};
}
template <auto... kM>
constexpr StringKey String() {
  return {&GetString<kM...>, &SetString<kM...>};
}
template <auto... kM>
constexpr OptionalStringKey OptionalString() {
  return {&GetString<kM...>, &SetString<kM...>};
}
template <auto... kM>
constexpr StringListKey StringList() {
  return {&GetStrings<kM...>, &SetStrings<kM...>};
}
template <auto... kM>
constexpr SizeKey Size(int64_t lo, int64_t hi) {
  return {lo, hi, &GetObject<workloads::SyntheticOptions, kM...>,
          &MutObject<workloads::SyntheticOptions, kM...>};
}
template <auto... kM>
constexpr FaultKey Fault() {
  return {&GetObject<workloads::FaultOptions, kM...>, &MutObject<workloads::FaultOptions, kM...>};
}
template <auto... kM>
constexpr StartMethodsKey StartMethods() {
  using Methods = std::vector<loader::StartMethod>;
  return {&GetObject<Methods, kM...>, &MutObject<Methods, kM...>};
}

constexpr auto kWorkload = &SweepConfig::workload;
constexpr auto kSynthetic = &workloads::WorkloadOptions::synthetic;
using Synthetic = workloads::SyntheticOptions;
constexpr auto kFiles = &workloads::WorkloadOptions::files;
using Files = workloads::FilesOptions;
constexpr auto kFormat = &workloads::WorkloadOptions::format;
using Format = workloads::FormatOptions;
constexpr auto kCommand = &workloads::WorkloadOptions::command;
using Command = workloads::CommandOptions;
constexpr auto kLoader = &SweepConfig::loader;
constexpr auto kKnobs = &loader::LoaderOptions::knobs;
using Knobs = loader::Knobs;
using LoaderOptions = loader::LoaderOptions;
constexpr auto kDevice = &SweepConfig::device;
constexpr auto kHostSim = &device::DeviceOptions::host_sim;
using DeviceOptions = device::DeviceOptions;
using HostSim = device::HostSimOptions;
constexpr auto kSweep = &SweepConfig::sweep;
constexpr auto kBudget = &SweepOptions::budget;
constexpr auto kBackground = &SweepOptions::background;

constexpr int64_t kMaxUs = 10'000'000;

constexpr PathKey Path(KindMask list_kinds) {
  return {list_kinds, &GetString<kWorkload, kFiles, &Files::path>, &SetString<kWorkload, kFiles, &Files::path>,
          &GetStrings<kWorkload, kFiles, &Files::path_list>, &SetStrings<kWorkload, kFiles, &Files::path_list>};
}

// Sections must be contiguous: ToYaml opens a section at its first key.
constexpr Key kKeyTable[] = {
    {"name", Hashed::kNo, Label<&SweepConfig::name>()},

    {"workload.kind", Hashed::kYes,
     Enum<kWorkload, &workloads::WorkloadOptions::kind>(
         static_cast<int>(workloads::kLastWorkloadKind) + 1,
         &EnumName<WorkloadKind, &workloads::WorkloadKindName>)},
    // files and the formats: where the data is and how it is read. The path is
    // where this machine keeps it, not what it is, so it is not hashed; the
    // sharded formats also take a list of shards.
    {"workload.path", Hashed::kNo, Path(kSharded), kOnDisk},
    {"workload.layout", Hashed::kYes,
     Enum<kWorkload, kFiles, &Files::layout>(
         static_cast<int>(workloads::FilesLayout::kFiles) + 1,
         &EnumName<workloads::FilesLayout, &workloads::FilesLayoutName>),
     kFilesOnly},
    {"workload.io", Hashed::kYes,
     Enum<kWorkload, kFiles, &Files::io>(static_cast<int>(workloads::FilesIo::kMmap) + 1,
                                         &EnumName<workloads::FilesIo, &workloads::FilesIoName>),
     kFilesOnly | kNpyOnly},
    {"workload.cache", Hashed::kYes,
     Enum<kWorkload, kFiles, &Files::cache>(
         static_cast<int>(workloads::CacheMode::kCold) + 1,
         &EnumName<workloads::CacheMode, &workloads::CacheModeName>),
     kOnDisk},
    // files (layout files), tfrecord, tar and lmdb: each sample a JPEG (or
    // raw pixels, PPM), decoded, cropped and resized (workloads/jpeg_samples.h). kIfSet: workloads
    // written before these keys keep their hashes.
    {"workload.decode", Hashed::kIfSet,
     Enum<kWorkload, kFiles, &Files::decode>(
         static_cast<int>(workloads::FilesDecode::kJpeg) + 1,
         &EnumName<workloads::FilesDecode, &workloads::FilesDecodeName>),
     kJpegDecoding},
    {"workload.crop", Hashed::kIfSet,
     Enum<kWorkload, kFiles, &Files::crop>(static_cast<int>(workloads::CropMode::kCenter) + 1,
                                           &EnumName<workloads::CropMode, &workloads::CropModeName>),
     kJpegDecoding},
    {"workload.resize", Hashed::kIfSet, Int<kWorkload, kFiles, &Files::resize>(1, 4096), kJpegDecoding},
    // hdf5: which datasets in the file, and HDF5's chunk cache per open dataset
    // (per worker process), which decides how often a compressed chunk is inflated.
    {"workload.dataset", Hashed::kYes, String<kWorkload, kFormat, &Format::dataset>(), kHdf5Only},
    {"workload.labels", Hashed::kYes, OptionalString<kWorkload, kFormat, &Format::labels>(),
     kHdf5Only},
    {"workload.hdf5.chunk_cache_mb", Hashed::kYes,
     Int<kWorkload, kFormat, &Format::hdf5_chunk_cache_mb>(0, 1 << 20), kHdf5Only},
    // lmdb: the kernel's readahead on the memory map (off: MDB_NORDAHEAD).
    {"workload.lmdb.readahead", Hashed::kYes, Bool<kWorkload, kFormat, &Format::lmdb_readahead>(),
     kLmdbOnly},
    // tfrecord and tar: shard files read as a map-style dataset (random) or as
    // an IterableDataset, each worker its own shards through a shuffle buffer
    // (stream); tfrecord: one bytes feature of each tf.train.Example, and
    // where indexes go when the data's folder is read-only.
    {"workload.access", Hashed::kYes,
     Enum<kWorkload, kFormat, &Format::access>(
         static_cast<int>(workloads::ShardAccess::kStream) + 1,
         &EnumName<workloads::ShardAccess, &workloads::ShardAccessName>),
     kSharded},
    {"workload.shuffle_buffer", Hashed::kYes, Int<kWorkload, kFormat, &Format::shuffle_buffer>(0, 10000000),
     kSharded},
    {"workload.feature", Hashed::kYes, OptionalString<kWorkload, kFormat, &Format::feature>(), kTfRecordOnly},
    {"workload.index_cache", Hashed::kNo, OptionalString<kWorkload, kFormat, &Format::index_cache>(),
     kTfRecordOnly},
    // command: the user's pipeline, one process per repeat (protocol run) or per sweep (serve).
    {"workload.argv", Hashed::kYes, StringList<kWorkload, kCommand, &Command::argv>(),
     kCommandOnly},
    {"workload.timeout_s", Hashed::kNo,
     Real<kWorkload, kCommand, &Command::timeout_s>(0, kOpen, kInf, kOpen), kCommandOnly},
    // How the command is driven, not what it measures: runs of either protocol compare.
    {"workload.protocol", Hashed::kNo,
     Enum<kWorkload, kCommand, &Command::protocol>(
         static_cast<int>(workloads::CommandProtocol::kServe) + 1,
         &EnumName<workloads::CommandProtocol, &workloads::CommandProtocolName>),
     kCommandOnly},
    // The command reads an object store and takes fetch_concurrency per trial.
    {"workload.remote_reads", Hashed::kIfSet, Bool<kWorkload, kCommand, &Command::remote_reads>(), kCommandOnly},
    // synthetic (and, for the per-sample cost, files).
    {"workload.samples", Hashed::kYes,
     Int<kWorkload, kSynthetic, &Synthetic::samples>(1, 1'000'000'000), kSyntheticOnly},
    {"workload.sample_bytes", Hashed::kYes, Size<kWorkload, kSynthetic>(1, int64_t{1} << 30),
     kSyntheticOnly},
    {"workload.cpu_us_per_sample", Hashed::kYes,
     Int<kWorkload, kSynthetic, &Synthetic::cpu_us_per_sample>(0, kMaxUs), kDatasets},
    // Intra-op threads a sample's CPU work is split over (OpenMP inside a
    // transform); the worker_threads knob overrides it per trial.
    {"workload.cpu_threads", Hashed::kIfSet,
     Int<kWorkload, kSynthetic, &Synthetic::cpu_threads>(1, 1024), kDatasets},
    {"workload.io_us_per_sample", Hashed::kYes,
     Int<kWorkload, kSynthetic, &Synthetic::io_us_per_sample>(0, kMaxUs), kSyntheticOnly},
    {"workload.jitter", Hashed::kYes,
     Real<kWorkload, kSynthetic, &Synthetic::jitter>(0, kClosed, 1, kClosed), kDatasets},
    {"workload.worker_init_us", Hashed::kYes,
     Int<kWorkload, kSynthetic, &Synthetic::worker_init_us>(0, kMaxUs), kDatasets},
    // What the run paid is stored with it; the workload is the same either way.
    {"workload.torch_costs", Hashed::kNo,
     Enum<kWorkload, kSynthetic, &Synthetic::torch_costs>(
         static_cast<int>(workloads::TorchCostsMode::kOff) + 1,
         &EnumName<workloads::TorchCostsMode, &workloads::TorchCostsModeName>),
     kDatasets},
    // Memory each read keeps for good (a drill of the growth flag); kIfSet:
    // workloads without it keep their hashes.
    {"workload.leak_bytes_per_sample", Hashed::kIfSet,
     Int<kWorkload, kSynthetic, &Synthetic::leak_bytes_per_sample>(0, int64_t{1} << 30), kSyntheticOnly},
    {"workload.fault", Hashed::kIfSet, Fault<kWorkload, kSynthetic, &Synthetic::fault>(),
     kDatasets},
    {"workload.seed", Hashed::kYes, Seed<kWorkload, kSynthetic, &Synthetic::seed>(), kDatasets},

    {"loader.batch_size", Hashed::kYes, Int<kLoader, kKnobs, &Knobs::batch_size>(1, 65536)},
    {"loader.shuffle", Hashed::kYes, Bool<kLoader, &LoaderOptions::shuffle>()},
    {"loader.drop_last", Hashed::kYes, Bool<kLoader, &LoaderOptions::drop_last>()},
    {"loader.worker_mode", Hashed::kNo,
     Enum<kLoader, &LoaderOptions::worker_mode>(static_cast<int>(WorkerMode::kThread) + 1,
                                                &EnumName<WorkerMode, &loader::WorkerModeName>)},
    {"loader.num_workers", Hashed::kNo, Int<kLoader, kKnobs, &Knobs::num_workers>(0, 1024)},
    {"loader.pin_memory", Hashed::kNo, Bool<kLoader, kKnobs, &Knobs::pin_memory>()},
    {"loader.non_blocking", Hashed::kNo, Bool<kLoader, kKnobs, &Knobs::non_blocking>()},
    // Carried even when num_workers is 0 (torch rejects that combination, but a
    // sweep sets num_workers per trial, so the base value must be allowed).
    {"loader.prefetch_factor", Hashed::kNo, Int<kLoader, kKnobs, &Knobs::prefetch_factor>(1, 64)},
    {"loader.persistent_workers", Hashed::kNo, Bool<kLoader, kKnobs, &Knobs::persistent_workers>()},
    // Intra-op threads per worker and rank (Knobs::worker_threads; 0 = the
    // workload's own): a sweep varies it, a trial can name it.
    {"loader.worker_threads", Hashed::kNo, Int<kLoader, kKnobs, &Knobs::worker_threads>(0, 1024)},
    // Requests in flight per worker (Knobs::fetch_concurrency): for remote
    // data (s3://, https://) a sweep tunes it with num_workers; 1 is torch's.
    {"loader.fetch_concurrency", Hashed::kNo, Int<kLoader, kKnobs, &Knobs::fetch_concurrency>(1, 1024)},
    // The Python workers' start method (Knobs::multiprocessing_context): a
    // command's knob, passed to the probe per trial; default = the interpreter's.
    {"loader.multiprocessing_context", Hashed::kNo,
     Enum<kLoader, kKnobs, &Knobs::multiprocessing_context>(
         static_cast<int>(loader::StartMethod::kSpawn) + 1, &EnumName<loader::StartMethod, &loader::StartMethodName>),
     kCommandOnly},
    {"loader.timeout_s", Hashed::kNo,
     Real<kLoader, &LoaderOptions::timeout_s>(0, kClosed, kInf, kOpen)},
    {"loader.seed", Hashed::kYes, Seed<kLoader, &LoaderOptions::seed>()},

    {"device.backend", Hashed::kNo,
     Enum<kDevice, &DeviceOptions::backend>(static_cast<int>(BackendChoice::kHostSim) + 1,
                                            &EnumName<BackendChoice, &device::BackendChoiceName>)},
    {"device.step_us", Hashed::kYes, Int<kDevice, &DeviceOptions::step_us>(0, 100'000'000)},
    {"device.sync_every_steps", Hashed::kYes,
     Int<kDevice, &DeviceOptions::sync_every_steps>(0, 1'000'000)},
    {"device.prefetch_to_device", Hashed::kYes,
     Bool<kDevice, &DeviceOptions::prefetch_to_device>()},
    // How ranks meet (tuner/measure/node_measurer.h): measured, not what is measured.
    {"device.rank_barrier", Hashed::kNo, Bool<kDevice, &DeviceOptions::rank_barrier>()},
    {"device.host_sim.h2d_gbps_pinned", Hashed::kNo,
     Real<kDevice, kHostSim, &HostSim::h2d_gbps_pinned>(0, kOpen, kInf, kOpen)},
    {"device.host_sim.h2d_gbps_pageable", Hashed::kNo,
     Real<kDevice, kHostSim, &HostSim::h2d_gbps_pageable>(0, kOpen, kInf, kOpen)},

    {"sweep.max_workers", Hashed::kNo, AutoInt<kSweep, &SweepOptions::max_workers>(1, 1024)},
    {"sweep.prefetch_factors", Hashed::kNo,
     IntList<kSweep, &SweepOptions::prefetch_factors>(1, 64)},
    {"sweep.repeats", Hashed::kNo, Int<kSweep, &SweepOptions::repeats>(1, 100)},
    {"sweep.warmup_batches", Hashed::kNo, Int<kSweep, &SweepOptions::warmup_batches>(0, 1'000'000)},
    {"sweep.measure_seconds", Hashed::kNo,
     Real<kSweep, &SweepOptions::measure_seconds>(0, kOpen, 3600, kClosed)},
    {"sweep.gain_threshold", Hashed::kNo,
     Real<kSweep, &SweepOptions::gain_threshold>(0, kClosed, 1, kOpen)},
    {"sweep.knee_tolerance", Hashed::kNo,
     Real<kSweep, &SweepOptions::knee_tolerance>(0, kClosed, 1, kOpen)},
    {"sweep.time_budget_s", Hashed::kNo,
     Real<kSweep, &SweepOptions::time_budget_s>(0, kClosed, kInf, kOpen)},
    {"sweep.copy_phases", Hashed::kNo, Bool<kSweep, &SweepOptions::copy_phases>()},
    {"sweep.ranks", Hashed::kNo, AutoInt<kSweep, &SweepOptions::ranks>(1, 1024)},
    {"sweep.cpu_binding", Hashed::kNo,
     Enum<kSweep, &SweepOptions::cpu_binding>(static_cast<int>(BindingChoice::kNuma) + 1,
                                              &EnumName<BindingChoice, &BindingChoiceName>)},
    // The multiprocessing_context phase's methods (tuner/search/search.h).
    {"sweep.start_methods", Hashed::kNo, StartMethods<kSweep, &SweepOptions::start_methods>(), kCommandOnly},
    // After the final check, stage trials at the best setting (tuner/measure/stage_runner.h).
    {"sweep.diagnose", Hashed::kNo, Bool<kSweep, &SweepOptions::diagnose>()},
    {"sweep.budget.memory_fraction", Hashed::kNo,
     Real<kSweep, kBudget, &BudgetOptions::memory_fraction>(0, kOpen, 1, kClosed)},
    {"sweep.budget.shm_fraction", Hashed::kNo,
     Real<kSweep, kBudget, &BudgetOptions::shm_fraction>(0, kOpen, 1, kClosed)},
    {"sweep.budget.job_epochs", Hashed::kNo, Int<kSweep, kBudget, &BudgetOptions::job_epochs>(1, 1'000'000)},
    // Other processes' CPU (tuner/measure/proc_stats.h, docs/measurement.md).
    {"sweep.background.warn_cpu", Hashed::kNo,
     Real<kSweep, kBackground, &BackgroundOptions::warn_cpu>(0, kClosed, kInf, kOpen)},
    {"sweep.background.disturbed_cpu", Hashed::kNo,
     Real<kSweep, kBackground, &BackgroundOptions::disturbed_cpu>(0, kOpen, kInf, kOpen)},
    {"sweep.background.sample_seconds", Hashed::kNo,
     Real<kSweep, kBackground, &BackgroundOptions::sample_seconds>(0, kClosed, 60, kClosed)},
};

}  // namespace

constinit const std::span<const Key> kKeys = kKeyTable;

// "a", "a and b", "a, b and c": the kinds of `mask`.
std::string KindNames(KindMask mask) {
  std::vector<std::string_view> names;
  for (int k = 0; k <= static_cast<int>(workloads::kLastWorkloadKind); ++k) {
    if ((mask & KindBit(static_cast<WorkloadKind>(k))) != 0) {
      names.emplace_back(workloads::WorkloadKindName(static_cast<WorkloadKind>(k)));
    }
  }
  std::string kinds;
  for (size_t n = 0; n < names.size(); ++n) {
    kinds += std::string(n == 0 ? "" : n + 1 == names.size() ? " and " : ", ") + std::string(names[n]);
  }
  return kinds;
}

const Key* FindKey(std::string_view path) {
  for (const Key& key : kKeys) {
    if (key.path == path) return &key;
  }
  return nullptr;
}

std::string Join(std::string_view prefix, std::string_view name) {
  if (prefix.empty()) return std::string(name);
  std::string out(prefix);
  out += '.';
  out += name;
  return out;
}

// A section is a proper prefix of some key path ("device", "device.host_sim").
bool IsSection(std::string_view path) {
  for (const Key& key : kKeys) {
    if (key.path.size() > path.size() && key.path.starts_with(path) &&
        key.path[path.size()] == '.') {
      return true;
    }
  }
  return false;
}

// The names allowed directly under `prefix` ("" = top level), in table order.
std::vector<std::string_view> ChildrenOf(std::string_view prefix) {
  std::vector<std::string_view> children;
  for (const Key& key : kKeys) {
    std::string_view rest = key.path;
    if (!prefix.empty()) {
      if (!(rest.size() > prefix.size() && rest.starts_with(prefix) &&
            rest[prefix.size()] == '.')) {
        continue;
      }
      rest.remove_prefix(prefix.size() + 1);
    }
    std::string_view child = rest.substr(0, rest.find('.'));
    if (std::find(children.begin(), children.end(), child) == children.end()) {
      children.push_back(child);
    }
  }
  return children;
}

std::vector<std::string_view> SplitPath(std::string_view path) {
  std::vector<std::string_view> parts;
  for (size_t start = 0;;) {
    const size_t dot = path.find('.', start);
    parts.push_back(path.substr(start, dot - start));
    if (dot == std::string_view::npos) return parts;
    start = dot + 1;
  }
}

std::string JoinList(const std::vector<std::string_view>& items, std::string_view sep) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += sep;
    out += items[i];
  }
  return out;
}

}  // namespace config_internal

CpuBinding StartBinding(BindingChoice choice) {
  switch (choice) {
    case BindingChoice::kAuto:
    case BindingChoice::kNone:
      return CpuBinding::kNone;
    case BindingChoice::kSplit:
      return CpuBinding::kSplit;
    case BindingChoice::kNuma:
      return CpuBinding::kNuma;
  }
  return CpuBinding::kNone;
}

const char* BindingChoiceName(BindingChoice choice) {
  switch (choice) {
    case BindingChoice::kAuto:
      return "auto";
    case BindingChoice::kNone:
      return "none";
    case BindingChoice::kSplit:
      return "split";
    case BindingChoice::kNuma:
      return "numa";
  }
  return "?";
}

}  // namespace feedtune::tuner
