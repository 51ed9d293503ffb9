// The config written out: the effective config as YAML (ToYaml), the key
// reference page (KeyReferenceMarkdown) and the workload hash, each a walk of
// the key table.
#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "tuner/config/config.h"
#include "tuner/config/keys.h"

namespace feedtune::tuner {
namespace config_internal {
namespace {

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

// The config with workload.argv as its file wrote it (config.h: argv_as_written).
SweepConfig AsWritten(const SweepConfig& config) {
  SweepConfig written = config;
  if (!config.argv_as_written.empty()) written.workload.command.argv = config.argv_as_written;
  return written;
}

}  // namespace
}  // namespace config_internal

using config_internal::Applies;
using config_internal::AsWritten;
using config_internal::Cell;
using config_internal::EmitString;
using config_internal::FaultKey;
using config_internal::Fnv1a64;
using config_internal::FormatReal;
using config_internal::FormatValue;
using config_internal::Hashed;
using config_internal::IntListKey;
using config_internal::Key;
using config_internal::KindsOf;
using config_internal::OptionalStringKey;
using config_internal::PathKey;
using config_internal::SizeKey;
using config_internal::SplitPath;
using config_internal::StartMethodsKey;
using config_internal::StringKey;
using config_internal::StringListKey;
using config_internal::Takes;
using config_internal::kKeys;

std::string ToYaml(const SweepConfig& resolved) {
  const SweepConfig config = AsWritten(resolved);
  YAML::Emitter out;
  out.SetNullFormat(YAML::LowerNull);  // "fault: null", as docs/config.md writes it
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
      // Sub-sections ({h2d_gbps_pinned: 25.0, ...}) print on one line, as
      // tests/testdata/configs/quickstart.yaml writes them.
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

std::string KeyReferenceMarkdown() {
  const SweepConfig defaults;
  std::string out =
      "# Config keys\n\n"
      "Generated from the key table in `tuner/config/keys.cc` by `feedtune config-keys`\n"
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
    // Built piece by piece: GCC 12 warns (-Wrestrict, falsely) on "`" + std::string
    // once this function is inlined differently.
    std::string shown = "(none)";
    if (!value.empty()) {
      shown = "`";
      shown += Cell(value);
      shown += '`';
    }
    out += "| `" + std::string(key.path) + "` | " + Cell(Takes(key)) + " | " + shown + " | " + KindsOf(key) + " | " +
           hashed + " |\n";
  }
  return out;
}

std::string WorkloadHash(const SweepConfig& resolved) {
  const SweepConfig config = AsWritten(resolved);
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

}  // namespace feedtune::tuner
