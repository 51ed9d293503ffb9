// Strict sweep-config parsing (DESIGN.md §4).
//
// Every leaf key is declared once, in kKeys below: its dotted path, its type and
// range, and accessors into SweepConfig. Parsing, `--set` overrides, ToYaml,
// WorkloadHash and the "did you mean" suggestions all walk that one table, so a
// new key cannot be parsed but forgotten in the printed config (or vice versa).
//
// Error messages are one line, "<source>:<line>:<column>: <key.path>: expected
// <what>, got <what was found>", because users fix configs from that line alone
// and editors jump to file:line:column.
#include "tuner/config/config.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "workloads/command_args.h"
#include "workloads/format_io.h"
#include "workloads/jpeg_image.h"
#include "workloads/shard_format.h"

namespace feedtune::tuner {
namespace {

using device::BackendChoice;
using loader::WorkerMode;
using workloads::WorkloadKind;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr int64_t kMaxBatchBytes = int64_t{2} << 30;  // one batch must fit in memory easily
constexpr size_t kMaxLabelLength = 128;
// Configs are a few hundred bytes. Both limits are checked before yaml-cpp
// sees the text, whose memory grows far out of proportion on huge or deeply
// nested input (16 MiB of "[" took 3.9 GB).
constexpr off_t kMaxConfigBytes = off_t{1} << 20;
constexpr int kMaxNesting = 32;  // a sweep config nests 3 levels
constexpr size_t kMaxQuotedChars = 60;              // keeps a "got ..." from flooding the line

// ---------------------------------------------------------------------------
// The key table.

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

// Which workload kinds a key applies to (a mask of 1 << WorkloadKind).
using KindMask = unsigned;
constexpr KindMask KindBit(WorkloadKind kind) { return 1u << static_cast<unsigned>(kind); }
constexpr KindMask kAllKinds = ~0u;
constexpr KindMask kSyntheticOnly = KindBit(WorkloadKind::kSynthetic);
constexpr KindMask kFilesOnly = KindBit(WorkloadKind::kFiles);
constexpr KindMask kCommandOnly = KindBit(WorkloadKind::kCommand);
constexpr KindMask kNpyOnly = KindBit(WorkloadKind::kNpy);
constexpr KindMask kHdf5Only = KindBit(WorkloadKind::kHdf5);
constexpr KindMask kLmdbOnly = KindBit(WorkloadKind::kLmdb);
constexpr KindMask kTfRecordOnly = KindBit(WorkloadKind::kTfRecord);
constexpr KindMask kSharded = kTfRecordOnly | KindBit(WorkloadKind::kTar);  // shard files: random or stream
// The kinds that read data from a path on this machine: files and the formats.
constexpr KindMask kOnDisk = kFilesOnly | kNpyOnly | kHdf5Only | kLmdbOnly | kSharded;
constexpr KindMask kDatasets = kSyntheticOnly | kOnDisk;  // native datasets: the per-sample cost keys
// The kinds whose samples can be JPEGs to decode (workload.decode: jpeg).
constexpr KindMask kJpegDecoding = kFilesOnly | kSharded;

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

struct IntKey {  // integer in [lo, hi]
  int64_t lo;
  int64_t hi;
  int64_t (*get)(const SweepConfig&);
  void (*set)(SweepConfig&, int64_t);
};
struct AutoIntKey {  // "auto" (stored as 0) or an integer in [lo, hi]
  int64_t lo;
  int64_t hi;
  int64_t (*get)(const SweepConfig&);
  void (*set)(SweepConfig&, int64_t);
};
struct SeedKey {  // any uint64
  uint64_t (*get)(const SweepConfig&);
  void (*set)(SweepConfig&, uint64_t);
};
struct RealKey {  // finite number between lo and hi; hi == kInf means no upper bound
  double lo;
  bool lo_open;
  double hi;
  bool hi_open;
  double (*get)(const SweepConfig&);
  void (*set)(SweepConfig&, double);
};
struct BoolKey {
  bool (*get)(const SweepConfig&);
  void (*set)(SweepConfig&, bool);
};
struct EnumKey {  // values 0..count-1, spelled by name()
  int count;
  const char* (*name)(int);
  std::string_view planned;  // "a|b": documented kinds not implemented yet, for a better message
  int64_t (*get)(const SweepConfig&);
  void (*set)(SweepConfig&, int64_t);
};
struct LabelKey {  // non-empty [A-Za-z0-9_.-]
  const std::string& (*get)(const SweepConfig&);
  void (*set)(SweepConfig&, std::string);
};
struct IntListKey {  // non-empty list of distinct integers in [lo, hi]
  int64_t lo;
  int64_t hi;
  const std::vector<int>& (*get)(const SweepConfig&);
  void (*set)(SweepConfig&, std::vector<int>);
};

struct StringKey {  // non-empty text without control characters (a path)
  const std::string& (*get)(const SweepConfig&);
  void (*set)(SweepConfig&, std::string);
};
struct OptionalStringKey {  // null (stored as "") or a non-empty string without control characters
  const std::string& (*get)(const SweepConfig&);
  void (*set)(SweepConfig&, std::string);
};
// workload.path: a non-empty string without control characters (as
// StringKey); for the kinds of `list_kinds` also a non-empty list of them
// (shards, read in list order). A string clears the list, a list the string.
struct PathKey {
  KindMask list_kinds;
  const std::string& (*get)(const SweepConfig&);
  void (*set)(SweepConfig&, std::string);
  const std::vector<std::string>& (*get_list)(const SweepConfig&);
  void (*set_list)(SweepConfig&, std::vector<std::string>);
};
struct StringListKey {  // non-empty list of strings, the first non-empty (a command line)
  const std::vector<std::string>& (*get)(const SweepConfig&);
  void (*set)(SweepConfig&, std::vector<std::string>);
};
// An integer in [lo, hi] (a fixed size), or a distribution
// {dist: lognormal, mean, sigma, min, max} | {dist: uniform, min, max}.
struct SizeKey {
  int64_t lo;
  int64_t hi;
  const workloads::SyntheticOptions& (*get)(const SweepConfig&);
  workloads::SyntheticOptions& (*mut)(SweepConfig&);
};
struct FaultKey {  // null, or {kind: throw|exit|abort|segv|hang, at_sample: N}
  const workloads::FaultOptions& (*get)(const SweepConfig&);
  workloads::FaultOptions& (*mut)(SweepConfig&);
};
// "auto" (stored as an empty list) or a non-empty list of distinct start
// methods other than default (fork, forkserver, spawn).
struct StartMethodsKey {
  const std::vector<loader::StartMethod>& (*get)(const SweepConfig&);
  std::vector<loader::StartMethod>& (*mut)(SweepConfig&);
};

using KeyType = std::variant<IntKey, AutoIntKey, SeedKey, RealKey, BoolKey, EnumKey, LabelKey,
                             IntListKey, StringKey, OptionalStringKey, PathKey, StringListKey, SizeKey, FaultKey,
                             StartMethodsKey>;

// Part of WorkloadHash? kIfSet: only when it differs from its default, so a key
// added later leaves the hashes of existing workloads as they were.
enum class Hashed { kNo, kYes, kIfSet };

struct Key {
  std::string_view path;  // dotted, in DESIGN.md §4 order
  Hashed hashed;
  KeyType type;
  KindMask kinds = kAllKinds;  // keys for other kinds are errors, and left out of ToYaml
};

bool Applies(const Key& key, WorkloadKind kind) { return (key.kinds & KindBit(kind)) != 0; }

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

constexpr bool kClosed = false;
constexpr bool kOpen = true;

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

constexpr int64_t kMaxUs = 10'000'000;

constexpr PathKey Path(KindMask list_kinds) {
  return {list_kinds, &GetString<kWorkload, kFiles, &Files::path>, &SetString<kWorkload, kFiles, &Files::path>,
          &GetStrings<kWorkload, kFiles, &Files::path_list>, &SetStrings<kWorkload, kFiles, &Files::path_list>};
}

// Sections must be contiguous: ToYaml opens a section at its first key.
constexpr Key kKeys[] = {
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
    // files (layout files), tfrecord and tar: each sample a JPEG, decoded,
    // cropped and resized (workloads/jpeg_samples.h). kIfSet: workloads
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
};

template <class... Fs>
struct Overloaded : Fs... {
  using Fs::operator()...;
};
template <class... Fs>
Overloaded(Fs...) -> Overloaded<Fs...>;

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

// ---------------------------------------------------------------------------
// Scalars: strict readers for the YAML 1.2 core schema forms we accept.

bool IsBoolText(std::string_view text, bool* value) {
  if (text == "true" || text == "True" || text == "TRUE") {
    *value = true;
    return true;
  }
  if (text == "false" || text == "False" || text == "FALSE") {
    *value = false;
    return true;
  }
  return false;
}

// Decimal integer with optional sign. Overflow saturates (the range check then
// reports it) rather than failing, so "99999999999999999999" reads as out of range.
bool ParseInt64(std::string_view text, int64_t* value) {
  bool negative = false;
  if (!text.empty() && (text[0] == '+' || text[0] == '-')) {
    negative = text[0] == '-';
    text.remove_prefix(1);
  }
  if (text.empty() ||
      !std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return false;
  }
  uint64_t magnitude = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), magnitude);
  constexpr uint64_t kMaxMagnitude = uint64_t{1} << 63;
  if (ec == std::errc::result_out_of_range || magnitude > kMaxMagnitude ||
      (!negative && magnitude == kMaxMagnitude)) {
    *value = negative ? std::numeric_limits<int64_t>::min() : std::numeric_limits<int64_t>::max();
    return true;
  }
  if (ec != std::errc() || ptr != text.data() + text.size()) return false;
  *value = negative ? static_cast<int64_t>(0 - magnitude) : static_cast<int64_t>(magnitude);
  return true;
}

bool ParseUint64(std::string_view text, uint64_t* value) {
  if (!text.empty() && text[0] == '+') text.remove_prefix(1);
  if (text.empty() ||
      !std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return false;
  }
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), *value);
  return ec == std::errc() && ptr == text.data() + text.size();
}

