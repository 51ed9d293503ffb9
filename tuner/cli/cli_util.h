// Helpers shared by the subcommands: option parsing with help and errors,
// loading a config into a ready-to-measure session, timestamps.
#pragma once

#include <boost/program_options.hpp>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "loader/device/device.h"
#include "results/records.h"
#include "tuner/cli/commands.h"
#include "tuner/config/config.h"
#include "tuner/measure/measurer_factory.h"

namespace feedtune::cli {

namespace po = boost::program_options;

inline constexpr const char* kDefaultDb = "results/feedtune.db";

// Parses `args` against `options` (+ positionals); prints help or the error.
// Returns nullopt with `*exit_code` set when the command should end now.
std::optional<po::variables_map> Parse(const Args& args, const po::options_description& options,
                                       const po::positional_options_description& positional, const char* usage,
                                       int* exit_code);

std::string NowIso8601();

// This machine's fingerprint, with `label` as display name (hostname when empty).
results::Fingerprint MachineFingerprint(const std::string& label);

// A loaded config with its workload and device, ready to make a measurer
// (tuner::MakeMeasurer).
struct Session {
  tuner::SweepConfig config;
  tuner::OpenedWorkload workload;
  std::unique_ptr<device::Device> device;
};

// Loads the config (applying `overrides`, as `--set` gives them), opens the
// workload (its dataset and fork server) and then creates the device, in that
// order (see tuner/measure/measurer_factory.h); prints the error and returns nullopt
// (with the exit code) when it cannot.
// tuner::OpenWorkload, printing why it failed (exit code 2 for the user's input, 1 otherwise).
bool OpenWorkloadOrExplain(const tuner::SweepConfig& config, tuner::OpenedWorkload* workload, int* exit_code);

std::optional<Session> OpenSession(const std::string& path, const std::vector<std::string>& overrides,
                                   int* exit_code);

}  // namespace feedtune::cli
