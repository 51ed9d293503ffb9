// libFuzzer target: the sweep-config parser (tuner/config/config.h).
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
// Found so far, each kept in the seed corpus as a regression input:
//   regression-not-utf8.yaml         text that was not UTF-8 printed as U+FFFD,
//                                    so the stored config differed from the one
//                                    that ran (fixed: such text is refused)
//   regression-top-level-comma.yaml  a top-level ',' made yaml-cpp's LoadAll
//                                    append empty documents until memory ran
//                                    out (fixed: ParseConfig no longer uses it)
//   regression-nul-in-argv.yaml      a raw NUL in a command argument was read as
//                                    eating the byte after it, so the printed config
//                                    hashed differently (fixed: C0 controls other
//                                    than tab and line ends are refused, as YAML does)
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "tuner/config/config.h"

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
  try {
    const SweepConfig config = feedtune::tuner::ParseConfig(text, "fuzz.yaml");
    CheckRoundTrip(config);
  } catch (const ConfigError& e) {
    CheckMessage(e, "fuzz.yaml");
  }
  return 0;
}