// A YAML number: decimal/exponent forms, or .inf/.nan spellings. Returns the
// non-finite value for those (and for overflow) so the caller can say "finite".
bool ParseReal(std::string_view text, double* value) {
  bool negative = false;
  std::string_view body = text;
  if (!body.empty() && (body[0] == '+' || body[0] == '-')) {
    negative = body[0] == '-';
    body.remove_prefix(1);
  }
  if (body == ".inf" || body == ".Inf" || body == ".INF") {
    *value = negative ? -kInf : kInf;
    return true;
  }
  if (body == ".nan" || body == ".NaN" || body == ".NAN") {
    *value = std::numeric_limits<double>::quiet_NaN();
    return true;
  }
  // from_chars also takes "inf"/"nan", which YAML does not call numbers.
  if (body.empty() || !(std::isdigit(static_cast<unsigned char>(body[0])) || body[0] == '.')) {
    return false;
  }
  double magnitude = 0;
  auto [ptr, ec] = std::from_chars(body.data(), body.data() + body.size(), magnitude,
                                   std::chars_format::general);
  if (ptr != body.data() + body.size()) return false;
  if (ec == std::errc::result_out_of_range) {
    // from_chars leaves the value unset here; strtod tells overflow (HUGE_VAL,
    // then rejected as not finite) from underflow (a tiny value).
    magnitude = std::strtod(std::string(body).c_str(), nullptr);
  } else if (ec != std::errc()) {
    return false;
  }
  *value = negative ? -magnitude : magnitude;
  return true;
}

// Shortest text that reads back as the same double, always with a '.' or an
// exponent so YAML readers see a float.
std::string FormatReal(double value, bool force_float = true) {
  std::array<char, 64> buffer;
  auto [ptr, ec] = std::to_chars(buffer.data(), buffer.data() + buffer.size(), value);
  std::string text(buffer.data(), ec == std::errc() ? ptr : buffer.data());
  if (force_float && text.find_first_of(".eEn") == std::string::npos) text += ".0";
  return text;
}

std::string Quote(std::string_view text) {
  std::string out = "\"";
  size_t shown = 0;
  for (char c : text) {
    if (shown++ == kMaxQuotedChars) {
      out += "...";
      break;
    }
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
          char hex[8];
          std::snprintf(hex, sizeof(hex), "\\x%02x",
                        static_cast<unsigned>(static_cast<unsigned char>(c)));
          out += hex;
        } else {
          out += c;
        }
    }
  }
  out += '"';
  return out;
}

bool IsPlain(const YAML::Node& node) { return node.IsScalar() && node.Tag() == "?"; }

// What was found, for "got ...": numbers and booleans as written, other text quoted.
std::string Describe(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Null:
      return "null";
    case YAML::NodeType::Map:
      return node.size() == 0 ? "an empty mapping" : "a mapping";
    case YAML::NodeType::Sequence:
      return node.size() == 0 ? "an empty list" : "a list";
    case YAML::NodeType::Undefined:
      return "nothing";
    case YAML::NodeType::Scalar:
      break;
  }
  const std::string& text = node.Scalar();
  int64_t i;
  double d;
  bool b;
  if (IsPlain(node) && text.size() <= kMaxQuotedChars &&
      (ParseInt64(text, &i) || ParseReal(text, &d) || IsBoolText(text, &b))) {
    return text;
  }
  return Quote(text);
}

std::string FormatBound(double value) { return FormatReal(value, /*force_float=*/false); }

std::string ExpectedInt(int64_t lo, int64_t hi) {
  return "an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
}

std::string ExpectedReal(const RealKey& key, bool finite_note) {
  std::string out = finite_note ? "a finite number " : "a number ";
  if (key.hi == kInf) {
    return out + (key.lo_open ? "> " : ">= ") + FormatBound(key.lo);
  }
  return out + "in " + (key.lo_open ? "(" : "[") + FormatBound(key.lo) + ", " +
         FormatBound(key.hi) + (key.hi_open ? ")" : "]");
}

bool InRange(const RealKey& key, double v) {
  if (!std::isfinite(v)) return false;
  if (key.lo_open ? !(v > key.lo) : !(v >= key.lo)) return false;
  if (key.hi == kInf) return true;
  return key.hi_open ? v < key.hi : v <= key.hi;
}

std::string ExpectedEnum(const EnumKey& key) {
  std::string out = "one of ";
  for (int i = 0; i < key.count; ++i) {
    if (i > 0) out += '|';
    out += key.name(i);
  }
  return out;
}

// What a key takes, in the words of its error message ("expected ...").
std::string Takes(const Key& key) {
  return std::visit(
      Overloaded{
          [](const IntKey& k) { return ExpectedInt(k.lo, k.hi); },
          [](const AutoIntKey& k) { return "auto or " + ExpectedInt(k.lo, k.hi); },
          [](const SeedKey&) { return std::string("an integer in [0, 2^64)"); },
          [](const RealKey& k) { return ExpectedReal(k, /*finite_note=*/false); },
          [](const BoolKey&) { return std::string("true or false"); },
          [](const EnumKey& k) { return ExpectedEnum(k); },
          [](const LabelKey&) {
            return "a label of 1 to " + std::to_string(kMaxLabelLength) + " characters from [A-Za-z0-9_.-]";
          },
          [](const IntListKey& k) {
            return "a non-empty list of distinct integers in [" + std::to_string(k.lo) + ", " +
                   std::to_string(k.hi) + "]";
          },
          [](const StringKey&) { return std::string("a non-empty string"); },
          [](const OptionalStringKey&) { return std::string("null or a non-empty string"); },
          [](const PathKey& k) {
            return "a non-empty string; for " + KindNames(k.list_kinds) +
                   " also a non-empty list of them (shard files, directories or globs, read in list order)";
          },
          [](const StringListKey&) { return std::string("a non-empty list of strings (the command and its arguments)"); },
          [](const SizeKey& k) {
            return ExpectedInt(k.lo, k.hi) + ", or {dist: lognormal, mean, sigma, min, max} | {dist: uniform, min, max}";
          },
          [](const FaultKey&) { return std::string("null or {kind: throw|exit|abort|segv|hang, at_sample: N}"); },
          [](const StartMethodsKey&) { return std::string("auto or a non-empty list of distinct fork|forkserver|spawn"); },
      },
      key.type);
}

bool IsLabel(std::string_view text) {
  return !text.empty() && text.size() <= kMaxLabelLength &&
         std::all_of(text.begin(), text.end(), [](char c) {
           return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-';
         });
}

// ---------------------------------------------------------------------------
// Suggestions.

std::string Lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Optimal string alignment distance: a swapped pair of letters counts as one typo.
size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

// The closest candidate: a case-insensitive match, else one within 2 edits
// (1 for names of up to 4 letters, where 2 edits make almost anything match).
std::string_view ClosestName(std::string_view name,
                             const std::vector<std::string_view>& candidates) {
  const std::string lower = Lower(name);
  for (std::string_view c : candidates) {
    if (Lower(c) == lower) return c;
  }
  std::string_view best;
  size_t best_distance = std::numeric_limits<size_t>::max();
  for (std::string_view c : candidates) {
    const size_t limit = c.size() <= 4 ? 1 : 2;
    const size_t distance = EditDistance(lower, Lower(c));
    if (distance <= limit && distance < best_distance) {
      best = c;
      best_distance = distance;
    }
  }
  return best;
}

std::string UnknownKeyText(std::string_view prefix, std::string_view name) {
  const std::vector<std::string_view> children = ChildrenOf(prefix);
  if (std::string_view close = ClosestName(name, children); !close.empty()) {
    return "unknown key; did you mean '" + std::string(close) + "'?";
  }
  // A key put in the wrong section ("loader.step_us"): name its real place,
  // whether it is a leaf or a section ("host_sim" -> 'device.host_sim').
  std::vector<std::string> elsewhere;
  const std::string lower = Lower(name);
  for (const Key& key : kKeys) {
    const std::vector<std::string_view> parts = SplitPath(key.path);
    std::string upto;
    for (std::string_view part : parts) {
      upto = Join(upto, part);
      if (Lower(part) == lower &&
          std::find(elsewhere.begin(), elsewhere.end(), upto) == elsewhere.end()) {
        elsewhere.push_back(upto);
      }
    }
  }
  if (!elsewhere.empty()) {
    std::string out = "unknown key; did you mean ";
    for (size_t i = 0; i < elsewhere.size(); ++i) {
      if (i > 0) out += " or ";
      out += "'" + elsewhere[i] + "'";
    }
    return out + "?";
  }
  return "unknown key; allowed keys: " + JoinList(children, ", ");
}

// ---------------------------------------------------------------------------
// Parsing.

std::string TopLevelExpectation() {
  return "expected a mapping with keys " + JoinList(ChildrenOf(""), ", ");
}

// Where a problem is. A null mark (overrides) prints no line:column.
YAML::Mark NoMark() { return YAML::Mark::null_mark(); }

// One parse (a file or one --set): the source for messages and which leaf keys
// it set, so cross-key errors point at a key the user actually wrote.
class Parser {
 public:
  Parser(std::string source, bool use_marks) : source_(std::move(source)), use_marks_(use_marks) {}

