// Diagnose: where a setting's time goes, by differential stage trials
// (DS-Analyzer's method; docs/verdict.md has the definitions and the rules).
//
// Each stage trial is a trial like any other (warm-up, sweep.repeats windows
// of sweep.measure_seconds, the median with its 95% interval, tuner/measure/stats.h),
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
#include <string>

#include "loader/device/device.h"
#include "results/records.h"
#include "tuner/config/config.h"
#include "tuner/measure/measurer_factory.h"
#include "tuner/measure/stage_trials.h"

namespace feedtune::tuner {

struct DiagnoseSetup {
  const SweepConfig* config = nullptr;
  const OpenedWorkload* workload = nullptr;
  device::Device* device = nullptr;
  const std::atomic<bool>* stop = nullptr;
  double usable_cpus = results::kNaN;
  // A serving command's measurer (its process already holds the dataset): the
  // stage trials go to it as requests with a "stage"; may be null otherwise.
  TrialMeasurer* command_measurer = nullptr;
  // The command runs feedtune's Python package (its preflight answered:
  // tuner/measure/python_preflight.h), e.g. a user's tune.py calling
  // feedtune.serve: served, it runs stage trials with the user's own step.
  bool python_package = false;
  std::function<void(const std::string&)> on_stage;  // "measuring prep ..." lines; may be empty
  // Whether the copy limits, by the verdict's rules (tuner/search/verdict_rules.h:
  // CopyLimits); when it says so, the copy is measured again with the other
  // pinning for the advice to compare. Empty: never. Passed in because the
  // rules decide and this room only measures.
  std::function<bool(const StageTrials&)> copy_limits;
};

// Runs the stage trials at `knobs`. Throws Interrupted.
StageTrials RunStageTrials(const DiagnoseSetup& setup, const loader::Knobs& knobs);

}  // namespace feedtune::tuner
