// Strict sweep-config parsing: YAML text to SweepConfig (ParseConfig), one
// `--set key.path=value` (ApplyOverride), the checks between keys, and the
// guards that run before yaml-cpp sees the text.
//
// Error messages are one line, "<source>:<line>:<column>: <key.path>: expected
// <what>, got <what was found>", because users fix configs from that line alone
// and editors jump to file:line:column.
#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "tuner/config/config.h"
#include "tuner/config/keys.h"
#include "tuner/config/parser.h"
#include "workloads/command_args.h"

namespace feedtune::tuner {
namespace config_internal {
namespace {

using loader::WorkerMode;

constexpr int64_t kMaxBatchBytes = int64_t{2} << 30;  // one batch must fit in memory easily
// Checked before yaml-cpp sees the text (as check_inputs.cc's kMaxConfigBytes),
// whose memory grows far out of proportion on deeply nested input.
constexpr int kMaxNesting = 32;  // a sweep config nests 3 levels

std::string TopLevelExpectation() {
  return "expected a mapping with keys " + JoinList(ChildrenOf(""), ", ");
}

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

}  // namespace

void Parser::Fail(const YAML::Mark& mark, std::string_view path,
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

void Parser::ParseSection(const YAML::Node& map, const std::string& prefix, SweepConfig& config) {
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

void Parser::CheckCrossKey(const SweepConfig& config) const {
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
                         : kind == WorkloadKind::kLmdb     ? "the value's bytes"
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
  // A run command takes each trial's requests in flight on its command line;
  // one that does not would be measured at one setting under many names.
  if (kind == WorkloadKind::kCommand && config.workload.command.remote_reads &&
      config.workload.command.protocol == workloads::CommandProtocol::kRun) {
    const auto& argv = config.workload.command.argv;
    if (std::none_of(argv.begin(), argv.end(),
                     [](const std::string& a) { return a.find("{fetch_concurrency}") != std::string::npos; })) {
      FailAtFirstGiven({"workload.remote_reads"},
                       "expected {fetch_concurrency} in workload.argv when workload.remote_reads is true and "
                       "workload.protocol is run (each trial's requests in flight reach the command there), got "
                       "none; add it where the command takes it, or use workload.protocol: serve");
    }
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

void Parser::CheckServeArgv(const std::vector<std::string>& argv) const {
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

const char* Parser::FormatPathNoun(WorkloadKind kind) {
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

YAML::Mark Parser::ValueMark(const YAML::Node& key, const YAML::Node& value) {
  if (value.Mark().is_null() || (value.IsNull() && value.Mark().line != key.Mark().line)) {
    return key.Mark();
  }
  return value.Mark();
}

void Parser::FailAtFirstGiven(std::initializer_list<std::string_view> paths,
                              const std::string& what) const {
  for (std::string_view path : paths) {
    if (auto it = given_.find(std::string(path)); it != given_.end())
      Fail(it->second, path, what);
  }
  Fail(NoMark(), *paths.begin(), what);
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

}  // namespace config_internal

using config_internal::Describe;
using config_internal::FindKey;
using config_internal::IsSection;
using config_internal::Join;
using config_internal::Key;
using config_internal::NoMark;
using config_internal::Parse;
using config_internal::Parser;
using config_internal::Quote;
using config_internal::SplitPath;
using config_internal::UnknownKeyText;

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

}  // namespace feedtune::tuner
