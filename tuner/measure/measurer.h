// The interface the search calls to run a trial (TrialMeasurer), what it asks
// beyond the knobs (TrialPlan), how it is told to stop (Interrupted), and the
// hook a rank of a node trial steps through (RankSync). Everything that
// measures (tuner/measure/) implements these; everything that decides
// (tuner/search/) sees only this header of the measuring room, besides the
// statistics and the machine facts (tuner/CMakeLists.txt says the arrows).
#pragma once

#include <algorithm>
#include <stdexcept>
#include <string>

#include "loader/options.h"
#include "results/records.h"

namespace feedtune::loader {
struct TraceCapture;  // loader/trace.h
}

namespace feedtune::tuner {

// Thrown when the stop flag was raised (SIGINT/SIGTERM) during a trial.
class Interrupted : public std::runtime_error {
 public:
  Interrupted() : std::runtime_error("interrupted") {}

 protected:
  explicit Interrupted(const std::string& what) : std::runtime_error(what) {}
};

// Thrown when the training job that serves the trials (sweep --serve-fd,
// feedtune.autotune) closed the connection: it ended or was killed mid-tuning,
// so the run stops as if interrupted. Its what() says so, with the trial.
class JobGone : public Interrupted {
 public:
  explicit JobGone(const std::string& what) : Interrupted(what) {}
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

// A trial's warm-up in batches: sweep.warmup_batches (`configured`), and at
// least the batches the loader dispatches before its first one comes back,
// num_workers x prefetch_factor. Workers started together deliver those in a
// burst, as fast as the loop takes them, so a window drawn from them measures
// the burst rather than the setting: with 32 workers and prefetch_factor 2 a
// window of the first 64 batches runs at the loop's own speed, however slowly
// 32 workers produce on the box. Short windows (a job's own, tuned in the job)
// are the most exposed. 0 stays 0: no warm-up was asked for.
inline int WarmupBatches(int configured, const loader::Knobs& knobs) {
  if (configured <= 0) return 0;
  const int fill = knobs.num_workers > 0 ? knobs.num_workers * std::max(1, knobs.prefetch_factor) : 0;
  return std::max(configured, fill);
}

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
  // The last trial's cold cache on local files: the largest share of the
  // data still in the page cache after an eviction, over its windows (0:
  // cold as said). None: nothing evicted, or nothing local to count.
  virtual std::optional<double> last_cache_resident_fraction() const { return std::nullopt; }
  // The run's quiet reference for other processes' CPU (docs/measurement.md):
  // a window whose background differs from it beyond
  // sweep.background.disturbed_cpu is measured again. NaN (the default): no
  // window is judged. A measurer that does not measure the background ignores it.
  virtual void SetQuietBackground(double /*cpu*/) {}
};

// How one rank of a node trial keeps step with the others (tuner/measure/node_measurer.h): the
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

}  // namespace feedtune::tuner
