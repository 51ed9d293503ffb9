// StageTrials: what the stage trials of a diagnosis measured (the runner:
// tuner/measure/stage_runner.h), as plain data; the rules that turn it into a
// verdict are tuner/search/verdict_rules.h.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "loader/options.h"
#include "results/records.h"
#include "results/verdict.h"

namespace feedtune::tuner {

// What the stage trials measured: the input of ComputeVerdict.
struct StageTrials {
  loader::Knobs knobs;
  // Per stage name (results::StageNames()); a stage absent here was not
  // measured and `not_measured` says why.
  std::map<std::string, results::TrialRecord> trials;
  std::map<std::string, std::string> not_measured;
  // The copy trial again with the other pin_memory, when copy limits (the
  // advice compares pinned with pageable).
  std::optional<results::TrialRecord> copy_other_pinning;
  double sample_bytes = results::kNaN;  // bytes per sample, as the loader moved them
  double file_bytes_per_sample = results::kNaN;  // bytes per sample on disk (file-backed)
  double usable_cpus = results::kNaN;
  // The workload as configured reads a cold cache: its real trial is fetch.
  bool cold_configured = false;
  std::vector<std::string> notes;
};

}  // namespace feedtune::tuner
