// The key table of a sweep config and what reads and names its values:
// the types a key can have, the table itself (kKeys, defined in keys.cc), the
// strict YAML scalar readers, the "expected ..." wording and the did-you-mean
// suggestions (scalars.cc). Internal to tuner/config/: parsing, `--set`, ToYaml, the
// workload hash and the key reference all walk this one table, so a new key
// cannot be parsed but forgotten in the printed config (or vice versa).
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "tuner/config/config.h"

namespace feedtune::tuner::config_internal {

using workloads::WorkloadKind;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr size_t kMaxLabelLength = 128;
constexpr size_t kMaxQuotedChars = 60;              // keeps a "got ..." from flooding the line

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
constexpr KindMask kJpegDecoding = kFilesOnly | kSharded | kLmdbOnly;

// "a", "a and b", "a, b and c": the kinds of `mask`.
std::string KindNames(KindMask mask);

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
// RealKey's bounds: whether each end is open.
constexpr bool kClosed = false;
constexpr bool kOpen = true;
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
  std::string_view path;  // dotted; the table order is docs/config.md's and ToYaml's
  Hashed hashed;
  KeyType type;
  KindMask kinds = kAllKinds;  // keys for other kinds are errors, and left out of ToYaml
};

inline bool Applies(const Key& key, WorkloadKind kind) { return (key.kinds & KindBit(kind)) != 0; }

template <class... Fs>
struct Overloaded : Fs... {
  using Fs::operator()...;
};
template <class... Fs>
Overloaded(Fs...) -> Overloaded<Fs...>;

// Every leaf key (the table in keys.cc). Sections are contiguous: ToYaml opens
// a section at its first key.
extern const std::span<const Key> kKeys;

// The table row of a dotted path; nullptr when none.
const Key* FindKey(std::string_view path);
// "prefix.name", or "name" at the top level.
std::string Join(std::string_view prefix, std::string_view name);
// A section is a proper prefix of some key path ("device", "device.host_sim").
bool IsSection(std::string_view path);
// The names allowed directly under `prefix` ("" = top level), in table order.
std::vector<std::string_view> ChildrenOf(std::string_view prefix);
std::vector<std::string_view> SplitPath(std::string_view path);
std::string JoinList(const std::vector<std::string_view>& items, std::string_view sep);

// Scalars: strict readers for the YAML 1.2 core schema forms we accept.
bool IsBoolText(std::string_view text, bool* value);
// Decimal integer with optional sign. Overflow saturates (the range check then
// reports it) rather than failing, so "99999999999999999999" reads as out of range.
bool ParseInt64(std::string_view text, int64_t* value);
bool ParseUint64(std::string_view text, uint64_t* value);
// A YAML number: decimal/exponent forms, or .inf/.nan spellings. Returns the
// non-finite value for those (and for overflow) so the caller can say "finite".
bool ParseReal(std::string_view text, double* value);
// Shortest text that reads back as the same double, always with a '.' or an
// exponent so YAML readers see a float.
std::string FormatReal(double value, bool force_float = true);
// Double-quoted, escaped, cut at kMaxQuotedChars.
std::string Quote(std::string_view text);
// A scalar written without quotes (or a tag).
bool IsPlain(const YAML::Node& node);
// What was found, for "got ...": numbers and booleans as written, other text quoted.
std::string Describe(const YAML::Node& node);
std::string ExpectedInt(int64_t lo, int64_t hi);
std::string ExpectedReal(const RealKey& key, bool finite_note);
bool InRange(const RealKey& key, double v);
std::string ExpectedEnum(const EnumKey& key);
// What a key takes, in the words of its error message ("expected ...").
std::string Takes(const Key& key);
bool IsLabel(std::string_view text);

// Suggestions. The closest candidate: a case-insensitive match, else one
// within 2 edits (1 for names of up to 4 letters); empty when none is close.
std::string_view ClosestName(std::string_view name, const std::vector<std::string_view>& candidates);
// "unknown key; did you mean ...?" for `name` under `prefix`, or the keys allowed there.
std::string UnknownKeyText(std::string_view prefix, std::string_view name);

}  // namespace feedtune::tuner::config_internal
