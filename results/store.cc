#include "results/store.h"

#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <string_view>
#include <system_error>
#include <thread>
#include <type_traits>
#include <utility>

#include "results/sqlite_util.h"

namespace feedtune::results {
namespace {

// Migration i takes the schema from version i to version i + 1. Entries are
// only ever appended: a released migration is never edited, because files in
// the field already carry its result.
constexpr std::array<const char*, Store::kSchemaVersion> kMigrations = {
    // 0 -> 1: the initial schema. Column names are a contract (DESIGN.md §5).
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
    // 9 -> 10: the two knobs a node sweep tunes around the loader (issue 13,
    // tuner/search/search.h): each trial's CPU binding and intra-op threads per worker
    // (0 = the workload's own). Older trials ran on the inherited mask with the
    // workload's own threads, which the defaults say.
    R"sql(
ALTER TABLE trials ADD COLUMN cpu_binding TEXT NOT NULL DEFAULT 'none';
ALTER TABLE trials ADD COLUMN worker_threads INTEGER NOT NULL DEFAULT 0;
)sql",
    // 10 -> 11: observed runs (issue 22): what a training job saw, written by
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
    // 12 -> 13: the workers' memory over the trial (issue 23): their private
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
};

constexpr int kRunFactsVersion = 14;      // run_facts: budget, max_workers, seed, safe limit
constexpr int kMoreRunFactsVersion = 15;  // run_facts: cpu, preflight, phases, timelines

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
constexpr RunFactColumn kRunFactColumns[] = {
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

// The run_facts columns added from schema `from` to `up_to`, "has_budget,
// budget_mem_available_bytes, ..." (all of them by default).
std::string RunFactColumnNames(int up_to = Store::kSchemaVersion, int from = 0) {
  std::string names;
  for (const RunFactColumn& c : kRunFactColumns) {
    if (c.since >= from && c.since <= up_to) names += std::string(names.empty() ? "" : ", ") + c.column;
  }
  return names;
}

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

// ISO 8601 UTC, the form RunRecord documents for its timestamps.
constexpr const char* kNowSql = "strftime('%Y-%m-%dT%H:%M:%SZ', 'now')";

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

struct FileState {
  int64_t application_id = 0;
  int schema_version = 0;
};

// The checks that decide whether this file may be touched, done before any write.
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

// Refuses, without opening it with sqlite, a non-empty file that is not SQLite.
void CheckHeader(const std::string& path) {
  std::error_code error;
  const auto size = std::filesystem::file_size(path, error);
  if (!error && size > 0 && !HasSqliteHeader(path)) {
    throw StoreError(path +
                     ": not a feedtune results file (not an SQLite database); choose another "
                     "--db path");
  }
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

// Brings the schema up to kSchemaVersion and marks the file as feedtune's.
void Migrate(sqlite3* db, const std::string& path) {
  Transaction transaction(db, path, "upgrade schema");
  // Read again under the write lock: another process may have migrated meanwhile.
  const int version = CheckFile(db, path).schema_version;
  for (int v = version; v < Store::kSchemaVersion; ++v) {
    Exec(db, path, "upgrade schema to version " + std::to_string(v + 1),
         kMigrations[static_cast<size_t>(v)]);
    if (v + 1 == kRunFactsVersion) MoveRunFactsOutOfJson(db, path);
    if (v + 1 == kMoreRunFactsVersion) MoveMoreRunFactsOutOfJson(db, path);
  }
  // PRAGMAs take no bound parameters; these are compile-time constants.
  Exec(db, path, "mark file",
       ("PRAGMA application_id = " + std::to_string(Store::kApplicationId)).c_str());
  Exec(db, path, "mark file",
       ("PRAGMA user_version = " + std::to_string(Store::kSchemaVersion)).c_str());
  transaction.Commit();
}

// WAL lets `feedtune report` read while a sweep writes. Filesystems without
// shared memory keep the rollback journal, which is still safe, so the mode
// actually granted is not checked.
void EnableWal(sqlite3* db, const std::string& path) {
  // Switching modes needs the file to itself. While another connection's first
  // open is mid-migration, sqlite answers BUSY at once instead of calling the
  // busy handler (waiting while holding our read lock could deadlock), so the
  // wait is done here, with the same limit.
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(kBusyTimeoutMs);
  while (true) {
    const int rc = sqlite3_exec(db, "PRAGMA journal_mode = WAL", nullptr, nullptr, nullptr);
    if (rc == SQLITE_OK) return;
    if ((rc & 0xff) != SQLITE_BUSY || std::chrono::steady_clock::now() >= deadline) {
      ThrowSqlite(db, path, "enable WAL", rc);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

using DbHandle = std::unique_ptr<sqlite3, decltype(&sqlite3_close_v2)>;

// "file:/a%20b.db?immutable=1": a path as an sqlite URI, with the characters
// that URIs reserve percent-encoded.
std::string ImmutableUri(const std::string& path) {
  std::string uri = "file:";
  for (const unsigned char c : std::filesystem::absolute(path).string()) {
    if (std::isalnum(c) || c == '/' || c == '.' || c == '-' || c == '_' || c == '~') {
      uri += static_cast<char>(c);
    } else {
      char hex[4];
      std::snprintf(hex, sizeof hex, "%%%02X", c);
      uri += hex;
    }
  }
  return uri + "?immutable=1";
}

DbHandle OpenHandle(const std::string& path, int flags) {
  sqlite3* raw = nullptr;
  const int rc = sqlite3_open_v2(path.c_str(), &raw, flags | SQLITE_OPEN_NOMUTEX, nullptr);
  // sqlite hands back a handle even on failure; it must still be closed.
  DbHandle db(raw, &sqlite3_close_v2);
  if (rc != SQLITE_OK) {
    // "unable to open database file" says nothing of why; the descriptor
    // limit is the cause a user can least guess (the file is fine).
    const int error = db ? sqlite3_system_errno(db.get()) : 0;
    if (error == EMFILE || error == ENFILE) {
      throw StoreError(path + ": open: too many open files (" + std::strerror(error) +
                           "); raise the limit (ulimit -n) or close what holds descriptors",
                       rc);
    }
    ThrowSqlite(db.get(), path, "open", rc);
  }
  sqlite3_extended_result_codes(db.get(), 1);
  sqlite3_busy_timeout(db.get(), kBusyTimeoutMs);
  return db;
}

// Column lists shared by the INSERTs and SELECTs so that their order cannot drift apart.
constexpr const char* kMachineColumns =
    "hash, hostname, label, cpu_model, logical_cpus, usable_cpus, cgroup_cpu_limit, numa_nodes, "
    "mem_total_bytes, cgroup_mem_limit_bytes, shm_bytes, nofile_limit, kernel, gpu_name, "
    "gpu_count, gpu_mem_bytes, gpu_driver, pcie_link";
constexpr const char* kRunColumns =
    "id, machine_id, workload_name, workload_hash, config_yaml, backend, version, started_at, "
    "ended_at, status, knee_workers, knee_samples_per_s, best_trial_id, baseline_trial_id";
constexpr const char* kTrialColumns =
    "run_id, phase, batch_size, num_workers, pin_memory, non_blocking, prefetch_factor, "
    "persistent_workers, status, error, samples_per_s, ci_low, ci_high, mb_per_s, gpu_idle_frac, "
    "copy_s, wait_p50_us, wait_p99_us, worker_startup_s, cpu_util, peak_rss_bytes, repeats, "
    "decision";
constexpr const char* kRepeatColumns =
    "trial_id, idx, samples_per_s, mb_per_s, gpu_idle_frac, wait_p50_us, wait_p99_us, wall_s, "
    "outlier";
// Columns added by schema v2, and what a v1 file reads as in their place (a
// read-only Store cannot migrate, yet must read a v1 file).
constexpr const char* kMachineColumnsV2 = "gpu_runtime, gpus_json";
constexpr const char* kMachineColumnsV1Stand_in = "'', '[]'";
constexpr const char* kRunColumnsV2 =
    "knee_kneedle_workers, safe_max_workers, speedup, speedup_ci_low, speedup_ci_high, "
    "calibration_json, uid";
// The uid expression is the one the 1 -> 2 migration stores, so a run has the
// same identity whether its file was migrated or read as v1.
constexpr const char* kRunColumnsV1Stand_in =
    "NULL, NULL, NULL, NULL, NULL, '', 'v1:' || (SELECT hash FROM machines WHERE machines.id = "
    "runs.machine_id) || ':' || started_at || ':' || id";
constexpr const char* kTrialColumnsV2 =
    "time_to_first_batch_s, epoch_boundary_ms, cv, worker_busy_frac";
constexpr const char* kTrialColumnsV1Stand_in = "NULL, NULL, NULL, NULL";
constexpr const char* kTrialColumnsV4 = "pinned_alloc_s";
constexpr const char* kTrialColumnsV3Stand_in = "NULL";
constexpr const char* kTrialColumnsV5 = "batches_per_epoch";
constexpr const char* kTrialColumnsV4Stand_in = "NULL";
constexpr const char* kRunColumnsV7 = "host_name, host_hostname, host_machine_id";
// What the 6 -> 7 migration stores for older runs, so a file reads alike migrated or not.
constexpr const char* kRunColumnsV6Stand_in =
    "(SELECT label FROM machines WHERE machines.id = runs.machine_id), "
    "(SELECT hostname FROM machines WHERE machines.id = runs.machine_id), ''";
constexpr const char* kTrialColumnsV6 = "worker_rss_bytes";
constexpr const char* kTrialColumnsV5Stand_in = "NULL";
constexpr int kTrialKnobsVersion = 10;  // cpu_binding, worker_threads
constexpr const char* kTrialColumnsKnobs = "cpu_binding, worker_threads";
constexpr const char* kTrialColumnsKnobsStand_in = "'none', 0";
constexpr int kStartMethodVersion = 12;  // trials.multiprocessing_context; runs' Python facts
constexpr const char* kTrialColumnsV12 = "multiprocessing_context";
constexpr const char* kTrialColumnsV11Stand_in = "'default'";
constexpr const char* kRunColumnsV12 = "python_version, torch_version, default_start_method";
constexpr const char* kRunColumnsV11Stand_in = "'', '', ''";
constexpr int kWorkerMemoryVersion = 13;  // trials.worker_rss_start_bytes ... worker_rss_samples
constexpr const char* kTrialColumnsV13 =
    "worker_rss_start_bytes, worker_rss_peak_bytes, worker_rss_growth_bytes_per_epoch, worker_rss_epochs, "
    "worker_rss_samples, worker_rss_in_consumer";
constexpr const char* kTrialColumnsV12Stand_in = "NULL, NULL, NULL, NULL, 0, 0";

// A stored start method; a name this version does not know reads as default.
loader::StartMethod StartMethodFromStored(const std::string& name) {
  loader::StartMethod method = loader::StartMethod::kDefault;
  return loader::StartMethodFromName(name, &method) ? method : loader::StartMethod::kDefault;
}

// A stored cpu_binding; a name this version does not know reads as none.
loader::CpuBinding BindingFromName(const std::string& name) {
  for (const auto b : {loader::CpuBinding::kSplit, loader::CpuBinding::kNuma}) {
    if (name == loader::CpuBindingName(b)) return b;
  }
  return loader::CpuBinding::kNone;
}

std::string MachineColumns(int version) {
  return std::string(kMachineColumns) + ", " +
         (version >= 2 ? kMachineColumnsV2 : kMachineColumnsV1Stand_in);
}
std::string RunFactsSelect(int version);
std::string RunColumns(int version) {
  std::string v2 = kRunColumnsV2;
  if (version < kMoreRunFactsVersion) {
    v2.replace(v2.find("calibration_json"), 16, JsonWithoutMoreRunFactsSql(JsonWithoutRunFactsSql()));
  }
  return std::string(kRunColumns) + ", " + (version >= 2 ? v2 : kRunColumnsV1Stand_in) + ", " +
         (version >= 7 ? kRunColumnsV7 : kRunColumnsV6Stand_in) + ", " +
         (version >= kStartMethodVersion ? kRunColumnsV12 : kRunColumnsV11Stand_in) + ", " +
         RunFactsSelect(version);
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
// What RunColumns() selects from: the runs and, from v14, their facts.
std::string RunsTable(int version) {
  return version >= kRunFactsVersion ? "runs LEFT JOIN run_facts ON run_facts.run_id = runs.id" : "runs";
}
std::string TrialColumns(int version) {
  return std::string(kTrialColumns) + ", " + (version >= 2 ? kTrialColumnsV2 : kTrialColumnsV1Stand_in) +
         ", " + (version >= 4 ? kTrialColumnsV4 : kTrialColumnsV3Stand_in) + ", " +
         (version >= 5 ? kTrialColumnsV5 : kTrialColumnsV4Stand_in) + ", " +
         (version >= 6 ? kTrialColumnsV6 : kTrialColumnsV5Stand_in) + ", " +
         (version >= kTrialKnobsVersion ? kTrialColumnsKnobs : kTrialColumnsKnobsStand_in) + ", " +
         (version >= kStartMethodVersion ? kTrialColumnsV12 : kTrialColumnsV11Stand_in) + ", " +
         (version >= kWorkerMemoryVersion ? kTrialColumnsV13 : kTrialColumnsV12Stand_in);
}

// The preflight warnings as preflight_json holds them (WriteRunFacts): a
// JSON array of strings; anything else reads as none.
std::vector<std::string> PreflightFromJson(const std::string& json) {
  std::vector<std::string> warnings;
  const auto j = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (!j.is_array()) return warnings;
  for (const auto& w : j) {
    if (w.is_string()) warnings.push_back(w.get<std::string>());
  }
  return warnings;
}

// And their one written form.
std::optional<std::string> PreflightJson(const std::vector<std::string>& warnings) {
  if (warnings.empty()) return std::nullopt;
  return nlohmann::json(warnings).dump();
}
std::optional<std::string> PhasesJson(const std::vector<PhaseFact>& phases) {
  if (phases.empty()) return std::nullopt;
  return PhasesToJson(phases);
}

// The one reader of a run's facts: kRunFactColumns' columns from `first` on
// (NULL where a run has no row, or an old JSON lacked the key).
RunFacts ReadRunFacts(const Statement& row, int first) {
  int c = first;
  const auto i64 = [&row, &c]() { return row.Optional<int64_t>(c++).value_or(0); };
  const auto text = [&row, &c]() { return row.Optional<std::string>(c++).value_or(""); };
  const auto flag = [&row, &c]() { return row.Optional<int>(c++).value_or(0) != 0; };
  RunFacts facts;
  if (flag()) {
    facts.budget.emplace();
    BudgetFacts& b = *facts.budget;
    b.mem_available_bytes = i64();
    b.shm_free_bytes = i64();
    b.nofile_limit = i64();
    b.fds_open = i64();
    b.usable_cpus = row.Optional<double>(c++).value_or(0);
    b.batch_bytes = i64();
    b.stream_buffer_bytes = i64();  // absent before issue 23
  }
  c = first + RunFactIndex("max_workers");
  facts.max_workers = row.Optional<int>(c++);
  if (flag()) {
    facts.seed.emplace();
    SeedFacts& seed = *facts.seed;
    seed.db_path = text();
    seed.run_id = i64();
    seed.run_uid = text();
    seed.run_host = text();
    seed.run_class = text();
    seed.match = text();
    seed.why = text();
    seed.source = text();
    seed.knee_workers = row.Optional<int>(c++).value_or(1);
    loader::Knobs& k = seed.best;
    k.batch_size = row.Optional<int>(c++).value_or(k.batch_size);
    k.num_workers = row.Optional<int>(c++).value_or(k.num_workers);
    k.pin_memory = flag();
    k.non_blocking = flag();
    k.prefetch_factor = row.Optional<int>(c++).value_or(k.prefetch_factor);
    k.persistent_workers = flag();
  }
  c = first + RunFactIndex("has_safe_limit");
  if (flag()) {
    SafeLimit& safe = facts.safe_limit.emplace();
    safe.workers = row.Optional<int>(c++);
    safe.basis = text();
    safe.basis_trial = row.Optional<int64_t>(c++);
    safe.worker_rss_bytes = row.Optional<int64_t>(c++);
    safe.growth_bytes = row.Optional<int64_t>(c++);
  }
  c = first + RunFactIndex("has_cpu");
  const bool has_cpu = flag();
  if (has_cpu && !row.IsNull(first + RunFactIndex("cpu_work_bytes_per_s"))) {  // a calibration, not an older figure
    CpuCalibrationFacts& cpu = facts.cpu.emplace();
    const auto number = [&row, &c]() { return row.Optional<double>(c++).value_or(0); };
    cpu.clock = text();
    cpu.clock_read_ns = number();
    cpu.work_bytes_per_s = number();
    cpu.chunk_bytes = i64();
    cpu.chunk_us = number();
    cpu.clock_overhead = number();
    cpu.check_requested_us = number();
    cpu.check_spent_us = number();
    cpu.calibration_s = number();
  }
  c = first + RunFactIndex("preflight_json");
  facts.preflight = PreflightFromJson(text());
  facts.phases = PhasesFromJson(text());
  facts.timelines_json = text();
  return facts;
}

// A member of a group the run may lack, for binding: NULL without the group.
template <typename Group, typename T>
std::optional<T> Field(const std::optional<Group>& group, T Group::*member) {
  return group ? std::optional<T>((*group).*member) : std::nullopt;
}
template <typename Group, typename T>
std::optional<T> Field(const Group* group, T Group::*member) {
  return group != nullptr ? std::optional<T>(group->*member) : std::nullopt;
}

RunRecord ReadRun(const Statement& row) {
  RunRecord run;
  run.id = row.Int(0);
  run.machine_id = row.Int(1);
  run.workload_name = row.Text(2);
  run.workload_hash = row.Text(3);
  run.config_yaml = row.Text(4);
  run.backend = row.Text(5);
  run.version = row.Text(6);
  run.started_at = row.Text(7);
  run.ended_at = row.Text(8);
  run.status = ParseRunStatus(row.Text(9));
  run.knee_workers = row.Optional<int>(10);
  run.knee_samples_per_s = row.Optional<double>(11);
  run.best_trial_id = row.Optional<int64_t>(12);
  run.baseline_trial_id = row.Optional<int64_t>(13);
  run.knee_kneedle_workers = row.Optional<int>(14);
  run.safe_max_workers = row.Optional<int>(15);
  run.speedup = row.Optional<double>(16);
  run.speedup_ci_low = row.Optional<double>(17);
  run.speedup_ci_high = row.Optional<double>(18);
  run.calibration_json = row.Text(19);
  run.uid = row.Text(20);
  run.host.name = row.Text(21);
  run.host.hostname = row.Text(22);
  run.host.machine_id = row.Text(23);
  run.python = {row.Text(24), row.Text(25), row.Text(26)};
  run.facts = ReadRunFacts(row, 27);
  return run;
}

// Now in the ISO 8601 UTC form of kNowSql, for values needed before the INSERT.
std::string CurrentUtc() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

// A new run's identity: the machine, the start time, and 64 random bits, so
// two runs started in the same second on one machine still differ.
std::string NewRunUid(const std::string& machine_hash, const std::string& started_at) {
  std::random_device random;
  const uint64_t bits = (static_cast<uint64_t>(random()) << 32) ^ random();
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(bits));
  return machine_hash + ":" + started_at + ":" + hex;
}

// GPU detail as the machines.gpus_json column holds it.
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

// Tolerant on purpose: a damaged detail column must not make the run unreadable.
std::vector<GpuInfo> GpusFromJson(const std::string& text) {
  std::vector<GpuInfo> gpus;
  const nlohmann::json list = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!list.is_array()) return gpus;
  for (const nlohmann::json& item : list) {
    if (!item.is_object()) continue;
    GpuInfo g;
    g.name = item.value("name", "");
    g.mem_bytes = item.value("mem_bytes", int64_t{0});
    g.driver = item.value("driver", "");
    g.runtime = item.value("runtime", "");
    g.pci_bus_id = item.value("pci_bus_id", "");
    g.link = item.value("link", "");
    gpus.push_back(std::move(g));
  }
  return gpus;
}

// Reads the columns of MachineColumns() (starting at column 0).
Fingerprint ReadMachine(const Statement& select) {
  Fingerprint f;
  // Column 0 is the stored hash; Hash() recomputes it from the fields below.
  f.hostname = select.Text(1);
  f.label = select.Text(2);
  f.cpu_model = select.Text(3);
  f.logical_cpus = select.Int32(4);
  f.usable_cpus = select.Int32(5);
  f.cgroup_cpu_limit = select.IsNull(6) ? 0 : select.Double(6);
  f.numa_nodes = select.Int32(7);
  f.mem_total_bytes = select.Int(8);
  f.cgroup_mem_limit_bytes = select.Int(9);
  f.shm_bytes = select.Int(10);
  f.nofile_limit = select.Int(11);
  f.kernel = select.Text(12);
  f.gpu_name = select.Text(13);
  f.gpu_count = select.Int32(14);
  f.gpu_mem_bytes = select.Int(15);
  f.gpu_driver = select.Text(16);
  f.pcie_link = select.Text(17);
  f.gpu_runtime = select.Text(18);
  f.gpus = GpusFromJson(select.Text(19));
  return f;
}

}  // namespace

void Store::DbCloser::operator()(sqlite3* db) const { sqlite3_close_v2(db); }

Store::Store(sqlite3* db, std::string path, int schema_version)
    : db_(db), statements_(std::make_unique<StatementCache>()), path_(std::move(path)), schema_version_(schema_version) {}
Store::Store(Store&&) noexcept = default;
Store& Store::operator=(Store&&) noexcept = default;
Store::~Store() = default;

Store Store::Open(const std::string& path) {
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) {
    std::error_code error;
    std::filesystem::create_directories(parent, error);
    if (error) {
      throw StoreError(path + ": cannot create folder " + parent.string() + ": " + error.message() +
                       "; choose another --db path");
    }
  }
  CheckHeader(path);
  DbHandle db = OpenHandle(path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
  // Until the checks pass, closing must not checkpoint someone else's WAL file
  // into their database.
  sqlite3_db_config(db.get(), SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, nullptr);
  const FileState state = CheckFile(db.get(), path);
  sqlite3_db_config(db.get(), SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 0, nullptr);

  EnableWal(db.get(), path);
  Exec(db.get(), path, "enable foreign keys", "PRAGMA foreign_keys = ON");
  if (state.schema_version < kSchemaVersion || state.application_id != kApplicationId) {
    Migrate(db.get(), path);
  }
  return Store(db.release(), path, kSchemaVersion);
}

Store Store::OpenImmutable(const std::string& path) {
  CheckHeader(path);
  DbHandle db = OpenHandle(ImmutableUri(path), SQLITE_OPEN_READONLY | SQLITE_OPEN_URI);
  const int version = CheckFile(db.get(), path).schema_version;
  if (version < 1) {
    throw StoreError(path + ": results file has schema version " + std::to_string(version) +
                     " (empty); run `feedtune sweep CONFIG --db " + path + "` to fill it");
  }
  // No foreign keys to enforce: nothing is written through it.
  return Store(db.release(), path, version);
}

Store Store::OpenReadOnly(const std::string& path) {
  std::error_code error;
  if (!std::filesystem::exists(path, error)) {
    throw StoreError(path + ": no results file; run `feedtune sweep CONFIG --db " + path +
                     "` first");
  }
  CheckHeader(path);
  DbHandle db = OpenHandle(path, SQLITE_OPEN_READONLY);
  int version = 0;
  try {
    version = CheckFile(db.get(), path).schema_version;
  } catch (const StoreError&) {
    // A WAL-mode file needs its -shm file beside it, which sqlite cannot
    // create in a read-only folder. Such a file is read as immutable instead:
    // nothing can be writing to it there, and a finished sweep leaves no WAL.
    const std::string folder = std::filesystem::path(path).parent_path().string();
    if (access(folder.empty() ? "." : folder.c_str(), W_OK) == 0) throw;
    db = OpenHandle(ImmutableUri(path), SQLITE_OPEN_READONLY | SQLITE_OPEN_URI);
    version = CheckFile(db.get(), path).schema_version;
  }
  if (version < 1) {
    // An empty file, or one whose creation never committed: nothing to read.
    throw StoreError(path + ": results file has schema version " + std::to_string(version) +
                     " (empty); run `feedtune sweep CONFIG --db " + path + "` to fill it");
  }
  // Older versions are read as they are (read-only cannot migrate): the
  // queries stand in defaults for the columns they lack.
  Exec(db.get(), path, "enable foreign keys", "PRAGMA foreign_keys = ON");
  return Store(db.release(), path, version);
}

int64_t Store::UpsertMachine(const Fingerprint& fingerprint) {
  const std::string hash = fingerprint.Hash();
  Transaction transaction(db_.get(), path_, "record machine");
  int64_t id = 0;
  {
    Statement find(db_.get(), path_, "record machine", "SELECT id FROM machines WHERE hash = ?");
    find.BindAll(hash);
    if (find.Step()) id = find.Int(0);
  }
  if (id != 0) {
    if (!fingerprint.label.empty()) {
      Statement update(db_.get(), path_, "update machine label",
                       "UPDATE machines SET label = ? WHERE id = ?");
      update.BindAll(fingerprint.label, id).Run();
    }
  } else {
    id = InsertMachine(hash, fingerprint, std::nullopt);
  }
  transaction.Commit();
  return id;
}

int64_t Store::InsertMachine(const std::string& hash, const Fingerprint& f,
                             const std::optional<std::string>& first_seen) {
  const std::string sql = std::string("INSERT INTO machines (") + MachineColumns(kSchemaVersion) +
                          ", first_seen) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, "
                          "?, ?, ?, ?, ?, COALESCE(?, " +
                          kNowSql + "))";
  Statement insert(*statements_, db_.get(), path_, "record machine", sql);
  insert
      .BindAll(hash, f.hostname, f.label.empty() ? f.hostname : f.label, f.cpu_model,
               f.logical_cpus, f.usable_cpus, f.cgroup_cpu_limit, f.numa_nodes, f.mem_total_bytes,
               f.cgroup_mem_limit_bytes, f.shm_bytes, f.nofile_limit, f.kernel, f.gpu_name,
               f.gpu_count, f.gpu_mem_bytes, f.gpu_driver, f.pcie_link, f.gpu_runtime,
               GpusToJson(f.gpus), first_seen)
      .Run();
  return sqlite3_last_insert_rowid(db_.get());
}

void Store::SetBandwidth(int64_t machine_id, const std::vector<BandwidthRecord>& points,
                         double pin_seconds_per_gib) {
  Transaction transaction(db_.get(), path_, "record bandwidth");
  Statement clear(db_.get(), path_, "record bandwidth", "DELETE FROM h2d_bandwidth WHERE machine_id = ?");
  clear.BindAll(machine_id).Run();
  const std::string insert_sql = std::string(
                                     "INSERT INTO h2d_bandwidth (machine_id, measured_at, bytes, pinned, "
                                     "non_blocking, gb_per_s) VALUES (?, ") +
                                 kNowSql + ", ?, ?, ?, ?)";
  for (const BandwidthRecord& p : points) {
    Statement insert(db_.get(), path_, "record bandwidth", insert_sql.c_str());
    insert.BindAll(machine_id, p.bytes, p.pinned, p.non_blocking, p.gb_per_s).Run();
  }
  const std::string pin_sql = std::string(
                                  "INSERT OR REPLACE INTO h2d_pinning (machine_id, measured_at, seconds_per_gib) "
                                  "VALUES (?, ") +
                              kNowSql + ", ?)";
  Statement pin(db_.get(), path_, "record bandwidth", pin_sql.c_str());
  pin.BindAll(machine_id, pin_seconds_per_gib).Run();
  transaction.Commit();
}

std::vector<BandwidthRecord> Store::LoadBandwidth(int64_t machine_id) const {
  std::vector<BandwidthRecord> points;
  if (schema_version_ < 3) return points;  // an older file opened read-only has no such table
  Statement select(db_.get(), path_, "read bandwidth",
                   "SELECT bytes, pinned, non_blocking, gb_per_s FROM h2d_bandwidth WHERE machine_id = ? "
                   "ORDER BY id");
  select.BindAll(machine_id);
  while (select.Step()) {
    points.push_back({select.Int(0), select.Int(1) != 0, select.Int(2) != 0, select.Double(3)});
  }
  return points;
}

int64_t Store::BeginRun(const RunRecord& run) {
  Transaction transaction(db_.get(), path_, "record run start");
  std::string machine_hash;
  HostIdentity host = run.host;
  {
    Statement find(db_.get(), path_, "record run start",
                   "SELECT hash, label, hostname FROM machines WHERE id = ?");
    find.BindAll(run.machine_id);
    if (!find.Step()) {
      throw StoreError(path_ + ": record run start: no machine " + std::to_string(run.machine_id) +
                       " in the file (call UpsertMachine first)");
    }
    machine_hash = find.Text(0);
    if (host.name.empty()) host.name = find.Text(1);
    if (host.hostname.empty()) host.hostname = find.Text(2);
  }
  const std::string started_at = run.started_at.empty() ? CurrentUtc() : run.started_at;
  const std::string uid = run.uid.empty() ? NewRunUid(machine_hash, started_at) : run.uid;
  const std::string sql =
      "INSERT INTO runs (machine_id, workload_name, workload_hash, config_yaml, backend, "
      "version, started_at, status, calibration_json, uid, host_name, host_hostname, "
      "host_machine_id, python_version, torch_version, default_start_method) "
      "VALUES (?, ?, ?, ?, ?, ?, ?, 'running', ?, ?, ?, ?, ?, ?, ?, ?)";
  Statement insert(db_.get(), path_, "record run start", sql.c_str());
  insert
      .BindAll(run.machine_id, run.workload_name, run.workload_hash, run.config_yaml, run.backend,
               run.version, started_at, run.calibration_json, uid, host.name, host.hostname,
               host.machine_id, run.python.python_version, run.python.torch_version,
               run.python.default_start_method)
      .Run();
  const int64_t id = sqlite3_last_insert_rowid(db_.get());
  WriteRunFacts(id, run.facts, "record run start");
  transaction.Commit();
  return id;
}

int64_t Store::AddTrial(int64_t run_id, const TrialRecord& trial) {
  const std::string operation = "record trial (" + trial.phase + ")";
  Transaction transaction(db_.get(), path_, operation);
  const int64_t trial_id = InsertTrial(run_id, trial, operation);
  transaction.Commit();
  return trial_id;
}

int64_t Store::InsertTrial(int64_t run_id, const TrialRecord& trial, const std::string& operation) {
  const std::string sql = "INSERT INTO trials (" + TrialColumns(kSchemaVersion) +
                          ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, "
                          "?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)";
  int64_t trial_id = 0;
  {
    Statement insert(*statements_, db_.get(), path_, operation, sql);
    const TrialRecord& t = trial;
    const loader::Knobs& k = trial.knobs;
    insert
        .BindAll(run_id, t.phase, k.batch_size, k.num_workers, k.pin_memory, k.non_blocking,
                 k.prefetch_factor, k.persistent_workers, TrialStatusName(t.status), t.error, t.samples_per_s,
                 t.ci_low, t.ci_high, t.mb_per_s, t.gpu_idle_frac, t.copy_s, t.wait_p50_us,
                 t.wait_p99_us, t.worker_startup_s, t.cpu_util, t.peak_rss_bytes, t.repeats,
                 t.decision, t.time_to_first_batch_s, t.epoch_boundary_ms, t.cv,
                 t.worker_busy_frac, t.pinned_alloc_s, t.batches_per_epoch, t.worker_rss_bytes,
                 std::string(loader::CpuBindingName(k.cpu_binding)), k.worker_threads,
                 std::string(loader::StartMethodName(k.multiprocessing_context)), t.worker_rss_start_bytes,
                 t.worker_rss_peak_bytes, t.worker_rss_growth_bytes_per_epoch, t.worker_rss_epochs,
                 t.worker_rss_samples, t.worker_rss_in_consumer)
        .Run();
    trial_id = sqlite3_last_insert_rowid(db_.get());
  }
  if (!trial.repeat_rows.empty()) {
    const std::string repeat_sql = std::string("INSERT INTO repeats (") + kRepeatColumns +
                                   ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)";
    Statement insert(*statements_, db_.get(), path_, operation, repeat_sql);
    for (const RepeatRecord& r : trial.repeat_rows) {
      insert
          .BindAll(trial_id, r.index, r.samples_per_s, r.mb_per_s, r.gpu_idle_frac, r.wait_p50_us,
                   r.wait_p99_us, r.wall_s, r.outlier)
          .Run();
      insert.Reset();
    }
  }
  if (trial.node) InsertNode(trial_id, *trial.node, operation);
  return trial_id;
}

void Store::InsertNode(int64_t trial_id, const NodeFigures& node, const std::string& operation) {
  Statement(*statements_, db_.get(), path_, operation,
            "INSERT INTO trial_nodes (trial_id, ranks, slowest_rank_samples_per_s, rank_spread, processes, "
            "threads, shm_bytes) VALUES (?, ?, ?, ?, ?, ?, ?)")
      .BindAll(trial_id, node.ranks, node.slowest_rank_samples_per_s, node.rank_spread, node.processes,
               node.threads, node.shm_bytes)
      .Run();
  Statement insert(*statements_, db_.get(), path_, operation,
                   "INSERT INTO trial_ranks (trial_id, rank, pid, status, error, samples_per_s, gpu_idle_frac, "
                   "wait_p50_us, wait_p99_us, cpu_mask, worker_cpu_masks, processes, threads, shm_bytes) "
                   "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
  for (const RankRecord& r : node.rank_rows) {
    insert
        .BindAll(trial_id, r.rank, r.pid, TrialStatusName(r.status), r.error, r.samples_per_s, r.gpu_idle_frac,
                 r.wait_p50_us, r.wait_p99_us, r.cpu_mask, r.worker_cpu_masks, r.processes, r.threads, r.shm_bytes)
        .Run();
    insert.Reset();
  }
}

void Store::LoadNodes(int64_t run_id, std::vector<TrialRecord>& trials,
                      const std::map<int64_t, size_t>& index_by_id) const {
  if (schema_version_ < 9) return;  // an older file opened read-only has no node tables
  Statement nodes(db_.get(), path_, "load node trials",
                  "SELECT n.trial_id, n.ranks, n.slowest_rank_samples_per_s, n.rank_spread, n.processes, "
                  "n.threads, n.shm_bytes FROM trial_nodes n JOIN trials t ON n.trial_id = t.id "
                  "WHERE t.run_id = ?");
  nodes.BindAll(run_id);
  while (nodes.Step()) {
    const auto it = index_by_id.find(nodes.Int(0));
    if (it == index_by_id.end()) continue;
    NodeFigures node;
    node.ranks = nodes.Int32(1);
    node.slowest_rank_samples_per_s = nodes.Double(2);
    node.rank_spread = nodes.Double(3);
    node.processes = nodes.Int32(4);
    node.threads = nodes.Int32(5);
    node.shm_bytes = nodes.Int(6);
    trials[it->second].node = std::move(node);
  }
  Statement ranks(db_.get(), path_, "load node trials",
                  "SELECT r.trial_id, r.rank, r.pid, r.status, r.error, r.samples_per_s, r.gpu_idle_frac, "
                  "r.wait_p50_us, r.wait_p99_us, r.cpu_mask, r.worker_cpu_masks, r.processes, r.threads, "
                  "r.shm_bytes FROM trial_ranks r JOIN trials t ON r.trial_id = t.id WHERE t.run_id = ? "
                  "ORDER BY r.trial_id, r.rank");
  ranks.BindAll(run_id);
  while (ranks.Step()) {
    const auto it = index_by_id.find(ranks.Int(0));
    if (it == index_by_id.end() || !trials[it->second].node) continue;
    RankRecord r;
    r.rank = ranks.Int32(1);
    r.pid = ranks.Int(2);
    r.status = ParseTrialStatus(ranks.Text(3));
    r.error = ranks.Optional<std::string>(4);
    r.samples_per_s = ranks.Double(5);
    r.gpu_idle_frac = ranks.Double(6);
    r.wait_p50_us = ranks.Double(7);
    r.wait_p99_us = ranks.Double(8);
    r.cpu_mask = ranks.Text(9);
    r.worker_cpu_masks = ranks.Text(10);
    r.processes = ranks.Int32(11);
    r.threads = ranks.Int32(12);
    r.shm_bytes = ranks.Int(13);
    trials[it->second].node->rank_rows.push_back(std::move(r));
  }
}

void Store::FinishRun(const RunRecord& run) {
  Transaction transaction(db_.get(), path_, "record run end");
  const std::string sql = std::string("UPDATE runs SET ended_at = COALESCE(?, ") + kNowSql +
                          "), status = ?, knee_workers = ?, knee_samples_per_s = ?, "
                          "best_trial_id = ?, baseline_trial_id = ?, knee_kneedle_workers = ?, "
                          "safe_max_workers = ?, speedup = ?, speedup_ci_low = ?, "
                          "speedup_ci_high = ?, calibration_json = COALESCE(?, calibration_json) "
                          "WHERE id = ?";
  Statement update(db_.get(), path_, "record run end", sql.c_str());
  // An empty calibration keeps what BeginRun stored rather than erasing it.
  update
      .BindAll(NullIfEmpty(run.ended_at), RunStatusName(run.status), run.knee_workers, run.knee_samples_per_s,
               run.best_trial_id, run.baseline_trial_id, run.knee_kneedle_workers,
               run.safe_max_workers, run.speedup, run.speedup_ci_low, run.speedup_ci_high,
               NullIfEmpty(run.calibration_json), run.id)
      .Run();
  if (sqlite3_changes(db_.get()) == 0) {
    throw StoreError(path_ + ": record run end: no run " + std::to_string(run.id) + " in the file");
  }
  WriteRunFacts(run.id, run.facts, "record run end");
  transaction.Commit();
}

void Store::WriteRunFacts(int64_t run_id, const RunFacts& facts, const std::string& operation) {
  std::string sql = "INSERT OR REPLACE INTO run_facts (run_id, " + RunFactColumnNames() + ") VALUES (?";
  for (size_t i = 0; i < std::size(kRunFactColumns); ++i) sql += ", ?";
  sql += ")";
  const std::optional<BudgetFacts>& b = facts.budget;
  const std::optional<SeedFacts>& seed = facts.seed;
  const loader::Knobs* best = seed ? &seed->best : nullptr;
  const std::optional<SafeLimit>& safe = facts.safe_limit;
  const std::optional<CpuCalibrationFacts>& cpu = facts.cpu;
  using K = loader::Knobs;
  using C = CpuCalibrationFacts;
  Statement insert(*statements_, db_.get(), path_, operation, sql);
  insert
      .BindAll(run_id, b.has_value(), Field(b, &BudgetFacts::mem_available_bytes),
               Field(b, &BudgetFacts::shm_free_bytes), Field(b, &BudgetFacts::nofile_limit),
               Field(b, &BudgetFacts::fds_open), Field(b, &BudgetFacts::usable_cpus),
               Field(b, &BudgetFacts::batch_bytes), Field(b, &BudgetFacts::stream_buffer_bytes), facts.max_workers,
               seed.has_value(), Field(seed, &SeedFacts::db_path), Field(seed, &SeedFacts::run_id),
               Field(seed, &SeedFacts::run_uid), Field(seed, &SeedFacts::run_host),
               Field(seed, &SeedFacts::run_class), Field(seed, &SeedFacts::match), Field(seed, &SeedFacts::why),
               Field(seed, &SeedFacts::source), Field(seed, &SeedFacts::knee_workers), Field(best, &K::batch_size),
               Field(best, &K::num_workers), Field(best, &K::pin_memory), Field(best, &K::non_blocking),
               Field(best, &K::prefetch_factor), Field(best, &K::persistent_workers), safe.has_value(),
               Field(safe, &SafeLimit::workers), Field(safe, &SafeLimit::basis), Field(safe, &SafeLimit::basis_trial),
               Field(safe, &SafeLimit::worker_rss_bytes), Field(safe, &SafeLimit::growth_bytes), cpu.has_value(),
               Field(cpu, &C::clock), Field(cpu, &C::clock_read_ns), Field(cpu, &C::work_bytes_per_s),
               Field(cpu, &C::chunk_bytes), Field(cpu, &C::chunk_us), Field(cpu, &C::clock_overhead),
               Field(cpu, &C::check_requested_us), Field(cpu, &C::check_spent_us), Field(cpu, &C::calibration_s),
               PreflightJson(facts.preflight), PhasesJson(facts.phases), NullIfEmpty(facts.timelines_json))
      .Run();
}

std::optional<RunRecord> Store::LoadRun(std::optional<int64_t> id) const {
  const std::string sql = "SELECT " + RunColumns(schema_version_) + " FROM " + RunsTable(schema_version_) +
                          (id.has_value() ? " WHERE id = ?" : " ORDER BY id DESC LIMIT 1");
  Statement select(db_.get(), path_, "load run", sql.c_str());
  if (id.has_value()) select.BindAll(*id);
  if (!select.Step()) return std::nullopt;
  return ReadRun(select);
}

std::vector<RunRecord> Store::LoadRuns() const {
  const std::string sql = "SELECT " + RunColumns(schema_version_) + " FROM " + RunsTable(schema_version_) +
                          " ORDER BY id";
  Statement select(db_.get(), path_, "load runs", sql.c_str());
  std::vector<RunRecord> runs;
  while (select.Step()) runs.push_back(ReadRun(select));
  return runs;
}

std::vector<TrialRecord> Store::LoadTrials(int64_t run_id) const {
  const std::string sql =
      "SELECT id, " + TrialColumns(schema_version_) + " FROM trials WHERE run_id = ? ORDER BY id";
  Statement select(db_.get(), path_, "load trials", sql.c_str());
  select.BindAll(run_id);
  std::vector<TrialRecord> trials;
  std::map<int64_t, size_t> index_by_id;
  while (select.Step()) {
    TrialRecord t;
    t.id = select.Int(0);
    t.run_id = select.Int(1);
    t.phase = select.Text(2);
    t.knobs.batch_size = select.Int32(3);
    t.knobs.num_workers = select.Int32(4);
    t.knobs.pin_memory = select.Bool(5);
    t.knobs.non_blocking = select.Bool(6);
    t.knobs.prefetch_factor = select.Int32(7);
    t.knobs.persistent_workers = select.Bool(8);
    t.status = ParseTrialStatus(select.Text(9));
    t.error = select.Optional<std::string>(10);
    t.samples_per_s = select.Double(11);
    t.ci_low = select.Double(12);
    t.ci_high = select.Double(13);
    t.mb_per_s = select.Double(14);
    t.gpu_idle_frac = select.Double(15);
    t.copy_s = select.Double(16);
    t.wait_p50_us = select.Double(17);
    t.wait_p99_us = select.Double(18);
    t.worker_startup_s = select.Double(19);
    t.cpu_util = select.Double(20);
    t.peak_rss_bytes = select.Int(21);
    t.repeats = select.Int32(22);
    t.decision = select.Text(23);
    t.time_to_first_batch_s = select.Double(24);
    t.epoch_boundary_ms = select.Double(25);
    t.cv = select.Double(26);
    t.worker_busy_frac = select.Double(27);
    t.pinned_alloc_s = select.Double(28);
    t.batches_per_epoch = select.Optional<int64_t>(29);
    t.worker_rss_bytes = select.Double(30);
    t.knobs.cpu_binding = BindingFromName(select.Text(31));
    t.knobs.worker_threads = select.Int32(32);
    t.knobs.multiprocessing_context = StartMethodFromStored(select.Text(33));
    t.worker_rss_start_bytes = select.Double(34);
    t.worker_rss_peak_bytes = select.Double(35);
    t.worker_rss_growth_bytes_per_epoch = select.Double(36);
    t.worker_rss_epochs = select.Double(37);
    t.worker_rss_samples = select.Int32(38);
    t.worker_rss_in_consumer = select.Bool(39);
    index_by_id[t.id] = trials.size();
    trials.push_back(std::move(t));
  }

  // One query for all repeats of the run rather than one per trial.
  Statement repeats(db_.get(), path_, "load repeats",
                    "SELECT r.trial_id, r.idx, r.samples_per_s, r.mb_per_s, r.gpu_idle_frac, "
                    "r.wait_p50_us, r.wait_p99_us, r.wall_s, r.outlier FROM repeats r "
                    "JOIN trials t ON r.trial_id = t.id WHERE t.run_id = ? "
                    "ORDER BY r.trial_id, r.idx, r.id");
  repeats.BindAll(run_id);
  while (repeats.Step()) {
    const auto it = index_by_id.find(repeats.Int(0));
    if (it == index_by_id.end()) continue;
    RepeatRecord r;
    r.index = repeats.Int32(1);
    r.samples_per_s = repeats.Double(2);
    r.mb_per_s = repeats.Double(3);
    r.gpu_idle_frac = repeats.Double(4);
    r.wait_p50_us = repeats.Double(5);
    r.wait_p99_us = repeats.Double(6);
    r.wall_s = repeats.Double(7);
    r.outlier = repeats.Bool(8);
    trials[it->second].repeat_rows.push_back(r);
  }
  LoadNodes(run_id, trials, index_by_id);
  return trials;
}

std::optional<Fingerprint> Store::LoadMachine(int64_t machine_id) const {
  const std::string sql = "SELECT " + MachineColumns(schema_version_) + " FROM machines WHERE id = ?";
  Statement select(db_.get(), path_, "load machine", sql.c_str());
  select.BindAll(machine_id);
  if (!select.Step()) return std::nullopt;
  return ReadMachine(select);
}

std::vector<StoredMachine> Store::LoadMachines() const {
  const std::string sql =
      "SELECT " + MachineColumns(schema_version_) + ", id, first_seen FROM machines ORDER BY id";
  Statement select(db_.get(), path_, "load machines", sql.c_str());
  std::vector<StoredMachine> machines;
  while (select.Step()) {
    StoredMachine m;
    m.fingerprint = ReadMachine(select);
    m.hash = select.Text(0);
    m.id = select.Int(20);
    m.first_seen = select.Text(21);
    machines.push_back(std::move(m));
  }
  return machines;
}

void Store::SaveVerdict(int64_t run_id, const Verdict& verdict) {
  Transaction transaction(db_.get(), path_, "record verdict");
  InsertVerdict(run_id, verdict, "record verdict");
  transaction.Commit();
}

void Store::InsertVerdict(int64_t run_id, const Verdict& verdict, const std::string& operation) {
  Statement insert(*statements_, db_.get(), path_, operation,
                   "INSERT OR REPLACE INTO verdicts (run_id, bottleneck, runner_up, input_bound_frac, verdict_json) "
                   "VALUES (?, ?, ?, ?, ?)");
  const auto text = [](const std::string& value) {
    return value.empty() ? std::nullopt : std::optional<std::string>(value);
  };
  insert.BindAll(run_id, text(verdict.bottleneck), text(verdict.runner_up), verdict.input_bound_frac,
                 VerdictToJson(verdict))
      .Run();
}

int64_t Store::FindOrInsertMachine(const Fingerprint& fingerprint, const std::string& operation) {
  const std::string hash = fingerprint.Hash();
  Statement find(db_.get(), path_, operation, "SELECT id FROM machines WHERE hash = ?");
  find.BindAll(hash);
  if (find.Step()) return find.Int(0);
  return InsertMachine(hash, fingerprint, std::nullopt);
}

std::vector<int64_t> Store::AddObserved(const Fingerprint& machine, const std::vector<ObservedRecord>& observed) {
  const std::string operation = "record observed runs";
  Transaction transaction(db_.get(), path_, operation);
  const int64_t machine_id = FindOrInsertMachine(machine, operation);
  std::vector<int64_t> ids;
  for (ObservedRecord row : observed) {
    if (row.host.name.empty()) row.host.name = machine.label.empty() ? machine.hostname : machine.label;
    if (row.host.hostname.empty()) row.host.hostname = machine.hostname;
    if (row.host.machine_id.empty()) row.host.machine_id = machine.machine_id;
    if (row.started_at.empty()) row.started_at = CurrentUtc();
    if (row.ended_at.empty()) row.ended_at = CurrentUtc();
    if (row.uid.empty()) row.uid = NewRunUid(machine.Hash(), row.started_at);
    InsertObserved(machine_id, row, operation + " (" + row.workload_name + ")");
    ids.push_back(sqlite3_last_insert_rowid(db_.get()));
  }
  transaction.Commit();
  return ids;
}

void Store::InsertObserved(int64_t machine_id, const ObservedRecord& o, const std::string& operation) {
  // REPLACE: the row of an earlier write of the same job (same uid) gives way.
  Statement insert(*statements_, db_.get(), path_, operation,
                   "INSERT OR REPLACE INTO observed (uid, machine_id, host_name, host_hostname, host_machine_id, "
                   "workload_name, batch_size, num_workers, pin_memory, non_blocking, prefetch_factor, "
                   "persistent_workers, samples_per_s, input_bound_frac, step_s, wait_s, steps, started_at, "
                   "ended_at, finished, sweep_run_id, source) "
                   "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
  insert
      .BindAll(o.uid, machine_id, o.host.name, o.host.hostname, o.host.machine_id, o.workload_name,
               o.knobs.batch_size, o.knobs.num_workers, o.knobs.pin_memory, o.non_blocking,
               o.knobs.prefetch_factor, o.knobs.persistent_workers, o.samples_per_s, o.input_bound_frac,
               o.step_s, o.wait_s, o.steps, o.started_at, o.ended_at, o.finished, o.sweep_run_id, o.source)
      .Run();
}

std::vector<ObservedRecord> Store::LoadObserved() const {
  std::vector<ObservedRecord> rows;
  if (schema_version_ < 11) return rows;  // an older file opened read-only has no such table
  Statement select(db_.get(), path_, "load observed runs",
                   "SELECT id, uid, machine_id, host_name, host_hostname, host_machine_id, workload_name, "
                   "batch_size, num_workers, pin_memory, non_blocking, prefetch_factor, persistent_workers, "
                   "samples_per_s, input_bound_frac, step_s, wait_s, steps, started_at, ended_at, finished, "
                   "sweep_run_id, source FROM observed ORDER BY id");
  while (select.Step()) {
    ObservedRecord o;
    o.id = select.Int(0);
    o.uid = select.Text(1);
    o.machine_id = select.Int(2);
    o.host = {select.Text(3), select.Text(4), select.Text(5)};
    o.workload_name = select.Text(6);
    o.knobs.batch_size = select.Int32(7);
    o.knobs.num_workers = select.Int32(8);
    o.knobs.pin_memory = select.Bool(9);
    o.non_blocking = select.Optional<bool>(10);
    o.knobs.prefetch_factor = select.Int32(11);
    o.knobs.persistent_workers = select.Bool(12);
    if (o.non_blocking) o.knobs.non_blocking = *o.non_blocking;
    o.samples_per_s = select.Double(13);
    o.input_bound_frac = select.Double(14);
    o.step_s = select.Double(15);
    o.wait_s = select.Double(16);
    o.steps = select.Int(17);
    o.started_at = select.Text(18);
    o.ended_at = select.Text(19);
    o.finished = select.Bool(20);
    o.sweep_run_id = select.Optional<int64_t>(21);
    o.source = select.Text(22);
    rows.push_back(std::move(o));
  }
  return rows;
}

std::optional<Verdict> Store::LoadVerdict(int64_t run_id) const {
  // An older file opened read-only has no such table.
  Statement table(db_.get(), path_, "read verdict",
                  "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'verdicts'");
  if (!table.Step() || table.Int(0) == 0) return std::nullopt;
  Statement select(db_.get(), path_, "read verdict", "SELECT verdict_json FROM verdicts WHERE run_id = ?");
  select.BindAll(run_id);
  if (!select.Step()) return std::nullopt;
  return VerdictFromJson(select.Text(0));
}

}  // namespace feedtune::results
