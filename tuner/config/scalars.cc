// The strict scalar readers of the key table (tuner/config/keys.h): the
// YAML 1.2 core schema forms a config value may take, the "expected ..."
// wording of every error, what a key takes in the key reference, and the
// did-you-mean suggestions for an unknown key.
#include <yaml-cpp/yaml.h>

#include <algorithm>
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
#include <vector>

#include "tuner/config/keys.h"

namespace feedtune::tuner::config_internal {

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
std::string FormatReal(double value, bool force_float) {
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

namespace {

std::string FormatBound(double value) { return FormatReal(value, /*force_float=*/false); }

}  // namespace

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

namespace {

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

}  // namespace

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

}  // namespace feedtune::tuner::config_internal
