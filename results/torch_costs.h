// TorchCosts: what torch's DataLoader costs on this box beyond the dataset's
// own work, fitted by `feedtune calibrate` from feedtune.torch_costs (a torch
// probe over a dataset that does nothing) and stored per machine in the
// results file (docs/measurement.md#torch-costs).
//
// Why: a native worker costs almost nothing per batch, a torch worker costs a
// Python process (its loop, default_collate into shared memory, pickling onto
// a queue, the main process rebuilding the batch). A native sweep that does
// not pay them overstates many workers for a torch job. A native trial with
// workload.torch_costs auto pays them (tuner/measure/torch_cost_dataset.h).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace feedtune::results {

struct TorchCosts {
  std::string measured_at;     // ISO 8601, UTC
  std::string python_version;  // of the interpreter that measured them
  std::string torch_version;
  std::string start_method;    // the workers' (the interpreter's default)
  double worker_start_s = 0;   // a worker's own start: in the worker, from its fork to its first sample
  // num_workers 0: the main process's own loop and collate.
  double in_process_batch_s = 0;
  double in_process_sample_s = 0;
  double in_process_byte_s = 0;
  // A worker's CPU for the same, with the pickling onto the queue.
  double worker_batch_s = 0;
  double worker_sample_s = 0;
  double worker_byte_s = 0;
  // The main process's CPU per batch it takes from a worker.
  double main_batch_s = 0;
  double main_byte_s = 0;
  // The main process's CPU per worker it starts (forks, one after another)
  // when a loader starts its workers, and its wait when it stops them (a
  // fixed part and one per worker: they exit together while it joins them
  // in turn): every epoch without persistent_workers.
  double main_worker_start_s = 0;
  double main_worker_stop_s = 0;
  double main_stop_fixed_s = 0;
  // The figures that could not be told from zero (a fit at or below zero, a
  // slope lost in the noise), by TorchCostFields name, with why: each is 0
  // above and is charged as 0; the lines that show the costs say so.
  std::map<std::string, std::string> not_measured;

  bool operator==(const TorchCosts&) const = default;

  // Seconds one sample of `bytes` costs where it is loaded: in a worker, or
  // in the main process without workers; each batch's fixed cost shared over
  // its `batch_size` samples.
  double SampleSeconds(bool in_worker, int64_t bytes, int batch_size) const;
  // Seconds the main process spends on a batch of `bytes` a worker made.
  double MainBatchSeconds(int64_t bytes) const { return main_batch_s + main_byte_s * static_cast<double>(bytes); }
  // The main process's CPU seconds starting `workers` workers, and the
  // seconds it waits stopping them.
  double MainStartSeconds(int workers) const { return main_worker_start_s * workers; }
  double MainStopWaitSeconds(int workers) const { return main_stop_fixed_s + main_worker_stop_s * workers; }
};

// The numeric fields, by name, in the order of the table's columns and of the
// JSON: the one list the store, the JSON and the probe's reader follow.
// Why a figure is not measured in costs stored before calibrate measured it.
inline constexpr const char* kMeasuredBeforeIt = "measured before feedtune measured it (calibrate again to measure it)";

struct TorchCostField {
  const char* name;
  double TorchCosts::*member;
  int since;  // the results file's schema version whose torch_costs table has the column
};
const std::vector<TorchCostField>& TorchCostFields();

// From the probe's {"torch_costs": {...}} object (the inner object). Throws
// std::runtime_error naming the missing or non-numeric key. A figure the
// probe did not yet measure when the object was written (a run's costs
// stored before it, TorchCostField::since) reads as not measured.
TorchCosts TorchCostsFromProbe(const nlohmann::json& costs);
// The "not_measured" object ({"name": "why"}) into `costs`; anything else adds nothing.
void ReadNotMeasured(const nlohmann::json& object, TorchCosts* costs);
// {"measured_at": ..., "python_version": ..., ..., "worker_start_s": ..., ...,
// "not_measured": {"worker_byte_s": "why", ...}}
nlohmann::ordered_json TorchCostsJson(const TorchCosts& costs);
// TorchCostsJson's text back (a run's stored costs); empty for "", or for text
// that is not such an object (a damaged value reads as none).
std::optional<TorchCosts> TorchCostsFromJson(const std::string& json);
// Whether a stored run measured feedtune's native loader core: not a command
// workload (its stored config says the kind) and not a run inside the job.
bool IsNativeRun(const std::string& config_yaml, const std::string& backend);

// One line for reports and exports: "torch 1.13.1 (Python 3.11.2, fork), measured 2026-12-04T17:20:00Z:
// a worker starts in 21 ms; per sample 9.1 us in a worker ...", ending with
// the figures not measured, each charged as 0: "; not measured, so charged
// 0: worker_byte_s (the fit ... came out at -1e-12 s: within the noise of zero)".
// Empty not_measured: no such part.
std::string TorchCostsLine(const TorchCosts& costs);

}  // namespace feedtune::results
