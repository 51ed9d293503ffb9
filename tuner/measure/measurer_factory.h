// OpenWorkload / MakeMeasurer: what measures a trial for the config's workload
// kind. Native datasets (synthetic, files and the formats npy, hdf5, lmdb,
// tfrecord, tar) go through a TrialRunner over the loader core, or with
// sweep.ranks > 1 a NodeMeasurer over rank processes; the command kind runs
// the user's pipeline (CommandMeasurer). Each measurer is wrapped so that a
// trial killed by the kernel says so (kill_cause.h). The sweep and trial
// commands stay unaware of the kinds.
//
// Two steps, because of the order docs/architecture.md asks for:
//   1. OpenWorkload builds the dataset (calibrating the CPU work loop once for
//      the native kinds) and starts the fork server that holds it, while this
//      process has one thread;
//   2. then the caller creates the device (the CUDA runtime starts threads),
//      and MakeMeasurer joins the two.
#pragma once

#include <atomic>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>

#include "loader/dataset.h"
#include "loader/device/device.h"
#include "loader/fork_server.h"
#include "results/records.h"
#include "results/torch_costs.h"
#include "tuner/config/config.h"
#include "tuner/measure/node_measurer.h"
#include "tuner/measure/stage_dataset.h"
#include "tuner/measure/trial_runner.h"

namespace feedtune::tuner {

// The workload's inputs are missing or unusable (no such dataset directory, an
// empty one, a command that is not in PATH): the user's input is wrong, and
// the CLI exits 2. The message starts with the config's source and key path.
class WorkloadError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct OpenedWorkload {
  std::shared_ptr<const loader::Dataset> dataset;   // native kinds
  std::shared_ptr<loader::ForkServer> fork_server;  // native kinds in process mode
  // Native kinds: `dataset` itself, behind the switch the stage trials turn
  // (tuner/measure/stage_runner.h); real reads, the configured cache, until they do.
  std::shared_ptr<StageDataset> stages;
  std::string description;  // one line: what was opened and how it is read
  // This machine's CPU calibration (workloads/cpu_work.h), as the run
  // record keeps it; none for the command kind.
  std::optional<results::CpuCalibrationFacts> cpu_calibration;
  // sweep.ranks > 1 (native kinds): the rank processes, forked first of all;
  // the dataset above then only describes the workload (no fork server).
  std::shared_ptr<node::RankSet> ranks;
  // The torch costs the native trials pay (tuner/measure/torch_cost_dataset.h):
  // the workers through `dataset`, the consumer through the trial runner.
  std::optional<results::TorchCosts> torch_costs;
};

// Call before this process starts threads or creates a CUDA device. Throws
// WorkloadError (see above), std::runtime_error (damaged data: the message
// names the file, record and byte offset) or std::system_error (no fork server).
// `torch_costs` (may be null): this host's torch DataLoader costs, for a
// native kind on one rank to pay (workload.torch_costs auto; the caller reads
// them from the results file). Not paid by node sweeps' ranks.
OpenedWorkload OpenWorkload(const SweepConfig& config, const results::TorchCosts* torch_costs = nullptr);

// `config`, `device` and `stop` must outlive the measurer. `serve_fd` >= 0
// (a command workload with protocol serve, `sweep --serve-fd`): the process
// that started feedtune serves the trials on that socket
// (CommandMeasurer::AttachToCaller).
std::unique_ptr<TrialMeasurer> MakeMeasurer(const SweepConfig& config, const OpenedWorkload& workload,
                                            device::Device& device, const std::atomic<bool>* stop,
                                            int serve_fd = -1);

}  // namespace feedtune::tuner