  [[noreturn]] void Fail(const YAML::Mark& mark, std::string_view path,
                         std::string_view what) const {
    std::string message = source_;
    if (use_marks_ && !mark.is_null()) {
      message += ':' + std::to_string(mark.line + 1) + ':' + std::to_string(mark.column + 1);
    }
    message += ": ";
    if (!path.empty()) {
      message += path;
      message += ": ";
    }
    message += what;
    // One line, whatever the input held (keys may contain escapes).
    std::string clean;
    for (char c : message) {
      if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
        clean += c == '\n' ? "\\n" : "?";
      } else {
        clean += c;
      }
    }
    throw ConfigError(clean);
  }

  // `map` is a mapping or null (an empty section) for `prefix` ("" = top level).
  void ParseSection(const YAML::Node& map, const std::string& prefix, SweepConfig& config) {
    std::map<std::string, YAML::Mark> seen;
    // Copies, not references: yaml-cpp's iterator hands out a temporary pair.
    for (auto it = map.begin(); it != map.end(); ++it) {
      const YAML::Node key = it->first;
      const YAML::Node value = it->second;
      if (!key.IsScalar()) {
        Fail(key.Mark(), prefix, "expected a key name, got " + Describe(key) + " as a key");
      }
      const std::string& name = key.Scalar();
      const std::string path = Join(prefix, name);
      if (auto [where, inserted] = seen.emplace(path, key.Mark()); !inserted) {
        std::string what = "duplicate key";
        if (use_marks_) {
          what += "; first given at line " + std::to_string(where->second.line + 1) + ", column " +
                  std::to_string(where->second.column + 1);
        }
        Fail(key.Mark(), path, what);
      }
      // A dotted name would alias a nested key ("loader.batch_size: 4" at the
      // top); nesting is the one spelling, so such names are unknown.
      const bool simple = !name.empty() && name.find('.') == std::string::npos;
      if (const Key* leaf = simple ? FindKey(path) : nullptr) {
        ParseLeaf(*leaf, value, ValueMark(key, value), config);
      } else if (simple && IsSection(path)) {
        if (value.IsNull()) continue;  // "loader:" with everything commented out
        if (!value.IsMap())
          Fail(ValueMark(key, value), path, "expected a mapping, got " + Describe(value));
        ParseSection(value, path, config);
      } else if (!simple && (FindKey(path) || IsSection(path))) {
        Fail(key.Mark(), path,
             "unknown key; dotted paths are for --set, write it nested under '" +
                 std::string(path.substr(0, path.rfind('.'))) + "'");
      } else {
        Fail(key.Mark(), path, UnknownKeyText(prefix, name));
      }
    }
  }

  void ParseLeaf(const Key& key, const YAML::Node& value, const YAML::Mark& mark,
                 SweepConfig& config) {
    given_[std::string(key.path)] = mark;
    std::visit(
        Overloaded{
            [&](const IntKey& k) { k.set(config, ReadInt(value, mark, key.path, k.lo, k.hi)); },
            [&](const AutoIntKey& k) {
              if (value.IsScalar() && value.Scalar() == "auto") {
                k.set(config, 0);
                return;
              }
              int64_t v = 0;
              const bool valid =
                  value.IsScalar() && ParseInt64(value.Scalar(), &v) && v >= k.lo && v <= k.hi;
              if (!IsPlain(value) || !valid) {
                Bad(value, mark, key.path, "auto or " + ExpectedInt(k.lo, k.hi), valid);
              }
              k.set(config, v);
            },
            [&](const SeedKey& k) {
              uint64_t v;
              if (!IsPlain(value) || !ParseUint64(value.Scalar(), &v)) {
                Bad(value, mark, key.path,
                    "an integer in [0, " + std::to_string(std::numeric_limits<uint64_t>::max()) +
                        "]",
                    value.IsScalar() && ParseUint64(value.Scalar(), &v));
              }
              k.set(config, v);
            },
            [&](const RealKey& k) {
              double v = 0;
              const bool parsed = value.IsScalar() && ParseReal(value.Scalar(), &v);
              if (!IsPlain(value) || !parsed || !InRange(k, v)) {
                Bad(value, mark, key.path, ExpectedReal(k, parsed && !std::isfinite(v)),
                    parsed && InRange(k, v));
              }
              k.set(config, v);
            },
            [&](const BoolKey& k) {
              bool v = false;
              const bool parsed = value.IsScalar() && IsBoolText(value.Scalar(), &v);
              if (!IsPlain(value) || !parsed) Bad(value, mark, key.path, "true or false", parsed);
              k.set(config, v);
            },
            [&](const EnumKey& k) { ParseEnum(key, k, value, mark, config); },
            [&](const LabelKey& k) {
              if (!value.IsScalar() || !IsLabel(value.Scalar())) {
                Fail(mark, key.path, "expected " + Takes(key) + ", got " + Describe(value));
              }
              k.set(config, value.Scalar());
            },
            [&](const IntListKey& k) { ParseIntList(key, k, value, mark, config); },
            [&](const StringKey& k) {
              if (!value.IsScalar() || value.Scalar().empty() || HasControl(value.Scalar())) {
                Fail(mark, key.path, "expected " + Takes(key) + ", got " + Describe(value));
              }
              k.set(config, value.Scalar());
            },
            [&](const OptionalStringKey& k) {
              if (value.IsNull()) {
                k.set(config, std::string());
                return;
              }
              if (!value.IsScalar() || value.Scalar().empty() || HasControl(value.Scalar())) {
                Fail(mark, key.path, "expected " + Takes(key) + ", got " + Describe(value));
              }
              k.set(config, value.Scalar());
            },
            [&](const PathKey& k) { ParsePath(key, k, value, mark, config); },
            [&](const StringListKey& k) { ParseStringList(key, k, value, mark, config); },
            [&](const SizeKey& k) {
              workloads::SyntheticOptions& synthetic = k.mut(config);
              if (value.IsMap()) {
                ReadSizeDistribution(value, mark, key.path, k, synthetic);
                return;
              }
              int64_t v = 0;
              const bool parsed = value.IsScalar() && ParseInt64(value.Scalar(), &v);
              if (!IsPlain(value) || !parsed || v < k.lo || v > k.hi) {
                Bad(value, mark, key.path,
                    ExpectedInt(k.lo, k.hi) +
                        " or a distribution {dist: lognormal|uniform, mean, sigma, min, max}",
                    parsed && v >= k.lo && v <= k.hi);
              }
              synthetic.sample_bytes = v;
              synthetic.size = workloads::SampleSize{};
            },
            [&](const FaultKey& k) { ParseFault(key, k, value, mark, config); },
            [&](const StartMethodsKey& k) { k.mut(config) = ReadStartMethods(value, mark, key.path); },
        },
        key.type);
  }

  // One of the names; a near miss gets "did you mean", a planned name "not supported yet".
  void ParseEnum(const Key& key, const EnumKey& k, const YAML::Node& value,
                 const YAML::Mark& mark, SweepConfig& config) {
    std::vector<std::string_view> names;
    for (int i = 0; i < k.count; ++i) names.emplace_back(k.name(i));
    if (value.IsScalar()) {
      const auto found = std::find(names.begin(), names.end(), value.Scalar());
      if (found != names.end()) {
        k.set(config, found - names.begin());
        return;
      }
    }
    std::string what = "expected " + ExpectedEnum(k) + ", got " + Describe(value);
    if (value.IsScalar()) {
      if (IsPlanned(k, value.Scalar())) {
        what += " (not supported yet)";
      } else if (std::string_view close = ClosestName(value.Scalar(), names);
                 !close.empty()) {
        what += "; did you mean '" + std::string(close) + "'?";
      }
    }
    Fail(mark, key.path, what);
  }

  // A non-empty list of distinct integers in range, each item checked at its own line.
  void ParseIntList(const Key& key, const IntListKey& k, const YAML::Node& value,
                    const YAML::Mark& mark, SweepConfig& config) {
    if (!value.IsSequence() || value.size() == 0) {
      Fail(mark, key.path,
           "expected a non-empty list of integers in [" + std::to_string(k.lo) + ", " +
               std::to_string(k.hi) + "], got " + Describe(value));
    }
    std::vector<int> items;
    for (size_t i = 0; i < value.size(); ++i) {
      const YAML::Node item = value[i];
      const std::string item_path = std::string(key.path) + "[" + std::to_string(i) + "]";
      const YAML::Mark item_mark = item.Mark().is_null() ? mark : item.Mark();
      const int v = static_cast<int>(ReadInt(item, item_mark, item_path, k.lo, k.hi));
      if (std::find(items.begin(), items.end(), v) != items.end()) {
        Fail(item_mark, item_path,
             "expected " + ExpectedInt(k.lo, k.hi) + " not already in the list, got " +
                 Describe(item));
      }
      items.push_back(v);
    }
    k.set(config, std::move(items));
  }

  // workload.path: a string, or a list of strings (whether the kind takes a
  // list is checked across keys, as the kind may come after the path); each
  // item's mark is kept for the checks of the inputs.
  void ParsePath(const Key& key, const PathKey& k, const YAML::Node& value, const YAML::Mark& mark,
                 SweepConfig& config) {
    const std::string path(key.path);
    if (!value.IsSequence()) {
      if (!value.IsScalar() || value.Scalar().empty() || HasControl(value.Scalar())) {
        // A bad string is told as one; anything else gets the whole of what the key takes.
        Fail(mark, key.path,
             "expected " + (value.IsScalar() ? std::string("a non-empty string") : Takes(key)) + ", got " +
                 Describe(value));
      }
      k.set(config, value.Scalar());
      k.set_list(config, {});
      list_item_marks_.erase(path);
      return;
    }
    if (value.size() == 0) Fail(mark, key.path, "expected " + Takes(key) + ", got " + Describe(value));
    std::vector<std::string> items;
    std::vector<YAML::Mark> marks;
    for (size_t i = 0; i < value.size(); ++i) {
      const YAML::Node item = value[i];
      const std::string item_path = path + "[" + std::to_string(i) + "]";
      const YAML::Mark item_mark = item.Mark().is_null() ? mark : item.Mark();
      if (!item.IsScalar() || item.Scalar().empty() || HasControl(item.Scalar())) {
        Fail(item_mark, item_path,
             "expected a non-empty string (a shard file, directory or glob), got " + Describe(item));
      }
      items.push_back(item.Scalar());
      marks.push_back(item_mark);
    }
    k.set(config, std::string());
    k.set_list(config, std::move(items));
    list_item_marks_[path] = std::move(marks);
  }

  // The command line: strings, the first non-empty, placeholders known; each item's
  // mark is kept for the cross-key checks.
  void ParseStringList(const Key& key, const StringListKey& k, const YAML::Node& value,
                       const YAML::Mark& mark, SweepConfig& config) {
    if (!value.IsSequence() || value.size() == 0) {
      Fail(mark, key.path, "expected " + Takes(key) + ", got " + Describe(value));
    }
    std::vector<std::string> items;
    std::vector<YAML::Mark> marks;
    for (size_t i = 0; i < value.size(); ++i) {
      const YAML::Node item = value[i];
      const std::string item_path = std::string(key.path) + "[" + std::to_string(i) + "]";
      const YAML::Mark item_mark = item.Mark().is_null() ? mark : item.Mark();
      if (!item.IsScalar() || (i == 0 && item.Scalar().empty())) {
        Fail(item_mark, item_path,
             std::string(i == 0 ? "expected the command (a non-empty string)"
                                : "expected a string") +
                 ", got " + Describe(item));
      }
      // execve takes C strings: a NUL would cut the argument short, so the
      // command that ran would not be the one stored (found by the config fuzzer).
      if (item.Scalar().find('\0') != std::string::npos) {
        Fail(item_mark, item_path, "a NUL character (\\0) cannot be part of a command argument; remove it");
      }
      if (const std::string unknown = workloads::UnknownPlaceholder(item.Scalar());
          !unknown.empty()) {
        std::vector<std::string_view> names(workloads::kPlaceholders.begin(),
                                            workloads::kPlaceholders.end());
        std::string what = "unknown placeholder {" + unknown + "}";
        if (std::string_view close = ClosestName(unknown, names); !close.empty()) {
          what += "; did you mean {" + std::string(close) + "}?";
        } else {
          what += "; known: ";
          for (size_t n = 0; n < names.size(); ++n) {
            what += (n > 0 ? ", {" : "{") + std::string(names[n]) + "}";
          }
        }
        Fail(item_mark, item_path, what);
      }
      items.push_back(item.Scalar());
      marks.push_back(item_mark);
    }
    k.set(config, std::move(items));
    list_item_marks_[std::string(key.path)] = std::move(marks);
  }

  // null, or {kind: throw|exit|abort|segv|hang, at_sample: N}.
  void ParseFault(const Key& key, const FaultKey& k, const YAML::Node& value,
                  const YAML::Mark& mark, SweepConfig& config) {
    workloads::FaultOptions& fault = k.mut(config);
    if (value.IsNull()) {
      fault = workloads::FaultOptions{};
      return;
    }
    if (!value.IsMap()) {
      Fail(mark, key.path, "expected " + Takes(key) + ", got " + Describe(value));
    }
    const auto given = ReadSubKeys(value, key.path, {"kind", "at_sample"});
    workloads::FaultOptions parsed;
    const std::string kind_path = std::string(key.path) + ".kind";
    const auto kind = given.find("kind");
    if (kind == given.end()) {
      Fail(mark, kind_path, "expected one of throw|exit|abort|segv|hang, got nothing");
    }
    std::vector<std::string_view> names;
    for (int i = 1; i <= static_cast<int>(workloads::FaultKind::kHang); ++i) {
      names.emplace_back(workloads::FaultKindName(static_cast<workloads::FaultKind>(i)));
    }
    const YAML::Node& kind_value = kind->second.first;
    const auto found = kind_value.IsScalar()
                           ? std::find(names.begin(), names.end(), kind_value.Scalar())
                           : names.end();
    if (found == names.end()) {
      std::string what =
          "expected one of throw|exit|abort|segv|hang, got " + Describe(kind_value);
      if (kind_value.IsScalar()) {
        if (std::string_view close = ClosestName(kind_value.Scalar(), names);
            !close.empty()) {
          what += "; did you mean '" + std::string(close) + "'?";
        }
      }
      Fail(kind->second.second, kind_path, what);
    }
    parsed.kind = static_cast<workloads::FaultKind>(found - names.begin() + 1);
    if (const auto at = given.find("at_sample"); at != given.end()) {
      parsed.at_sample = ReadInt(at->second.first, at->second.second,
                                 std::string(key.path) + ".at_sample", 0, 1'000'000'000);
    }
    fault = parsed;
  }

  // sweep.start_methods: auto (empty) or a list of distinct fork|forkserver|spawn.
  std::vector<loader::StartMethod> ReadStartMethods(const YAML::Node& value, const YAML::Mark& mark,
                                                    std::string_view path) const {
    if (value.IsScalar() && value.Scalar() == "auto") return {};
    const std::string expected = "expected auto or a non-empty list of distinct fork|forkserver|spawn";
    if (!value.IsSequence() || value.size() == 0) Fail(mark, path, expected + ", got " + Describe(value));
    const std::vector<std::string_view> names = {"fork", "forkserver", "spawn"};
    std::vector<loader::StartMethod> methods;
    for (size_t i = 0; i < value.size(); ++i) {
      const YAML::Node item = value[i];
      const std::string item_path = std::string(path) + "[" + std::to_string(i) + "]";
      const YAML::Mark item_mark = item.Mark().is_null() ? mark : item.Mark();
      loader::StartMethod method = loader::StartMethod::kDefault;
      if (!item.IsScalar() || item.Scalar() == "default" || !loader::StartMethodFromName(item.Scalar(), &method)) {
        std::string what = "expected one of fork|forkserver|spawn, got " + Describe(item);
        if (item.IsScalar()) {
          if (item.Scalar() == "default") {
            what += " (name the methods: the interpreter's default is among them when listed by name)";
          } else if (std::string_view close = ClosestName(item.Scalar(), names); !close.empty()) {
            what += "; did you mean '" + std::string(close) + "'?";
          }
        }
        Fail(item_mark, item_path, what);
      }
      if (std::find(methods.begin(), methods.end(), method) != methods.end()) {
        Fail(item_mark, item_path, "expected a method not already in the list, got " + Describe(item));
      }
      methods.push_back(method);
    }
    return methods;
  }

  // Checks between keys, after all of them are read.
  void CheckCrossKey(const SweepConfig& config) const {
    const WorkloadKind kind = config.workload.kind;
    const std::string kind_name = workloads::WorkloadKindName(kind);
    for (const Key& key : kKeys) {
      const auto it = given_.find(std::string(key.path));
      if (it == given_.end() || Applies(key, kind)) continue;
      Fail(it->second, key.path,
           "unknown key for workload.kind " + kind_name + " (it is for " + KindNames(key.kinds) + ")");
    }
    const workloads::FilesOptions& files = config.workload.files;
    const bool no_path = files.path.empty() && files.path_list.empty();
    if (const Key& path_key = *FindKey("workload.path"); !files.path_list.empty() && Applies(path_key, kind)) {
      const KindMask list_kinds = std::get<PathKey>(path_key.type).list_kinds;
      if ((list_kinds & KindBit(kind)) == 0) {
        FailAtFirstGiven({"workload.path", "workload.kind"},
                         "expected one string when workload.kind is " + kind_name + ", got a list (a list of " +
                             "shards is for workload.kind " + KindNames(list_kinds) + "); give the " +
                             FormatPathNoun(kind) + " as one string");
      }
    }
    if (kind == WorkloadKind::kFiles && no_path) {
      FailAtFirstGiven({"workload.kind"},
                       "expected workload.path, the dataset's directory, when workload.kind is "
                       "files (make one with `feedtune gen-data`), got none");
    }
    if (kind == WorkloadKind::kFiles && config.workload.files.decode == workloads::FilesDecode::kJpeg &&
        config.workload.files.layout != workloads::FilesLayout::kFiles) {
      FailAtFirstGiven({"workload.layout", "workload.decode"},
                       "expected layout: files when workload.decode is jpeg (one JPEG file per sample), got " +
                           std::string(workloads::FilesLayoutName(config.workload.files.layout)));
    }
    if ((kJpegDecoding & KindBit(kind)) != 0 && config.workload.files.decode == workloads::FilesDecode::kNone) {
      const char* stored = kind == WorkloadKind::kFiles      ? "the file's bytes"
                           : kind == WorkloadKind::kTfRecord ? "the record's bytes"
                                                             : "its members' bytes";
      for (const char* path : {"workload.crop", "workload.resize"}) {
        if (const auto it = given_.find(path); it != given_.end()) {
          Fail(it->second, path, std::string("applies only with workload.decode: jpeg (the sample is ") + stored +
                                     " otherwise); add decode: jpeg, or remove it");
        }
      }
    }
    if (workloads::IsFormatKind(kind) && no_path) {
      FailAtFirstGiven({"workload.kind"},
                       "expected workload.path, the " + std::string(FormatPathNoun(kind)) +
                           ", when workload.kind is " + kind_name + " (make one with `feedtune gen-data --layout " +
                           kind_name + "`), got none");
    }
    if (kind == WorkloadKind::kHdf5 && config.loader.worker_mode == WorkerMode::kThread) {
      FailAtFirstGiven({"loader.worker_mode", "workload.kind"},
                       "expected process when workload.kind is hdf5, got thread: Debian's libhdf5 is "
                       "built thread-safe by one global lock around every call, so thread-mode workers "
                       "would measure that lock, not the storage (PyTorch's workers are processes too)");
    }
    if (kind == WorkloadKind::kCommand && config.workload.command.argv.empty()) {
      FailAtFirstGiven({"workload.kind"},
                       "expected workload.argv, the command to run, when workload.kind is "
                       "command, got none");
    }
    if (kind == WorkloadKind::kCommand &&
        config.workload.command.protocol == workloads::CommandProtocol::kServe) {
      CheckServeArgv(config.workload.command.argv);
      // A serving process is one rank; ranks of a command are started per repeat (tuner/measure/command_ranks.h).
      if (config.sweep.ranks > 1) {
        FailAtFirstGiven({"sweep.ranks", "workload.protocol"},
                         "expected sweep.ranks 1 (or auto) when workload.protocol is serve (a serving process is "
                         "one rank), got " + std::to_string(config.sweep.ranks) +
                             "; use workload.protocol: run with the knobs as {placeholders} in argv (feedtune "
                             "starts the ranks per repeat; configs/torch-probe-2ranks.yaml), or sweep.ranks: 1");
      }
    }
    if (kind != WorkloadKind::kSynthetic) return;

    const int64_t batch_size = config.loader.knobs.batch_size;
    const int64_t sample_bytes = config.workload.synthetic.sample_bytes;
    // Both are range-checked first, so the product cannot overflow (2^16 * 2^30).
    if (batch_size * sample_bytes > kMaxBatchBytes) {
      FailAtFirstGiven({"loader.batch_size", "workload.sample_bytes"},
                       "expected loader.batch_size * workload.sample_bytes <= " +
                           std::to_string(kMaxBatchBytes) +
                           " (2 GiB) so a batch fits in memory, got " + std::to_string(batch_size) +
                           " * " + std::to_string(sample_bytes) + " = " +
                           std::to_string(batch_size * sample_bytes));
    }
    const int64_t samples = config.workload.synthetic.samples;
    if (config.loader.drop_last && samples < batch_size) {
      FailAtFirstGiven(
          {"workload.samples", "loader.batch_size", "loader.drop_last"},
          "expected workload.samples >= loader.batch_size when loader.drop_last is true "
          "(else an epoch has no batch), got " +
              std::to_string(samples) + " < " + std::to_string(batch_size));
    }
    const workloads::FaultOptions& fault = config.workload.synthetic.fault;
    if (fault.kind != workloads::FaultKind::kNone && fault.at_sample >= samples) {
      FailAtFirstGiven({"workload.fault", "workload.samples"},
                       "expected fault.at_sample < workload.samples (else it never fires), got " +
                           std::to_string(fault.at_sample) + " >= " + std::to_string(samples));
    }
  }

  // A serving command starts once per sweep and reads each trial's knobs on
  // stdin, so a knob placeholder in its argv would silently hold the first
  // trial's value for every trial. The error points at the argument when this
  // parse read argv, else at workload.protocol (a --set of either has no mark).
  void CheckServeArgv(const std::vector<std::string>& argv) const {
    for (size_t i = 0; i < argv.size(); ++i) {
      const std::string knob = workloads::FirstKnobPlaceholder(argv[i]);
      if (knob.empty()) continue;
      YAML::Mark mark = NoMark();
      if (const auto marks = list_item_marks_.find("workload.argv");
          marks != list_item_marks_.end() && i < marks->second.size()) {
        mark = marks->second[i];
      } else if (const auto protocol = given_.find("workload.protocol"); protocol != given_.end()) {
        mark = protocol->second;
      }
      Fail(mark, "workload.argv[" + std::to_string(i) + "]",
           "expected no per-trial placeholder when workload.protocol is serve (the serving command "
           "gets each trial's knobs on stdin, see docs/command-protocol.md), got {" + knob +
               "}; remove it from argv, or use protocol: run");
    }
  }

  // The inputs the config names must exist on this machine: a files
  // workload's directory, not empty, with an index for the shards layout.
  void CheckInputs(const SweepConfig& config) const {
    if (workloads::IsFormatKind(config.workload.kind)) {
      CheckFormatInput(config);
      return;
    }
    if (config.workload.kind != WorkloadKind::kFiles) return;
    const workloads::FilesOptions& files = config.workload.files;
    const bool jpeg = files.decode == workloads::FilesDecode::kJpeg;
    const std::string make = "make one with `feedtune gen-data --out " + files.path + " --layout " +
                             (jpeg ? "jpeg" : workloads::FilesLayoutName(files.layout)) + " ...`";
    const auto fail = [&](const std::string& why) {
      FailAtFirstGiven({"workload.path", "workload.kind"},
                       "expected a directory holding a dataset, got \"" + files.path + "\" (" +
                           why + ")");
    };
    struct stat info {};
    if (::stat(files.path.c_str(), &info) != 0) {
      fail(std::generic_category().message(errno) + "; " + make);
    }
    if (!S_ISDIR(info.st_mode)) fail("not a directory");
    DIR* dir = ::opendir(files.path.c_str());
    if (dir == nullptr) fail("cannot list it: " + std::generic_category().message(errno));
    bool empty = true;
    while (const dirent* entry = ::readdir(dir)) {
      const std::string_view name = entry->d_name;
      if (name != "." && name != "..") {
        empty = false;
        break;
      }
    }
    ::closedir(dir);
    if (empty) fail("the directory is empty; " + make);
    if (files.layout == workloads::FilesLayout::kShards) {
      const std::string index = files.path + "/" + workloads::kIndexFileName;
      if (::stat(index.c_str(), &info) != 0) {
        fail(std::string("no ") + workloads::kIndexFileName +
             ", so not a sharded dataset; for a directory of your own files use layout: files");
      }
    }
    if (jpeg && !HasJpegFile(files.path)) {
      FailAtFirstGiven({"workload.path", "workload.decode"},
                       "expected a directory holding JPEG images (files named *.jpg, *.jpeg or *.jpe, in any "
                       "folder under it) when workload.decode is jpeg, got \"" + files.path + "\" (none there; " +
                           make + ")");
    }
  }

  // Whether any file under `dir` (recursively, dot-files skipped, as
  // FilesDataset lists them) is named as a JPEG. Stops at the first.
  static bool HasJpegFile(const std::string& dir) {
    namespace fs = std::filesystem;
    std::error_code ec;
    auto it = fs::recursive_directory_iterator(dir, fs::directory_options::skip_permission_denied, ec);
    for (; !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
      const std::string name = it->path().filename().string();
      if (!name.empty() && name[0] == '.') {
        if (it->is_directory(ec)) it.disable_recursion_pending();
        continue;
      }
      if (workloads::HasJpegExtension(name) && it->is_regular_file(ec)) return true;
    }
    return false;
  }

 private:
  // The format kinds' input: the file (npy, hdf5) or the environment (lmdb, a
  // directory or its data file) exists. Its contents are checked when the
  // workload is opened (OpenWorkload), with the format's library.
  void CheckFormatInput(const SweepConfig& config) const {
    const WorkloadKind kind = config.workload.kind;
    const std::string& path = config.workload.files.path;
    const std::string kind_name = workloads::WorkloadKindName(kind);
    if (kind == WorkloadKind::kTfRecord || kind == WorkloadKind::kTar) {
      CheckShardInput(config);
      return;
    }
    const std::string expected =
        "expected " + std::string(kind == WorkloadKind::kNpy ? "a " : "an ") + FormatPathNoun(kind) + ", got \"" +
        path + "\" (";
    const std::string make = "; make one with `feedtune gen-data --layout " + kind_name + " --out " + path + " ...`";
    struct stat info {};
    if (::stat(path.c_str(), &info) != 0) {
      FailAtFirstGiven({"workload.path", "workload.kind"},
                       expected + std::generic_category().message(errno) + make + ")");
    }
    if (kind != WorkloadKind::kLmdb && !S_ISREG(info.st_mode)) {
      FailAtFirstGiven({"workload.path", "workload.kind"},
                       expected + (S_ISDIR(info.st_mode) ? "a directory" : "not a regular file") + ")");
    }
    if (kind == WorkloadKind::kLmdb && !S_ISDIR(info.st_mode) && !S_ISREG(info.st_mode)) {
      FailAtFirstGiven({"workload.path", "workload.kind"}, expected + "neither a directory nor a file)");
    }
  }

  // tfrecord and tar: the path, or each entry of the list, names shard files
  // (workloads::ResolveShardPaths, as the dataset finds them); an entry that
  // names none is the error, at its own line. A shard named by two entries
  // is found when the workload is opened.
  void CheckShardInput(const SweepConfig& config) const {
    const WorkloadKind kind = config.workload.kind;
    const workloads::FilesOptions& files = config.workload.files;
    const std::vector<std::string> entries = files.path_list.empty() ? std::vector{files.path} : files.path_list;
    const auto marks = list_item_marks_.find("workload.path");
    for (size_t i = 0; i < entries.size(); ++i) {
      try {
        workloads::ResolveShardPaths(entries[i], workloads::ShardExtensions(kind));
      } catch (const std::exception& e) {  // DatasetNotFound, or a directory that cannot be listed
        std::string why = e.what();
        if (why.starts_with(entries[i] + ": ")) why.erase(0, entries[i].size() + 2);
        const bool glob_or_list = !files.path_list.empty() || entries[i].find_first_of("*?[") != std::string::npos;
        const std::string what = "expected a " + std::string(FormatPathNoun(kind)) + ", got \"" + entries[i] +
                                 "\" (" + why + "; make one with `feedtune gen-data --layout " +
                                 workloads::WorkloadKindName(kind) + " --out " + (glob_or_list ? "DIR" : entries[i]) +
                                 " ...`)";
        if (files.path_list.empty()) FailAtFirstGiven({"workload.path", "workload.kind"}, what);
        const bool marked = marks != list_item_marks_.end() && i < marks->second.size();
        Fail(marked ? marks->second[i] : NoMark(), "workload.path[" + std::to_string(i) + "]", what);
      }
    }
  }

  static const char* FormatPathNoun(WorkloadKind kind) {
    switch (kind) {
      case WorkloadKind::kFiles: return "dataset's directory";
      case WorkloadKind::kNpy: return ".npy file";
      case WorkloadKind::kHdf5: return "HDF5 file";
      case WorkloadKind::kLmdb: return "LMDB environment (its directory, or its data file)";
      case WorkloadKind::kTfRecord: return "TFRecord file, directory or glob";
      case WorkloadKind::kTar: return "tar shard, directory or glob";
      default: return "dataset";
    }
  }

  // Empty values ("key:" then a newline) get the mark of whatever follows; the
  // key itself is the better place to point at.
  static YAML::Mark ValueMark(const YAML::Node& key, const YAML::Node& value) {
    if (value.Mark().is_null() || (value.IsNull() && value.Mark().line != key.Mark().line)) {
      return key.Mark();
    }
    return value.Mark();
  }

  static bool IsPlanned(const EnumKey& key, std::string_view value) {
    std::string_view rest = key.planned;
    while (!rest.empty()) {
      const size_t bar = rest.find('|');
      if (rest.substr(0, bar) == value) return true;
      if (bar == std::string_view::npos) break;
      rest.remove_prefix(bar + 1);
    }
    return false;
  }

  // `quoted_but_valid`: the text would have been accepted unquoted, which is
  // worth saying, since `"4"` in an error reads like a good value otherwise.
  [[noreturn]] void Bad(const YAML::Node& value, const YAML::Mark& mark, std::string_view path,
                        const std::string& expected, bool quoted_but_valid) const {
    std::string what = "expected " + expected + ", got " + Describe(value);
    if (value.IsScalar() && !IsPlain(value) && quoted_but_valid) {
      what += " (quoted, so a string)";
    }
    Fail(mark, path, what);
  }

  static bool HasControl(std::string_view text) {
    return std::any_of(text.begin(), text.end(),
                       [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; });
  }

  // The entries of a leaf's mapping value ({dist: ..., mean: ...}): name ->
  // (value, mark). Unknown and duplicate names are errors, as in sections.
  std::map<std::string, std::pair<YAML::Node, YAML::Mark>> ReadSubKeys(
      const YAML::Node& map, std::string_view path,
      const std::vector<std::string_view>& allowed) const {
    std::map<std::string, std::pair<YAML::Node, YAML::Mark>> out;
    std::map<std::string, YAML::Mark> name_marks;  // for "first given at"
    for (auto it = map.begin(); it != map.end(); ++it) {
      const YAML::Node name_node = it->first;
      const YAML::Node value = it->second;
      if (!name_node.IsScalar()) {
        Fail(name_node.Mark(), path,
             "expected a key name, got " + Describe(name_node) + " as a key");
      }
      const std::string& name = name_node.Scalar();
      const std::string sub_path = std::string(path) + "." + name;
      if (std::find(allowed.begin(), allowed.end(), name) == allowed.end()) {
        if (std::string_view close = ClosestName(name, allowed); !close.empty()) {
          Fail(name_node.Mark(), sub_path, "unknown key; did you mean '" + std::string(close) + "'?");
        }
        Fail(name_node.Mark(), sub_path, "unknown key; allowed keys: " + JoinList(allowed, ", "));
      }
      if (auto [first, inserted] = name_marks.emplace(name, name_node.Mark()); !inserted) {
        std::string what = "duplicate key";
        if (use_marks_) {
          what += "; first given at line " + std::to_string(first->second.line + 1) +
                  ", column " + std::to_string(first->second.column + 1);
        }
        Fail(name_node.Mark(), sub_path, what);
      }
      out.emplace(name, std::make_pair(value, ValueMark(name_node, value)));
    }
    return out;
  }

  double ReadReal(const YAML::Node& value, const YAML::Mark& mark, std::string_view path,
                  const RealKey& bounds) const {
    double v = 0;
    const bool parsed = value.IsScalar() && ParseReal(value.Scalar(), &v);
    if (!IsPlain(value) || !parsed || !InRange(bounds, v)) {
      Bad(value, mark, path, ExpectedReal(bounds, parsed && !std::isfinite(v)),
          parsed && InRange(bounds, v));
    }
    return v;
  }

  // {dist: lognormal, mean: M, sigma: S[, min: A][, max: B]} or
  // {dist: uniform, min: A, max: B}. With lognormal, max defaults to
  // exp(mu + 4 sigma) (above all but 3 in 100,000 draws), which then sizes the slots.
  void ReadSizeDistribution(const YAML::Node& map, const YAML::Mark& mark, std::string_view path,
                            const SizeKey& k, workloads::SyntheticOptions& synthetic) const {
    const auto given = ReadSubKeys(map, path, {"dist", "mean", "sigma", "min", "max"});
    const std::string base(path);
    const auto dist = given.find("dist");
    if (dist == given.end()) Fail(mark, base + ".dist", "expected lognormal or uniform, got nothing");
    const YAML::Node& dist_value = dist->second.first;
    workloads::SampleSize size;
    if (dist_value.IsScalar() && dist_value.Scalar() == "lognormal") {
      size.dist = workloads::SizeDist::kLognormal;
    } else if (dist_value.IsScalar() && dist_value.Scalar() == "uniform") {
      size.dist = workloads::SizeDist::kUniform;
    } else {
      std::string what = "expected lognormal or uniform, got " + Describe(dist_value);
      if (dist_value.IsScalar()) {
        if (std::string_view close = ClosestName(dist_value.Scalar(), {"lognormal", "uniform"});
            !close.empty()) {
          what += "; did you mean '" + std::string(close) + "'?";
        }
      }
      Fail(dist->second.second, base + ".dist", what);
    }
    const auto read_int = [&](const char* name) {
      const auto& [node, at] = given.at(name);
      return ReadInt(node, at, base + "." + name, k.lo, k.hi);
    };
    const auto require = [&](const char* name) {
      if (given.count(name) == 0) {
        Fail(mark, base + "." + name,
             std::string("expected a value (required with dist ") +
                 workloads::SizeDistName(size.dist) + "), got nothing");
      }
    };
    if (size.dist == workloads::SizeDist::kLognormal) {
      require("mean");
      require("sigma");
      size.mean = read_int("mean");
      const RealKey sigma_bounds{0, kOpen, 4, kClosed, nullptr, nullptr};
      size.sigma = ReadReal(given.at("sigma").first, given.at("sigma").second, base + ".sigma",
                            sigma_bounds);
      size.min = given.count("min") != 0 ? read_int("min") : k.lo;
      if (given.count("max") != 0) {
        size.max = read_int("max");
      } else {
        const double mu = std::log(static_cast<double>(size.mean)) - size.sigma * size.sigma / 2;
        const double tail = std::ceil(std::exp(mu + 4 * size.sigma));
        size.max = std::max(size.mean, static_cast<int64_t>(std::min(tail, static_cast<double>(k.hi))));
      }
      if (size.min > size.mean) {
        Fail(given.at("min").second, base + ".min",
             "expected at most mean (" + std::to_string(size.mean) + "), got " +
                 std::to_string(size.min));
      }
      if (size.max < size.mean) {
        Fail(given.at("max").second, base + ".max",
             "expected at least mean (" + std::to_string(size.mean) + "), got " +
                 std::to_string(size.max));
      }
    } else {
      for (const char* name : {"mean", "sigma"}) {
        if (const auto it = given.find(name); it != given.end()) {
          Fail(it->second.second, base + "." + name,
               "unknown key for dist uniform; allowed keys: dist, min, max");
        }
      }
      require("min");
      require("max");
      size.min = read_int("min");
      size.max = read_int("max");
      if (size.max < size.min) {
        Fail(given.at("max").second, base + ".max",
             "expected at least min (" + std::to_string(size.min) + "), got " +
                 std::to_string(size.max));
      }
    }
    synthetic.size = size;
    synthetic.sample_bytes = size.max;  // the largest sample sizes the slots
  }

  int64_t ReadInt(const YAML::Node& value, const YAML::Mark& mark, std::string_view path,
                  int64_t lo, int64_t hi) const {
    int64_t v = 0;
    const bool parsed = value.IsScalar() && ParseInt64(value.Scalar(), &v);
    if (!IsPlain(value) || !parsed || v < lo || v > hi) {
      Bad(value, mark, path, ExpectedInt(lo, hi), parsed && v >= lo && v <= hi);
    }
    return v;
  }

  [[noreturn]] void FailAtFirstGiven(std::initializer_list<std::string_view> paths,
                                     const std::string& what) const {
    for (std::string_view path : paths) {
      if (auto it = given_.find(std::string(path)); it != given_.end())
        Fail(it->second, path, what);
    }
    Fail(NoMark(), *paths.begin(), what);
  }

  std::string source_;
  bool use_marks_;
  std::map<std::string, YAML::Mark> given_;  // leaf path -> where its value is
  // String-list path -> where each item is (workload.argv), for cross-key errors.
  std::map<std::string, std::vector<YAML::Mark>> list_item_marks_;
};

