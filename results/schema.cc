#include "results/schema.h"

#include <array>
#include <cinttypes>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <system_error>

#include <nlohmann/json.hpp>

#include "results/sqlite.h"

namespace feedtune::results {
namespace {

// Migration i takes the schema from version i to version i + 1. Entries are
// only ever appended: a released migration is never edited, because files in
// the field already carry its result.
constexpr std::array<const char*, Store::kSchemaVersion> kMigrations = {
    // 0 -> 1: the initial schema. Column names are a contract (docs/architecture.md).
    // Measurement columns are nullable because a NaN binds as NULL and a failed
    // trial may have nothing to measure.
    R"sql(
CREATE TABLE machines (
  id INTEGER PRIMARY KEY,
  hash TEXT NOT NULL UNIQUE,
  hostname TEXT NOT NULL,
  label TEXT NOT NULL,
  cpu_model TEXT NOT NULL,
  logical_cpus INTEGER NOT NULL,
  usable_cpus INTEGER NOT NULL,
  cgroup_cpu_limit REAL,
  numa_nodes INTEGER NOT NULL,
  mem_total_bytes INTEGER NOT NULL,
  cgroup_mem_limit_bytes INTEGER NOT NULL,
  shm_bytes INTEGER NOT NULL,
  nofile_limit INTEGER NOT NULL,
  kernel TEXT NOT NULL,
  gpu_name TEXT NOT NULL,
  gpu_count INTEGER NOT NULL,
  gpu_mem_bytes INTEGER NOT NULL,
  gpu_driver TEXT NOT NULL,
  pcie_link TEXT NOT NULL,
  first_seen TEXT NOT NULL
);
CREATE TABLE runs (
  id INTEGER PRIMARY KEY,
  machine_id INTEGER NOT NULL REFERENCES machines(id),
  workload_name TEXT NOT NULL,
  workload_hash TEXT NOT NULL,
  config_yaml TEXT NOT NULL,
  backend TEXT NOT NULL,
  version TEXT NOT NULL,
  started_at TEXT NOT NULL,
  ended_at TEXT,
  status TEXT NOT NULL CHECK (status IN ('running', 'done', 'interrupted', 'failed')),
  knee_workers INTEGER,
  knee_samples_per_s REAL,
  best_trial_id INTEGER REFERENCES trials(id),
  baseline_trial_id INTEGER REFERENCES trials(id)
);
CREATE TABLE trials (
  id INTEGER PRIMARY KEY,
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  phase TEXT NOT NULL,
  batch_size INTEGER NOT NULL,
  num_workers INTEGER NOT NULL,
  pin_memory INTEGER NOT NULL CHECK (pin_memory IN (0, 1)),
  non_blocking INTEGER NOT NULL CHECK (non_blocking IN (0, 1)),
  prefetch_factor INTEGER NOT NULL,
  persistent_workers INTEGER NOT NULL CHECK (persistent_workers IN (0, 1)),
  status TEXT NOT NULL CHECK (status IN ('ok', 'failed', 'skipped')),
  error TEXT,
  samples_per_s REAL,
  ci_low REAL,
  ci_high REAL,
  mb_per_s REAL,
  gpu_idle_frac REAL,
  copy_s REAL,
  wait_p50_us REAL,
  wait_p99_us REAL,
  worker_startup_s REAL,
  cpu_util REAL,
  peak_rss_bytes INTEGER NOT NULL,
  repeats INTEGER NOT NULL,
  decision TEXT NOT NULL
);
CREATE TABLE repeats (
  id INTEGER PRIMARY KEY,
  trial_id INTEGER NOT NULL REFERENCES trials(id) ON DELETE CASCADE,
  idx INTEGER NOT NULL,
  samples_per_s REAL,
  mb_per_s REAL,
  gpu_idle_frac REAL,
  wait_p50_us REAL,
  wait_p99_us REAL,
  wall_s REAL,
  outlier INTEGER NOT NULL CHECK (outlier IN (0, 1))
);
CREATE INDEX trials_run_id ON trials(run_id);
CREATE INDEX repeats_trial_id ON repeats(trial_id);
)sql",
    // 1 -> 2: the tuner's extra figures, per-GPU detail, and a run identity that
    // survives `feedtune merge`. Only ADD COLUMN, so v1 rows stay as they were;
    // a v1 run's uid is derived from what identified it there, the same string
    // the store derives when it reads a v1 file without migrating it.
    R"sql(
ALTER TABLE machines ADD COLUMN gpu_runtime TEXT NOT NULL DEFAULT '';
ALTER TABLE machines ADD COLUMN gpus_json TEXT NOT NULL DEFAULT '[]';
ALTER TABLE runs ADD COLUMN knee_kneedle_workers INTEGER;
ALTER TABLE runs ADD COLUMN safe_max_workers INTEGER;
ALTER TABLE runs ADD COLUMN speedup REAL;
ALTER TABLE runs ADD COLUMN speedup_ci_low REAL;
ALTER TABLE runs ADD COLUMN speedup_ci_high REAL;
ALTER TABLE runs ADD COLUMN calibration_json TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN uid TEXT;
UPDATE runs SET uid = 'v1:' || (SELECT hash FROM machines WHERE machines.id = runs.machine_id) ||
                      ':' || started_at || ':' || id;
CREATE UNIQUE INDEX runs_uid ON runs(uid);
ALTER TABLE trials ADD COLUMN time_to_first_batch_s REAL;
ALTER TABLE trials ADD COLUMN epoch_boundary_ms REAL;
ALTER TABLE trials ADD COLUMN cv REAL;
ALTER TABLE trials ADD COLUMN worker_busy_frac REAL;
)sql",
    // 2 -> 3: the host-to-device bandwidth matrix `feedtune machine` measures on
    // CUDA, and the cost of pinning memory, per machine (latest measurement).
    R"sql(
CREATE TABLE h2d_bandwidth (
  id INTEGER PRIMARY KEY,
  machine_id INTEGER NOT NULL REFERENCES machines(id) ON DELETE CASCADE,
  measured_at TEXT NOT NULL,
  bytes INTEGER NOT NULL,
  pinned INTEGER NOT NULL,
  non_blocking INTEGER NOT NULL,
  gb_per_s REAL
);
CREATE INDEX h2d_bandwidth_machine_id ON h2d_bandwidth(machine_id);
CREATE TABLE h2d_pinning (
  machine_id INTEGER PRIMARY KEY REFERENCES machines(id) ON DELETE CASCADE,
  measured_at TEXT NOT NULL,
  seconds_per_gib REAL
);
)sql",
    // 3 -> 4: the one-off time to allocate a trial's pinned pool (kept out of
    // the trial's measurement windows, so stored beside them).
    R"sql(
