// MakeMeasurer: what measures a trial for the config's workload kind. Native
// datasets (synthetic) go through a TrialRunner over the loader core; each
// workload kind adds its case here, and the sweep and trial commands stay unaware.
#pragma once

#include <atomic>
#include <memory>

#include "loader/device/device.h"
#include "tuner/config.h"
#include "tuner/trial_runner.h"

namespace feedtune::tuner {

// `device` and `stop` must outlive the measurer. Throws std::runtime_error when
// the workload cannot be opened (the message says what and where).
std::unique_ptr<TrialMeasurer> MakeMeasurer(const SweepConfig& config, device::Device& device,
                                            const std::atomic<bool>* stop);

}  // namespace feedtune::tuner
