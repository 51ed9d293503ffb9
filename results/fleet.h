// Fleets (docs/fleets.md): answers asked of a results file that holds many
// hosts. Which stored run stands for a machine (`export --machine this`,
// `sweep --seed-from`), and what `check` reports: hosts whose latest best fell
// below their previous run beyond both intervals, and outliers of their class.
// Pure functions over a Store opened by the caller; one thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "results/records.h"

namespace feedtune::results {

class Store;

// How close two machines are for a sweep's answer, 0 for identical hardware.
// The GPU model weighs most (a different model, or a GPU against none, is 8:
// more than any CPU or memory difference a fleet sees), then the GPU count,
// usable CPUs and memory, each as |log2| of their ratio (twice the CPUs is 1,
// twice the memory 0.5).
double MachineDistance(const Fingerprint& a, const Fingerprint& b);

// Why a stored run was chosen for a machine, in order of preference.
enum class RunMatch {
  kHost,       // this host's own latest run
  kClass,      // the latest run of another host of this hardware class
  kNeighbour,  // the run of the nearest other class (MachineDistance)
};
const char* RunMatchName(RunMatch match);  // "host" | "class" | "neighbour"

struct StoredRunMatch {
  RunMatch match = RunMatch::kHost;
  RunRecord run;
  std::string machine_hash;  // the run's class
  Fingerprint machine;       // the run's class fingerprint
  double distance = 0;       // MachineDistance to the machine asked about
  // The run was marked busy (docs/measurement.md): no quiet run of this
  // host or class stood in for it.
  bool busy = false;
  // A busy run of this host or class that would have been chosen, passed
  // over for this quiet one: "run 9 of gpu-node-3, 2024-06-02T...: other
  // processes took 1.01 CPU ..."; empty when none was.
  std::string passed_over;
  // "this host's latest run (run 7 of gpu-node-3, 2024-06-01T10:05:00Z)", and
  // so on, with the busy run passed over or the busy mark.
  std::string Describe() const;

 private:
  std::string DescribeMatch() const;  // the match alone
};

// The stored run of `workload` (by name) that stands for `machine` on `host`:
// this host's latest run with a best setting; else the latest of its class
// (same hash); else the nearest class's latest by MachineDistance (the latest
// breaks ties). A run is this host's when its machine-id equals ours (both
// known), else when its hostname does; with `match_name`, its name (the
// label) must equal host.name too. Another host that is an outlier of its
// class (compare.h) is passed over: its setting is not its class's. A run
// marked busy (docs/measurement.md) is passed over for a quiet run of this
// host or class, which then stands first (this host's before its class's);
// only when none is quiet does a busy one stand, said so. nullopt when no run
// of the workload has a best setting.
std::optional<StoredRunMatch> NearestStoredRun(const Store& store, const std::string& workload,
                                               const Fingerprint& machine, const HostIdentity& host,
                                               bool match_name = false);

// What a results file holds, for "nothing matches" messages: each workload
// with its count of runs with a best and of hosts, e.g. "resnet (3 runs on 2 hosts)".
std::string DescribeStoredWorkloads(const Store& store);

// One finding of `feedtune check`.
struct FleetFinding {
  std::string kind;  // "regression" | "outlier"
  std::string workload_name;
  std::string workload_hash;
  HostIdentity host;
  std::string machine_hash;
  int64_t run_id = 0;  // the latest run
  double best_samples_per_s = 0;
  double ci_low = 0;
  double ci_high = 0;
  // regression: the previous run of the same host and workload; outlier: the
  // class's median (reference_ci_low the median host's lower bound).
  int64_t reference_run_id = 0;  // 0 for an outlier
  double reference_samples_per_s = 0;
  double reference_ci_low = 0;
  double reference_ci_high = 0;
  double drop = 0;  // fraction below the reference
  std::string text;  // one line for people
};

// A run marked busy (docs/measurement.md), as `check` lists it: which run,
// the quiet run that `export`, loader_kwargs and --seed-from take for its
// host instead (none: the busy run still stands), and one line for people.
struct BusyRun {
  std::string workload_name;
  HostIdentity host;
  std::string machine_hash;
  int64_t run_id = 0;
  std::string date;
  double background_cpu = 0;  // what the mark rests on (BusyFigure): the neighbours' demand
  std::optional<int64_t> instead;
  std::string text;
};

// Every run marked busy, optionally of one workload, oldest first.
std::vector<BusyRun> BusyRuns(const Store& store, const std::optional<std::string>& workload);

// Regressions (latest best's interval wholly below the previous run's: its
// ci_high < the previous ci_low; by workload name and hash, per host; runs
// marked busy left out, BusyRuns lists them) and
// class outliers (IsClassOutlier, compare.h), optionally of one workload.
std::vector<FleetFinding> CheckFleet(const Store& store, const std::optional<std::string>& workload);

}  // namespace feedtune::results
