// Parser's readers of one key's value: each type of the key table (an integer
// in range, an enum by name, a list, a path, a command line, a size
// distribution, a fault), strictly, with the file:line:column error.
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "tuner/config/keys.h"
#include "tuner/config/parser.h"
#include "workloads/command_args.h"

namespace feedtune::tuner::config_internal {

void Parser::ParseLeaf(const Key& key, const YAML::Node& value, const YAML::Mark& mark,
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

void Parser::ParseEnum(const Key& key, const EnumKey& k, const YAML::Node& value,
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

void Parser::ParseIntList(const Key& key, const IntListKey& k, const YAML::Node& value,
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

void Parser::ParsePath(const Key& key, const PathKey& k, const YAML::Node& value, const YAML::Mark& mark,
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

void Parser::ParseStringList(const Key& key, const StringListKey& k, const YAML::Node& value,
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

void Parser::ParseFault(const Key& key, const FaultKey& k, const YAML::Node& value,
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

std::vector<loader::StartMethod> Parser::ReadStartMethods(const YAML::Node& value,
                                                          const YAML::Mark& mark,
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

bool Parser::IsPlanned(const EnumKey& key, std::string_view value) {
  std::string_view rest = key.planned;
  while (!rest.empty()) {
    const size_t bar = rest.find('|');
    if (rest.substr(0, bar) == value) return true;
    if (bar == std::string_view::npos) break;
    rest.remove_prefix(bar + 1);
  }
  return false;
}

void Parser::Bad(const YAML::Node& value, const YAML::Mark& mark, std::string_view path,
                 const std::string& expected, bool quoted_but_valid) const {
  std::string what = "expected " + expected + ", got " + Describe(value);
  if (value.IsScalar() && !IsPlain(value) && quoted_but_valid) {
    what += " (quoted, so a string)";
  }
  Fail(mark, path, what);
}

bool Parser::HasControl(std::string_view text) {
  return std::any_of(text.begin(), text.end(),
                     [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; });
}

std::map<std::string, std::pair<YAML::Node, YAML::Mark>> Parser::ReadSubKeys(
    const YAML::Node& map, std::string_view path, const std::vector<std::string_view>& allowed) const {
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

double Parser::ReadReal(const YAML::Node& value, const YAML::Mark& mark, std::string_view path,
                        const RealKey& bounds) const {
  double v = 0;
  const bool parsed = value.IsScalar() && ParseReal(value.Scalar(), &v);
  if (!IsPlain(value) || !parsed || !InRange(bounds, v)) {
    Bad(value, mark, path, ExpectedReal(bounds, parsed && !std::isfinite(v)),
        parsed && InRange(bounds, v));
  }
  return v;
}

void Parser::ReadSizeDistribution(const YAML::Node& map, const YAML::Mark& mark, std::string_view path,
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

int64_t Parser::ReadInt(const YAML::Node& value, const YAML::Mark& mark, std::string_view path,
                        int64_t lo, int64_t hi) const {
  int64_t v = 0;
  const bool parsed = value.IsScalar() && ParseInt64(value.Scalar(), &v);
  if (!IsPlain(value) || !parsed || v < lo || v > hi) {
    Bad(value, mark, path, ExpectedInt(lo, hi), parsed && v >= lo && v <= hi);
  }
  return v;
}

}  // namespace feedtune::tuner::config_internal
