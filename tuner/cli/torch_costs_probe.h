// Measuring this box's torch DataLoader costs (results/torch_costs.h): runs
// feedtune.torch_costs, the torch probe of the feedtune Python package, under
// the interpreter FEEDTUNE_PYTHON names (default: python3, then
// /usr/bin/python3, the first that imports torch), and reads its answer.
// `feedtune calibrate` stores it; a sweep of a native workload reads it back
// (docs/measurement.md#torch-costs).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "results/store.h"
#include "results/torch_costs.h"
#include "tuner/config/config.h"

namespace feedtune::cli {

// The interpreters to try, in order: `python` when given, else FEEDTUNE_PYTHON
// when set, else python3 and /usr/bin/python3.
std::vector<std::string> TorchPythonCandidates(const std::string& python);

// An interpreter that imports torch, as it was named, and its torch's version.
struct TorchPython {
  std::string interpreter;
  std::string torch_version;
};

// The first of `candidates` that imports torch (each asked once, about 1 s
// with torch's import); nullopt when none does, with each one's reason in
// `*tried` ("python3: ModuleNotFoundError: No module named 'torch'").
std::optional<TorchPython> FindTorchPython(const std::vector<std::string>& candidates,
                                           std::vector<std::string>* tried);

// Runs the probe (about 10 s on 2 CPUs). Empty, with the reason in `*why`,
// when no candidate imports torch or the probe fails.
std::optional<results::TorchCosts> MeasureTorchCosts(const std::string& python, std::string* why);

// A fresh sweep's torch costs (none when !PaysTorchCosts): those stored for
// this host in `db_path`, else, on the host's first sweep there, measured now
// (`*measured` true: the sweep stores them with its run, StoreTorchCosts, so a
// sweep that stops before its run leaves no file), when an interpreter
// imports torch (FEEDTUNE_PYTHON=none: never, and silently: the report and
// the export say the figures are the native core's). `note` gets what the
// progress output should say.
std::optional<results::TorchCosts> SweepTorchCosts(const tuner::SweepConfig& config, const std::string& db_path,
                                                   const std::function<void(const std::string&)>& note,
                                                   bool* measured);
// Stores `costs` as this host's.
void StoreTorchCosts(results::Store& store, const results::TorchCosts& costs);

}  // namespace feedtune::cli
