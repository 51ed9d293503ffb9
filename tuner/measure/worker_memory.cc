#include "tuner/measure/worker_memory.h"

#include <algorithm>
#include <limits>
#include <optional>

#include "tuner/measure/proc_stats.h"
#include "workloads/cpu_work.h"

namespace feedtune::tuner {

void WorkerMemorySampler::Series::Add(double x, double y) {
  if (n == 0) {
    first_x = x;
    first_y = y;
    peak_y = y;
  }
  ++n;
  const double dx = x - mean_x;
  mean_x += dx / n;
  mean_y += (y - mean_y) / n;
  m2_x += dx * (x - mean_x);
  c_xy += dx * (y - mean_y);
  last_x = x;
  peak_y = std::max(peak_y, y);
}

bool WorkerMemorySampler::Due(bool epoch_edge) const {
  if (series_.empty()) return true;
  const auto now = std::chrono::steady_clock::now();
  if (now - last_sample_ >= kInterval) return true;
  const double spent_s = static_cast<double>(spent_cpu_ns_) / 1e9;
  return epoch_edge && (spent_s <= std::chrono::duration<double>(kAllowance).count() ||
                        spent_s <= kMaxShare * std::chrono::duration<double>(now - first_sample_).count());
}

void WorkerMemorySampler::Sample(const std::vector<pid_t>& pids, double epoch_position) {
  const auto now = std::chrono::steady_clock::now();
  const int64_t cpu0 = workloads::ThreadCpuNs();
  if (series_.empty()) first_sample_ = now;
  last_sample_ = now;
  // Another set of pids is another set of workers (non-persistent workers
  // restart at each epoch): new series, even should a pid be reused.
  if (pids != current_pids_) {
    current_.clear();
    current_pids_ = pids;
  }
  const std::vector<pid_t> self = {0};
  for (const pid_t pid : in_consumer_ ? self : pids) {
    const std::optional<int64_t> rss = ReadPrivateRss(pid);
    if (!rss) continue;  // the worker ended between the listing and the read
    auto [it, added] = current_.try_emplace(pid, series_.size());
    if (added) series_.emplace_back();
    series_[it->second].Add(epoch_position, static_cast<double>(*rss));
  }
  spent_cpu_ns_ += workloads::ThreadCpuNs() - cpu0;
}

void WorkerMemorySampler::Fill(results::TrialRecord* trial) const {
  // The growth is each worker's least-squares slope of RSS over the epoch
  // position, averaged over the workers weighted by the span each covered.
  // Least squares rather than last minus first: it rests on every sample, so
  // one read caught mid-allocation or after a trim moves it little, and it
  // handles alike a worker that lives the whole trial (persistent) and one
  // that lives a single epoch. The weights keep a worker seen over a sliver
  // of an epoch (the last, cut-off one) from counting as much as one seen over
  // a whole epoch. The samples start after the warm-up, so a cache that fills
  // in the first epoch and stops counts only for what it adds in the windows.
  double start_sum = 0, peak = 0, weighted_slope = 0, weights = 0, longest = 0;
  int samples = 0;
  for (const Series& s : series_) {
    start_sum += s.first_y;
    peak = std::max(peak, s.peak_y);
    samples += s.n;
    longest = std::max(longest, s.span());
    if (s.n >= 2 && s.m2_x > 0) {
      weighted_slope += s.c_xy / s.m2_x * s.span();
      weights += s.span();
    }
  }
  if (series_.empty()) return;
  trial->worker_rss_start_bytes = start_sum / static_cast<double>(series_.size());
  trial->worker_rss_peak_bytes = peak;
  trial->worker_rss_samples = samples;
  trial->worker_rss_epochs = longest;
  trial->worker_rss_in_consumer = in_consumer_;
  trial->worker_rss_growth_bytes_per_epoch =
      weights > 0 ? weighted_slope / weights / shares_ : std::numeric_limits<double>::quiet_NaN();
}

}  // namespace feedtune::tuner
