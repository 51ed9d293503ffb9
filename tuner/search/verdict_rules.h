// Diagnose: where a setting's time goes, by differential stage trials
// (DS-Analyzer's method; docs/verdict.md has the definitions and the rules).
//
// Each stage trial is a trial like any other (warm-up, sweep.repeats windows
// of sweep.measure_seconds, the median with its 95% interval, tuner/stats.h),
// with everything after its stage made free:
//
//   step       batches already on the device, no loader: the model step alone
//   copy       one resident host batch of the real size (pinned or pageable as
//              the setting says) copied with non_blocking as set, then the step
//   transport  the loader with workers producing zero-filled samples of the
//              real size (StageDataset kTransport): process start, slots,
//              collate, the pin stage, then copy and step
//   prep       the real workload with its files read into the page cache first
//   fetch      file-backed workloads: the real workload, its files evicted
//              from the page cache before each window
//
// Each trial contains the ones before it, so a stage's own rate is derived
// from its trial and the previous one (ComputeVerdict): the time per sample it
// adds. Stages that run inside the workers (transport, prep, fetch) are
// measured in worker time when there are workers (their busy time per
// sample over the workers), since the workers overlap the main loop and the
// trial rate alone would hide them; without workers everything is one thread
// and the trial rates' time difference is the stage's time.
//
// A command workload runs its stage trials through feedtune_probe.py
// --stage step|copy|transport|prep (workload.argv must run the probe); fetch
// and anything the command cannot run are reported as not measured, with why.
//
// One thread runs a diagnosis; it throws Interrupted when `stop` is raised.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "loader/device/device.h"
#include "results/records.h"
#include "results/verdict.h"
#include "tuner/config.h"
#include "tuner/measurer_factory.h"

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

// The verdict from the stage trials; pure (tests feed it constructed trials).
results::Verdict ComputeVerdict(const StageTrials& trials);

struct DiagnoseSetup {
  const SweepConfig* config = nullptr;
  const OpenedWorkload* workload = nullptr;
  device::Device* device = nullptr;
  const std::atomic<bool>* stop = nullptr;
  double usable_cpus = results::kNaN;
  // A serving command's measurer (its process already holds the dataset): the
  // stage trials go to it as requests with a "stage"; may be null otherwise.
  TrialMeasurer* command_measurer = nullptr;
  std::function<void(const std::string&)> on_stage;  // "measuring prep ..." lines; may be empty
};

// Runs the stage trials at `knobs`. Throws Interrupted.
StageTrials RunStageTrials(const DiagnoseSetup& setup, const loader::Knobs& knobs);

inline results::Verdict Diagnose(const DiagnoseSetup& setup, const loader::Knobs& knobs) {
  return ComputeVerdict(RunStageTrials(setup, knobs));
}

}  // namespace feedtune::tuner
