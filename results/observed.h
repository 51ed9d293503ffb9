// Observed runs: what a training job saw, coming back into
// the results file (`feedtune observe`, fed by python feedtune.watch), and the
// questions asked of it: which sweep stands for the job, and does the sweep's
// answer hold in the job (`feedtune check`). The store keeps the rows
// (ObservedRecord, results/records.h); this file reads their JSON form and
// judges them. Pure functions over a Store opened by the caller; one thread.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "results/records.h"

namespace feedtune::results {

class Store;

// A record that cannot be stored. The message names the field, what is wrong
// with it and what it takes, e.g. "field 'input_bound_frac': 1.4 is not a
// share; give wait / step time, between 0 and 1".
class ObservedError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Reads one JSON object (a line of `feedtune observe`'s input; the fields are
// listed by ObservedFieldsHelp) into a record. Throws ObservedError.
ObservedRecord ParseObserved(const std::string& json_text);
// The fields ParseObserved takes, one per line, for --help.
const char* ObservedFieldsHelp();

// The JSON form report and check print for an observed run.
nlohmann::ordered_json ObservedJson(const ObservedRecord& observed);

// Whether a stored run and an observed run ran on the same host: the same
// machine-id when both know it, else the same hostname (the rule of
// `export --machine this`, results/fleet.h).
bool SameHostAs(const HostIdentity& a, const HostIdentity& b);

// The observed runs of the run's workload on the run's host, oldest first.
std::vector<ObservedRecord> ObservedForRun(const Store& store, const RunRecord& run);

// Default of `check --slower-than`: a job more than this share below the swept figure is flagged.
inline constexpr double kDefaultSlowerThan = 0.10;

// One thing `check` flags about an observed run.
struct ObservedFinding {
  std::string kind;  // "slower" | "input-bound" | "knobs"
  std::string text;  // "the job ran 23% below the swept figure (...)"
};

// An observed run held against the sweep of its host and workload.
struct ObservedCheck {
  ObservedRecord observed;
  // The sweep it was held against: the run the job named (sweep_run_id) when
  // it is in this file with the same workload and host, else the host's latest
  // run of the workload with a best trial. Unset: no such sweep here.
  std::optional<int64_t> sweep_run_id;
  loader::Knobs swept;                   // the sweep's best setting
  double swept_samples_per_s = 0;        // the best trial's median
  double drop = 0;                       // 1 - observed / swept samples/s
  std::vector<ObservedFinding> findings; // empty: the sweep's answer holds
  std::string text;                      // one line: "holds: ..." or why it was not checked
};

// Holds the latest observed run of each host and workload (optionally one
// workload) against its sweep. Flags a job more than `slower_than` below the
// swept samples/s, a job at or over the 20% input-bound band
// (kInputBoundHigh), and knobs that differ from the swept best (batch_size,
// num_workers, pin_memory; prefetch_factor and persistent_workers when both
// use workers; non_blocking when the job gave it).
std::vector<ObservedCheck> CheckObserved(const Store& store, const std::optional<std::string>& workload,
                                         double slower_than = kDefaultSlowerThan);

}  // namespace feedtune::results
