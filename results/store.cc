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

#include "results/run_owner.h"
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
  c = first + RunFactIndex("background_demand_cpu");
  if (facts.background) {
    facts.background->demand_cpu = row.Optional<double>(c++).value_or(std::nan(""));
    facts.background->demand_windows = row.Optional<int>(c++).value_or(0);
  }
  c = first + RunFactIndex("store_probe_json");
  facts.store_probe_json = text();
  return facts;
}

// A member of a group the run may lack, for binding: NULL without the group.
template <typename Group, typename T>
std::optional<T> OrNull(const std::optional<Group>& group, T Group::*member) {
  return group ? std::optional<T>((*group).*member) : std::nullopt;
}
template <typename Group, typename T>
std::optional<T> OrNull(const Group* group, T Group::*member) {
  return group != nullptr ? std::optional<T>(group->*member) : std::nullopt;
}

RunRecord ReadRun(const Statement& row) {
  RunRecord run;
  ReadColumns(row, 0, kRunColumns, run);
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

// The machine of a row that selected "hash, <kMachineColumns>". The stored
// hash is not read back: Fingerprint::Hash() recomputes it from the fields.
Fingerprint ReadMachine(const Statement& select) {
  Fingerprint f;
  ReadColumns(select, 1, kMachineColumns, f);
  return f;
}

// Hands each row of `select` (its first column a trial id of the run) to
// `read` with that trial; rows of trials not loaded are skipped.
template <typename Read>
void ForEachTrialRow(Statement& select, std::vector<TrialRecord>& trials,
                     const std::map<int64_t, size_t>& index_by_id, Read read) {
  while (select.Step()) {
    const auto it = index_by_id.find(select.Int(0));
    if (it != index_by_id.end()) read(trials[it->second]);
  }
}

// The child rows of a run's trials: `columns` of `table` whose trial is one of the run's.
template <typename Record, size_t N>
std::string TrialRowsSql(const char* table, const Column<Record> (&columns)[N], int version, const char* order) {
  return "SELECT trial_id, " + ColumnList(columns, version) + " FROM " + table +
         " WHERE trial_id IN (SELECT id FROM trials WHERE run_id = ?) ORDER BY " + order;
}

}  // namespace

std::string StaleRunText(const StaleRun& stale) {
  return "run " + std::to_string(stale.run_id) + " was left running by pid " + std::to_string(stale.owner.pid) +
         stale.how + "; marked interrupted, its " + std::to_string(stale.trials) + " trial" +
         (stale.trials == 1 ? "" : "s") + " kept";
}

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
  Store store(db.release(), path, kSchemaVersion);
  store.MarkStaleRuns();
  return store;
}

void Store::MarkStaleRuns() {
  const RunOwner here = ThisProcess();
  if (here.pid == 0 || here.boot_id.empty()) return;  // no /proc: nothing can be judged
  std::vector<StaleRun> found;
  {
    // Read outside a write transaction: nearly every open finds nothing to mark.
    Statement select(db_.get(), path_, "check running runs",
                     "SELECT id, owner_hostname, owner_boot_id, owner_pid_namespace, owner_pid, owner_start_ticks, "
                     "(SELECT count(*) FROM trials WHERE trials.run_id = runs.id) FROM runs "
                     "WHERE status = 'running' AND owner_pid IS NOT NULL AND owner_hostname = ? ORDER BY id");
    select.BindAll(here.hostname);
    while (select.Step()) {
      StaleRun stale;
      stale.run_id = select.Int(0);
      stale.owner = {select.Text(1), select.Text(2), select.Text(3), select.Int(4), select.Int(5)};
      stale.how = OwnerEnded(stale.owner, here);
      stale.trials = select.Int(6);
      if (!stale.how.empty()) found.push_back(std::move(stale));
    }
  }
  if (found.empty()) return;
  const std::string operation = "mark runs left running as interrupted";
  Transaction transaction(db_.get(), path_, operation);
  for (StaleRun& stale : found) {
    const RunOwner& o = stale.owner;
    const std::string note = "left running by pid " + std::to_string(o.pid) + " on " + o.hostname + stale.how +
                             "; marked interrupted by pid " + std::to_string(here.pid) +
                             ", the next to open the file for writing";
    // Only if it is still running as read: its process cannot have finished
    // it since (it has ended), but another open may have marked it already.
    Statement update(*statements_, db_.get(), path_, operation,
                     std::string("UPDATE runs SET status = 'interrupted', ended_at = ") + kNowSql +
                         ", end_note = ? WHERE id = ? AND status = 'running' AND owner_pid = ? AND "
                         "owner_start_ticks = ? AND owner_boot_id = ?");
    update.BindAll(note, stale.run_id, o.pid, o.start_ticks, o.boot_id).Run();
    if (sqlite3_changes(db_.get()) > 0) stale_runs_.push_back(std::move(stale));
  }
  transaction.Commit();
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
  constexpr int kColumns = static_cast<int>(std::size(kMachineColumns));
  const std::string sql = "INSERT INTO machines (hash, " + ColumnList(kMachineColumns) + ", first_seen) VALUES (?, " +
                          Placeholders(kColumns) + ", COALESCE(?, " + kNowSql + "))";
  Statement insert(*statements_, db_.get(), path_, "record machine", sql);
  insert.BindAll(hash);
  BindColumns(insert, 2, kMachineColumns, f).BindAt(kColumns + 2, first_seen).Run();
  return sqlite3_last_insert_rowid(db_.get());
}

