// The results file's schema: the column tables that the store's INSERTs and
// SELECTs are made from, each row with how its record's field is read and
// bound, the migrations that build the tables (schema.cc, append-only), and
// the checks that decide whether a file may be opened.
// Internal to feedtune_results: nothing outside results/ includes it.
//
// Column names are a contract (docs/json-report.md, "The results file's
// schema"): other tools read the file with SQL.
#pragma once

#include <sqlite3.h>

#include <algorithm>
#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "results/sqlite.h"
#include "results/store.h"
#include "results/store_probe.h"

namespace feedtune::results {

constexpr int kRunFactsVersion = 14;      // run_facts: budget, max_workers, seed, safe limit
constexpr int kMoreRunFactsVersion = 15;  // run_facts: cpu, preflight, phases, timelines
constexpr int kBackgroundVersion = 16;    // other processes' CPU: repeats, trials, run_facts
constexpr int kWindowTreeVersion = 20;    // each window's own CPU: repeats.tree_cpu; trials.elapsed_s
constexpr int kTorchCostsVersion = 17;    // torch_costs per host; run_facts: the costs a run paid
constexpr int kDemandVersion = 18;        // run_facts: the neighbours' demand the busy mark rests on
constexpr int kRunOwnerVersion = 19;      // runs: the process running a run, and how a run ended
constexpr int kStoreProbeVersion = 21;    // run_facts: what a remote store looked like from this box
constexpr int kRunKindVersion = 22;       // runs: the kind of run, and a layout run's answer out of config_yaml
constexpr int kTrialStoreVersion = 23;    // trials: what each trial read from a remote store

// The stored forms of the columns that hold a name or JSON. Reading is
// tolerant on purpose: a damaged or newer value must not make a run unreadable.
//
// A stored start method; a name this version does not know reads as default.
loader::StartMethod StartMethodFromStored(const std::string& name);
// A stored cpu_binding; a name this version does not know reads as none.
loader::CpuBinding BindingFromName(const std::string& name);
// GPU detail as the machines.gpus_json column holds it.
std::string GpusToJson(const std::vector<GpuInfo>& gpus);
std::vector<GpuInfo> GpusFromJson(const std::string& text);

// One column of a table, in the order the store selects and inserts it: its
// name, the schema version whose migration added it, what a file before that
// version reads in its place (a read-only Store cannot migrate, yet must read
// every older file), and how a Record's field is read from it and bound to
// it. The stand-in is the value that migration stores for old rows, so a
// file reads alike migrated or not. A column added to a table is selected,
// read, inserted and bound from its one row here; its migration (schema.cc)
// adds it to the file. A column without `bind` is selected and read only
// (SelectOnly).
template <typename Record>
struct Column {
  const char* name;
  int since = 1;
  const char* stand_in = "NULL";
  void (*read)(const Statement& row, int column, Record& record) = nullptr;
  void (*bind)(Statement& statement, int index, const Record& record) = nullptr;
};

template <typename Member>
struct MemberClass;
template <typename Class, typename Type>
struct MemberClass<Type Class::*> {
  using type = Class;
};

// The column of the field that `First` (then each of `Rest`, into a nested
// struct) points to, read and bound as its type is (Statement::Get, BindAt):
// Field<&TrialRecord::knobs, &loader::Knobs::batch_size>("batch_size").
template <auto First, auto... Rest>
constexpr Column<typename MemberClass<decltype(First)>::type> Field(const char* name, int since = 1,
                                                                   const char* stand_in = "NULL") {
  using Record = typename MemberClass<decltype(First)>::type;
  return {name, since, stand_in,
          [](const Statement& row, int column, Record& record) {
            auto& field = ((record.*First).*....*Rest);
            field = row.Get<std::remove_cvref_t<decltype(field)>>(column);
          },
          [](Statement& statement, int index, const Record& record) {
            statement.BindAt(index, ((record.*First).*....*Rest));
          }};
}

// The column, read but never inserted: the row's own id, or what is set
// after the row is in (a run's best and baseline trials, inserted after it).
template <typename Record>
constexpr Column<Record> SelectOnly(Column<Record> column) {
  column.bind = nullptr;
  return column;
}

// "a, b, c": the columns of `table` a file of `version` has, each older one's
// stand-in in its place, for a SELECT.
template <typename Record, size_t N>
std::string ColumnList(const Column<Record> (&table)[N], int version = Store::kSchemaVersion) {
  std::string list;
  for (const Column<Record>& c : table) {
    list += list.empty() ? "" : ", ";
    list += version >= c.since ? c.name : c.stand_in;
  }
  return list;
}
// "?, ?, ?": one placeholder for each of `count` values.
std::string Placeholders(size_t count);
// "<verb> <table> (<leading>, <every column of `columns`>) VALUES (?, ...)"
// (verb "INSERT INTO", "INSERT OR REPLACE INTO"): `leading` names the
// values bound before the table's, the placeholders are counted for both.
template <typename Record, size_t N>
std::string InsertSql(std::string_view verb, std::string_view table, std::string_view leading,
                      const Column<Record> (&columns)[N]) {
  std::string names(leading);
  size_t count = leading.empty() ? 0 : std::count(leading.begin(), leading.end(), ',') + 1;
  for (const Column<Record>& c : columns) {
    if (c.bind == nullptr) continue;
    names += names.empty() ? "" : ", ";
    names += c.name;
    ++count;
  }
  return std::string(verb) + " " + std::string(table) + " (" + names + ") VALUES (" + Placeholders(count) + ")";
}
// Reads `record`'s fields from the row's columns `first`, first + 1, ...
template <typename Record, size_t N>
void ReadColumns(const Statement& row, int first, const Column<Record> (&table)[N], Record& record) {
  for (size_t i = 0; i < N; ++i) table[i].read(row, first + static_cast<int>(i), record);
}
// Binds `record`'s fields to the placeholders `first`, first + 1, ...
// (1-based), the table's inserted columns in order (InsertSql's).
template <typename Record, size_t N>
Statement& BindColumns(Statement& statement, int first, const Column<Record> (&table)[N], const Record& record) {
  int index = first;
  for (const Column<Record>& c : table) {
    if (c.bind != nullptr) c.bind(statement, index++, record);
  }
  return statement;
}

// The machines' columns after `hash` (the stored hash: selected and inserted
// apart, since Fingerprint::Hash() recomputes it).
inline constexpr Column<Fingerprint> kMachineColumns[] = {
    Field<&Fingerprint::hostname>("hostname"),
    // A machine without a label shows its hostname.
    {"label", 1, "NULL", [](const Statement& row, int c, Fingerprint& f) { f.label = row.Text(c); },
     [](Statement& s, int i, const Fingerprint& f) { s.BindAt(i, f.label.empty() ? f.hostname : f.label); }},
    Field<&Fingerprint::cpu_model>("cpu_model"),
    Field<&Fingerprint::logical_cpus>("logical_cpus"),
    Field<&Fingerprint::usable_cpus>("usable_cpus"),
    // NULL (no limit recorded) reads as 0, none.
    {"cgroup_cpu_limit", 1, "NULL",
     [](const Statement& row, int c, Fingerprint& f) { f.cgroup_cpu_limit = row.IsNull(c) ? 0 : row.Double(c); },
     [](Statement& s, int i, const Fingerprint& f) { s.BindAt(i, f.cgroup_cpu_limit); }},
    Field<&Fingerprint::numa_nodes>("numa_nodes"),
    Field<&Fingerprint::mem_total_bytes>("mem_total_bytes"),
    Field<&Fingerprint::cgroup_mem_limit_bytes>("cgroup_mem_limit_bytes"),
    Field<&Fingerprint::shm_bytes>("shm_bytes"),
    Field<&Fingerprint::nofile_limit>("nofile_limit"),
    Field<&Fingerprint::kernel>("kernel"),
    Field<&Fingerprint::gpu_name>("gpu_name"),
    Field<&Fingerprint::gpu_count>("gpu_count"),
    Field<&Fingerprint::gpu_mem_bytes>("gpu_mem_bytes"),
    Field<&Fingerprint::gpu_driver>("gpu_driver"),
    Field<&Fingerprint::pcie_link>("pcie_link"),
    Field<&Fingerprint::gpu_runtime>("gpu_runtime", 2, "''"),
    {"gpus_json", 2, "'[]'", [](const Statement& row, int c, Fingerprint& f) { f.gpus = GpusFromJson(row.Text(c)); },
     [](Statement& s, int i, const Fingerprint& f) { s.BindAt(i, GpusToJson(f.gpus)); }},
};

// A run's status by its name.
inline constexpr Column<RunRecord> kRunStatusColumn = {
    "status", 1, "NULL", [](const Statement& row, int c, RunRecord& run) { run.status = ParseRunStatus(row.Text(c)); },
    [](Statement& s, int i, const RunRecord& run) { s.BindAt(i, RunStatusName(run.status)); }};

// A run is inserted whole (BeginRun, the merge) from these rows.
inline constexpr Column<RunRecord> kRunColumns[] = {
    SelectOnly(Field<&RunRecord::id>("id")),
    Field<&RunRecord::machine_id>("machine_id"),
    Field<&RunRecord::workload_name>("workload_name"),
    Field<&RunRecord::workload_hash>("workload_hash"),
    Field<&RunRecord::config_yaml>("config_yaml"),
    Field<&RunRecord::backend>("backend"),
    Field<&RunRecord::version>("version"),
    Field<&RunRecord::started_at>("started_at"),
    // NULL while the run is running (or died).
    {"ended_at", 1, "NULL", [](const Statement& row, int c, RunRecord& run) { run.ended_at = row.Text(c); },
     [](Statement& s, int i, const RunRecord& run) { s.BindAt(i, NullIfEmpty(run.ended_at)); }},
    kRunStatusColumn,
    Field<&RunRecord::knee_workers>("knee_workers"),
    Field<&RunRecord::knee_samples_per_s>("knee_samples_per_s"),
    SelectOnly(Field<&RunRecord::best_trial_id>("best_trial_id")),
    SelectOnly(Field<&RunRecord::baseline_trial_id>("baseline_trial_id")),
    Field<&RunRecord::knee_kneedle_workers>("knee_kneedle_workers", 2),
    Field<&RunRecord::safe_max_workers>("safe_max_workers", 2),
    Field<&RunRecord::speedup>("speedup", 2),
    Field<&RunRecord::speedup_ci_low>("speedup_ci_low", 2),
    Field<&RunRecord::speedup_ci_high>("speedup_ci_high", 2),
    Field<&RunRecord::calibration_json>("calibration_json", 2, "''"),
    // The 1 -> 2 migration stores this uid, so a run has the same identity
    // whether its file was migrated or read as v1.
    Field<&RunRecord::uid>(
        "uid", 2,
        "'v1:' || (SELECT hash FROM machines WHERE machines.id = runs.machine_id) || ':' || started_at || ':' || id"),
    Field<&RunRecord::host, &HostIdentity::name>("host_name", 7,
                                                 "(SELECT label FROM machines WHERE machines.id = runs.machine_id)"),
    Field<&RunRecord::host, &HostIdentity::hostname>(
        "host_hostname", 7, "(SELECT hostname FROM machines WHERE machines.id = runs.machine_id)"),
    Field<&RunRecord::host, &HostIdentity::machine_id>("host_machine_id", 7, "''"),
    Field<&RunRecord::python, &PythonFacts::python_version>("python_version", 12, "''"),
    Field<&RunRecord::python, &PythonFacts::torch_version>("torch_version", 12, "''"),
    Field<&RunRecord::python, &PythonFacts::default_start_method>("default_start_method", 12, "''"),
    // v19: the process running it (results/run_owner.h); owner_pid NULL: not
    // known, and such a run is never judged left running.
    Field<&RunRecord::owner, &RunOwner::hostname>("owner_hostname", kRunOwnerVersion, "''"),
    Field<&RunRecord::owner, &RunOwner::boot_id>("owner_boot_id", kRunOwnerVersion, "''"),
    Field<&RunRecord::owner, &RunOwner::pid_namespace>("owner_pid_namespace", kRunOwnerVersion, "''"),
    {"owner_pid", kRunOwnerVersion, "NULL",
     [](const Statement& row, int c, RunRecord& run) { run.owner.pid = row.Optional<int64_t>(c).value_or(0); },
     [](Statement& s, int i, const RunRecord& run) {
       s.BindAt(i, run.owner.pid > 0 ? std::optional<int64_t>(run.owner.pid) : std::nullopt);
     }},
    {"owner_start_ticks", kRunOwnerVersion, "NULL",
     [](const Statement& row, int c, RunRecord& run) {
       run.owner.start_ticks = row.Optional<int64_t>(c).value_or(0);
     },
     [](Statement& s, int i, const RunRecord& run) {
       s.BindAt(i, run.owner.pid > 0 ? std::optional<int64_t>(run.owner.start_ticks) : std::nullopt);
     }},
    // NULL: nothing to add to the status.
    {"end_note", kRunOwnerVersion, "NULL",
     [](const Statement& row, int c, RunRecord& run) { run.end_note = row.Text(c); },
     [](Statement& s, int i, const RunRecord& run) { s.BindAt(i, NullIfEmpty(run.end_note)); }},
    // v22: an older file's stand-ins are RunColumns' (schema.cc: the answer
    // it kept in config_yaml tells a layout run).
    {"kind", kRunKindVersion, "'sweep'",
     [](const Statement& row, int c, RunRecord& run) { run.kind = ParseRunKind(row.Text(c)); },
     [](Statement& s, int i, const RunRecord& run) { s.BindAt(i, RunKindName(run.kind)); }},
    Field<&RunRecord::answer_json>("answer_json", kRunKindVersion, "''"),
};

// A trial's status by its name.
inline constexpr Column<TrialRecord> kTrialStatusColumn = {
    "status", 1, "NULL", [](const Statement& row, int c, TrialRecord& t) { t.status = ParseTrialStatus(row.Text(c)); },
    [](Statement& s, int i, const TrialRecord& t) { s.BindAt(i, TrialStatusName(t.status)); }};

// The trials' columns after `run_id` (selected and inserted apart: a merged
// trial takes its new run's id).
inline constexpr Column<TrialRecord> kTrialColumns[] = {
    Field<&TrialRecord::phase>("phase"),
    Field<&TrialRecord::knobs, &loader::Knobs::batch_size>("batch_size"),
    Field<&TrialRecord::knobs, &loader::Knobs::num_workers>("num_workers"),
    Field<&TrialRecord::knobs, &loader::Knobs::pin_memory>("pin_memory"),
    Field<&TrialRecord::knobs, &loader::Knobs::non_blocking>("non_blocking"),
    Field<&TrialRecord::knobs, &loader::Knobs::prefetch_factor>("prefetch_factor"),
    Field<&TrialRecord::knobs, &loader::Knobs::persistent_workers>("persistent_workers"),
    kTrialStatusColumn,
    Field<&TrialRecord::error>("error"),
    Field<&TrialRecord::samples_per_s>("samples_per_s"),
    Field<&TrialRecord::ci_low>("ci_low"),
    Field<&TrialRecord::ci_high>("ci_high"),
    Field<&TrialRecord::mb_per_s>("mb_per_s"),
    Field<&TrialRecord::gpu_idle_frac>("gpu_idle_frac"),
    Field<&TrialRecord::copy_s>("copy_s"),
    Field<&TrialRecord::wait_p50_us>("wait_p50_us"),
    Field<&TrialRecord::wait_p99_us>("wait_p99_us"),
    Field<&TrialRecord::worker_startup_s>("worker_startup_s"),
    Field<&TrialRecord::cpu_util>("cpu_util"),
    Field<&TrialRecord::peak_rss_bytes>("peak_rss_bytes"),
    Field<&TrialRecord::repeats>("repeats"),
    Field<&TrialRecord::decision>("decision"),
    Field<&TrialRecord::time_to_first_batch_s>("time_to_first_batch_s", 2),
    Field<&TrialRecord::epoch_boundary_ms>("epoch_boundary_ms", 2),
    Field<&TrialRecord::cv>("cv", 2),
    Field<&TrialRecord::worker_busy_frac>("worker_busy_frac", 2),
    Field<&TrialRecord::pinned_alloc_s>("pinned_alloc_s", 4),
    Field<&TrialRecord::batches_per_epoch>("batches_per_epoch", 5),
    Field<&TrialRecord::worker_rss_bytes>("worker_rss_bytes", 6),
    {"cpu_binding", 10, "'none'",
     [](const Statement& row, int c, TrialRecord& t) { t.knobs.cpu_binding = BindingFromName(row.Text(c)); },
     [](Statement& s, int i, const TrialRecord& t) {
       s.BindAt(i, std::string(loader::CpuBindingName(t.knobs.cpu_binding)));
     }},
    Field<&TrialRecord::knobs, &loader::Knobs::worker_threads>("worker_threads", 10, "0"),
    {"multiprocessing_context", 12, "'default'",
     [](const Statement& row, int c, TrialRecord& t) {
       t.knobs.multiprocessing_context = StartMethodFromStored(row.Text(c));
     },
     [](Statement& s, int i, const TrialRecord& t) {
       s.BindAt(i, std::string(loader::StartMethodName(t.knobs.multiprocessing_context)));
     }},
    Field<&TrialRecord::worker_rss_start_bytes>("worker_rss_start_bytes", 13),
    Field<&TrialRecord::worker_rss_peak_bytes>("worker_rss_peak_bytes", 13),
    Field<&TrialRecord::worker_rss_growth_bytes_per_epoch>("worker_rss_growth_bytes_per_epoch", 13),
    Field<&TrialRecord::worker_rss_epochs>("worker_rss_epochs", 13),
    Field<&TrialRecord::worker_rss_samples>("worker_rss_samples", 13, "0"),
    Field<&TrialRecord::worker_rss_in_consumer>("worker_rss_in_consumer", 13, "0"),
    Field<&TrialRecord::background_cpu>("background_cpu", kBackgroundVersion),
    Field<&TrialRecord::remeasured_windows>("remeasured_windows", kBackgroundVersion, "0"),
    Field<&TrialRecord::elapsed_s>("elapsed_s", kWindowTreeVersion),
    Field<&TrialRecord::knobs, &loader::Knobs::fetch_concurrency>("fetch_concurrency", kWindowTreeVersion, "1"),
    // v23: remote data's figures of the store (results/store_probe.h); NULL: local data, older trials.
    {"store_json", kTrialStoreVersion, "NULL",
     [](const Statement& row, int c, TrialRecord& t) {
       t.store = row.IsNull(c) ? std::nullopt : StoreFiguresFromJson(row.Text(c));
     },
     [](Statement& s, int i, const TrialRecord& t) {
       s.BindAt(i, t.store ? std::optional<std::string>(StoreFiguresJson(*t.store).dump()) : std::nullopt);
     }},
};

// The repeats' columns after `trial_id`.
inline constexpr Column<RepeatRecord> kRepeatColumns[] = {
    Field<&RepeatRecord::index>("idx"),
    Field<&RepeatRecord::samples_per_s>("samples_per_s"),
    Field<&RepeatRecord::mb_per_s>("mb_per_s"),
    Field<&RepeatRecord::gpu_idle_frac>("gpu_idle_frac"),
    Field<&RepeatRecord::wait_p50_us>("wait_p50_us"),
    Field<&RepeatRecord::wait_p99_us>("wait_p99_us"),
    Field<&RepeatRecord::wall_s>("wall_s"),
    Field<&RepeatRecord::outlier>("outlier"),
    Field<&RepeatRecord::background_cpu>("background_cpu", kBackgroundVersion),
    Field<&RepeatRecord::disturbed>("disturbed", kBackgroundVersion, "0"),
    Field<&RepeatRecord::remeasured>("remeasured", kBackgroundVersion, "0"),
    Field<&RepeatRecord::tree_cpu>("tree_cpu", kWindowTreeVersion),
};

// A node trial's figures (trial_nodes, from v9) after `trial_id`.
inline constexpr Column<NodeFigures> kNodeColumns[] = {
    Field<&NodeFigures::ranks>("ranks"),
    Field<&NodeFigures::slowest_rank_samples_per_s>("slowest_rank_samples_per_s"),
    Field<&NodeFigures::rank_spread>("rank_spread"),
    Field<&NodeFigures::processes>("processes"),
    Field<&NodeFigures::threads>("threads"),
    Field<&NodeFigures::shm_bytes>("shm_bytes"),
};

// Each rank of a node trial (trial_ranks, from v9) after `trial_id`.
inline constexpr Column<RankRecord> kRankColumns[] = {
    Field<&RankRecord::rank>("rank"),
    Field<&RankRecord::pid>("pid"),
    {"status", 1, "NULL", [](const Statement& row, int c, RankRecord& r) { r.status = ParseTrialStatus(row.Text(c)); },
     [](Statement& s, int i, const RankRecord& r) { s.BindAt(i, TrialStatusName(r.status)); }},
    Field<&RankRecord::error>("error"),
    Field<&RankRecord::samples_per_s>("samples_per_s"),
    Field<&RankRecord::gpu_idle_frac>("gpu_idle_frac"),
    Field<&RankRecord::wait_p50_us>("wait_p50_us"),
    Field<&RankRecord::wait_p99_us>("wait_p99_us"),
    Field<&RankRecord::cpu_mask>("cpu_mask"),
    Field<&RankRecord::worker_cpu_masks>("worker_cpu_masks"),
    Field<&RankRecord::processes>("processes"),
    Field<&RankRecord::threads>("threads"),
    Field<&RankRecord::shm_bytes>("shm_bytes"),
};

// The host-to-device bandwidth points (from v3) after `machine_id` and
// `measured_at` (inserted apart: the machine's id and the time of the
// measurement, not of a point).
inline constexpr Column<BandwidthRecord> kBandwidthColumns[] = {
    Field<&BandwidthRecord::bytes>("bytes"),
    Field<&BandwidthRecord::pinned>("pinned"),
    Field<&BandwidthRecord::non_blocking>("non_blocking"),
    Field<&BandwidthRecord::gb_per_s>("gb_per_s"),
};

// The observed runs (from v11) after `machine_id` (selected and inserted
// apart: a merged row takes its machine's id in the file it goes to).
inline constexpr Column<ObservedRecord> kObservedColumns[] = {
    Field<&ObservedRecord::uid>("uid"),
    Field<&ObservedRecord::host, &HostIdentity::name>("host_name"),
    Field<&ObservedRecord::host, &HostIdentity::hostname>("host_hostname"),
    Field<&ObservedRecord::host, &HostIdentity::machine_id>("host_machine_id"),
    Field<&ObservedRecord::workload_name>("workload_name"),
    Field<&ObservedRecord::knobs, &loader::Knobs::batch_size>("batch_size"),
    Field<&ObservedRecord::knobs, &loader::Knobs::num_workers>("num_workers"),
    Field<&ObservedRecord::knobs, &loader::Knobs::pin_memory>("pin_memory"),
    // NULL: the job did not say; the knob then keeps its default.
    {"non_blocking", 1, "NULL",
     [](const Statement& row, int c, ObservedRecord& o) {
       o.non_blocking = row.Optional<bool>(c);
       if (o.non_blocking) o.knobs.non_blocking = *o.non_blocking;
     },
     [](Statement& s, int i, const ObservedRecord& o) { s.BindAt(i, o.non_blocking); }},
    Field<&ObservedRecord::knobs, &loader::Knobs::prefetch_factor>("prefetch_factor"),
    Field<&ObservedRecord::knobs, &loader::Knobs::persistent_workers>("persistent_workers"),
    Field<&ObservedRecord::samples_per_s>("samples_per_s"),
    Field<&ObservedRecord::input_bound_frac>("input_bound_frac"),
    Field<&ObservedRecord::step_s>("step_s"),
    Field<&ObservedRecord::wait_s>("wait_s"),
    Field<&ObservedRecord::steps>("steps"),
    Field<&ObservedRecord::started_at>("started_at"),
    Field<&ObservedRecord::ended_at>("ended_at"),
    Field<&ObservedRecord::finished>("finished"),
    Field<&ObservedRecord::sweep_run_id>("sweep_run_id"),
    Field<&ObservedRecord::source>("source"),
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
    // v18: the neighbours' demand (BackgroundFacts::demand_cpu); NULL before.
    {"background_demand_cpu", "$.background.demand_cpu", kDemandVersion},
    {"background_demand_windows", "$.background.demand_windows", kDemandVersion},
    // v21: remote data: the store's probe before the baseline (storage::ProbeJson); NULL: local data.
    {"store_probe_json", "$.store_probe", kStoreProbeVersion},
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
}  // namespace feedtune::results