ALTER TABLE trials ADD COLUMN pinned_alloc_s REAL;
)sql",
    // 4 -> 5: batches in one epoch of the trial's loader, as the workload
    // reported it; the search reads it to see short, stepped epochs, so a
    // resumed run must find it.
    R"sql(
ALTER TABLE trials ADD COLUMN batches_per_epoch INTEGER;
)sql",
    // 5 -> 6: one worker's peak resident memory as a command measured it; the
    // safe limit of a command sweep rests on it, so a resumed run must find it.
    R"sql(
ALTER TABLE trials ADD COLUMN worker_rss_bytes REAL;
)sql",
    // 6 -> 7: the host that ran each run, apart from its hardware class (the
    // machines row): identical nodes share a class and stay separate hosts.
    // Older runs take their machine's label and hostname, which is what they
    // were shown as before.
    R"sql(
ALTER TABLE runs ADD COLUMN host_name TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN host_hostname TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN host_machine_id TEXT NOT NULL DEFAULT '';
UPDATE runs SET host_name = (SELECT label FROM machines WHERE machines.id = runs.machine_id),
                host_hostname = (SELECT hostname FROM machines WHERE machines.id = runs.machine_id);
)sql",
    // 7 -> 8: the bottleneck verdict of a run's best setting (tuner/measure/stage_runner.h,
    // results/verdict.h): the stage rates and advice as one JSON object, with
    // the bottleneck and the input-bound share as columns for queries.
    R"sql(
CREATE TABLE verdicts (
  run_id INTEGER PRIMARY KEY REFERENCES runs(id) ON DELETE CASCADE,
  bottleneck TEXT,
  runner_up TEXT,
  input_bound_frac REAL,
  verdict_json TEXT NOT NULL
);
)sql",
    // 8 -> 9: node trials (sweep.ranks > 1, tuner/measure/node_measurer.h): the node's figures
    // per trial, and one row per rank with what it ran on.
    R"sql(
CREATE TABLE trial_nodes (
  trial_id INTEGER PRIMARY KEY REFERENCES trials(id) ON DELETE CASCADE,
  ranks INTEGER NOT NULL,
  slowest_rank_samples_per_s REAL,
  rank_spread REAL,
  processes INTEGER NOT NULL,
  threads INTEGER NOT NULL,
  shm_bytes INTEGER NOT NULL
);
CREATE TABLE trial_ranks (
  id INTEGER PRIMARY KEY,
  trial_id INTEGER NOT NULL REFERENCES trials(id) ON DELETE CASCADE,
  rank INTEGER NOT NULL,
  pid INTEGER NOT NULL,
  status TEXT NOT NULL,
  error TEXT,
  samples_per_s REAL,
  gpu_idle_frac REAL,
  wait_p50_us REAL,
  wait_p99_us REAL,
  cpu_mask TEXT NOT NULL,
  worker_cpu_masks TEXT NOT NULL,
  processes INTEGER NOT NULL,
  threads INTEGER NOT NULL,
  shm_bytes INTEGER NOT NULL
);
CREATE INDEX trial_ranks_by_trial ON trial_ranks(trial_id);
)sql",
    // 9 -> 10: the two knobs a node sweep tunes around the loader
    // (tuner/search/search.h): each trial's CPU binding and intra-op threads per worker
    // (0 = the workload's own). Older trials ran on the inherited mask with the
    // workload's own threads, which the defaults say.
    R"sql(