// ---------------------------------------------------------------------------
// Output.

std::string FormatValue(const Key& key, const SweepConfig& config) {
  return std::visit(
      Overloaded{
          [&](const IntKey& k) { return std::to_string(k.get(config)); },
          [&](const AutoIntKey& k) {
            const int64_t v = k.get(config);
            return v == 0 ? std::string("auto") : std::to_string(v);
          },
          [&](const SeedKey& k) { return std::to_string(k.get(config)); },
          [&](const RealKey& k) { return FormatReal(k.get(config)); },
          [&](const BoolKey& k) { return std::string(k.get(config) ? "true" : "false"); },
          [&](const EnumKey& k) { return std::string(k.name(static_cast<int>(k.get(config)))); },
          [&](const LabelKey& k) { return k.get(config); },
          [&](const IntListKey& k) {
            std::string out = "[";
            for (int v : k.get(config)) out += (out.size() > 1 ? ", " : "") + std::to_string(v);
            return out + "]";
          },
          [&](const StringKey& k) { return k.get(config); },
          [&](const OptionalStringKey& k) {
            return k.get(config).empty() ? std::string("null") : Quote(k.get(config));
          },
          [&](const PathKey& k) {
            if (k.get_list(config).empty()) return k.get(config);
            std::string out = "[";
            for (const std::string& v : k.get_list(config)) out += (out.size() > 1 ? ", " : "") + Quote(v);
            return out + "]";
          },
          [&](const StringListKey& k) {
            // Unambiguous for hashing (ToYaml prints the list itself): each item quoted.
            std::string out = "[";
            for (const std::string& v : k.get(config)) out += (out.size() > 1 ? ", " : "") + Quote(v);
            return out + "]";
          },
          [&](const SizeKey& k) {
            const workloads::SyntheticOptions& synthetic = k.get(config);
            const workloads::SampleSize& size = synthetic.size;
            switch (size.dist) {
              case workloads::SizeDist::kFixed:
                break;
              case workloads::SizeDist::kLognormal:
                return "{dist: lognormal, mean: " + std::to_string(size.mean) +
                       ", sigma: " + FormatReal(size.sigma) + ", min: " + std::to_string(size.min) +
                       ", max: " + std::to_string(size.max) + "}";
              case workloads::SizeDist::kUniform:
                return "{dist: uniform, min: " + std::to_string(size.min) +
                       ", max: " + std::to_string(size.max) + "}";
            }
            return std::to_string(synthetic.sample_bytes);
          },
          [&](const FaultKey& k) {
            const workloads::FaultOptions& fault = k.get(config);
            if (fault.kind == workloads::FaultKind::kNone) return std::string("null");
            return std::string("{kind: ") + workloads::FaultKindName(fault.kind) +
                   ", at_sample: " + std::to_string(fault.at_sample) + "}";
          },
          [&](const StartMethodsKey& k) {
            if (k.get(config).empty()) return std::string("auto");
            std::string out = "[";
            for (const loader::StartMethod m : k.get(config)) {
              out += (out.size() > 1 ? ", " : "") + std::string(loader::StartMethodName(m));
            }
            return out + "]";
          },
      },
      key.type);
}

