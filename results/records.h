// The rows of the results store (docs/architecture.md, the results schema) as plain structs. The store reads
// and writes them; the tuner fills them; the renderers print them. No behaviour
// beyond the statuses' names and the phases' JSON form.
#pragma once

#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "loader/options.h"
#include "results/torch_costs.h"

namespace feedtune::results {

// How a trial (or one rank of a node trial) ended. Each has one string form,
// TrialStatusName(): what the store's trials.status / trial_ranks.status
// columns hold and what the JSON report prints (docs/json-report.md).
enum class TrialStatus { kOk, kFailed, kSkipped };  // "ok" | "failed" | "skipped" (over a budget)

// How a run stands or ended; RunStatusName() is the runs.status column's and
// the reports' string.
enum class RunStatus { kRunning, kDone, kInterrupted, kFailed };  // "running" | "done" | "interrupted" | "failed"

// What a run is (schema v22, the runs.kind column: RunKindName()): a sweep's
// (sweep, diagnose, fleet: a config and its trials) or `feedtune layout`'s
// (candidates' trials and an answer, RunRecord::answer_json).
enum class RunKind { kSweep, kLayout };  // "sweep" | "layout"

std::string TrialStatusName(TrialStatus status);
std::string RunStatusName(RunStatus status);
std::string RunKindName(RunKind kind);
// The string forms back; throw std::invalid_argument naming the unknown
// string and the known ones (a file written by a newer feedtune, or damaged).
TrialStatus ParseTrialStatus(std::string_view text);
RunStatus ParseRunStatus(std::string_view text);
RunKind ParseRunKind(std::string_view text);

// One GPU as the device layer reports it. results never queries CUDA itself:
// the device layer fills these and hands them to SetGpus() (fingerprint.h).
struct GpuInfo {
  std::string name;
  int64_t mem_bytes = 0;
  std::string driver;      // driver version, e.g. "550.54.15" or CUDA's "12040"
  std::string runtime;     // CUDA runtime version, e.g. "12.4"
  std::string pci_bus_id;  // e.g. "0000:3b:00.0"
  std::string link;        // PCIe link, e.g. "gen5 x16"

  bool operator==(const GpuInfo&) const = default;
};

// One point of the host-to-device bandwidth matrix (`feedtune machine` on CUDA).
struct BandwidthRecord {
  int64_t bytes = 0;
  bool pinned = false;
  bool non_blocking = false;
  double gb_per_s = 0;
};

// What identifies and describes a machine. Hash() is stable across runs on the
// same box: it covers the hardware and limits, not the hostname or the label.
struct Fingerprint {
  std::string hostname;
  std::string label;            // display name (`sweep --label`), else the hostname
  std::string cpu_model;
  int logical_cpus = 0;
  int usable_cpus = 0;          // affinity mask, capped by the cgroup CPU quota
  double cgroup_cpu_limit = 0;  // CPUs allowed by cpu.max / cfs quota; 0 = none
  int numa_nodes = 0;
  int64_t mem_total_bytes = 0;
  int64_t cgroup_mem_limit_bytes = 0;  // 0 = none
  int64_t shm_bytes = 0;               // size of /dev/shm
  int64_t nofile_limit = 0;            // RLIMIT_NOFILE soft limit
  std::string kernel;
  // GPU: empty name and count 0 when there is none.
  std::string gpu_name;
  int gpu_count = 0;
  int64_t gpu_mem_bytes = 0;
  std::string gpu_driver;
  std::string pcie_link;
  // Schema v2: the CUDA runtime version and every GPU in detail. The summary
  // fields above describe GPU 0 (SetGpus keeps them consistent with `gpus`).
  std::string gpu_runtime;
  std::vector<GpuInfo> gpus;
  // /etc/machine-id ("" where it does not exist). Names the host, not the
  // hardware: kept with each run (HostIdentity), never in Hash().
  std::string machine_id;

  std::string Hash() const;  // 16 hex digits: the hardware class
};

// Which host ran a run, apart from its hardware class (Fingerprint::Hash()):
// 64 identical nodes are one class and 64 hosts. Two sweeps on one box under
// two labels are two hosts, since the label is what the user named them.
struct HostIdentity {
  std::string name;        // the label when given, else the hostname
  std::string hostname;
  std::string machine_id;  // /etc/machine-id; "" where missing and in files before hosts were kept