ALTER TABLE trials ADD COLUMN cpu_binding TEXT NOT NULL DEFAULT 'none';
ALTER TABLE trials ADD COLUMN worker_threads INTEGER NOT NULL DEFAULT 0;
)sql",
    // 10 -> 11: observed runs: what a training job saw, written by
    // `feedtune observe` (python feedtune.watch). One row per job, named by
    // uid: a job that writes every K steps replaces its row. sweep_run_id has
    // no foreign key, since the run it names may live in another file.
    R"sql(
CREATE TABLE observed (
  id INTEGER PRIMARY KEY,
  uid TEXT NOT NULL UNIQUE,
  machine_id INTEGER NOT NULL REFERENCES machines(id),
  host_name TEXT NOT NULL,
  host_hostname TEXT NOT NULL,
  host_machine_id TEXT NOT NULL,
  workload_name TEXT NOT NULL,
  batch_size INTEGER NOT NULL,
  num_workers INTEGER NOT NULL,
  pin_memory INTEGER NOT NULL CHECK (pin_memory IN (0, 1)),
  non_blocking INTEGER CHECK (non_blocking IN (0, 1)),
  prefetch_factor INTEGER NOT NULL,
  persistent_workers INTEGER NOT NULL CHECK (persistent_workers IN (0, 1)),
  samples_per_s REAL,
  input_bound_frac REAL,
  step_s REAL,
  wait_s REAL,
  steps INTEGER NOT NULL,
  started_at TEXT NOT NULL,
  ended_at TEXT NOT NULL,
  finished INTEGER NOT NULL CHECK (finished IN (0, 1)),
  sweep_run_id INTEGER,
  source TEXT NOT NULL
);
CREATE INDEX observed_by_workload ON observed(workload_name);
)sql",
    // 11 -> 12: the workers' start method, a knob of command workloads
    // ('default' = the interpreter's), and the interpreter a Python command
    // ran under, as its preflight said ('' = not a Python command, or older).
    R"sql(
ALTER TABLE trials ADD COLUMN multiprocessing_context TEXT NOT NULL DEFAULT 'default';
ALTER TABLE runs ADD COLUMN python_version TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN torch_version TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN default_start_method TEXT NOT NULL DEFAULT '';
)sql",
    // 12 -> 13: the workers' memory over the trial: their private
    // RSS at the start, its peak, and its growth per epoch per worker with the
    // epochs and samples it rests on, and whether the series is the consumer's
// (thread workers) rather than worker processes' (results/records.h). NULL in older trials:
    // not measured; worker_rss_samples 0.
    R"sql(
ALTER TABLE trials ADD COLUMN worker_rss_start_bytes REAL;
ALTER TABLE trials ADD COLUMN worker_rss_peak_bytes REAL;
ALTER TABLE trials ADD COLUMN worker_rss_growth_bytes_per_epoch REAL;
ALTER TABLE trials ADD COLUMN worker_rss_epochs REAL;
ALTER TABLE trials ADD COLUMN worker_rss_samples INTEGER NOT NULL DEFAULT 0;
ALTER TABLE trials ADD COLUMN worker_rss_in_consumer INTEGER NOT NULL DEFAULT 0 CHECK (worker_rss_in_consumer IN (0, 1));
)sql",
    // 13 -> 14: the run's facts as typed columns (results/records.h RunFacts),
    // out of runs.calibration_json, where they were keys beside unrelated
    // figures. A table of its own rather than columns on runs: the facts are
    // groups (budget, seed, safe limit) that a run has or has not, one row per
    // run with a has_ flag per group keeps that visible, and runs stays the
    // run's identity and outcome. Migrate() fills it from the old JSON
    // (kRunFactColumns) and takes those keys out of calibration_json.
    R"sql(
