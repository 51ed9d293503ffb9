// `feedtune compare`: machines side by side, one row per machine for each
// workload (name + hash), read from one or more results files at once.
// Pure functions over loaded records; the CLI opens the stores.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "results/records.h"

namespace feedtune::results {

class Store;

// One machine's answer for one workload: its latest run that found a best
// setting (else its latest run, with the figures unset).
struct CompareRow {
  std::string workload_name;
  std::string workload_hash;
  std::string machine_hash;
  Fingerprint machine;
  std::string db_path;  // the file the run was read from
  int64_t run_id = 0;   // its id in that file
  std::string run_uid;
  std::string status;
  std::string backend;
  std::string date;     // when the run ended, else when it started (ISO 8601 UTC)
  std::optional<int> knee_workers;
  std::optional<loader::Knobs> best_config;
  double best_samples_per_s = 0;      // NaN when unknown
  double best_gpu_idle_frac = 0;      // NaN when unknown
  double baseline_samples_per_s = 0;  // NaN when unknown
  std::optional<double> speedup;
  int runs_seen = 0;  // runs of this machine and workload across the files
};

// Rows for every (workload, machine) in `stores`, optionally only the
// workloads named `workload`. A run present in several files (same uid) counts
// once. Sorted by workload name and hash, then fastest best first.
std::vector<CompareRow> CollectCompareRows(const std::vector<const Store*>& stores,
                                           const std::optional<std::string>& workload);

std::string RenderCompareTable(const std::vector<CompareRow>& rows);
std::string RenderCompareJson(const std::vector<CompareRow>& rows);  // ends with a newline
std::string RenderCompareHtml(const std::vector<CompareRow>& rows);

}  // namespace feedtune::results