// Writes a string so that it reads back as the same string: quoted when plain
// YAML would read it as something else (null, a number, a boolean, a flow collection).
void EmitString(YAML::Emitter& out, const std::string& text) {
  int64_t i;
  double d;
  bool b;
  const bool ambiguous = text.empty() || text == "~" || text == "null" || text == "Null" ||
                         text == "NULL" || ParseInt64(text, &i) || ParseReal(text, &d) ||
                         IsBoolText(text, &b);
  if (ambiguous) out << YAML::DoubleQuoted;
  out << text;
}

uint64_t Fnv1a64(std::string_view data) {
  uint64_t hash = 0xcbf29ce484222325ull;
  for (unsigned char c : data) {
    hash ^= c;
    hash *= 0x100000001b3ull;
  }
  return hash;
}

// Reads a whole file, refusing directories and anything implausibly large.
std::string ReadConfigFile(const std::string& path) {
  const auto fail = [&](int error) -> std::string {
    throw ConfigError(path + ": cannot read config: " + std::generic_category().message(error));
  };
  const auto too_big = [&]() -> std::string {
    throw ConfigError(path + ": cannot read config: larger than " +
                      std::to_string(kMaxConfigBytes >> 20) + " MiB");
  };
  struct Fd {  // closes on every exit path, including throws
    int fd;
    ~Fd() {
      if (fd >= 0) ::close(fd);
    }
  } file{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (file.fd < 0) return fail(errno);
  struct stat info;
  if (::fstat(file.fd, &info) != 0) return fail(errno);
  if (S_ISDIR(info.st_mode)) return fail(EISDIR);
  if (S_ISREG(info.st_mode) && info.st_size > kMaxConfigBytes) return too_big();
  std::string text;
  std::array<char, 65536> buffer;
  for (;;) {
    const ssize_t n = ::read(file.fd, buffer.data(), buffer.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return fail(errno);
    }
    if (n == 0) break;
    text.append(buffer.data(), static_cast<size_t>(n));
    if (static_cast<off_t>(text.size()) > kMaxConfigBytes) return too_big();
  }
  return text;
}

}  // namespace