CREATE TABLE run_facts (
  run_id INTEGER PRIMARY KEY REFERENCES runs(id) ON DELETE CASCADE,
  has_budget INTEGER NOT NULL CHECK (has_budget IN (0, 1)),
  budget_mem_available_bytes INTEGER,
  budget_shm_free_bytes INTEGER,
  budget_nofile_limit INTEGER,
  budget_fds_open INTEGER,
  budget_usable_cpus REAL,
  budget_batch_bytes INTEGER,
  budget_stream_buffer_bytes INTEGER,
  max_workers INTEGER,
  has_seed INTEGER NOT NULL CHECK (has_seed IN (0, 1)),
  seed_db TEXT,
  seed_run INTEGER,
  seed_run_uid TEXT,
  seed_run_host TEXT,
  seed_run_class TEXT,
  seed_match TEXT,
  seed_why TEXT,
  seed_source TEXT,
  seed_knee_workers INTEGER,
  seed_batch_size INTEGER,
  seed_num_workers INTEGER,
  seed_pin_memory INTEGER,
  seed_non_blocking INTEGER,
  seed_prefetch_factor INTEGER,
  seed_persistent_workers INTEGER,
  has_safe_limit INTEGER NOT NULL CHECK (has_safe_limit IN (0, 1)),
  safe_workers INTEGER,
  safe_basis TEXT,
  safe_trial INTEGER,
  safe_worker_rss_bytes INTEGER,
  safe_growth_bytes INTEGER
);
)sql",
    // 14 -> 15: the rest of what runs.calibration_json held, typed too
    // (results/records.h RunFacts): the workload's CPU calibration as
    // columns, the preflight warnings and the phases' decisions as JSON
    // arrays of a fixed form that the one reader parses, and the trace
    // excerpts as the JSON they are. Migrate() fills them from the old JSON
    // (kRunFactColumns) and takes those keys out of it; a key no field holds
    // (an older figure) stays.
    R"sql(
ALTER TABLE run_facts ADD COLUMN has_cpu INTEGER NOT NULL DEFAULT 0 CHECK (has_cpu IN (0, 1));
ALTER TABLE run_facts ADD COLUMN cpu_clock TEXT;
ALTER TABLE run_facts ADD COLUMN cpu_clock_read_ns REAL;
ALTER TABLE run_facts ADD COLUMN cpu_work_bytes_per_s REAL;
ALTER TABLE run_facts ADD COLUMN cpu_chunk_bytes INTEGER;
ALTER TABLE run_facts ADD COLUMN cpu_chunk_us REAL;
ALTER TABLE run_facts ADD COLUMN cpu_clock_overhead REAL;
ALTER TABLE run_facts ADD COLUMN cpu_check_requested_us REAL;
ALTER TABLE run_facts ADD COLUMN cpu_check_spent_us REAL;
ALTER TABLE run_facts ADD COLUMN cpu_calibration_s REAL;
ALTER TABLE run_facts ADD COLUMN preflight_json TEXT;
ALTER TABLE run_facts ADD COLUMN phases_json TEXT;
ALTER TABLE run_facts ADD COLUMN timelines_json TEXT;
)sql",
    // 15 -> 16: other processes' CPU (docs/measurement.md): per window, with
    // whether it was disturbed and re-measured; per trial, the median over
    // the windows in its figures and how many were re-measured; per run, the
    // sample before the baseline, its top consumers, the quiet reference,
    // the thresholds, the median over the windows and the busy mark. Older
    // rows read NULL (not measured), 0 for the flags and counts.
    R"sql(
ALTER TABLE repeats ADD COLUMN background_cpu REAL;
ALTER TABLE repeats ADD COLUMN disturbed INTEGER NOT NULL DEFAULT 0 CHECK (disturbed IN (0, 1));
ALTER TABLE repeats ADD COLUMN remeasured INTEGER NOT NULL DEFAULT 0 CHECK (remeasured IN (0, 1));
ALTER TABLE trials ADD COLUMN background_cpu REAL;
ALTER TABLE trials ADD COLUMN remeasured_windows INTEGER NOT NULL DEFAULT 0;
ALTER TABLE run_facts ADD COLUMN has_background INTEGER NOT NULL DEFAULT 0 CHECK (has_background IN (0, 1));
ALTER TABLE run_facts ADD COLUMN background_source TEXT;
ALTER TABLE run_facts ADD COLUMN background_start_cpu REAL;
ALTER TABLE run_facts ADD COLUMN background_sample_s REAL;
ALTER TABLE run_facts ADD COLUMN background_top_json TEXT;
ALTER TABLE run_facts ADD COLUMN background_reference_cpu REAL;
ALTER TABLE run_facts ADD COLUMN background_warn_cpu REAL;
ALTER TABLE run_facts ADD COLUMN background_disturbed_cpu REAL;
ALTER TABLE run_facts ADD COLUMN background_median_cpu REAL;
ALTER TABLE run_facts ADD COLUMN background_windows INTEGER;
ALTER TABLE run_facts ADD COLUMN background_remeasured INTEGER;
ALTER TABLE run_facts ADD COLUMN busy INTEGER CHECK (busy IN (0, 1));
)sql",
    // 16 -> 17: this box's torch DataLoader costs, per host (`feedtune
    // calibrate`, results/torch_costs.h; the columns follow TorchCostFields),
    // and the costs a run's native trials paid (NULL: none, the native core's
    // own figures).
    R"sql(
