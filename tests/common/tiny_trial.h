// One trial of the native trial runner on a few tiny samples, as the tuner's
// tests run it in process: 16 samples of 64 bytes without CPU work, batches
// of 4, on the host-sim device without a step, one warm-up batch and two
// one-epoch windows (the warm-up runs on to its epoch's end). What a test
// varies is a field of the config, the dataset or the knobs.
#pragma once

#include <cmath>
#include <memory>
#include <string>

#include "loader/dataset.h"
#include "loader/device/device.h"
#include "results/records.h"
#include "tuner/config/config.h"
#include "tuner/measure/trial_runner.h"

namespace feedtune::testing_util {

inline tuner::SweepConfig TinyTrialConfig(const std::string& name) {
  tuner::SweepConfig config;
  config.name = name;
  config.workload.synthetic.samples = 16;
  config.workload.synthetic.sample_bytes = 64;
  config.workload.synthetic.cpu_us_per_sample = 0;
  config.loader.knobs.batch_size = 4;
  config.device.backend = device::BackendChoice::kHostSim;
  config.device.step_us = 0;
  config.sweep.warmup_batches = 1;
  return config;
}

// `quiet_reference`: the run's quiet background (TrialMeasurer::SetQuietBackground); NaN: none.
inline results::TrialRecord TinyTrial(const tuner::SweepConfig& config, std::shared_ptr<const loader::Dataset> dataset,
                                      const loader::Knobs& knobs, double quiet_reference = std::nan("")) {
  std::string note;
  const std::unique_ptr<device::Device> device = device::CreateDevice(config.device, &note);
  tuner::TrialRunner runner(config, *device, std::move(dataset), nullptr);
  runner.SetQuietBackground(quiet_reference);
  tuner::TrialPlan plan;
  plan.repeats = 2;
  plan.window_epochs = 1;
  return runner.MeasurePlanned(knobs, plan);
}

// One persistent worker process: the knobs TinyTrial takes for a worker's own figures.
inline loader::Knobs OnePersistentWorker(const tuner::SweepConfig& config) {
  loader::Knobs knobs = config.loader.knobs;
  knobs.num_workers = 1;
  knobs.persistent_workers = true;
  return knobs;
}

}  // namespace feedtune::testing_util