  // What tells hosts apart across files: the name, and the machine-id when known.
  std::string Key() const { return machine_id.empty() ? name : name + "/" + machine_id; }
  bool operator==(const HostIdentity&) const = default;
};

// NaN in a figure means "not measured" (the store binds it as NULL, the
// renderers print null, "-" or "not measured"): a command workload fills only
// what its command reported. Native trials measure every figure.
struct RepeatRecord {
  int index = 0;
  double samples_per_s = 0;
  double mb_per_s = 0;
  double gpu_idle_frac = 0;
  double wait_p50_us = 0;
  double wait_p99_us = 0;
  double wall_s = 0;
  bool outlier = false;
  // Schema v16 (docs/measurement.md, other processes' CPU): the CPUs other
  // processes took during the window (the box's busy CPU, or its cgroup's,
  // less the trial's process tree); NaN where not measured. Disturbed: it
  // differed from the run's quiet reference beyond
  // sweep.background.disturbed_cpu. Remeasured: a disturbed window another
  // window replaced, left out of the trial's figures.
  double background_cpu = std::numeric_limits<double>::quiet_NaN();
  bool disturbed = false;
  bool remeasured = false;
  // Schema v20: the CPUs the trial's own process tree used in the window;
  // with background_cpu, whether the box had CPU left idle there (where the
  // neighbours got what they wanted, results/background.h). NaN where not
  // measured (command workloads, files before v20).
  double tree_cpu = std::numeric_limits<double>::quiet_NaN();
};

// One rank of a node trial (sweep.ranks > 1; tuner/measure/node_measurer.h): its own loader's
// figures and what it ran on. Schema: the trial_ranks table.
struct RankRecord {
  int rank = 0;
  int64_t pid = 0;
  TrialStatus status = TrialStatus::kOk;  // kOk | kFailed
  std::optional<std::string> error;
  double samples_per_s = 0;   // median over the windows
  double gpu_idle_frac = 0;
  double wait_p50_us = 0;
  double wait_p99_us = 0;
  std::string cpu_mask;          // Cpus_allowed_list of the rank process
  std::string worker_cpu_masks;  // of its fork server and workers: the distinct lists, "; "-separated
  int processes = 0;             // the rank, its fork server and workers, at the last window's end
  int threads = 0;
  int64_t shm_bytes = 0;         // shared-memory batch slots (memfd) the rank maps
};

// What a node trial measures beyond one loader's figures. The trial's
// samples_per_s is then the aggregate: all ranks' samples over the longest
// rank's window, median over the windows; its cpu_util the ranks' sum, its
// peak_rss_bytes the largest rank's (what the budget sizes per rank).
struct NodeFigures {
  int ranks = 0;
  double slowest_rank_samples_per_s = 0;
  double rank_spread = 0;  // (fastest - slowest) / fastest rank's samples/s
  int processes = 0;       // the tuner and every rank's tree
  int threads = 0;
  int64_t shm_bytes = 0;
  std::vector<RankRecord> rank_rows;
};

// A trial on remote data (schema v23): what its loader read from the store
// in the windows of its figures, added over them (the workers' clients, in
// every process: storage/fetch_tally.h), the figures `inspect s3://` gives
// for the store alone (docs/storage.md#remote-data-in-a-sweep).
struct StoreFigures {
  int64_t requests = 0;              // HTTP requests sent, tries included
  int64_t retries_slowdown = 0;      // tries again after a 503 (SlowDown)
  int64_t retries_server_error = 0;  // after a 500, 502 or 504
  int64_t retries_connection = 0;    // after a connection lost mid-answer
  int64_t objects = 0;               // object reads that succeeded
  int64_t bytes = 0;                 // their bytes
  // From the request sent to the first byte, over the objects read (from a
  // histogram: within 4.2%); NaN when none was.
  double first_byte_p50_s = std::numeric_limits<double>::quiet_NaN();
  double first_byte_p99_s = std::numeric_limits<double>::quiet_NaN();
  // The bytes over their seconds from the first byte to the last, summed over
  // the objects: one connection's rate, as the probe's; NaN when no time passed.
  double mb_per_s_per_connection = std::numeric_limits<double>::quiet_NaN();