CREATE TABLE torch_costs (
  host TEXT PRIMARY KEY,
  measured_at TEXT NOT NULL,
  python_version TEXT NOT NULL,
  torch_version TEXT NOT NULL,
  start_method TEXT NOT NULL,
  worker_start_s REAL NOT NULL,
  in_process_batch_s REAL NOT NULL,
  in_process_sample_s REAL NOT NULL,
  in_process_byte_s REAL NOT NULL,
  worker_batch_s REAL NOT NULL,
  worker_sample_s REAL NOT NULL,
  worker_byte_s REAL NOT NULL,
  main_batch_s REAL NOT NULL,
  main_byte_s REAL NOT NULL,
  main_worker_start_s REAL NOT NULL,
  main_worker_stop_s REAL NOT NULL
);
ALTER TABLE run_facts ADD COLUMN torch_costs_json TEXT;
)sql",
    // 17 -> 18: the neighbours' demand that a run's busy mark rests on
    // (results/background.h); NULL in the runs before, marked on their median.
    R"sql(
ALTER TABLE run_facts ADD COLUMN background_demand_cpu REAL;
ALTER TABLE run_facts ADD COLUMN background_demand_windows INTEGER;
)sql",
    // 18 -> 19: the process that runs a run (results/run_owner.h): its host,
    // the kernel's boot, its pid namespace, its pid and start time, so that
    // the next open for writing can mark interrupted a run whose process
    // died without finishing it; and a note on how a run ended. Older runs
    // have no owner (owner_pid NULL) and are never judged.
    R"sql(
ALTER TABLE runs ADD COLUMN owner_hostname TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN owner_boot_id TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN owner_pid_namespace TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN owner_pid INTEGER;
ALTER TABLE runs ADD COLUMN owner_start_ticks INTEGER;
ALTER TABLE runs ADD COLUMN end_note TEXT;
)sql",
    // 19 -> 20: torch costs' fixed wait to stop the workers, and the figures
    // calibrate could not tell from zero ({"name": "why"}; rows before it did
    // not measure the fixed part); each window's own CPU (the trial's process
    // tree), so the busy mark reads the neighbours only where the box had
    // CPU left idle (results/background.h); each trial's end on the search's
    // clock, so a resumed run's time budget goes on from it (tuner/search/replay.h);
    // requests in flight per worker, the knob remote data needs (loader/options.h).
    R"sql(
ALTER TABLE torch_costs ADD COLUMN main_stop_fixed_s REAL NOT NULL DEFAULT 0;
ALTER TABLE torch_costs ADD COLUMN not_measured_json TEXT NOT NULL DEFAULT '{}';
UPDATE torch_costs SET not_measured_json =
  json_object('main_stop_fixed_s', 'measured before feedtune measured it (calibrate again to measure it)');
ALTER TABLE repeats ADD COLUMN tree_cpu REAL;
ALTER TABLE trials ADD COLUMN elapsed_s REAL;
ALTER TABLE trials ADD COLUMN fetch_concurrency INTEGER NOT NULL DEFAULT 1;
)sql",
    // 20 -> 21: remote data (docs/storage.md): what the store looked like
    // from this box before the baseline (first byte, MB/s per connection,
    // objects/s by requests in flight, retries), so that `compare` can put
    // machines side by side on the same bucket. NULL: local data, older runs.
    R"sql(
ALTER TABLE run_facts ADD COLUMN store_probe_json TEXT;
)sql",
    // 21 -> 22: the kind of run as a column, where a layout run was told by
    // its workload's name and its answer in config_yaml. Migrate() moves each
    // layout run's answer to answer_json (MoveLayoutAnswers).
    R"sql(
ALTER TABLE runs ADD COLUMN kind TEXT NOT NULL DEFAULT 'sweep' CHECK (kind IN ('sweep', 'layout'));
ALTER TABLE runs ADD COLUMN answer_json TEXT NOT NULL DEFAULT '';
)sql",
    // 22 -> 23: remote data (docs/storage.md): what each trial's loader read
    // from the store in its windows, added over every worker process (first
    // byte p50 and p99, MB/s per connection, requests, retries by cause), as
    // the run's probe shows the store alone. NULL: local data, older trials.
    R"sql(
ALTER TABLE trials ADD COLUMN store_json TEXT;
)sql",
};

// A `feedtune layout` run in a file before v22: its workload "layout NAME"
// and its config the answer, a JSON object with a "candidates" array (a
// sweep's config is YAML).
constexpr const char* kLayoutRunBeforeV22 =
    "(workload_name LIKE 'layout %' AND "
    "(CASE WHEN json_valid(config_yaml) THEN json_type(config_yaml, '$.candidates') END) = 'array')";

