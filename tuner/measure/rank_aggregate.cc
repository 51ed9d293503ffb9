#include "tuner/measure/rank_aggregate.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <utility>

#include "tuner/measure/stats.h"

namespace feedtune::tuner::node {

using results::TrialStatus;

namespace {

// The node's worker_rss_* figures from its ranks': the growth (and its span)
// of the rank whose workers grow fastest, as the flag and the budget must
// hold for every rank; the largest peak; the mean start; the samples summed.
void FillNodeWorkerMemory(const std::vector<results::TrialRecord>& ranks, results::TrialRecord* node) {
  const results::TrialRecord* fastest = nullptr;
  constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
  double start_sum = 0, longest = kNaN;
  int measured = 0;
  for (const results::TrialRecord& r : ranks) {
    if (!std::isfinite(r.worker_rss_peak_bytes)) continue;
    ++measured;
    start_sum += r.worker_rss_start_bytes;
    node->worker_rss_peak_bytes = std::fmax(node->worker_rss_peak_bytes, r.worker_rss_peak_bytes);  // NaN at first
    node->worker_rss_samples += r.worker_rss_samples;
    node->worker_rss_in_consumer = node->worker_rss_in_consumer || r.worker_rss_in_consumer;
    if (std::isfinite(r.worker_rss_growth_bytes_per_epoch) &&
        (fastest == nullptr || r.worker_rss_growth_bytes_per_epoch > fastest->worker_rss_growth_bytes_per_epoch)) {
      fastest = &r;
    }
    if (std::isfinite(r.worker_rss_epochs)) longest = std::fmax(longest, r.worker_rss_epochs);  // fmax skips NaN
  }
  if (measured == 0) return;
  node->worker_rss_start_bytes = start_sum / measured;
  node->worker_rss_growth_bytes_per_epoch = fastest != nullptr ? fastest->worker_rss_growth_bytes_per_epoch : kNaN;
  node->worker_rss_epochs = fastest != nullptr ? fastest->worker_rss_epochs : longest;
}

}  // namespace

results::TrialRecord AggregateRanks(const loader::Knobs& knobs, const std::vector<results::TrialRecord>& ranks,
                                    std::vector<results::RankRecord> rows) {
  results::TrialRecord node;
  node.knobs = knobs;
  const size_t repeats = ranks.empty() ? 0 : ranks[0].repeat_rows.size();
  std::vector<double> rates, mbps;
  for (size_t i = 0; i < repeats; ++i) {
    double samples = 0, bytes = 0, longest = 0;
    for (const auto& r : ranks) {
      if (i >= r.repeat_rows.size()) continue;
      const auto& rep = r.repeat_rows[i];
      samples += rep.samples_per_s * rep.wall_s;
      bytes += rep.mb_per_s * rep.wall_s;
      longest = std::max(longest, rep.wall_s);
    }
    results::RepeatRecord rep;
    rep.index = static_cast<int>(i);
    rep.wall_s = longest;
    rep.samples_per_s = longest > 0 ? samples / longest : 0;
    rep.mb_per_s = longest > 0 ? bytes / longest : 0;
    std::vector<double> idles, p50s, p99s, backgrounds, trees;
    for (const auto& r : ranks) {
      if (i >= r.repeat_rows.size()) continue;
      if (std::isfinite(r.repeat_rows[i].background_cpu)) backgrounds.push_back(r.repeat_rows[i].background_cpu);
      if (std::isfinite(r.repeat_rows[i].tree_cpu)) trees.push_back(r.repeat_rows[i].tree_cpu);
      idles.push_back(r.repeat_rows[i].gpu_idle_frac);
      p50s.push_back(r.repeat_rows[i].wait_p50_us);
      p99s.push_back(r.repeat_rows[i].wait_p99_us);
    }
    rep.gpu_idle_frac = MedianOrNaN(idles);
    rep.wait_p50_us = MedianOrNaN(p50s);
    rep.wait_p99_us = p99s.empty() ? 0 : *std::max_element(p99s.begin(), p99s.end());
    // Every rank reads the same box against the same tree: their median.
    rep.background_cpu = MedianOrNaN(backgrounds);
    rep.tree_cpu = MedianOrNaN(trees);
    node.repeat_rows.push_back(rep);
    rates.push_back(rep.samples_per_s);
    mbps.push_back(rep.mb_per_s);
  }
  std::vector<double> window_backgrounds;
  for (const auto& rep : node.repeat_rows) {
    if (std::isfinite(rep.background_cpu)) window_backgrounds.push_back(rep.background_cpu);
  }
  node.background_cpu = MedianOrNaN(window_backgrounds);
  if (!rates.empty()) {
    const Summary s = Summarize(rates);
    for (size_t i = 0; i < s.outliers.size(); ++i) node.repeat_rows[i].outlier = s.outliers[i];
    node.samples_per_s = s.median;
    node.cv = s.cv;
    node.ci_low = s.ci_low;
    node.ci_high = s.ci_high;
    node.mb_per_s = Median(mbps);
  }
  // The node's GPU idle and waits: the ranks' mean idle, median p50 and worst p99.
  double idle_sum = 0, busy_sum = 0;
  std::vector<double> p50s;
  for (const auto& r : ranks) {
    idle_sum += r.gpu_idle_frac;
    busy_sum += std::isfinite(r.worker_busy_frac) ? r.worker_busy_frac : 0;
    p50s.push_back(r.wait_p50_us);
    node.wait_p99_us = std::max(node.wait_p99_us, r.wait_p99_us);
    node.copy_s += r.copy_s;
    node.cpu_util += r.cpu_util;
    node.peak_rss_bytes = std::max(node.peak_rss_bytes, r.peak_rss_bytes);  // per rank: preflight.h
    node.worker_rss_bytes = std::fmax(node.worker_rss_bytes, r.worker_rss_bytes);  // per rank, as peak_rss; NaN skipped
    node.worker_startup_s = std::max(node.worker_startup_s, r.worker_startup_s);
    node.time_to_first_batch_s = std::max(node.time_to_first_batch_s, r.time_to_first_batch_s);
    node.pinned_alloc_s = std::max(node.pinned_alloc_s, r.pinned_alloc_s);
    if (std::isfinite(r.epoch_boundary_ms)) {
      node.epoch_boundary_ms = std::max(std::isfinite(node.epoch_boundary_ms) ? node.epoch_boundary_ms : 0.0,
                                        r.epoch_boundary_ms);
    }
  }
  const double n = std::max<double>(1, static_cast<double>(ranks.size()));
  node.gpu_idle_frac = idle_sum / n;
  node.worker_busy_frac = busy_sum / n;
  node.wait_p50_us = MedianOrNaN(p50s);
  node.repeats = ranks.empty() ? 0 : ranks[0].repeats;
  if (!ranks.empty()) node.batches_per_epoch = ranks[0].batches_per_epoch;
  if (ranks.empty() || std::none_of(ranks.begin(), ranks.end(),
                                    [](const auto& r) { return std::isfinite(r.epoch_boundary_ms); })) {
    node.epoch_boundary_ms = std::numeric_limits<double>::quiet_NaN();
  }

  results::NodeFigures figures;
  figures.ranks = static_cast<int>(rows.size());
  double fastest = 0, slowest = std::numeric_limits<double>::infinity();
  for (size_t r = 0; r < rows.size(); ++r) {
    rows[r].rank = static_cast<int>(r);
    fastest = std::max(fastest, rows[r].samples_per_s);
    slowest = std::min(slowest, rows[r].samples_per_s);
    figures.processes += rows[r].processes;
    figures.threads += rows[r].threads;
    figures.shm_bytes += rows[r].shm_bytes;
  }
  figures.slowest_rank_samples_per_s = rows.empty() ? 0 : slowest;
  figures.rank_spread = fastest > 0 ? (fastest - figures.slowest_rank_samples_per_s) / fastest : 0;
  figures.rank_rows = std::move(rows);
  node.node = std::move(figures);
  FillNodeWorkerMemory(ranks, &node);  // the growth flag holds for the rank that grows fastest
  node.status = TrialStatus::kOk;
  return node;
}

}  // namespace feedtune::tuner::node