  int64_t retries() const { return retries_slowdown + retries_server_error + retries_connection; }
};

struct TrialRecord {
  int64_t id = 0;
  int64_t run_id = 0;
  std::string phase;        // baseline | pin_memory | num_workers | non_blocking | prefetch_factor | persistent_workers
  loader::Knobs knobs;
  TrialStatus status = TrialStatus::kOk;
  std::optional<std::string> error;
  double samples_per_s = 0;   // median over repeats
  double ci_low = 0;          // 95% interval of the median's estimate
  double ci_high = 0;
  double mb_per_s = 0;
  double gpu_idle_frac = 0;
  double copy_s = 0;          // device copy time inside the windows, reported apart from steps
  double wait_p50_us = 0;
  double wait_p99_us = 0;
  double worker_startup_s = 0;
  double cpu_util = 0;        // CPU seconds of the process tree per wall second
  int64_t peak_rss_bytes = 0;
  int repeats = 0;
  // Schema v2; NaN (unknown) when read from a v1 file.
  double time_to_first_batch_s = 0;  // from loader start to the first batch delivered
  double epoch_boundary_ms = 0;      // stall at the epoch change (worker restart when not persistent)
  double cv = 0;                     // coefficient of variation of samples/s over the repeats
  double worker_busy_frac = 0;       // fraction of worker wall time spent producing samples
  // One-off: allocating (and locking) the pinned pool at the trial's start,
  // outside every measurement window. 0 without pin_memory; NaN before schema v4.
  double pinned_alloc_s = 0;
  // Schema v5: batches in one epoch of this trial's loader, as the workload
  // reported it (a command may not say); the search reads it for short epochs.
  std::optional<int64_t> batches_per_epoch;
  // Schema v6: the peak resident memory of one worker process, as the command
  // measured it (its workers' peak RSS summed and divided by their count);
  // NaN when not measured: native trials, and commands that do not report it.
  // The budget's per-worker memory for commands rests on it.
  double worker_rss_bytes = std::numeric_limits<double>::quiet_NaN();
  // Schema v13: each worker process's private RSS sampled through the
  // windows (tuner/measure/worker_memory.h). Start: the workers' mean first
  // sample; peak: the largest sample of one worker; growth: bytes per epoch
  // per worker (least squares over the samples); epochs: the longest span
  // one worker was sampled over, what the growth rests on. Thread workers and
  // num_workers 0: this process's figures (worker_rss_in_consumer), the
  // growth shared over the thread workers. A command workload reports them
  // on its result lines (docs/command-protocol.md: worker_rss_*, the probe
  // samples as the native sampler does). NaN where not measured (a command
  // that does not report them, files before v13); growth NaN when no worker
  // spanned two samples.
  double worker_rss_start_bytes = std::numeric_limits<double>::quiet_NaN();
  double worker_rss_peak_bytes = std::numeric_limits<double>::quiet_NaN();
  double worker_rss_growth_bytes_per_epoch = std::numeric_limits<double>::quiet_NaN();
  double worker_rss_epochs = std::numeric_limits<double>::quiet_NaN();
  int worker_rss_samples = 0;
  // The series is this process's (thread workers, or none), not worker processes'.
  bool worker_rss_in_consumer = false;
  // Schema v16: other processes' CPU, the median over the windows in the
  // figures (RepeatRecord::background_cpu); NaN where not measured (command
  // workloads, files before v16). remeasured_windows: disturbed windows that
  // others replaced (repeat rows with remeasured set).
  double background_cpu = std::numeric_limits<double>::quiet_NaN();
  int remeasured_windows = 0;
  // Schema v20: seconds from the search's start to the trial's end, on the
  // search's clock (a resumed run's clock goes on from its stored trials',
  // tuner/search/replay.h); NaN before v20.
  double elapsed_s = std::numeric_limits<double>::quiet_NaN();
  std::string decision;       // why the phase kept or dropped this setting
  std::vector<RepeatRecord> repeat_rows;
  // A node trial (sweep.ranks > 1): the ranks' figures; unset for one loader.
  std::optional<NodeFigures> node;
  // Remote data (schema v23): the store's figures over the trial's windows;
  // unset for local data, commands, node trials and older files.
  std::optional<StoreFigures> store;
};

// The interpreter a Python command workload ran under, as its preflight
// reported it (tuner/measure/python_preflight.h); empty for other workloads and
// for runs stored before schema v12.
struct PythonFacts {
  std::string python_version;        // "3.11.2"
  std::string torch_version;         // "1.13.0a0"
  // What multiprocessing_context=default means there: the start method a
  // DataLoader's workers get without one ("fork", "forkserver", "spawn").
  std::string default_start_method;

