// TrialRunner: measures one loader configuration the way a training loop would
// see it (docs/architecture.md): for each batch, wait for the loader, copy to the
// device, run the model step, and every sync_every_steps wait for the device.
//
// A trial is: build the loader (slots and pinned pool allocated outside any
// window), a warm-up (WarmupBatches, measurer.h), then `repeats` windows of
// `measure_seconds`, epochs following each other as the data runs out. The
// figures of each window are kept (RepeatRecord); the trial's figures are their
// median with a 95% interval. With TrialPlan::window_epochs, the warm-up runs
// on to the end of its epoch and each window is whole epochs.
//
// The epoch-boundary cost (TrialRecord::epoch_boundary_ms): at each epoch
// change inside a window, the wait for the new epoch's first batch (worker
// restart, pipeline refill) minus the window's median wait; the trial reports
// the median over its boundaries, NaN when its windows crossed none.
//
// Other processes' CPU (TrialRecord::background_cpu, docs/measurement.md):
// each window reads the box's busy CPU and this process tree's at its edges.
// A window whose background differs from the run's quiet reference by more
// than sweep.background.disturbed_cpu is disturbed: another window replaces
// it, up to as many as the trial's repeats; it stays in the repeat rows,
// marked, out of the figures.
//
// The workers' memory (TrialRecord::worker_rss_*): each worker process's
// private RSS sampled through the windows, between steps, with its growth per
// epoch (tuner/measure/worker_memory.h).
// One thread uses a TrialRunner.
#pragma once

#include <atomic>
#include <limits>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>

#include "loader/dataset.h"
#include "loader/device/device.h"
#include "loader/fork_server.h"
#include "loader/options.h"
#include "loader/trace.h"
#include "results/records.h"
#include "results/torch_costs.h"
#include "tuner/config/config.h"
#include "tuner/measure/measurer.h"
#include "workloads/cpu_work.h"
#include "tuner/measure/proc_stats.h"

namespace feedtune::tuner {

// What a trial says beside its figures (last_warning and
// last_cache_resident_fraction).
struct TrialNotes {
  std::string warning;
  std::optional<double> cache_resident_fraction;
};

class TrialRunner final : public TrialMeasurer {
 public:
  // `stop` (may be null) is polled between batches. `fork_server` (holding
  // `dataset`) starts the process-mode workers of every trial; without one,
  // each trial's loader forks its own.
  TrialRunner(const SweepConfig& config, device::Device& device,
              std::shared_ptr<const loader::Dataset> dataset, const std::atomic<bool>* stop,
              std::shared_ptr<loader::ForkServer> fork_server = nullptr);

  results::TrialRecord Measure(const loader::Knobs& knobs) override { return MeasurePlanned(knobs, {}); }
  results::TrialRecord MeasurePlanned(const loader::Knobs& knobs, const TrialPlan& plan) override;

  std::string last_warning() const override { return notes_.warning; }
  std::optional<double> last_cache_resident_fraction() const override { return notes_.cache_resident_fraction; }

  void SetQuietBackground(double cpu) override { quiet_reference_ = cpu; }

  // A rank of a node trial (tuner/measure/node_measurer.h) sets this once, before any trial.
  void set_rank_sync(RankSync* sync) { sync_ = sync; }

  // The torch costs this run pays (workload.torch_costs auto, results/torch_costs.h):
  // with workers, the consumer burns the main process's cost of each batch it
  // takes, inside the wait, as torch's __next__ rebuilds the batch there, and
  // its cost of starting and stopping the workers, one after another, at each
  // start of them (every epoch without persistent_workers). The workers'
  // share is the dataset's (tuner/measure/torch_cost_dataset.h).
  void set_torch_costs(const results::TorchCosts& costs, const workloads::CpuCalibration& calibration) {
    torch_costs_ = costs;
    calibration_ = calibration;
  }
  // A rank counts the whole node's tree (its parent's, the tuner) as its own
  // for the background: the other ranks are not other processes.
  void set_background_tree_root(pid_t root);

 private:
  const SweepConfig config_;
  device::Device& device_;
  const std::shared_ptr<const loader::Dataset> dataset_;
  const std::shared_ptr<loader::ForkServer> fork_server_;
  const std::atomic<bool>* const stop_;
  TrialNotes notes_;  // the last trial's
  RankSync* sync_ = nullptr;
  BackgroundMeter meter_;  // other processes' CPU per window (tuner/measure/proc_stats.h)
  double quiet_reference_ = std::numeric_limits<double>::quiet_NaN();
  std::optional<results::TorchCosts> torch_costs_;
  workloads::CpuCalibration calibration_;  // with torch_costs_
};

}  // namespace feedtune::tuner
