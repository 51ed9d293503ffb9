// `feedtune validate`: check a config, print it with defaults filled in.
// `feedtune config-keys`: every key of the config, from the key table.
#include <iostream>

#include "tuner/cli/cli_util.h"
#include "tuner/cli/install_paths.h"

namespace feedtune::cli {
namespace {
constexpr const char* kValidateUsage = R"(Usage: feedtune validate CONFIG

Checks a sweep config strictly (unknown keys, types, ranges) and prints the
effective config, every default filled in. Exit 2 with file:line:column on error.

Example:
  feedtune validate configs/quickstart.yaml)";

constexpr const char* kConfigKeysUsage = R"(Usage: feedtune config-keys

Prints every config key as a Markdown table, from the key table the parser
uses: what each key takes, its default, the workload kinds it applies to, and
whether it is part of the workload hash. docs/config.md is this output
(make config-docs rewrites it).

Example:
  feedtune config-keys > docs/config.md)";
}  // namespace

int RunValidate(const Args& args) {
  po::options_description options("Options");
  std::string config_path;
  options.add_options()("help,h", "this help")("config", po::value(&config_path)->required(), "the config (YAML)");
  po::positional_options_description positional;
  positional.add("config", 1);
  int code = kExitOk;
  const auto vm = Parse(args, options, positional, kValidateUsage, &code);
  if (!vm) return code;
  try {
    const std::string path = ResolveDataPath(config_path);
    const tuner::SweepConfig config = tuner::LoadConfig(path);
    std::cout << "# " << path << ": valid; effective config (workload hash " << tuner::WorkloadHash(config)
              << ")\n"
              << tuner::ToYaml(config);
    return kExitOk;
  } catch (const tuner::ConfigError& e) {
    std::cerr << "feedtune: " << e.what() << "\n";
    return kExitUsage;
  }
}

int RunConfigKeys(const Args& args) {
  po::options_description options("Options");
  options.add_options()("help,h", "this help");
  int code = kExitOk;
  const auto vm = Parse(args, options, {}, kConfigKeysUsage, &code);
  if (!vm) return code;
  std::cout << tuner::KeyReferenceMarkdown();
  return kExitOk;
}

}  // namespace feedtune::cli