  bool empty() const { return python_version.empty() && torch_version.empty() && default_start_method.empty(); }
  bool operator==(const PythonFacts&) const = default;
};

// The machine's limits a sweep read at its start (tuner/search/budget.h
// predicts each trial's memory, /dev/shm and descriptors from them); stored
// with the run so --resume predicts as the first run did.
struct BudgetFacts {
  int64_t mem_available_bytes = 0;  // MemAvailable, capped by the cgroup limit; 0 = unknown
  int64_t shm_free_bytes = 0;       // free space of /dev/shm; 0 = unknown
  int64_t nofile_limit = 0;         // RLIMIT_NOFILE soft limit; 0 = unknown
  int64_t fds_open = 0;             // descriptors this process holds now
  double usable_cpus = 0;           // affinity, capped by cgroup cpu.max; 0 = unknown
  int64_t batch_bytes = 0;          // slot size (batch_size x max sample bytes); 0 = learn it
  // A streaming dataset's shuffle buffer per worker (shuffle_buffer x the
  // largest sample); 0 = none. A worker holds at least this much.
  int64_t stream_buffer_bytes = 0;

  bool operator==(const BudgetFacts&) const = default;
};

// The most workers the budgets allow at the best setting, and what that rests on.
struct SafeLimit {
  std::optional<int> workers;           // none when nothing supports a number
  std::string basis;                    // e.g. "measured worker RSS of trial 4 (212 MiB)"
  std::optional<int64_t> basis_trial;   // the trial whose memory it rests on
  std::optional<int64_t> worker_rss_bytes;
  std::optional<int64_t> growth_bytes;  // the workers' growth over the job it adds (G x E)

  bool operator==(const SafeLimit&) const = default;
};

// The stored run a `sweep --seed-from` started from (tuner/search/seed.h).
struct SeedFacts {
  std::string db_path;    // the file it came from
  int64_t run_id = 0;     // the run in that file
  std::string run_uid;
  std::string run_host;
  std::string run_class;  // its machine hash
  std::string match;      // "host" | "class" | "neighbour"
  std::string why;
  std::string source;     // "run 7 of box-a"
  int knee_workers = 1;
  // Its best setting: batch_size, num_workers, pin_memory, non_blocking,
  // prefetch_factor and persistent_workers are kept (the rest are defaults).
  loader::Knobs best;

  bool operator==(const SeedFacts&) const = default;
};

// The synthetic workload's CPU calibration (workloads/cpu_work.h
// CpuCalibration: how fast this machine burns the per-sample CPU work), as
// the run stored it.
struct CpuCalibrationFacts {
  std::string clock;  // "CLOCK_THREAD_CPUTIME_ID"
  double clock_read_ns = 0;
  double work_bytes_per_s = 0;
  int64_t chunk_bytes = 0;
  double chunk_us = 0;
  double clock_overhead = 0;
  double check_requested_us = 0;
  double check_spent_us = 0;
  double calibration_s = 0;

  bool operator==(const CpuCalibrationFacts&) const = default;
};

// One search phase's decision, in the order the search took them.
struct PhaseFact {
  std::string phase;  // "pin_memory", "num_workers", ...
  bool kept = false;  // whether the phase changed the best setting
  std::string why;

  bool operator==(const PhaseFact&) const = default;
};

// A process that took CPU beside the sweep (docs/measurement.md): its
// command name, one pid of that name, how many processes shared the name,
// and their CPUs over the sample.
struct ProcessCpu {
  std::string name;
  int64_t pid = 0;
  int processes = 1;
  double cpu = 0;