namespace {

YAML::Mark MarkAt(int line, int column) {
  YAML::Mark mark;
  mark.line = line;
  mark.column = column;
  return mark;
}

// The first byte that is not part of valid UTF-8 or is a control character
// YAML does not allow, as a mark; nullopt when all is.
// Checked up front: yaml-cpp would carry such bytes into keys and values, and
// the effective config printed back would no longer be the one that ran.
std::optional<std::pair<YAML::Mark, unsigned char>> FirstRefusedByte(const std::string& text) {
  int line = 0, column = 0;
  for (size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    size_t length = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    bool valid = length > 0 && i + length <= text.size() && !(length == 2 && c < 0xC2);
    for (size_t k = 1; valid && k < length; ++k) valid = (static_cast<unsigned char>(text[i + k]) & 0xC0) == 0x80;
    if (valid && length == 3) {
      const auto c1 = static_cast<unsigned char>(text[i + 1]);
      valid = !(c == 0xE0 && c1 < 0xA0) && !(c == 0xED && c1 >= 0xA0);  // overlong, surrogates
    }
    if (valid && length == 4) {
      const auto c1 = static_cast<unsigned char>(text[i + 1]);
      valid = c <= 0xF4 && !(c == 0xF0 && c1 < 0x90) && !(c == 0xF4 && c1 >= 0x90);
    }
    // YAML's printable set leaves out the C0 controls but tab, newline and
    // carriage return, and DEL; yaml-cpp reads them unevenly (a raw NUL ate the
    // byte after it, so the printed config hashed differently: the config fuzzer).
    if (valid && length == 1 && ((c < 0x20 && c != '\t' && c != '\n' && c != '\r') || c == 0x7f)) valid = false;
    if (!valid) return std::make_pair(MarkAt(line, column), c);
    if (c == '\n') {
      ++line;
      column = 0;
    } else {
      ++column;
    }
    i += length;
  }
  return std::nullopt;
}

// Where the nesting of flow collections ([ {) or of block indentation first
// goes deeper than kMaxNesting; nullopt when it never does. A scan, not a
// parse: quoted scalars and comments are skipped, which is all it needs to
// bound what yaml-cpp will be asked to build.
std::optional<YAML::Mark> FirstTooDeep(const std::string& text) {
  int flow = 0;
  std::vector<int> indents;  // block indentation levels open on the current line
  int line = 0, column = 0;
  bool line_start = true;
  char quote = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\n') {
      ++line;
      column = 0;
      line_start = true;
      if (quote == '\'') quote = 0;  // single-quoted scalars rarely span lines; be lenient
      continue;
    }
    if (quote != 0) {
      if (c == '\\' && quote == '"') {
        ++i;
        ++column;
      } else if (c == quote) {
        quote = 0;
      }
      ++column;
      continue;
    }
    if (line_start && c != ' ') {
      line_start = false;
      if (c != '#' && flow == 0) {
        while (!indents.empty() && indents.back() >= column) indents.pop_back();
        indents.push_back(column);
        if (static_cast<int>(indents.size()) > kMaxNesting) return MarkAt(line, column);
      }
    }
    if (c == '#' && (i == 0 || text[i - 1] == ' ' || text[i - 1] == '\t')) {
      while (i + 1 < text.size() && text[i + 1] != '\n') ++i;
      continue;
    }
    if (c == '"' || c == '\'') {
      quote = c;
    } else if (c == '[' || c == '{') {
      if (++flow + static_cast<int>(indents.size()) > kMaxNesting) return MarkAt(line, column);
    } else if ((c == ']' || c == '}') && flow > 0) {
      --flow;
    }
    ++column;
  }
  return std::nullopt;
}