void Store::SetBandwidth(int64_t machine_id, const std::vector<BandwidthRecord>& points,
                         double pin_seconds_per_gib) {
  Transaction transaction(db_.get(), path_, "record bandwidth");
  Statement clear(db_.get(), path_, "record bandwidth", "DELETE FROM h2d_bandwidth WHERE machine_id = ?");
  clear.BindAll(machine_id).Run();
  const std::string measured_at = CurrentUtc();
  const std::string insert_sql = InsertSql("INSERT INTO", "h2d_bandwidth", "machine_id, measured_at", kBandwidthColumns);
  for (const BandwidthRecord& p : points) {
    Statement insert(db_.get(), path_, "record bandwidth", insert_sql.c_str());
    BindColumns(insert.BindAll(machine_id, measured_at), 3, kBandwidthColumns, p).Run();
  }
  Statement pin(db_.get(), path_, "record bandwidth",
                "INSERT OR REPLACE INTO h2d_pinning (machine_id, measured_at, seconds_per_gib) VALUES (?, ?, ?)");
  pin.BindAll(machine_id, measured_at, pin_seconds_per_gib).Run();
  transaction.Commit();
}

std::vector<BandwidthRecord> Store::LoadBandwidth(int64_t machine_id) const {
  std::vector<BandwidthRecord> points;
  if (schema_version_ < 3) return points;  // an older file opened read-only has no such table
  const std::string sql =
      "SELECT " + ColumnList(kBandwidthColumns) + " FROM h2d_bandwidth WHERE machine_id = ? ORDER BY id";
  Statement select(db_.get(), path_, "read bandwidth", sql.c_str());
  select.BindAll(machine_id);
  while (select.Step()) ReadColumns(select, 0, kBandwidthColumns, points.emplace_back());
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
  RunRecord row = run;
  row.status = RunStatus::kRunning;
  if (row.started_at.empty()) row.started_at = CurrentUtc();
  if (row.uid.empty()) row.uid = NewRunUid(machine_hash, row.started_at);
  row.host = host;
  if (row.owner.pid == 0) row.owner = ThisProcess();
  const int64_t id = InsertRun(row, "record run start");
  transaction.Commit();
  return id;
}

int64_t Store::InsertRun(const RunRecord& run, const std::string& operation) {
  Statement insert(*statements_, db_.get(), path_, operation, InsertSql("INSERT INTO", "runs", "", kRunColumns));
  BindColumns(insert, 1, kRunColumns, run).Run();
  const int64_t id = sqlite3_last_insert_rowid(db_.get());
  WriteRunFacts(id, run.facts, operation);
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
  int64_t trial_id = 0;
  {
    Statement insert(*statements_, db_.get(), path_, operation,
                     InsertSql("INSERT INTO", "trials", "run_id", kTrialColumns));
    BindColumns(insert.BindAll(run_id), 2, kTrialColumns, trial).Run();
    trial_id = sqlite3_last_insert_rowid(db_.get());
  }
  if (!trial.repeat_rows.empty()) {
    Statement insert(*statements_, db_.get(), path_, operation,
                     InsertSql("INSERT INTO", "repeats", "trial_id", kRepeatColumns));
    for (const RepeatRecord& r : trial.repeat_rows) {
      BindColumns(insert.BindAll(trial_id), 2, kRepeatColumns, r).Run();
      insert.Reset();
    }
  }
  if (trial.node) InsertNode(trial_id, *trial.node, operation);
  return trial_id;
}