  bool operator==(const ProcessCpu&) const = default;
};

// Other processes' CPU around a run (schema v16's run_facts background_
// columns; docs/measurement.md). NaN: not measured.
struct BackgroundFacts {
  std::string source;  // what the box's busy CPU was read from: "/proc/stat", or the cgroup's file
  // Sampled for sample_s before the baseline, with the top consumers then.
  double start_cpu = std::numeric_limits<double>::quiet_NaN();
  double sample_s = 0;
  std::vector<ProcessCpu> top;
  // What each window was judged against: start_cpu when it was at most
  // warn_cpu (the box was quiet), NaN otherwise (nothing to judge against).
  double reference_cpu = std::numeric_limits<double>::quiet_NaN();
  double warn_cpu = 0;       // sweep.background.warn_cpu
  double disturbed_cpu = 0;  // sweep.background.disturbed_cpu
  // At the end: the median over the run's measured windows, how many there
  // were, and the mark: busy when the neighbours' demand is above warn_cpu.
  double median_cpu = std::numeric_limits<double>::quiet_NaN();
  int windows = 0;
  int remeasured = 0;  // windows re-measured in the run
  // v18: the neighbours' demand, what the mark rests on: the median of the
  // sample before the baseline and of the windows where the trial left CPU
  // free (0 workers, or its process tree under the usable CPUs less
  // warn_cpu), and how many windows those were. Not the median of all
  // windows: as workers grow the sweep itself pushes a neighbour's share
  // down, and a busy box would read quiet. NaN in runs before v18, whose
  // mark rested on median_cpu.
  double demand_cpu = std::numeric_limits<double>::quiet_NaN();
  int demand_windows = 0;
  bool busy = false;

  bool operator==(const BackgroundFacts& o) const;
};

// What a sweep knew about its run beside the trials, as typed fields (the
// run_facts table: schema v14 for budget, max_workers, seed and safe limit,
// v15 for the rest; before, keys of runs.calibration_json). Unset or empty:
// the run did not record it (a diagnose run, a run before the fact was kept).
struct RunFacts {
  std::optional<BudgetFacts> budget;  // at the start
  std::optional<int> max_workers;     // the resolved cap on num_workers
  std::optional<SeedFacts> seed;      // --seed-from's run (--resume re-seeds from it)
  std::optional<SafeLimit> safe_limit;  // at the end, with a best setting
  std::optional<CpuCalibrationFacts> cpu;  // at the start, for the workloads that calibrate
  std::vector<std::string> preflight;      // the warnings said before the first trial
  std::vector<PhaseFact> phases;           // at the end
  // `sweep --trace`: the baseline's and the best setting's timeline excerpts
  // ({"baseline": ..., "best": ...}, loader::MakeTimelineExcerpt each), kept
  // as JSON: they are a trace, drawn by the HTML report (results/timeline_html.h).
  std::string timelines_json;
  // v16: other processes' CPU at the start and over the windows; the busy mark.
  std::optional<BackgroundFacts> background;
  // v17: the torch costs the native trials paid (workload.torch_costs auto); none: the native core's figures.
  std::optional<TorchCosts> torch_costs;
  // v21: remote data: the store's probe before the baseline, as
  // storage::ProbeJson writes it (kept as JSON: the results room does not
  // depend on the storage room); empty: local data.
  std::string store_probe_json;

  bool operator==(const RunFacts&) const = default;
};

// The phases' one JSON form, [{"phase": ..., "kept": ..., "why": ...}, ...]
// (the JSON report's and run_facts.phases_json), and its reader (anything
// but such an array reads as none).
std::string PhasesToJson(const std::vector<PhaseFact>& phases);
// The same as a value, for a JSON being built (the report, the sweep's done event).
nlohmann::json PhasesArray(const std::vector<PhaseFact>& phases);
std::vector<PhaseFact> PhasesFromJson(const std::string& json);

// Schema v19: the process that runs a run, so that a later open of the file
// can tell a run whose process died without a word (SIGKILL, the job killed
// around it, a reboot) from one that is still running (Store::Open,
// results/run_owner.h). BeginRun sets the calling process's.
struct RunOwner {
  std::string hostname;       // gethostname(): runs of other hosts are never judged
  std::string boot_id;        // /proc/sys/kernel/random/boot_id: another boot, the process is gone
  std::string pid_namespace;  // /proc/self/ns/pid's link: a pid means nothing in another namespace
  int64_t pid = 0;            // 0: not known (runs before v19, or /proc was not there)
  int64_t start_ticks = 0;    // field 22 of /proc/PID/stat: a reused pid starts at another time

