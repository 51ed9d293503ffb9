// The worker-memory growth flag: a trial whose worker processes
// grow by more than kGrowthFlagBytesPerEpoch per epoch each is flagged, with
// the figure and its basis, in the sweep's summary, `feedtune trial` and
// `feedtune report`. The rule lives here, beside its words, so every renderer
// flags the same trials. Pure functions of a TrialRecord.
//
// Why a constant and not a config key: the flag is advice, not a gate (the
// budget already counts the growth, tuner/search/budget.h), and a report of a
// stored run must flag what the sweep flagged without the sweep's config.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "results/records.h"

namespace feedtune::results {

// 64 MiB per epoch per worker: above what allocator noise and a worker's
// first-touch of its buffers come to, well below what a per-sample cache or
// leak of a real dataset grows by.
inline constexpr double kGrowthFlagBytesPerEpoch = 64.0 * (1 << 20);
// The least span one worker must have been sampled over for its growth to be
// flagged: over less, a start-up transient extrapolated to a whole epoch
// could read as a leak.
inline constexpr double kGrowthFlagMinEpochs = 0.5;

// Whether the trial is flagged: ok, growth measured over at least
// kGrowthFlagMinEpochs, at or above kGrowthFlagBytesPerEpoch.
bool GrowthFlagged(const TrialRecord& trial);

// "memory grows 180 MiB per epoch per worker: a cache or a leak;
// persistent_workers: false frees it at each epoch" (persistent workers), or
// the same ending "...; the workers restart each epoch, which frees it" for
// workers that are not persistent; for thread workers (or none), the loading
// process grows and no restart frees it. Only for a flagged trial.
std::string GrowthText(const TrialRecord& trial);

// The trial's worker_rss_* figures and its flag as one JSON object (the
// report's and `feedtune trial --json`'s trial keys): worker_rss_start_bytes,
// worker_rss_peak_bytes, worker_rss_growth_bytes_per_epoch, worker_rss_epochs
// (null when not measured), worker_rss_samples, and worker_rss_flag (GrowthText
// when flagged, else null).
nlohmann::ordered_json WorkerMemoryJson(const TrialRecord& trial);

// One line per flagged trial, each starting with `indent`: "trial 7 (2
// workers, persistent): memory grows ... (over 2.0 epochs, 34 samples)"; ""
// when none.
std::string GrowthFlagsText(const std::vector<TrialRecord>& trials, const std::string& indent);

}  // namespace feedtune::results