void Store::InsertNode(int64_t trial_id, const NodeFigures& node, const std::string& operation) {
  Statement node_insert(*statements_, db_.get(), path_, operation,
                        InsertSql("INSERT INTO", "trial_nodes", "trial_id", kNodeColumns));
  BindColumns(node_insert.BindAll(trial_id), 2, kNodeColumns, node).Run();
  Statement insert(*statements_, db_.get(), path_, operation,
                   InsertSql("INSERT INTO", "trial_ranks", "trial_id", kRankColumns));
  for (const RankRecord& r : node.rank_rows) {
    BindColumns(insert.BindAll(trial_id), 2, kRankColumns, r).Run();
    insert.Reset();
  }
}

void Store::LoadNodes(int64_t run_id, std::vector<TrialRecord>& trials,
                      const std::map<int64_t, size_t>& index_by_id) const {
  if (schema_version_ < 9) return;  // an older file opened read-only has no node tables
  const std::string nodes_sql = TrialRowsSql("trial_nodes", kNodeColumns, schema_version_, "trial_id");
  Statement nodes(db_.get(), path_, "load node trials", nodes_sql.c_str());
  nodes.BindAll(run_id);
  ForEachTrialRow(nodes, trials, index_by_id, [&nodes](TrialRecord& trial) {
    NodeFigures node;
    ReadColumns(nodes, 1, kNodeColumns, node);
    trial.node = std::move(node);
  });
  const std::string ranks_sql = TrialRowsSql("trial_ranks", kRankColumns, schema_version_, "trial_id, rank");
  Statement ranks(db_.get(), path_, "load node trials", ranks_sql.c_str());
  ranks.BindAll(run_id);
  ForEachTrialRow(ranks, trials, index_by_id, [&ranks](TrialRecord& trial) {
    if (!trial.node) return;
    RankRecord r;
    ReadColumns(ranks, 1, kRankColumns, r);
    trial.node->rank_rows.push_back(std::move(r));
  });
}

