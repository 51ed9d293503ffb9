// MakeMeasurer / OpenWorkload: what measures a trial for the config's workload
// kind. Native datasets (synthetic, files) go through a TrialRunner over the
// loader core; the command kind runs the user's pipeline (CommandMeasurer).
// The sweep and trial commands stay unaware of the kinds.
//
// Opening calibrates the CPU work loop once (workloads/cpu_work.h) for the
// native kinds, before any worker is forked; the calibration is returned as
// JSON so it can be stored with the run.
#pragma once

#include <atomic>
#include <memory>
#include <stdexcept>
#include <string>

#include "loader/device/device.h"
#include "tuner/config.h"
#include "tuner/trial_runner.h"

namespace feedtune::tuner {

// The workload's inputs are missing or unusable (no such dataset directory, an
// empty one, a command that is not in PATH): the user's input is wrong, and
// the CLI exits 2. The message starts with the config's source and key path.
class WorkloadError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct OpenedWorkload {
  std::unique_ptr<TrialMeasurer> measurer;
  std::string description;       // one line: what was opened and how it is read
  // This machine's CPU calibration as a JSON object (workloads/cpu_work.h:
  // clock_read_ns, work_bytes_per_s, chunk_bytes, ...) for the run record;
  // empty for the command kind.
  std::string calibration_json;
};

// `device` and `stop` must outlive the measurer. Throws WorkloadError (see
// above) or std::runtime_error (damaged data: the message names the file,
// record and byte offset).
OpenedWorkload OpenWorkload(const SweepConfig& config, device::Device& device, const std::atomic<bool>* stop);

// OpenWorkload(...).measurer.
std::unique_ptr<TrialMeasurer> MakeMeasurer(const SweepConfig& config, device::Device& device,
                                            const std::atomic<bool>* stop);

}  // namespace feedtune::tuner
