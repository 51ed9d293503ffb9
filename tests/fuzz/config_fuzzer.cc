// libFuzzer target: the sweep-config parser (tuner/config.h).
//
// Input: YAML text, parsed as a config file. An input whose first byte is '='
// is instead a list of `--set` assignments, one per line, applied in turn to
// the default config.
//
// Beyond "no crash, no leak, no undefined behaviour" (the sanitizers), it checks
// the contracts of config.h: the only exception is ConfigError; its message is
// one non-empty line that starts with the source; and a config that parses
// prints (ToYaml) as YAML that parses back to the same text and workload hash.
//
// Found so far: a string that was not UTF-8 printed as U+FFFD, so the stored
// config differed from the one that ran (fixed: such text is refused;
// corpus/config/regression-not-utf8.yaml).
//
// Known bug, excluded until fixed: ParseConfig calls YAML::LoadAll, which never
// ends (and allocates without bound) on a ',' at the top level of a document:
// a config of one comma makes feedtune take all memory and abort
// (known-bugs/config-loadall-endless-documents.yaml; the test
// BadConfigs.DISABLED_ATopLevelCommaIsAnErrorNotAnEndlessLoop). Inputs that may
// hold such a comma are skipped (MayHaveTopLevelComma).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "tuner/config.h"

namespace {

using feedtune::tuner::ConfigError;
using feedtune::tuner::SweepConfig;

[[noreturn]] void Broken(const std::string& what, const std::string& detail) {
  std::fprintf(stderr, "config_fuzzer: %s\n%s\n", what.c_str(), detail.c_str());
  std::abort();
}

void CheckMessage(const ConfigError& e, std::string_view source) {
  const std::string message = e.what();
  if (message.empty() || message.find('\n') != std::string::npos || message.rfind(source, 0) != 0) {
    Broken("a ConfigError message is not one line starting with its source", message);
  }
}

// True unless every ',' is certainly inside a flow collection ([...] or {...}).
// Quotes and comments could hide brackets from this count, so with a ',' and
// any of them present the answer is "maybe" (true).
bool MayHaveTopLevelComma(std::string_view text) {
  if (text.find(',') == std::string_view::npos) return false;
  if (text.find_first_of("\"'#") != std::string_view::npos) return true;
  int depth = 0;
  for (char c : text) {
    if (c == '[' || c == '{') ++depth;
    if ((c == ']' || c == '}') && depth > 0) --depth;
    if (c == ',' && depth == 0) return true;
  }
  return false;
}

void CheckRoundTrip(const SweepConfig& config) {
  const std::string yaml = feedtune::tuner::ToYaml(config);
  SweepConfig again;
  try {
    again = feedtune::tuner::ParseConfig(yaml, "<round trip>");
  } catch (const ConfigError& e) {
    Broken("the printed config does not parse back", std::string(e.what()) + "\n" + yaml);
  }
  if (feedtune::tuner::ToYaml(again) != yaml) Broken("the printed config changes when read back", yaml);
  if (feedtune::tuner::WorkloadHash(again) != feedtune::tuner::WorkloadHash(config)) {
    Broken("the workload hash changes when the printed config is read back", yaml);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  if (!text.empty() && text[0] == '=') {
    SweepConfig config;
    size_t start = 1;
    while (start <= text.size()) {
      size_t end = text.find('\n', start);
      if (end == std::string::npos) end = text.size();
      try {
        feedtune::tuner::ApplyOverride(config, text.substr(start, end - start));
      } catch (const ConfigError& e) {
        CheckMessage(e, "--set ");
      }
      start = end + 1;
    }
    CheckRoundTrip(config);
    return 0;
  }
  if (MayHaveTopLevelComma(text)) return 0;  // the LoadAll bug above
  try {
    const SweepConfig config = feedtune::tuner::ParseConfig(text, "fuzz.yaml");
    CheckRoundTrip(config);
  } catch (const ConfigError& e) {
    CheckMessage(e, "fuzz.yaml");
  }
  return 0;
}