// `json` (an expression: runs.calibration_json, or one of these applied to
// it) without the keys run_facts took over in v14: what the migration leaves
// there, and what a read-only open of an older file reads, so a merge from it
// does not carry them twice.
std::string JsonWithoutRunFactsSql(const std::string& json = "calibration_json") {
  return "(CASE WHEN json_valid(" + json + ") AND json_type(" + json + ") = 'object' THEN "
         "json_remove(" + json + ", '$.budget_facts', '$.max_workers', '$.seed', '$.safe_limit') "
         "ELSE " + json + " END)";
}

// And without those v15 took over: the preflight, the phases, the timelines
// and the calibration's fields; a "cpu" object is removed once nothing else
// (an older figure) is left in it.
std::string JsonWithoutMoreRunFactsSql(const std::string& json = "calibration_json") {
  std::string paths = "'$.preflight', '$.phases', '$.timelines'";
  for (const RunFactColumn& c : kRunFactColumns) {
    if (std::string_view(c.json_path).starts_with("$.cpu.")) paths += std::string(", '") + c.json_path + "'";
  }
  const std::string stripped = "json_remove(" + json + ", " + paths + ")";
  return "(CASE WHEN json_valid(" + json + ") AND json_type(" + json + ") = 'object' THEN "
         "(CASE WHEN json_extract(" + stripped + ", '$.cpu') = '{}' THEN json_remove(" + stripped +
         ", '$.cpu') ELSE " + stripped + " END) ELSE " + json + " END)";
}

// A fact's expression read out of runs.calibration_json (of a file before the
// column existed). Text that is no JSON object reads as no facts.
std::string RunFactFromJsonSql(const RunFactColumn& c) {
  const std::string json = "(CASE WHEN json_valid(calibration_json) THEN calibration_json END)";
  const std::string path = std::string("'") + c.json_path + "'";
  const bool flag = std::string_view(c.column).starts_with("has_");
  return flag ? "COALESCE(json_type(" + json + ", " + path + ") = 'object', 0)"
              : "json_extract(" + json + ", " + path + ")";
}

// The facts of the columns added in schema `version`, read out of
// runs.calibration_json.
std::string RunFactsFromJsonSql(int version) {
  std::string exprs;
  for (const RunFactColumn& c : kRunFactColumns) {
    if (c.since != version) continue;
    exprs += std::string(exprs.empty() ? "" : ", ") + RunFactFromJsonSql(c);
  }
  return exprs;
}

// The run facts' columns in a file of `version`: run_facts' where the file
// has the column, else the old JSON's key from v2 (which added
// calibration_json), none before.
std::string RunFactsSelect(int version) {
  std::string exprs;
  for (const RunFactColumn& c : kRunFactColumns) {
    exprs += exprs.empty() ? "" : ", ";
    if (version >= kRunFactsVersion && c.since <= version) {
      exprs += c.column;
    } else {
      exprs += version >= 2 ? RunFactFromJsonSql(c) : "NULL";
    }
  }
  return exprs;
}

// True when the file starts with SQLite's magic string. Read directly so that
// a file that is not a database is never handed to sqlite (which could create
// -wal/-journal files beside it).
bool HasSqliteHeader(const std::filesystem::path& path) {
  static constexpr char kMagic[] = "SQLite format 3";  // 16 bytes with the NUL
  std::ifstream in(path, std::ios::binary);
  char header[sizeof(kMagic)] = {};
  if (!in.read(header, sizeof(header))) return false;
  return std::equal(std::begin(header), std::end(header), std::begin(kMagic));
}

std::string HexId(int64_t id) {
  char buffer[16];
  std::snprintf(buffer, sizeof(buffer), "0x%08" PRIx32,
                static_cast<uint32_t>(static_cast<int32_t>(id)));
  return buffer;
}

// Schema v22: each layout run's answer out of config_yaml into answer_json,
// and its kind said.
void MoveLayoutAnswers(sqlite3* db, const std::string& path) {
  const std::string move = std::string("UPDATE runs SET kind = 'layout', answer_json = config_yaml, config_yaml = '' "
                                       "WHERE ") + kLayoutRunBeforeV22;
  Exec(db, path, "upgrade schema to version 22: layout runs", move.c_str());
}

