// `feedtune compare`: machines side by side, one row per machine for each
// workload (name + hash), read from one or more results files at once.
// Pure functions over loaded records; the CLI opens the stores.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "results/records.h"

namespace feedtune::results {

class Store;

// One host's answer for one workload: its latest run that found a best
// setting (else its latest run, with the figures unset). Hosts of one
// hardware class (the machine hash) are separate rows: a fleet of identical
// nodes shows every node, so the slow one is visible.
struct CompareRow {
  std::string workload_name;
  std::string workload_hash;
  std::string machine_hash;  // the hardware class
  HostIdentity host;
  Fingerprint machine;       // the class's fingerprint, its label and hostname the host's
  std::string db_path;  // the file the run was read from
  int64_t run_id = 0;   // its id in that file
  std::string run_uid;
  RunStatus status = RunStatus::kRunning;  // the run's
  std::string backend;
  std::string version;  // the feedtune build that measured the run (runs.version)
  std::string date;     // when the run ended, else when it started (ISO 8601 UTC)
  std::optional<int> knee_workers;  // per rank in a node run: the knobs are per rank
  // sweep.ranks of the run: the loaders measured at once (1: one loader; a
  // node run, docs/node-sweep.md: the ranks of its node trials).
  int ranks = 1;
  std::optional<loader::Knobs> best_config;
  double best_samples_per_s = 0;      // NaN when unknown
  double best_ci_low = 0;             // the best's 95% interval; NaN when unknown
  double best_ci_high = 0;
  double best_gpu_idle_frac = 0;      // NaN when unknown
  double baseline_samples_per_s = 0;  // NaN when unknown
  std::optional<double> speedup;
  int runs_seen = 0;  // runs of this host and workload across the files
  // Below its class's median beyond the noise (IsClassOutlier); how far below
  // the median, as a fraction of it (NaN when the class has no median).
  bool outlier = false;
  double below_class_median = 0;
  // The run was marked busy (docs/measurement.md): other processes took
  // background_cpu CPUs (results::BusyFigure: their demand, or the median of its windows
  // in a run before schema v18; NaN when not measured).
  bool busy = false;
  double background_cpu = 0;
  // Remote data: the store's probe from this host (RunFacts::store_probe_json;
  // results/store_probe.h); empty for local data. An instance's network is a
  // machine property, so the same bucket reads differently from each host.
  std::string store_probe_json;
  // Remote data: the best trial's own reads from the store (TrialRecord::store,
  // schema v23), whose retries `compare` shows beside the probe; none otherwise.
  std::optional<StoreFigures> best_store;
  // A `feedtune layout` run's stored answer (results/layout_report.h); nullopt for a sweep.
  std::optional<nlohmann::ordered_json> layout;
};

// One hardware class of one workload: the spread of its hosts' best samples/s.
struct ClassSpread {
  std::string workload_name;
  std::string workload_hash;
  std::string machine_hash;
  int hosts = 0;            // rows of this class, measured or not
  int measured = 0;         // of which with a best samples/s
  double median = 0;        // over the measured hosts; NaN when none
  double min = 0;
  double max = 0;
  double median_ci_low = 0;  // the median of their intervals' lower bounds: the median host's noise
  int outliers = 0;
  std::vector<const CompareRow*> rows;  // in row order
};

// A host falls below its class beyond the noise when, with 3 or more measured
// hosts in the class (with two, neither is "the" odd one), its best is below
// the class median by more than kOutlierThreshold AND its best's interval
// lies wholly below the median host's (ci_high < the median of the hosts'
// ci_low): the test the sweep uses for "slower beyond the noise", with the
// sweep's default gain_threshold. Without an interval (one repeat), the
// median itself stands in for it.
inline constexpr double kOutlierThreshold = 0.05;
inline constexpr int kOutlierMinHosts = 3;
bool IsClassOutlier(const CompareRow& row, const ClassSpread& spread);

// The classes of `rows` (as CollectCompareRows orders them: workload, then
// class), each pointing at its rows.
std::vector<ClassSpread> ClassSpreads(const std::vector<CompareRow>& rows);

// Rows for every (workload, host) in `stores`, optionally only the workloads
// named `workload`. A run present in several files (same uid) counts once.
// Sorted by workload name and hash, then class (fastest median first), then
// fastest best first; `outlier` and `below_class_median` are filled.
std::vector<CompareRow> CollectCompareRows(const std::vector<const Store*>& stores,
                                           const std::optional<std::string>& workload);

std::string RenderCompareTable(const std::vector<CompareRow>& rows);
std::string RenderCompareJson(const std::vector<CompareRow>& rows);  // ends with a newline
std::string RenderCompareHtml(const std::vector<CompareRow>& rows);

// Shared with the layouts side by side (results/layout_report.h).
namespace internal {
// "2024-05-01T10:05:00Z" -> "2024-05-01 10:05".
std::string ShortDate(const std::string& iso);
// "1 host", "3 hosts".
std::string CountText(int n, const char* one, const char* many);
}  // namespace internal

}  // namespace feedtune::results
