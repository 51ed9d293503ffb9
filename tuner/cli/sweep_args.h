// The command line of `feedtune sweep`, checked (ParseSweepArgs), and the
// stop every step of the sweep may throw (SweepStop). Internal to
// tuner/cli/: the steps are tuner/cli/sweep_command.cc's.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tuner/cli/cli_util.h"
#include "tuner/cli/trace_files.h"
#include "tuner/measure/python_preflight.h"

namespace feedtune::cli {

// Ends the sweep early with an exit code; `message` (may be empty) goes to
// stderr. Thrown by the steps below, caught once in RunSweep.
struct SweepStop {
  int code;
  std::string message;
};

// The command line of `feedtune sweep`, checked.
struct SweepArgs {
  std::string config_path, db_path, label, seed_from;
  std::vector<std::string> sets;  // --set key.path=value, applied in order after the config loads
  int64_t resume_id = 0;
  int serve_fd = -1;  // --serve-fd: the process that started feedtune serves the trials (feedtune.autotune)
  // --serve-preflight: that process's own preflight (python_preflight.h), read once here.
  std::optional<tuner::PythonPreflight> serve_preflight;
  bool resuming = false;
  bool continue_unfinished = false;  // --continue-unfinished: resume this host's latest interrupted run of CONFIG
  bool json = false;
  bool quiet = false;
  SweepTraceFiles trace_files;  // opened before anything runs: a wrong folder costs no trial
};

// The arguments, checked; nullopt with `code` set where Parse answered
// (--help, a bad option). Throws SweepStop on a combination that does not go.
std::optional<SweepArgs> ParseSweepArgs(const Args& args, int* code);

}  // namespace feedtune::cli