// Splits YAML text before the "---" line that starts its second document (a
// "---" before any content starts the first). Returns the first part and the
// rest (empty when there is no second document), the rest padded with newlines
// so that marks in it keep their line numbers.
std::pair<std::string, std::string> SplitAtSecondDocument(const std::string& text) {
  bool content = false;
  int line = 0;
  for (size_t start = 0; start < text.size(); ++line) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string_view row(text.data() + start, end - start);
    const bool marker = row.substr(0, 3) == "---" && (row.size() == 3 || row[3] == ' ' || row[3] == '\t' || row[3] == '\r');
    if (marker && content) return {text.substr(0, start), std::string(static_cast<size_t>(line), '\n') + text.substr(start)};
    const size_t first = row.find_first_not_of(" \t\r");
    if (marker || (first != std::string_view::npos && row[first] != '#')) content = true;
    start = end + 1;
  }
  return {text, std::string()};
}

std::string TooDeepMessage() {
  return "invalid YAML: nested deeper than " + std::to_string(kMaxNesting) + " levels (a sweep config needs 3)";
}

SweepConfig Parse(const std::string& text, const std::string& source, bool check_inputs) {
  Parser parser(source, /*use_marks=*/true);
  if (const auto bad = FirstRefusedByte(text)) {
    char byte[8];
    std::snprintf(byte, sizeof byte, "0x%02x", bad->second);
    parser.Fail(bad->first, "", bad->second < 0x80 ? std::string("control character ") + byte + " is not allowed in YAML; write it as an escape in a double-quoted string, or remove it"
                            : std::string("invalid UTF-8: byte ") + byte + " cannot start or continue a character here; save the config as UTF-8");
  }
  if (const auto deep = FirstTooDeep(text)) parser.Fail(*deep, "", TooDeepMessage());
  try {
    // Not YAML::LoadAll: yaml-cpp 0.7's LoadAll never ends on a top-level ','
    // (it appends empty documents until memory runs out; found by the config
    // fuzzer). Load reads the first document; a second one is found by its
    // "---" line and loaded on its own. A trailing empty one is no error.
    const auto [first_text, second_text] = SplitAtSecondDocument(text);
    const YAML::Node root = YAML::Load(first_text);
    if (!second_text.empty()) {
      if (const YAML::Node second = YAML::Load(second_text); !second.IsNull()) {
        parser.Fail(second.Mark(), "", "expected a single YAML document, got a second one");
      }
    }
    if (root.IsNull()) parser.Fail(YAML::Mark(), "", TopLevelExpectation() + ", got an empty document");
    if (!root.IsMap())
      parser.Fail(root.Mark(), "", TopLevelExpectation() + ", got " + Describe(root));
    SweepConfig config;
    config.source = source;
    parser.ParseSection(root, "", config);
    parser.CheckCrossKey(config);
    if (check_inputs) parser.CheckInputs(config);
    // The loader reads a streaming dataset's shuffle buffer from its options.
    if (config.workload.format.access == workloads::ShardAccess::kStream) {
      config.loader.shuffle_buffer = config.workload.format.shuffle_buffer;
    }
    return config;
  } catch (const YAML::DeepRecursion& e) {
    parser.Fail(e.mark, "", TooDeepMessage());  // what the scan above let through
  } catch (const YAML::Exception& e) {
    parser.Fail(e.mark, "", "invalid YAML: " + e.msg);
  }
}

}  // namespace

