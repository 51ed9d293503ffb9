// Helpers shared by the subcommands: option parsing with help and errors (and
// the config options every measuring command takes), loading a config into a
// ready-to-measure session with the torch costs it pays, this machine's
// fingerprint, running a helper program, timestamps.
#pragma once

#include <boost/program_options.hpp>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "loader/device/device.h"
#include "results/records.h"
#include "results/torch_costs.h"
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

// The options every command that measures settings of a config begins with
// (trial, diagnose): --help, the config (required; also the first
// positional) and --set key.path=value (repeatable).
void AddConfigOptions(po::options_description& options, po::positional_options_description& positional,
                      std::string* config_path, std::vector<std::string>* sets);

// A bad use of `feedtune <command>`: says `what` on stderr
// ("feedtune <command>: <what>") and returns kExitUsage, for `return`.
int UsageError(const std::string& command, const std::string& what);

std::string NowIso8601();

// Runs argv (PATH looked up), stderr passed through (or into the file
// `stderr_path`, created or truncated, when given); returns the exit status
// (or -1 when it cannot start, errno set) and its stdout in `*out`.
int RunCapturing(const std::vector<std::string>& argv, std::string* out, const std::string& stderr_path = "");

// This machine's fingerprint, with `label` as display name (hostname when empty).
results::Fingerprint MachineFingerprint(const std::string& label);

// A loaded config with its workload and device, ready to make a measurer
// (tuner::MakeMeasurer).
struct Session {
  tuner::SweepConfig config;
  tuner::OpenedWorkload workload;
  std::unique_ptr<device::Device> device;
};

// tuner::OpenWorkload, printing why it failed (exit code 2 for the user's input, 1 otherwise).
bool OpenWorkloadOrExplain(const tuner::SweepConfig& config, tuner::OpenedWorkload* workload, int* exit_code,
                           const results::TorchCosts* torch_costs = nullptr);

// Whether the workload's trials pay torch costs when there are some: a native
// kind with workload.torch_costs auto.
bool PaysTorchCosts(const tuner::SweepConfig& config);

// The torch costs a native workload's trials pay (workload.torch_costs auto,
// docs/measurement.md#torch-costs): this host's, stored in `db_path` by
// `feedtune calibrate` or a sweep's first use. Empty when !PaysTorchCosts, or
// when the file holds none for this host (then `*note` says why the figures
// are the native core's), or cannot be read (no note: the caller's own use of
// the file reports it).
std::optional<results::TorchCosts> StoredTorchCosts(const tuner::SweepConfig& config, const std::string& db_path,
                                                    std::string* note);

// Loads the config (applying `overrides`, as `--set` gives them), opens the
// workload (its dataset and fork server, paying the torch costs stored in
// `torch_costs_db` for this host when that is not empty) and then creates the
// device, in that order (see tuner/measure/measurer_factory.h); prints the
// error and returns nullopt (with the exit code) when it cannot.
std::optional<Session> OpenSession(const std::string& path, const std::vector<std::string>& overrides,
                                   int* exit_code, const std::string& torch_costs_db = "");

}  // namespace feedtune::cli
