// WorkerMemorySampler: each worker process's private resident memory
// (proc_stats.h: ReadPrivateRss), sampled through a trial's measurement
// windows, and the figures the trial records from the series: the workers'
// start, their peak, and how fast they grow per epoch (TrialRecord::worker_rss_*).
//
// What is sampled: every live worker process of the loader (DataLoader::
// worker_pids). Thread workers and num_workers == 0 run in this process, so
// the series is then this process's: its start and peak are the consumer's,
// and its growth is shared over the thread workers (they cause it, and the
// budget multiplies the per-worker growth back by the workers).
//
// When: at each window's start, after the first batch of each epoch (new
// workers when they are not persistent), after the last batch of each epoch
// (before non-persistent workers stop), and between those every kInterval.
// Each sample is one small /proc read per worker (a few microseconds), on the
// consumer's thread between steps, never inside the wait for a batch: at 10
// samples a second, 16 workers cost well under 1 ms of each second. Epochs of
// a batch or two would ask for a sample at nearly every step, so the epoch
// samples are skipped once sampling has taken both kAllowance of CPU time in
// all and more than kMaxShare of the time since the first sample (the allowance lets
// a short trial of quick epochs see each of its epochs' edges). Memory is O(worker lifetimes): running sums,
// no samples kept.
//
// One thread (the trial's) uses a sampler.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <map>
#include <vector>

#include "results/records.h"

namespace feedtune::tuner {

class WorkerMemorySampler {
 public:
  static constexpr std::chrono::milliseconds kInterval{100};
  static constexpr double kMaxShare = 0.01;
  static constexpr std::chrono::milliseconds kAllowance{5};

  // Thread workers (or none) sample this process, whose growth the
  // `num_workers` threads share; otherwise each worker process.
  WorkerMemorySampler(int num_workers, bool thread_workers)
      : in_consumer_(thread_workers || num_workers == 0), shares_(thread_workers && num_workers > 0 ? num_workers : 1) {}

  // Whether to sample now: kInterval has passed since the last sample, or
  // `epoch_edge` (the step began or ended an epoch) within kMaxShare.
  bool Due(bool epoch_edge) const;
  // Samples every process of `pids` (this process instead when the workers
  // are in it; none while worker processes are stopped) at `epoch_position`,
  // the epochs the loader has delivered so far (2.5: half-way through the third).
  void Sample(const std::vector<pid_t>& pids, double epoch_position);

  // Fills the trial's worker_rss_* figures; leaves them NaN without a sample.
  void Fill(results::TrialRecord* trial) const;

 private:
  // One worker process's life within the windows, as running sums: a
  // least-squares line of its RSS over the epoch position (Welford's
  // co-moments, stable over long series).
  struct Series {
    int n = 0;
    double mean_x = 0, mean_y = 0;
    double m2_x = 0;   // sum of (x - mean_x)^2
    double c_xy = 0;   // sum of (x - mean_x)(y - mean_y)
    double first_x = 0, last_x = 0, first_y = 0, peak_y = 0;

    void Add(double x, double y);
    double span() const { return last_x - first_x; }
  };

  const bool in_consumer_;  // the workers are this process (thread workers, or none)
  const int shares_;        // how many workers one series stands for
  std::vector<Series> series_;
  std::map<pid_t, size_t> current_;  // the live workers' series, by pid
  std::vector<pid_t> current_pids_;  // as last sampled: a change means new workers
  std::chrono::steady_clock::time_point first_sample_{}, last_sample_{};
  // This thread's CPU time in Sample, all told: the sampling's cost to the
  // loop. Not wall time: on a loaded box the thread is preempted inside a
  // /proc read, and that wait, the box's and not the sampler's, would use up
  // the allowance after a few samples and skip the epoch edges.
  int64_t spent_cpu_ns_ = 0;
};

}  // namespace feedtune::tuner
