// How a node trial's figures (records.h: NodeFigures, sweep.ranks > 1) are
// shown: one JSON object for `report --format json` and `trial --json`, and a
// per-rank table for the text and HTML reports and `trial`. Stateless.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "results/records.h"

namespace feedtune::results {

// {"ranks", "slowest_rank_samples_per_s", "rank_spread", "processes",
//  "threads", "shm_bytes", "per_rank": [{"rank", "pid", "status", "error",
//  "samples_per_s", "gpu_idle_frac", "wait_p50_us", "wait_p99_us", "cpu_mask",
//  "worker_cpu_masks", "processes", "threads", "shm_bytes"}]}
nlohmann::ordered_json NodeFiguresJson(const NodeFigures& node);

// A summary line and one row per rank, each line starting with `indent`.
std::string NodeFiguresText(const NodeFigures& node, const std::string& indent);

// What the usual formulas would pick for num_workers per rank on this node,
// beside what that setting measured in the run (a node run's trials). A
// formula's setting is the run's best with only num_workers changed, so its
// gap to the best is what the formula alone costs.
struct FormulaRow {
  std::string name;  // "Lightning", "cpus // ranks", "timm"
  std::string rule;  // the formula with this node's numbers
  int workers = 0;
  std::optional<int64_t> trial_id;       // the trial that measured it (below)
  std::optional<double> samples_per_s;   // its aggregate; unset: not measured
  // Whether that trial ran the best's other settings (FormulaKnobs). When no
  // trial did, the row falls back to the fastest ok trial at that worker
  // count, whose other settings differ (say so beside its figure).
  bool at_best_settings = false;
};

// The best's knobs with `workers` workers (without workers, not persistent:
// torch refuses that).
loader::Knobs FormulaKnobs(const loader::Knobs& best, int workers);

// Empty unless the run's trials are node trials. `usable_cpus`: the
// machine's; `best`: the run's best trial (nullptr: none, then every row is a
// fallback).
std::vector<FormulaRow> NodeFormulas(const std::vector<TrialRecord>& trials, int usable_cpus,
                                     const TrialRecord* best);
// Text lines (with the gap to the best's samples/s when known) and JSON (also
// the gap to the knee).
std::string NodeFormulasText(const std::vector<FormulaRow>& rows, std::optional<double> best_samples_per_s,
                             const std::string& indent);
nlohmann::ordered_json NodeFormulasJson(const std::vector<FormulaRow>& rows, std::optional<double> best_samples_per_s,
                                        std::optional<double> knee_samples_per_s);

// For `export`: how to launch the measured node, each line starting with
// `prefix` ("# " in Python, "" in env files): the rank count for torchrun
// (with OMP_NUM_THREADS/MKL_NUM_THREADS when `knobs` set worker_threads), and
// each rank's CPUs when `knobs` bound them: a taskset line (cpu_binding
// split), a numactl line that keeps memory local (numa).
std::string NodeLaunchText(const NodeFigures& node, const loader::Knobs& knobs, const std::string& prefix);

// For `export --format env`: FEEDTUNE_NPROC_PER_NODE, FEEDTUNE_CPU_BINDING
// and, when bound, FEEDTUNE_RANK<r>_CPUS per rank.
std::string NodeLaunchEnv(const NodeFigures& node, const loader::Knobs& knobs);

}  // namespace feedtune::results