  bool operator==(const RunOwner&) const = default;
};

struct RunRecord {
  int64_t id = 0;
  int64_t machine_id = 0;
  std::string workload_name;
  std::string workload_hash;
  RunKind kind = RunKind::kSweep;  // schema v22 (older files: told by the stored answer, schema.cc)
  std::string config_yaml;  // the full effective config ("" for a layout run: it has none)
  std::string backend;      // host-sim | cuda
  std::string version;
  std::string started_at;   // ISO 8601 UTC
  std::string ended_at;     // empty while running
  RunStatus status = RunStatus::kRunning;
  std::optional<int> knee_workers;
  std::optional<double> knee_samples_per_s;
  std::optional<int64_t> best_trial_id;
  std::optional<int64_t> baseline_trial_id;
  // Schema v2 (unset in files written before it).
  std::optional<int> knee_kneedle_workers;  // the knee by the Kneedle method, next to the tolerance one
  std::optional<int> safe_max_workers;      // the most workers the memory, /dev/shm and fd budgets allow
  std::optional<double> speedup;            // best over baseline samples/s
  std::optional<double> speedup_ci_low;     // 95% interval of the speedup
  std::optional<double> speedup_ci_high;
  // Keys of runs.calibration_json that this version has no field for (an
  // older feedtune's figures), kept as they were ("" = none). A sweep of
  // this version stores none: its facts are `facts`.
  std::string calibration_json;
  RunFacts facts;  // schema v14 and v15 (filled from calibration_json for older files)
  // Identifies the run across files, so `feedtune merge` adds a run once. The
  // store assigns it at BeginRun when empty; runs from schema v1 files get
  // "v1:<machine hash>:<started_at>:<id>".
  std::string uid;
  // The host that ran it. Empty at BeginRun: the machine row's label and
  // hostname stand in (they are what files before hosts were kept read as).
  HostIdentity host;
  // Schema v12: a Python command's interpreter (empty otherwise).
  PythonFacts python;
  // Schema v19: who runs it (see RunOwner), and how it ended when that is
  // worth saying ("" = nothing to add to its status): a run found left
  // running by a process that has ended, a sweep stopped by a signal.
  RunOwner owner;
  std::string end_note;
  // Schema v22: a layout run's answer, the JSON `feedtune layout --format
  // json` prints (results/layout_report.h reads it); "" for a sweep.
  std::string answer_json;
};

// The date a run is known by: its end, else (running, or died) its start.
inline const std::string& RunDate(const RunRecord& run) { return run.ended_at.empty() ? run.started_at : run.ended_at; }

// What a training job saw (an observed run, `feedtune observe`, python
// feedtune.watch): the loader setting it ran with and how fast it went. Data
// like a sweep's: it carries the host and the machine (hardware class) it ran
// on, so `check` can hold it against the sweep of the same host and workload.
// Schema v11: the observed table.
struct ObservedRecord {
  int64_t id = 0;
  // Names the job across writes and files: a job that writes every K steps
  // replaces its own row (the latest figures win), and `merge` adds it once.
  std::string uid;
  int64_t machine_id = 0;
  HostIdentity host;
  std::string workload_name;  // the config/workload the sweep ran under (`check` matches on it)
  // The knobs read from the job's DataLoader. non_blocking is the job's own
  // copy argument, which a DataLoader does not hold: unset when not given.
  loader::Knobs knobs;
  std::optional<bool> non_blocking;
  double samples_per_s = 0;      // over the steps observed (after the first)
  double input_bound_frac = 0;   // wait for the batch / step time, summed over the steps
  double step_s = 0;             // mean step time: from one batch handed out to the next
  double wait_s = 0;             // mean wait for a batch inside that
  int64_t steps = 0;
  std::string started_at;        // ISO 8601 UTC
  std::string ended_at;          // the last write; ISO 8601 UTC
  bool finished = false;         // the loop ended (false: a periodic write of a running job)
  std::optional<int64_t> sweep_run_id;  // the run its setting came from, when the job knows it
  std::string source;            // what wrote it, e.g. "feedtune.watch"
};

}  // namespace feedtune::results
