#include "results/store.h"

#include <sqlite3.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <iterator>
#include <map>
#include <random>
#include <string_view>
#include <system_error>
#include <utility>

#include "results/schema.h"
#include "results/sqlite.h"

namespace feedtune::results {
namespace {

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
    b.stream_buffer_bytes = i64();  // absent in runs older than the streaming formats
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
  c = first + RunFactIndex("has_background");
  if (flag()) {
    BackgroundFacts& bg = facts.background.emplace();
    const auto figure = [&row, &c]() { return row.Optional<double>(c++).value_or(std::nan("")); };
    bg.source = text();
    bg.start_cpu = figure();
    bg.sample_s = row.Optional<double>(c++).value_or(0);
    bg.top = ProcessCpuFromJson(text());
    bg.reference_cpu = figure();
    bg.warn_cpu = row.Optional<double>(c++).value_or(0);
    bg.disturbed_cpu = row.Optional<double>(c++).value_or(0);
    bg.median_cpu = figure();
    bg.windows = row.Optional<int>(c++).value_or(0);
    bg.remeasured = row.Optional<int>(c++).value_or(0);
    bg.busy = flag();
  }
  c = first + RunFactIndex("torch_costs_json");
  facts.torch_costs = TorchCostsFromJson(text());
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
  static_assert(std::size(kRunColumns) == 27, "a run column was added: read it here");
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
  run.facts = ReadRunFacts(row, static_cast<int>(std::size(kRunColumns)));
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

// Reads the columns of kMachineColumns (starting at column 0).
Fingerprint ReadMachine(const Statement& select) {
  static_assert(std::size(kMachineColumns) == 20, "a machine column was added: read it here and bind it in InsertMachine");
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
  const std::string sql = "INSERT INTO machines (" + ColumnList(kMachineColumns) + ", first_seen) VALUES (" +
                          Placeholders(std::size(kMachineColumns)) + ", COALESCE(?, " + kNowSql + "))";
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
  const std::string sql = InsertSql("trials", kTrialColumns);
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
                 t.worker_rss_samples, t.worker_rss_in_consumer, t.background_cpu, t.remeasured_windows)
        .Run();
    trial_id = sqlite3_last_insert_rowid(db_.get());
  }
  if (!trial.repeat_rows.empty()) {
    const std::string repeat_sql = InsertSql("repeats", kRepeatColumns);
    Statement insert(*statements_, db_.get(), path_, operation, repeat_sql);
    for (const RepeatRecord& r : trial.repeat_rows) {
      insert
          .BindAll(trial_id, r.index, r.samples_per_s, r.mb_per_s, r.gpu_idle_frac, r.wait_p50_us,
                   r.wait_p99_us, r.wall_s, r.outlier, r.background_cpu, r.disturbed, r.remeasured)
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
  const std::string sql = "INSERT OR REPLACE INTO run_facts (run_id, " + RunFactColumnNames() + ") VALUES (?, " +
                          Placeholders(std::size(kRunFactColumns)) + ")";
  const std::optional<BudgetFacts>& b = facts.budget;
  const std::optional<SeedFacts>& seed = facts.seed;
  const loader::Knobs* best = seed ? &seed->best : nullptr;
  const std::optional<SafeLimit>& safe = facts.safe_limit;
  const std::optional<CpuCalibrationFacts>& cpu = facts.cpu;
  using K = loader::Knobs;
  using C = CpuCalibrationFacts;
  const std::optional<BackgroundFacts>& bg = facts.background;
  using G = BackgroundFacts;
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
               PreflightJson(facts.preflight), PhasesJson(facts.phases), NullIfEmpty(facts.timelines_json),
               bg.has_value(), Field(bg, &G::source), Field(bg, &G::start_cpu), Field(bg, &G::sample_s),
               bg ? std::optional<std::string>(ProcessCpuToJson(bg->top)) : std::nullopt,
               Field(bg, &G::reference_cpu), Field(bg, &G::warn_cpu), Field(bg, &G::disturbed_cpu),
               Field(bg, &G::median_cpu), Field(bg, &G::windows), Field(bg, &G::remeasured), Field(bg, &G::busy),
               facts.torch_costs ? std::optional<std::string>(TorchCostsJson(*facts.torch_costs).dump())
                                 : std::nullopt)
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
  static_assert(std::size(kTrialColumns) == 41, "a trial column was added: read it below and bind it in InsertTrial");
  const std::string sql =
      "SELECT id, " + ColumnList(kTrialColumns, schema_version_) + " FROM trials WHERE run_id = ? ORDER BY id";
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
    t.background_cpu = select.Double(40);
    t.remeasured_windows = select.Int32(41);
    index_by_id[t.id] = trials.size();
    trials.push_back(std::move(t));
  }

  // One query for all repeats of the run rather than one per trial.
  static_assert(std::size(kRepeatColumns) == 12, "a repeat column was added: read it below");
  const std::string repeats_sql = "SELECT " + ColumnList(kRepeatColumns, schema_version_) +
                                  " FROM repeats WHERE trial_id IN (SELECT id FROM trials WHERE run_id = ?) "
                                  "ORDER BY trial_id, idx, id";
  Statement repeats(db_.get(), path_, "load repeats", repeats_sql.c_str());
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
    r.background_cpu = repeats.Double(9);
    r.disturbed = repeats.Bool(10);
    r.remeasured = repeats.Bool(11);
    trials[it->second].repeat_rows.push_back(r);
  }
  LoadNodes(run_id, trials, index_by_id);
  return trials;
}

std::optional<Fingerprint> Store::LoadMachine(int64_t machine_id) const {
  const std::string sql = "SELECT " + ColumnList(kMachineColumns, schema_version_) + " FROM machines WHERE id = ?";
  Statement select(db_.get(), path_, "load machine", sql.c_str());
  select.BindAll(machine_id);
  if (!select.Step()) return std::nullopt;
  return ReadMachine(select);
}

std::vector<StoredMachine> Store::LoadMachines() const {
  constexpr int kMachineColumnCount = static_cast<int>(std::size(kMachineColumns));
  const std::string sql =
      "SELECT " + ColumnList(kMachineColumns, schema_version_) + ", id, first_seen FROM machines ORDER BY id";
  Statement select(db_.get(), path_, "load machines", sql.c_str());
  std::vector<StoredMachine> machines;
  while (select.Step()) {
    StoredMachine m;
    m.fingerprint = ReadMachine(select);
    m.hash = select.Text(0);
    m.id = select.Int(kMachineColumnCount);
    m.first_seen = select.Text(kMachineColumnCount + 1);
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