void Store::FinishRun(const RunRecord& run) {
  Transaction transaction(db_.get(), path_, "record run end");
  const std::string sql = std::string("UPDATE runs SET ended_at = COALESCE(?, ") + kNowSql +
                          "), status = ?, end_note = ?, knee_workers = ?, knee_samples_per_s = ?, "
                          "best_trial_id = ?, baseline_trial_id = ?, knee_kneedle_workers = ?, "
                          "safe_max_workers = ?, speedup = ?, speedup_ci_low = ?, "
                          "speedup_ci_high = ?, calibration_json = COALESCE(?, calibration_json) "
                          "WHERE id = ?";
  Statement update(db_.get(), path_, "record run end", sql.c_str());
  // An empty calibration keeps what BeginRun stored rather than erasing it.
  update
      .BindAll(NullIfEmpty(run.ended_at), RunStatusName(run.status), NullIfEmpty(run.end_note), run.knee_workers,
               run.knee_samples_per_s,
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
      .BindAll(run_id, b.has_value(), OrNull(b, &BudgetFacts::mem_available_bytes),
               OrNull(b, &BudgetFacts::shm_free_bytes), OrNull(b, &BudgetFacts::nofile_limit),
               OrNull(b, &BudgetFacts::fds_open), OrNull(b, &BudgetFacts::usable_cpus),
               OrNull(b, &BudgetFacts::batch_bytes), OrNull(b, &BudgetFacts::stream_buffer_bytes), facts.max_workers,
               seed.has_value(), OrNull(seed, &SeedFacts::db_path), OrNull(seed, &SeedFacts::run_id),
               OrNull(seed, &SeedFacts::run_uid), OrNull(seed, &SeedFacts::run_host),
               OrNull(seed, &SeedFacts::run_class), OrNull(seed, &SeedFacts::match), OrNull(seed, &SeedFacts::why),
               OrNull(seed, &SeedFacts::source), OrNull(seed, &SeedFacts::knee_workers), OrNull(best, &K::batch_size),
               OrNull(best, &K::num_workers), OrNull(best, &K::pin_memory), OrNull(best, &K::non_blocking),
               OrNull(best, &K::prefetch_factor), OrNull(best, &K::persistent_workers), safe.has_value(),
               OrNull(safe, &SafeLimit::workers), OrNull(safe, &SafeLimit::basis),
               OrNull(safe, &SafeLimit::basis_trial), OrNull(safe, &SafeLimit::worker_rss_bytes),
               OrNull(safe, &SafeLimit::growth_bytes), cpu.has_value(),
               OrNull(cpu, &C::clock), OrNull(cpu, &C::clock_read_ns), OrNull(cpu, &C::work_bytes_per_s),
               OrNull(cpu, &C::chunk_bytes), OrNull(cpu, &C::chunk_us), OrNull(cpu, &C::clock_overhead),
               OrNull(cpu, &C::check_requested_us), OrNull(cpu, &C::check_spent_us), OrNull(cpu, &C::calibration_s),
               PreflightJson(facts.preflight), PhasesJson(facts.phases), NullIfEmpty(facts.timelines_json),
               bg.has_value(), OrNull(bg, &G::source), OrNull(bg, &G::start_cpu), OrNull(bg, &G::sample_s),
               bg ? std::optional<std::string>(ProcessCpuToJson(bg->top)) : std::nullopt,
               OrNull(bg, &G::reference_cpu), OrNull(bg, &G::warn_cpu), OrNull(bg, &G::disturbed_cpu),
               OrNull(bg, &G::median_cpu), OrNull(bg, &G::windows), OrNull(bg, &G::remeasured), OrNull(bg, &G::busy),
               facts.torch_costs ? std::optional<std::string>(TorchCostsJson(*facts.torch_costs).dump())
                                 : std::nullopt,
               OrNull(bg, &G::demand_cpu), OrNull(bg, &G::demand_windows), NullIfEmpty(facts.store_probe_json))
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
      "SELECT id, run_id, " + ColumnList(kTrialColumns, schema_version_) + " FROM trials WHERE run_id = ? ORDER BY id";
  Statement select(db_.get(), path_, "load trials", sql.c_str());
  select.BindAll(run_id);
  std::vector<TrialRecord> trials;
  std::map<int64_t, size_t> index_by_id;
  while (select.Step()) {
    TrialRecord t;
    t.id = select.Int(0);
    t.run_id = select.Int(1);
    ReadColumns(select, 2, kTrialColumns, t);
    index_by_id[t.id] = trials.size();
    trials.push_back(std::move(t));
  }

  // One query for all repeats of the run rather than one per trial.
  const std::string repeats_sql = TrialRowsSql("repeats", kRepeatColumns, schema_version_, "trial_id, idx, id");
  Statement repeats(db_.get(), path_, "load repeats", repeats_sql.c_str());
  repeats.BindAll(run_id);
  ForEachTrialRow(repeats, trials, index_by_id, [&repeats](TrialRecord& trial) {
    RepeatRecord r;
    ReadColumns(repeats, 1, kRepeatColumns, r);
    trial.repeat_rows.push_back(r);
  });
  LoadNodes(run_id, trials, index_by_id);
  return trials;
}

std::optional<Fingerprint> Store::LoadMachine(int64_t machine_id) const {
  const std::string sql =
      "SELECT hash, " + ColumnList(kMachineColumns, schema_version_) + " FROM machines WHERE id = ?";
  Statement select(db_.get(), path_, "load machine", sql.c_str());
  select.BindAll(machine_id);
  if (!select.Step()) return std::nullopt;
  return ReadMachine(select);
}

std::vector<StoredMachine> Store::LoadMachines() const {
  constexpr int kAfterColumns = static_cast<int>(std::size(kMachineColumns)) + 1;
  const std::string sql =
      "SELECT hash, " + ColumnList(kMachineColumns, schema_version_) + ", id, first_seen FROM machines ORDER BY id";
  Statement select(db_.get(), path_, "load machines", sql.c_str());
  std::vector<StoredMachine> machines;
  while (select.Step()) {
    StoredMachine m;
    m.fingerprint = ReadMachine(select);
    m.hash = select.Text(0);
    m.id = select.Int(kAfterColumns);
    m.first_seen = select.Text(kAfterColumns + 1);
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
                   InsertSql("INSERT OR REPLACE INTO", "observed", "machine_id", kObservedColumns));
  BindColumns(insert.BindAll(machine_id), 2, kObservedColumns, o).Run();
}

std::vector<ObservedRecord> Store::LoadObserved() const {
  std::vector<ObservedRecord> rows;
  if (schema_version_ < 11) return rows;  // an older file opened read-only has no such table
  const std::string sql =
      "SELECT id, machine_id, " + ColumnList(kObservedColumns, schema_version_) + " FROM observed ORDER BY id";
  Statement select(db_.get(), path_, "load observed runs", sql.c_str());
  while (select.Step()) {
    ObservedRecord o;
    o.id = select.Int(0);
    o.machine_id = select.Int(1);
    ReadColumns(select, 2, kObservedColumns, o);
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
