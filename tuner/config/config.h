// SweepConfig: one sweep config file (docs/config.md), parsed strictly into typed
// structs. Every key has a default; unknown keys, wrong types and out-of-range
// values are ConfigErrors that name file:line:column and the key path.
//
// The same header gives `--set` (ApplyOverride), the effective config as YAML,
// the workload hash and the key reference (docs/config.md), all from one key
// table (keys.h).
//
// LoadConfig / ParseConfig keep no state and are safe from any thread; ParseConfig
// does not touch the file system.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

#include "loader/device/options.h"
#include "loader/options.h"
#include "workloads/options.h"

namespace feedtune::tuner {

struct BudgetOptions {
  double memory_fraction = 0.5;  // of the memory available to this process tree
  double shm_fraction = 0.8;     // of /dev/shm's free space
  // Epochs a training job runs its persistent workers for: the safe limit adds
  // the workers' measured growth per epoch over them (tuner/search/budget.h).
  // 1: one epoch beyond what the trials saw, what non-persistent workers reach.
  int job_epochs = 1;
};

// Other processes' CPU beside a sweep (docs/measurement.md, "A busy box").
struct BackgroundOptions {
  // CPUs of other processes above which the sweep warns before its baseline
  // and marks the run busy (when the median over its windows is above it).
  double warn_cpu = 0.25;
  // A window whose background differs from the run's quiet reference by more
  // than this many CPUs is disturbed and measured again.
  double disturbed_cpu = 0.25;
  // How long the sweep samples the box before its baseline; 0: no sample, so
  // no warning and no quiet reference (no window is re-measured).
  double sample_seconds = 1.0;
};

// How a node sweep's ranks are placed on the CPUs (tuner/measure/node_measurer.h), per trial
// (loader::Knobs::cpu_binding): `none` leaves every rank the mask feedtune
// inherited; `split` binds each rank, its fork server and workers, to an
// equal, disjoint share of it; `numa` to its share on its GPU's NUMA node.
using loader::CpuBinding;
using loader::CpuBindingName;
// sweep.cpu_binding: `auto` searches the binding (tuner/search/search.h's cpu_binding
// phase, from none); a binding named is used by every trial and not searched.
enum class BindingChoice { kAuto, kNone, kSplit, kNuma };
const char* BindingChoiceName(BindingChoice choice);
// The binding the first trial runs with: the one named, none for auto.
CpuBinding StartBinding(BindingChoice choice);

struct SweepOptions {
  int max_workers = 0;  // 0 = auto: 64, capped by budgets
  std::vector<int> prefetch_factors = {1, 2, 4, 8};
  int repeats = 3;
  int warmup_batches = 8;
  double measure_seconds = 2.0;
  double gain_threshold = 0.05;
  double knee_tolerance = 0.05;
  // > 0: the search asks no new trial once this many seconds have passed since
  // its start, and keeps the best setting so far (tuner/search/search.h);
  // feedtune.autotune sets it from budget_s. 0 = no limit.
  double time_budget_s = 0;
  // false: the pin_memory and non_blocking phases are not tried. For a job
  // that trains on the CPU, where no batch is copied to a device and torch
  // ignores pin_memory; feedtune.autotune sets it from torch.cuda.is_available().
  bool copy_phases = true;
  // Stage trials at the best setting after the sweep, and the bottleneck
  // verdict (tuner/measure/stage_runner.h, docs/verdict.md).
  bool diagnose = true;
  BudgetOptions budget;
  BackgroundOptions background;
  // Data-parallel ranks on this node, each with its own loader (tuner/measure/node_measurer.h).
  // 0 = auto: the number of CUDA devices, 1 without one.
  int ranks = 0;
  BindingChoice cpu_binding = BindingChoice::kAuto;
  // The workers' start methods the multiprocessing_context phase measures
  // (command workloads; tuner/search/search.h). Empty = auto: the interpreter's
  // default and the others, only when that default is not fork (Python 3.14+);
  // a list measures those methods whatever the default.
  std::vector<loader::StartMethod> start_methods;
};

struct SweepConfig {
  std::string name = "unnamed";
  workloads::WorkloadOptions workload;
  loader::LoaderOptions loader;
  device::DeviceOptions device;
  SweepOptions sweep;

  std::string source;  // where it came from (file path, or "<string>"), for messages
  // workload.argv as the file wrote it, when the CLI has made a path in it
  // absolute (the probe harness beside an installed binary); empty otherwise.
  // WorkloadHash and ToYaml use it, so a run is the same workload, and resumes
  // the same way, wherever feedtune is installed.
  std::vector<std::string> argv_as_written;
};

// A config problem, with its location already in the message:
//   "configs/x.yaml:7:3: sweep.repeats: expected an integer >= 1, got "three""
class ConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Reads and parses `path`, and checks that the inputs it names exist on this
// machine (a files workload's directory: present, not empty, with an index for
// the shards layout; relative paths are taken from the working directory), with
// the same file:line:column errors. Throws ConfigError (missing, unreadable,
// empty, or invalid file; missing inputs).
SweepConfig LoadConfig(const std::string& path);

// Parses YAML text; `source` names it in messages. Throws ConfigError.
SweepConfig ParseConfig(const std::string& text, const std::string& source);

// Applies one `key.path=value` override (as `feedtune trial --set` takes), with the
// same checks as the file; the value is YAML (`4`, `true`, `[1, 2]`). Throws ConfigError
// naming "--set" as the source.
void ApplyOverride(SweepConfig& config, const std::string& assignment);

// The effective config as YAML, every key present, defaults filled in, in the
// order of the key table (docs/config.md). ParseConfig(ToYaml(c)) == c.
std::string ToYaml(const SweepConfig& config);

// A stable hash (16 hex digits) of what defines the workload: runs with the same
// name and hash are comparable across machines. Covers the workload, batch_size,
// shuffle/drop_last and the device step, not the tuned knobs or sweep settings.
std::string WorkloadHash(const SweepConfig& config);

// Every key of the table as a Markdown page (docs/config.md): the key, what it
// takes (as its error message says), the default, the kinds it applies to, and
// whether it is part of the workload hash.
std::string KeyReferenceMarkdown();

}  // namespace feedtune::tuner
