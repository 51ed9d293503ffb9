// Parser: one parse of a sweep config (a file, or one `--set`), shared by the
// config's files: parse.cc reads sections and checks keys against each other,
// parse_values.cc reads each key's value, check_inputs.cc checks the inputs
// the config names on this machine. Internal to tuner/config/.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <initializer_list>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tuner/config/config.h"
#include "tuner/config/keys.h"

namespace feedtune::tuner::config_internal {

// Where a problem is. A null mark (overrides) prints no line:column.
inline YAML::Mark NoMark() { return YAML::Mark::null_mark(); }

// One parse (a file or one --set): the source for messages and which leaf keys
// it set, so cross-key errors point at a key the user actually wrote.
class Parser {
 public:
  Parser(std::string source, bool use_marks) : source_(std::move(source)), use_marks_(use_marks) {}

  // Throws ConfigError "<source>:<line>:<column>: <path>: <what>", on one line.
  [[noreturn]] void Fail(const YAML::Mark& mark, std::string_view path,
                         std::string_view what) const;

  // `map` is a mapping or null (an empty section) for `prefix` ("" = top level).
  void ParseSection(const YAML::Node& map, const std::string& prefix, SweepConfig& config);

  void ParseLeaf(const Key& key, const YAML::Node& value, const YAML::Mark& mark,
                 SweepConfig& config);

  // One of the names; a near miss gets "did you mean", a planned name "not supported yet".
  void ParseEnum(const Key& key, const EnumKey& k, const YAML::Node& value,
                 const YAML::Mark& mark, SweepConfig& config);

  // A non-empty list of distinct integers in range, each item checked at its own line.
  void ParseIntList(const Key& key, const IntListKey& k, const YAML::Node& value,
                    const YAML::Mark& mark, SweepConfig& config);

  // workload.path: a string, or a list of strings (whether the kind takes a
  // list is checked across keys, as the kind may come after the path); each
  // item's mark is kept for the checks of the inputs.
  void ParsePath(const Key& key, const PathKey& k, const YAML::Node& value, const YAML::Mark& mark,
                 SweepConfig& config);

  // The command line: strings, the first non-empty, placeholders known; each item's
  // mark is kept for the cross-key checks.
  void ParseStringList(const Key& key, const StringListKey& k, const YAML::Node& value,
                       const YAML::Mark& mark, SweepConfig& config);

  // null, or {kind: throw|exit|abort|segv|hang, at_sample: N}.
  void ParseFault(const Key& key, const FaultKey& k, const YAML::Node& value,
                  const YAML::Mark& mark, SweepConfig& config);

  // sweep.start_methods: auto (empty) or a list of distinct fork|forkserver|spawn.
  std::vector<loader::StartMethod> ReadStartMethods(const YAML::Node& value, const YAML::Mark& mark,
                                                    std::string_view path) const;

  // Checks between keys, after all of them are read.
  void CheckCrossKey(const SweepConfig& config) const;

  // A serving command starts once per sweep and reads each trial's knobs on
  // stdin, so a knob placeholder in its argv would silently hold the first
  // trial's value for every trial. The error points at the argument when this
  // parse read argv, else at workload.protocol (a --set of either has no mark).
  void CheckServeArgv(const std::vector<std::string>& argv) const;

  // The inputs the config names must exist on this machine: a files
  // workload's directory, not empty, with an index for the shards layout.
  void CheckInputs(const SweepConfig& config) const;
  void CheckRemoteInput(const SweepConfig& config) const;

  // Whether any file under `dir` (recursively, dot-files skipped, as
  // FilesDataset lists them) is named as a JPEG. Stops at the first.
  static bool HasJpegFile(const std::string& dir);

 private:
  // The format kinds' input: the file (npy, hdf5) or the environment (lmdb, a
  // directory or its data file) exists. Its contents are checked when the
  // workload is opened (OpenWorkload), with the format's library.
  void CheckFormatInput(const SweepConfig& config) const;

  // tfrecord and tar: the path, or each entry of the list, names shard files
  // (workloads::ResolveShardPaths, as the dataset finds them); an entry that
  // names none is the error, at its own line. A shard named by two entries
  // is found when the workload is opened.
  void CheckShardInput(const SweepConfig& config) const;

  static const char* FormatPathNoun(WorkloadKind kind);

  // Empty values ("key:" then a newline) get the mark of whatever follows; the
  // key itself is the better place to point at.
  static YAML::Mark ValueMark(const YAML::Node& key, const YAML::Node& value);

  static bool IsPlanned(const EnumKey& key, std::string_view value);

  // `quoted_but_valid`: the text would have been accepted unquoted, which is
  // worth saying, since `"4"` in an error reads like a good value otherwise.
  [[noreturn]] void Bad(const YAML::Node& value, const YAML::Mark& mark, std::string_view path,
                        const std::string& expected, bool quoted_but_valid) const;

  static bool HasControl(std::string_view text);

  // The entries of a leaf's mapping value ({dist: ..., mean: ...}): name ->
  // (value, mark). Unknown and duplicate names are errors, as in sections.
  std::map<std::string, std::pair<YAML::Node, YAML::Mark>> ReadSubKeys(
      const YAML::Node& map, std::string_view path,
      const std::vector<std::string_view>& allowed) const;

  double ReadReal(const YAML::Node& value, const YAML::Mark& mark, std::string_view path,
                  const RealKey& bounds) const;

  // {dist: lognormal, mean: M, sigma: S[, min: A][, max: B]} or
  // {dist: uniform, min: A, max: B}. With lognormal, max defaults to
  // exp(mu + 4 sigma) (above all but 3 in 100,000 draws), which then sizes the slots.
  void ReadSizeDistribution(const YAML::Node& map, const YAML::Mark& mark, std::string_view path,
                            const SizeKey& k, workloads::SyntheticOptions& synthetic) const;

  int64_t ReadInt(const YAML::Node& value, const YAML::Mark& mark, std::string_view path,
                  int64_t lo, int64_t hi) const;

  [[noreturn]] void FailAtFirstGiven(std::initializer_list<std::string_view> paths,
                                     const std::string& what) const;

  std::string source_;
  bool use_marks_;
  std::map<std::string, YAML::Mark> given_;  // leaf path -> where its value is
  // String-list path -> where each item is (workload.argv), for cross-key errors.
  std::map<std::string, std::vector<YAML::Mark>> list_item_marks_;
};

// Parses `text` (named `source` in messages) after the guards that run before
// yaml-cpp sees it; with `check_inputs`, also checks the inputs it names
// (Parser::CheckInputs). Throws ConfigError.
SweepConfig Parse(const std::string& text, const std::string& source, bool check_inputs);

}  // namespace feedtune::tuner::config_internal
