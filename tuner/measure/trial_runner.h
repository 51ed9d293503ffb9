// TrialRunner: measures one loader configuration the way a training loop would
// see it (DESIGN.md §3): for each batch, wait for the loader, copy to the
// device, run the model step, and every sync_every_steps wait for the device.
//
// A trial is: build the loader (slots and pinned pool allocated outside any
// window), `warmup_batches` batches, then `repeats` windows of
// `measure_seconds`, epochs following each other as the data runs out. The
// figures of each window are kept (RepeatRecord); the trial's figures are their
// median with a 95% interval. With TrialPlan::window_epochs, the warm-up runs
// on to the end of its epoch and each window is whole epochs.
//
// The epoch-boundary cost (TrialRecord::epoch_boundary_ms): at each epoch
// change inside a window, the wait for the new epoch's first batch (worker
// restart, pipeline refill) minus the window's median wait; the trial reports
// the median over its boundaries, NaN when its windows crossed none.
// One thread uses a TrialRunner.
#pragma once

#include <atomic>
#include <memory>
#include <stdexcept>
#include <string>

#include "loader/dataset.h"
#include "loader/device/device.h"
#include "loader/fork_server.h"
#include "loader/options.h"
#include "loader/trace.h"
#include "results/records.h"
#include "tuner/config.h"

namespace feedtune::tuner {

// Thrown when the stop flag was raised (SIGINT/SIGTERM) during a trial.
class Interrupted : public std::runtime_error {
 public:
  Interrupted() : std::runtime_error("interrupted") {}
};

// How the search wants one trial measured, beyond its knobs.
struct TrialPlan {
  std::string phase;          // what the trial is for (the search's phase); replay checks it
  int repeats = 0;            // windows; 0 = sweep.repeats
  // > 0: each window spans this many whole epochs (from an epoch's start to its
  // last batch) instead of measure_seconds, so epoch boundaries, and what
  // persistent_workers saves at them, are inside every window.
  int window_epochs = 0;
  // Non-null: record the first trace->seconds of the first window into it
  // (loader/trace.h); the figures are measured as without.
  loader::TraceCapture* trace = nullptr;
};

// What the search controller asks of a measurer; tests substitute scripted ones.
class TrialMeasurer {
 public:
  virtual ~TrialMeasurer() = default;
  // Returns a record with status ok (figures filled) or failed (error set).
  // Throws Interrupted when asked to stop.
  virtual results::TrialRecord Measure(const loader::Knobs& knobs) = 0;
  // Measures as `plan` says. A measurer that cannot follow a plan (e.g. one
  // that runs an external command) measures as Measure does.
  virtual results::TrialRecord MeasurePlanned(const loader::Knobs& knobs, const TrialPlan& /*plan*/) {
    return Measure(knobs);
  }
  // A warning about the last trial (e.g. the pinned pool could not be locked), or empty.
  virtual std::string last_warning() const { return {}; }
};

// How one rank of a node trial keeps step with the others (tuner/node/): the
// runner calls it at each window's start and end and after every step. Absent
// (the default), a trial is one loader on its own.
class RankSync {
 public:
  virtual ~RankSync() = default;
  virtual void WindowStart() = 0;
  // After each step; `my_done`: this rank's window would end here. Returns
  // whether the window ends, the same answer on every rank that steps in
  // lockstep with the others.
  virtual bool AfterStep(bool my_done) = 0;
  // After each window, while the loader and its workers still exist.
  virtual void WindowEnd() = 0;
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

  std::string last_warning() const override { return last_warning_; }

  // A rank of a node trial (tuner/node/) sets this once, before any trial.
  void set_rank_sync(RankSync* sync) { sync_ = sync; }

 private:
  const SweepConfig config_;
  device::Device& device_;
  const std::shared_ptr<const loader::Dataset> dataset_;
  const std::shared_ptr<loader::ForkServer> fork_server_;
  const std::atomic<bool>* const stop_;
  std::string last_warning_;
  RankSync* sync_ = nullptr;
};

}  // namespace feedtune::tuner