// Schema v14: the run facts the runs' calibration_json held, into run_facts,
// and out of the JSON, so they have one place (the rest stays there).
void MoveRunFactsOutOfJson(sqlite3* db, const std::string& path) {
  const std::string fill = "INSERT INTO run_facts (run_id, " + RunFactColumnNames(kRunFactsVersion) +
                           ") SELECT id, " + RunFactsFromJsonSql(kRunFactsVersion) + " FROM runs";
  Exec(db, path, "upgrade schema to version 14: run facts", fill.c_str());
  const std::string strip = "UPDATE runs SET calibration_json = " + JsonWithoutRunFactsSql();
  Exec(db, path, "upgrade schema to version 14: run facts", strip.c_str());
}

// Schema v15: the rest of the facts, likewise (each run has its run_facts row
// since v14; one is added where a run lacks it).
void MoveMoreRunFactsOutOfJson(sqlite3* db, const std::string& path) {
  const char* operation = "upgrade schema to version 15: run facts";
  Exec(db, path, operation,
       "INSERT OR IGNORE INTO run_facts (run_id, has_budget, has_seed, has_safe_limit) SELECT id, 0, 0, 0 FROM runs");
  const std::string fill = "UPDATE run_facts SET (" +
                           RunFactColumnNames(kMoreRunFactsVersion, kMoreRunFactsVersion) +
                           ") = (SELECT " + RunFactsFromJsonSql(kMoreRunFactsVersion) +
                           " FROM runs WHERE runs.id = run_facts.run_id)";
  Exec(db, path, operation, fill.c_str());
  const std::string strip = "UPDATE runs SET calibration_json = " + JsonWithoutMoreRunFactsSql();
  Exec(db, path, operation, strip.c_str());
}

// The objects of a JSON array kept as text, each read by `read`. Tolerant on
// purpose: a damaged column (not an array, an item not an object) reads as
// fewer items, never as an unreadable run.
template <typename T, typename Read>
std::vector<T> ObjectsFromJson(const std::string& text, Read read) {
  std::vector<T> items;
  const nlohmann::json list = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!list.is_array()) return items;
  for (const nlohmann::json& item : list) {
    if (item.is_object()) items.push_back(read(item));
  }
  return items;
}

}  // namespace

std::string RunFactColumnNames(int up_to, int from) {
  std::string names;
  for (const RunFactColumn& c : kRunFactColumns) {
    if (c.since >= from && c.since <= up_to) names += std::string(names.empty() ? "" : ", ") + c.column;
  }
  return names;
}

std::string Placeholders(size_t count) {
  std::string list;
  for (size_t i = 0; i < count; ++i) list += i == 0 ? "?" : ", ?";
  return list;
}

std::string RunColumns(int version) {
  std::string list;
  for (const Column<RunRecord>& c : kRunColumns) {
    list += list.empty() ? "" : ", ";
    const std::string_view name = c.name;
    if (version < kRunKindVersion && (name == "kind" || name == "answer_json" || name == "config_yaml")) {
      // A layout run of an older file, as the v22 migration reads it.
      const std::string layout = std::string("(CASE WHEN ") + kLayoutRunBeforeV22 + " THEN ";
      list += name == "kind"          ? layout + "'layout' ELSE 'sweep' END)"
              : name == "answer_json" ? layout + "config_yaml ELSE '' END)"
                                      : layout + "'' ELSE config_yaml END)";
    } else if (version < c.since) {
      list += c.stand_in;
    } else if (std::string_view(c.name) == "calibration_json" && version < kMoreRunFactsVersion) {
      // What the v14 and v15 migrations leave there, so a merge from an older
      // file does not carry the run facts twice.
      list += JsonWithoutMoreRunFactsSql(JsonWithoutRunFactsSql());
    } else {
      list += c.name;
    }
  }
  return list + ", " + RunFactsSelect(version);
}

std::string RunsTable(int version) {
  return version >= kRunFactsVersion ? "runs LEFT JOIN run_facts ON run_facts.run_id = runs.id" : "runs";
}

FileState CheckFile(sqlite3* db, const std::string& path) {
  // One statement, so one read snapshot: read one by one, a concurrent first
  // open could commit between them and make its fresh tables look foreign.
  int64_t application_id = 0;
  int64_t user_version = 0;
  int64_t objects = 0;
  try {
    Statement read(db, path, "read file header",
                   "SELECT (SELECT application_id FROM pragma_application_id()), "
                   "(SELECT user_version FROM pragma_user_version()), "
                   "(SELECT count(*) FROM sqlite_master)");
    if (read.Step()) {
      application_id = read.Int(0);
      user_version = read.Int(1);
      objects = read.Int(2);
    }
  } catch (const StoreError&) {
    // A damaged file or one with a forged header: sqlite reports NOTADB here.
    if ((sqlite3_errcode(db) & 0xff) == SQLITE_NOTADB) {
      throw StoreError(path +
                       ": not a feedtune results file (not an SQLite database); choose another "
                       "--db path");
    }
    throw;
  }
  if (application_id != Store::kApplicationId && objects > 0) {
    throw StoreError(path + ": not a feedtune results file (application_id " +
                     HexId(application_id) + "); refusing to modify it");
  }
  if (user_version > Store::kSchemaVersion) {
    throw StoreError(path + ": results file has schema version " + std::to_string(user_version) +
                     ", this feedtune understands up to " + std::to_string(Store::kSchemaVersion) +
                     "; upgrade feedtune");
  }
  return {application_id, static_cast<int>(user_version)};
}