SweepConfig LoadConfig(const std::string& path) {
  return Parse(ReadConfigFile(path), path, /*check_inputs=*/true);
}

SweepConfig ParseConfig(const std::string& text, const std::string& source) {
  return Parse(text, source, /*check_inputs=*/false);
}

void ApplyOverride(SweepConfig& config, const std::string& assignment) {
  Parser parser("--set " + assignment, /*use_marks=*/false);
  const size_t eq = assignment.find('=');
  if (eq == std::string::npos) parser.Fail(NoMark(), "", "expected key.path=value, got no '='");
  const auto trim = [](std::string_view s) {
    const size_t begin = s.find_first_not_of(" \t");
    if (begin == std::string_view::npos) return std::string_view();
    return s.substr(begin, s.find_last_not_of(" \t") - begin + 1);
  };
  const std::string path(trim(std::string_view(assignment).substr(0, eq)));
  if (path.empty()) parser.Fail(NoMark(), "", "expected key.path=value, got an empty key path");

  // Walk the path one name at a time so a typo is reported where it is.
  const std::vector<std::string_view> parts = SplitPath(path);
  if (std::find(parts.begin(), parts.end(), std::string_view()) != parts.end()) {
    parser.Fail(NoMark(), "", "expected key.path=value, got an empty name in " + Quote(path));
  }
  std::string prefix;
  const Key* leaf = nullptr;
  for (size_t i = 0; i < parts.size(); ++i) {
    const std::string here = Join(prefix, parts[i]);
    if (!FindKey(here) && !IsSection(here)) {
      parser.Fail(NoMark(), here, UnknownKeyText(prefix, parts[i]));
    }
    if ((leaf = FindKey(here)) != nullptr && i + 1 < parts.size()) {
      parser.Fail(NoMark(), Join(here, parts[i + 1]),
                  "unknown key; " + here + " is a value, not a section");
    }
    prefix = here;
  }

  YAML::Node value;
  try {
    value = YAML::Load(std::string(assignment.substr(eq + 1)));
  } catch (const YAML::Exception& e) {
    parser.Fail(NoMark(), path, "invalid YAML value: " + e.msg);
  }
  // Work on a copy so a rejected override leaves `config` as it was.
  SweepConfig updated = config;
  try {
    if (leaf != nullptr) {
      parser.ParseLeaf(*leaf, value, NoMark(), updated);
    } else if (!value.IsNull()) {
      if (!value.IsMap()) parser.Fail(NoMark(), path, "expected a mapping, got " + Describe(value));
      parser.ParseSection(value, path, updated);
    }
    parser.CheckCrossKey(updated);
  } catch (const YAML::Exception& e) {
    parser.Fail(NoMark(), path, "invalid YAML value: " + e.msg);
  }
  config = std::move(updated);
}

std::string ToYaml(const SweepConfig& config) {
  YAML::Emitter out;
  out.SetNullFormat(YAML::LowerNull);  // "fault: null", as DESIGN.md writes it
  out << YAML::BeginMap;
  std::vector<std::string_view> open;  // sections currently open, outermost first
  for (const Key& key : kKeys) {
    if (!Applies(key, config.workload.kind)) continue;
    // decode, crop and resize are written for decode: jpeg only (crop and
    // resize are errors without it; a files config reads as it did before them).
    if (config.workload.files.decode == workloads::FilesDecode::kNone &&
        (key.path == "workload.decode" || key.path == "workload.crop" || key.path == "workload.resize")) {
      continue;
    }
    const std::vector<std::string_view> parts = SplitPath(key.path);
    size_t common = 0;
    while (common < open.size() && common + 1 < parts.size() && open[common] == parts[common])
      ++common;
    for (; open.size() > common; open.pop_back()) out << YAML::EndMap;
    while (open.size() + 1 < parts.size()) {
      out << YAML::Key << std::string(parts[open.size()]) << YAML::Value;
      // Sub-sections ({h2d_gbps_pinned: 25.0, ...}) print on one line, as in DESIGN.md.
      if (!open.empty()) out << YAML::Flow;
      out << YAML::BeginMap;
      open.push_back(parts[open.size()]);
    }
    out << YAML::Key << std::string(parts.back()) << YAML::Value;
    if (const auto* list = std::get_if<IntListKey>(&key.type)) {
      out << YAML::Flow << YAML::BeginSeq;
      for (int v : list->get(config)) out << std::to_string(v);
      out << YAML::EndSeq;
    } else if (const auto* methods = std::get_if<StartMethodsKey>(&key.type);
               methods != nullptr && !methods->get(config).empty()) {
      out << YAML::Flow << YAML::BeginSeq;
      for (const loader::StartMethod m : methods->get(config)) out << loader::StartMethodName(m);
      out << YAML::EndSeq;
    } else if (const auto* strings = std::get_if<StringListKey>(&key.type)) {
      out << YAML::Flow << YAML::BeginSeq;
      for (const std::string& v : strings->get(config)) EmitString(out, v);
      out << YAML::EndSeq;
    } else if (const auto* text = std::get_if<StringKey>(&key.type)) {
      EmitString(out, text->get(config));
    } else if (const auto* path = std::get_if<PathKey>(&key.type)) {
      if (path->get_list(config).empty()) {
        EmitString(out, path->get(config));
      } else {
        out << YAML::Flow << YAML::BeginSeq;
        for (const std::string& v : path->get_list(config)) EmitString(out, v);
        out << YAML::EndSeq;
      }
    } else if (const auto* optional = std::get_if<OptionalStringKey>(&key.type)) {
      if (optional->get(config).empty()) {
        out << YAML::Null;
      } else {
        EmitString(out, optional->get(config));
      }
    } else if (const auto* size = std::get_if<SizeKey>(&key.type);
               size != nullptr && size->get(config).size.dist != workloads::SizeDist::kFixed) {
      const workloads::SampleSize& s = size->get(config).size;
      out << YAML::Flow << YAML::BeginMap;
      out << YAML::Key << "dist" << YAML::Value << workloads::SizeDistName(s.dist);
      if (s.dist == workloads::SizeDist::kLognormal) {
        out << YAML::Key << "mean" << YAML::Value << std::to_string(s.mean);
        out << YAML::Key << "sigma" << YAML::Value << FormatReal(s.sigma);
      }
      out << YAML::Key << "min" << YAML::Value << std::to_string(s.min);
      out << YAML::Key << "max" << YAML::Value << std::to_string(s.max);
      out << YAML::EndMap;
    } else if (const auto* fault = std::get_if<FaultKey>(&key.type);
               fault != nullptr && fault->get(config).kind != workloads::FaultKind::kNone) {
      const workloads::FaultOptions& f = fault->get(config);
      out << YAML::Flow << YAML::BeginMap;
      out << YAML::Key << "kind" << YAML::Value << workloads::FaultKindName(f.kind);
      out << YAML::Key << "at_sample" << YAML::Value << std::to_string(f.at_sample);
      out << YAML::EndMap;
    } else if (std::holds_alternative<FaultKey>(key.type)) {
      out << YAML::Null;  // no fault (a set one is handled above)
    } else {
      out << FormatValue(key, config);
    }
  }
  for (; !open.empty(); open.pop_back()) out << YAML::EndMap;
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

namespace {

// The workload kinds a key applies to: "all" or "files, npy".
std::string KindsOf(const Key& key) {
  if (key.kinds == kAllKinds) return "all";
  std::string out;
  for (int i = 0; i <= static_cast<int>(workloads::kLastWorkloadKind); ++i) {
    if (!Applies(key, static_cast<WorkloadKind>(i))) continue;
    out += (out.empty() ? "" : ", ") + std::string(workloads::WorkloadKindName(static_cast<WorkloadKind>(i)));
  }
  return out;
}

// A table cell: pipes would end the cell.
std::string Cell(std::string text) {
  for (size_t at = text.find('|'); at != std::string::npos; at = text.find('|', at + 2)) text.replace(at, 1, "\\|");
  return text;
}

}  // namespace

std::string KeyReferenceMarkdown() {
  const SweepConfig defaults;
  std::string out =
      "# Config keys\n\n"
      "Generated from the key table in `tuner/config/config.cc` by `feedtune config-keys`\n"
      "(`make config-docs` rewrites this file; a test fails when it differs from the table).\n"
      "Every key has a default; unknown keys, wrong types and out-of-range values are errors\n"
      "that name the file, line and column. `feedtune validate FILE` prints the effective config,\n"
      "and `--set key=value` sets any key from the command line. \"In the workload hash\": runs whose\n"
      "hashed keys match compare across machines (\"if set\": only when not the default).\n\n"
      "| key | takes | default | kinds | in the workload hash |\n"
      "|---|---|---|---|---|\n";
  for (const Key& key : kKeys) {
    const char* hashed = key.hashed == Hashed::kYes ? "yes" : key.hashed == Hashed::kIfSet ? "if set" : "no";
    const std::string value = FormatValue(key, defaults);
    out += "| `" + std::string(key.path) + "` | " + Cell(Takes(key)) + " | " +
           (value.empty() ? "(none)" : "`" + Cell(value) + "`") + " | " + KindsOf(key) + " | " + hashed + " |\n";
  }
  return out;
}

std::string WorkloadHash(const SweepConfig& config) {
  // Versioned so a change in what is hashed cannot collide with old results.
  std::string canonical = "feedtune-workload-v1\n";
  const SweepConfig defaults;
  for (const Key& key : kKeys) {
    if (key.hashed == Hashed::kNo || !Applies(key, config.workload.kind)) continue;
    const std::string value = FormatValue(key, config);
    if (key.hashed == Hashed::kIfSet && value == FormatValue(key, defaults)) continue;
    canonical += key.path;
    canonical += '=';
    canonical += value;
    canonical += '\n';
  }
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(Fnv1a64(canonical)));
  return hex;
}

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
