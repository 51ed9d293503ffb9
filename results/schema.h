// The results file's schema: the column tables that the store's INSERTs and
// SELECTs are made from, the migrations that build the tables (schema.cc,
// append-only), and the checks that decide whether a file may be opened.
// Internal to feedtune_results: nothing outside results/ includes it.
//
// Column names are a contract (docs/json-report.md, "The results file's
// schema"): other tools read the file with SQL.
#pragma once

#include <sqlite3.h>

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "results/store.h"

namespace feedtune::results {

constexpr int kRunFactsVersion = 14;      // run_facts: budget, max_workers, seed, safe limit
constexpr int kMoreRunFactsVersion = 15;  // run_facts: cpu, preflight, phases, timelines
constexpr int kBackgroundVersion = 16;    // other processes' CPU: repeats, trials, run_facts
constexpr int kTorchCostsVersion = 17;    // torch_costs per host; run_facts: the costs a run paid

// One column of a table, in the order the store binds and reads it: its name,
// the schema version whose migration added it, and what a file before that
// version reads in its place (a read-only Store cannot migrate, yet must read
// every older file). The stand-in is the value that migration stores for old
// rows, so a file reads alike migrated or not.
struct Column {
  const char* name;
  int since = 1;
  const char* stand_in = "NULL";
};

inline constexpr Column kMachineColumns[] = {
    {"hash"},
    {"hostname"},
    {"label"},
    {"cpu_model"},
    {"logical_cpus"},
    {"usable_cpus"},
    {"cgroup_cpu_limit"},
    {"numa_nodes"},
    {"mem_total_bytes"},
    {"cgroup_mem_limit_bytes"},
    {"shm_bytes"},
    {"nofile_limit"},
    {"kernel"},
    {"gpu_name"},
    {"gpu_count"},
    {"gpu_mem_bytes"},
    {"gpu_driver"},
    {"pcie_link"},
    {"gpu_runtime", 2, "''"},
    {"gpus_json", 2, "'[]'"},
};

// SELECT only (the id is the row's own); the writers name their columns.
inline constexpr Column kRunColumns[] = {
    {"id"},
    {"machine_id"},
    {"workload_name"},
    {"workload_hash"},
    {"config_yaml"},
    {"backend"},
    {"version"},
    {"started_at"},
    {"ended_at"},
    {"status"},
    {"knee_workers"},
    {"knee_samples_per_s"},
    {"best_trial_id"},
    {"baseline_trial_id"},
    {"knee_kneedle_workers", 2},
    {"safe_max_workers", 2},
    {"speedup", 2},
    {"speedup_ci_low", 2},
    {"speedup_ci_high", 2},
    {"calibration_json", 2, "''"},
    // The 1 -> 2 migration stores this uid, so a run has the same identity
    // whether its file was migrated or read as v1.
    {"uid", 2,
     "'v1:' || (SELECT hash FROM machines WHERE machines.id = runs.machine_id) || ':' || started_at || ':' || id"},
    {"host_name", 7, "(SELECT label FROM machines WHERE machines.id = runs.machine_id)"},
    {"host_hostname", 7, "(SELECT hostname FROM machines WHERE machines.id = runs.machine_id)"},
    {"host_machine_id", 7, "''"},
    {"python_version", 12, "''"},
    {"torch_version", 12, "''"},
    {"default_start_method", 12, "''"},
};

inline constexpr Column kTrialColumns[] = {
    {"run_id"},
    {"phase"},
    {"batch_size"},
    {"num_workers"},
    {"pin_memory"},
    {"non_blocking"},
    {"prefetch_factor"},
    {"persistent_workers"},
    {"status"},
    {"error"},
    {"samples_per_s"},
    {"ci_low"},
    {"ci_high"},
    {"mb_per_s"},
    {"gpu_idle_frac"},
    {"copy_s"},
    {"wait_p50_us"},
    {"wait_p99_us"},
    {"worker_startup_s"},
    {"cpu_util"},
    {"peak_rss_bytes"},
    {"repeats"},
    {"decision"},
    {"time_to_first_batch_s", 2},
    {"epoch_boundary_ms", 2},
    {"cv", 2},
    {"worker_busy_frac", 2},
    {"pinned_alloc_s", 4},
    {"batches_per_epoch", 5},
    {"worker_rss_bytes", 6},
    {"cpu_binding", 10, "'none'"},
    {"worker_threads", 10, "0"},
    {"multiprocessing_context", 12, "'default'"},
    {"worker_rss_start_bytes", 13},
    {"worker_rss_peak_bytes", 13},
    {"worker_rss_growth_bytes_per_epoch", 13},
    {"worker_rss_epochs", 13},
    {"worker_rss_samples", 13, "0"},
    {"worker_rss_in_consumer", 13, "0"},
    {"background_cpu", kBackgroundVersion},
    {"remeasured_windows", kBackgroundVersion, "0"},
};

inline constexpr Column kRepeatColumns[] = {
    {"trial_id"},
    {"idx"},
    {"samples_per_s"},
    {"mb_per_s"},
    {"gpu_idle_frac"},
    {"wait_p50_us"},
    {"wait_p99_us"},
    {"wall_s"},
    {"outlier"},
    {"background_cpu", kBackgroundVersion},
    {"disturbed", kBackgroundVersion, "0"},
    {"remeasured", kBackgroundVersion, "0"},
};

// Each column of run_facts (in the order ReadRunFacts reads them), the path
// in runs.calibration_json the fact had before, and the schema version that
// added the column. A has_ column is whether that object was there. The
// migrations fill the table from these paths; a read-only open of an older
// file reads them in place.
struct RunFactColumn {
  const char* column;
  const char* json_path;
  int since = kRunFactsVersion;
};
inline constexpr RunFactColumn kRunFactColumns[] = {
    {"has_budget", "$.budget_facts"},
    {"budget_mem_available_bytes", "$.budget_facts.mem_available_bytes"},
    {"budget_shm_free_bytes", "$.budget_facts.shm_free_bytes"},
    {"budget_nofile_limit", "$.budget_facts.nofile_limit"},
    {"budget_fds_open", "$.budget_facts.fds_open"},
    {"budget_usable_cpus", "$.budget_facts.usable_cpus"},
    {"budget_batch_bytes", "$.budget_facts.batch_bytes"},
    {"budget_stream_buffer_bytes", "$.budget_facts.stream_buffer_bytes"},
    {"max_workers", "$.max_workers"},
    {"has_seed", "$.seed"},
    {"seed_db", "$.seed.db"},
    {"seed_run", "$.seed.run"},
    {"seed_run_uid", "$.seed.run_uid"},
    {"seed_run_host", "$.seed.run_host"},
    {"seed_run_class", "$.seed.run_class"},
    {"seed_match", "$.seed.match"},
    {"seed_why", "$.seed.why"},
    {"seed_source", "$.seed.source"},
    {"seed_knee_workers", "$.seed.knee_workers"},
    {"seed_batch_size", "$.seed.best.batch_size"},
    {"seed_num_workers", "$.seed.best.num_workers"},
    {"seed_pin_memory", "$.seed.best.pin_memory"},
    {"seed_non_blocking", "$.seed.best.non_blocking"},
    {"seed_prefetch_factor", "$.seed.best.prefetch_factor"},
    {"seed_persistent_workers", "$.seed.best.persistent_workers"},
    {"has_safe_limit", "$.safe_limit"},
    {"safe_workers", "$.safe_limit.workers"},
    {"safe_basis", "$.safe_limit.basis"},
    {"safe_trial", "$.safe_limit.trial"},
    {"safe_worker_rss_bytes", "$.safe_limit.worker_rss_bytes"},
    {"safe_growth_bytes", "$.safe_limit.growth_bytes"},
    // v15. has_cpu: a "cpu" object was there; it is the calibration when it
    // holds work_bytes_per_s (ReadRunFacts), an older figure otherwise.
    {"has_cpu", "$.cpu", kMoreRunFactsVersion},
    {"cpu_clock", "$.cpu.clock", kMoreRunFactsVersion},
    {"cpu_clock_read_ns", "$.cpu.clock_read_ns", kMoreRunFactsVersion},
    {"cpu_work_bytes_per_s", "$.cpu.work_bytes_per_s", kMoreRunFactsVersion},
    {"cpu_chunk_bytes", "$.cpu.chunk_bytes", kMoreRunFactsVersion},
    {"cpu_chunk_us", "$.cpu.chunk_us", kMoreRunFactsVersion},
    {"cpu_clock_overhead", "$.cpu.clock_overhead", kMoreRunFactsVersion},
    {"cpu_check_requested_us", "$.cpu.check_requested_us", kMoreRunFactsVersion},
    {"cpu_check_spent_us", "$.cpu.check_spent_us", kMoreRunFactsVersion},
    {"cpu_calibration_s", "$.cpu.calibration_s", kMoreRunFactsVersion},
    {"preflight_json", "$.preflight", kMoreRunFactsVersion},
    {"phases_json", "$.phases", kMoreRunFactsVersion},
    {"timelines_json", "$.timelines", kMoreRunFactsVersion},
    // v16: other processes' CPU (BackgroundFacts). No older file had them in
    // its JSON: the paths read as NULL there.
    {"has_background", "$.background", kBackgroundVersion},
    {"background_source", "$.background.source", kBackgroundVersion},
    {"background_start_cpu", "$.background.start_cpu", kBackgroundVersion},
    {"background_sample_s", "$.background.sample_s", kBackgroundVersion},
    {"background_top_json", "$.background.top", kBackgroundVersion},
    {"background_reference_cpu", "$.background.reference_cpu", kBackgroundVersion},
    {"background_warn_cpu", "$.background.warn_cpu", kBackgroundVersion},
    {"background_disturbed_cpu", "$.background.disturbed_cpu", kBackgroundVersion},
    {"background_median_cpu", "$.background.median_cpu", kBackgroundVersion},
    {"background_windows", "$.background.windows", kBackgroundVersion},
    {"background_remeasured", "$.background.remeasured", kBackgroundVersion},
    {"busy", "$.background.busy", kBackgroundVersion},
    // v17: the torch costs the run's native trials paid (TorchCostsJson), NULL: none.
    {"torch_costs_json", "$.torch_costs", kTorchCostsVersion},
};

// Where `column` stands in kRunFactColumns: ReadRunFacts reads a group's
// columns from its first one, wherever the groups before it ended. A name
// that is not there fails the build (consteval).
consteval int RunFactIndex(std::string_view column) {
  for (size_t i = 0; i < std::size(kRunFactColumns); ++i) {
    if (column == kRunFactColumns[i].column) return static_cast<int>(i);
  }
  throw "RunFactIndex: no run_facts column of that name";
}

// "a, b, c": the columns of `table` a file of `version` has, each older one's
// stand-in in its place, for a SELECT.
std::string ColumnList(std::span<const Column> table, int version = Store::kSchemaVersion);
// "?, ?, ?": one placeholder for each of `count` values.
std::string Placeholders(size_t count);
// "INSERT INTO <table> (<every column of `columns`>) VALUES (?, ...)", the
// placeholders counted from the table.
std::string InsertSql(std::string_view table, std::span<const Column> columns);
// The runs' columns of a file of `version` (calibration_json without what
// run_facts took over), then the run facts' (RunFactsSelect); from RunsTable().
std::string RunColumns(int version);
// What RunColumns() selects from: the runs and, from v14, their facts.
std::string RunsTable(int version);
// The run_facts columns added from schema `from` to `up_to`, "has_budget,
// budget_mem_available_bytes, ..." (all of them by default).
std::string RunFactColumnNames(int up_to = Store::kSchemaVersion, int from = 0);

// ISO 8601 UTC, the form RunRecord documents for its timestamps.
constexpr const char* kNowSql = "strftime('%Y-%m-%dT%H:%M:%SZ', 'now')";

struct FileState {
  int64_t application_id = 0;
  int schema_version = 0;
};

// The checks that decide whether this file may be touched, done before any
// write: feedtune's application_id (or an empty file), a schema version this
// build knows. Throws StoreError.
FileState CheckFile(sqlite3* db, const std::string& path);
// Refuses, without opening it with sqlite, a non-empty file that is not SQLite.
void CheckHeader(const std::string& path);
// Brings the schema up to Store::kSchemaVersion and marks the file as feedtune's.
void Migrate(sqlite3* db, const std::string& path);

// The stored forms of the columns that hold a name or JSON. Reading is
// tolerant on purpose: a damaged or newer value must not make a run unreadable.
//
// A stored start method; a name this version does not know reads as default.
loader::StartMethod StartMethodFromStored(const std::string& name);
// A stored cpu_binding; a name this version does not know reads as none.
loader::CpuBinding BindingFromName(const std::string& name);
// The preflight warnings as run_facts.preflight_json holds them: a JSON array
// of strings (none: NULL); anything else reads as none.
std::vector<std::string> PreflightFromJson(const std::string& json);
std::optional<std::string> PreflightJson(const std::vector<std::string>& warnings);
// The phases' decisions as run_facts.phases_json holds them (none: NULL).
std::optional<std::string> PhasesJson(const std::vector<PhaseFact>& phases);
// The top consumers as run_facts.background_top_json holds them: a JSON
// array of {"name", "pid", "processes", "cpu"}; anything else reads as none.
std::string ProcessCpuToJson(const std::vector<ProcessCpu>& top);
std::vector<ProcessCpu> ProcessCpuFromJson(const std::string& json);
// GPU detail as the machines.gpus_json column holds it.
std::string GpusToJson(const std::vector<GpuInfo>& gpus);
std::vector<GpuInfo> GpusFromJson(const std::string& text);

}  // namespace feedtune::results