void CheckHeader(const std::string& path) {
  std::error_code error;
  const auto size = std::filesystem::file_size(path, error);
  if (!error && size > 0 && !HasSqliteHeader(path)) {
    throw StoreError(path +
                     ": not a feedtune results file (not an SQLite database); choose another "
                     "--db path");
  }
}

void Migrate(sqlite3* db, const std::string& path) {
  Transaction transaction(db, path, "upgrade schema");
  // Read again under the write lock: another process may have migrated meanwhile.
  const int version = CheckFile(db, path).schema_version;
  for (int v = version; v < Store::kSchemaVersion; ++v) {
    Exec(db, path, "upgrade schema to version " + std::to_string(v + 1),
         kMigrations[static_cast<size_t>(v)]);
    if (v + 1 == kRunFactsVersion) MoveRunFactsOutOfJson(db, path);
    if (v + 1 == kMoreRunFactsVersion) MoveMoreRunFactsOutOfJson(db, path);
    if (v + 1 == kRunKindVersion) MoveLayoutAnswers(db, path);
  }
  // PRAGMAs take no bound parameters; these are compile-time constants.
  Exec(db, path, "mark file",
       ("PRAGMA application_id = " + std::to_string(Store::kApplicationId)).c_str());
  Exec(db, path, "mark file",
       ("PRAGMA user_version = " + std::to_string(Store::kSchemaVersion)).c_str());
  transaction.Commit();
}

loader::StartMethod StartMethodFromStored(const std::string& name) {
  loader::StartMethod method = loader::StartMethod::kDefault;
  return loader::StartMethodFromName(name, &method) ? method : loader::StartMethod::kDefault;
}

loader::CpuBinding BindingFromName(const std::string& name) {
  for (const auto b : {loader::CpuBinding::kSplit, loader::CpuBinding::kNuma}) {
    if (name == loader::CpuBindingName(b)) return b;
  }
  return loader::CpuBinding::kNone;
}

std::vector<std::string> PreflightFromJson(const std::string& json) {
  std::vector<std::string> warnings;
  const auto j = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (!j.is_array()) return warnings;
  for (const auto& w : j) {
    if (w.is_string()) warnings.push_back(w.get<std::string>());
  }
  return warnings;
}

std::optional<std::string> PreflightJson(const std::vector<std::string>& warnings) {
  if (warnings.empty()) return std::nullopt;
  return nlohmann::json(warnings).dump();
}
std::optional<std::string> PhasesJson(const std::vector<PhaseFact>& phases) {
  if (phases.empty()) return std::nullopt;
  return PhasesToJson(phases);
}

std::string ProcessCpuToJson(const std::vector<ProcessCpu>& top) {
  nlohmann::json list = nlohmann::json::array();
  for (const ProcessCpu& p : top) {
    list.push_back({{"name", p.name}, {"pid", p.pid}, {"processes", p.processes}, {"cpu", p.cpu}});
  }
  return list.dump();
}

std::vector<ProcessCpu> ProcessCpuFromJson(const std::string& json) {
  return ObjectsFromJson<ProcessCpu>(json, [](const nlohmann::json& item) {
    ProcessCpu p;
    p.name = item.value("name", "");
    p.pid = item.value("pid", int64_t{0});
    p.processes = item.value("processes", 1);
    p.cpu = item.value("cpu", 0.0);
    return p;
  });
}

std::string GpusToJson(const std::vector<GpuInfo>& gpus) {
  nlohmann::json list = nlohmann::json::array();
  for (const GpuInfo& g : gpus) {
    list.push_back({{"name", g.name},
                    {"mem_bytes", g.mem_bytes},
                    {"driver", g.driver},
                    {"runtime", g.runtime},
                    {"pci_bus_id", g.pci_bus_id},
                    {"link", g.link}});
  }
  return list.dump();
}

std::vector<GpuInfo> GpusFromJson(const std::string& text) {
  return ObjectsFromJson<GpuInfo>(text, [](const nlohmann::json& item) {
    GpuInfo g;
    g.name = item.value("name", "");
    g.mem_bytes = item.value("mem_bytes", int64_t{0});
    g.driver = item.value("driver", "");
    g.runtime = item.value("runtime", "");
    g.pci_bus_id = item.value("pci_bus_id", "");
    g.link = item.value("link", "");
    return g;
  });
}

}  // namespace feedtune::results
