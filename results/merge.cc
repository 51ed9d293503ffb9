#include "results/merge.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <vector>

#include "results/sqlite.h"

namespace feedtune::results {
namespace {

// SQLite's file header: the magic string, then big-endian fields at fixed
// offsets (https://www.sqlite.org/fileformat.html#the_database_header).
constexpr size_t kHeaderBytes = 100;
constexpr size_t kUserVersionOffset = 60;
constexpr size_t kApplicationIdOffset = 68;
constexpr char kSqliteMagic[] = "SQLite format 3";  // 16 bytes with the NUL

uint32_t BigEndian32(const unsigned char* bytes) {
  return (uint32_t{bytes[0]} << 24) | (uint32_t{bytes[1]} << 16) | (uint32_t{bytes[2]} << 8) | uint32_t{bytes[3]};
}

std::string OpenFilesLimit() {
  struct rlimit limit {};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return "unlimited";
  return std::to_string(static_cast<uint64_t>(limit.rlim_cur));
}

// The message for an input that open() or read() refused with `error`.
[[noreturn]] void ThrowOpenError(const std::string& path, int error) {
  switch (error) {
    case EMFILE:
    case ENFILE:
      throw StoreError(path + ": cannot open: too many open files (ulimit -n is " + OpenFilesLimit() +
                       "); the merge holds one input open at a time, so something else holds the descriptors: "
                       "raise the limit (ulimit -n 4096) or close them");
    case EACCES:
    case EPERM:
      throw StoreError(path + ": cannot read: permission denied; make it readable (chmod a+r " + path +
                       ") or merge as a user who may read it");
    case ENOENT:
      throw StoreError(path + ": no such file; check the path (a --from list names one file per line)");
    case EISDIR:
      throw StoreError(path + ": is a folder; `feedtune merge OUT DIR` merges the .db files in a folder");
    default:
      throw StoreError(path + ": cannot read: " + std::strerror(error));
  }
}

// A read of `source` whose damaged pages say so by name: SQLite's own
// "database disk image is malformed" does not say which of thousands.
template <typename Read>
auto FromFile(const std::string& path, Read read) -> decltype(read()) {
  try {
    return read();
  } catch (const StoreError& e) {
    const int code = e.sqlite_code() & 0xff;
    if (code != SQLITE_CORRUPT && code != SQLITE_NOTADB) throw;
    throw StoreError(path + ": the file is damaged (" + sqlite3_errstr(code) +
                         "), nothing of it was merged; copy it again from its host, or leave it out",
                     e.sqlite_code());
  }
}

template <typename Read>
auto FromSource(const Store& source, Read read) -> decltype(read()) {
  return FromFile(source.path(), read);
}

bool WalBeside(const std::string& path) {
  std::error_code error;
  return std::filesystem::exists(path + "-wal", error);
}

}  // namespace

void CheckMergeInput(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) ThrowOpenError(path, errno);
  std::array<unsigned char, kHeaderBytes> header{};
  struct stat st {};
  ssize_t got = 0;
  int error = 0;
  if (fstat(fd, &st) != 0) {
    error = errno;
  } else if (S_ISDIR(st.st_mode)) {
    error = EISDIR;
  } else {
    got = pread(fd, header.data(), header.size(), 0);
    if (got < 0) error = errno;
  }
  close(fd);
  if (error != 0) ThrowOpenError(path, error);
  if (got == 0) {
    throw StoreError(path + ": empty, not a feedtune results file (a sweep that never began?); leave it out");
  }
  if (static_cast<size_t>(got) < header.size() ||
      !std::equal(std::begin(kSqliteMagic), std::end(kSqliteMagic), header.begin())) {
    throw StoreError(path + ": not a feedtune results file (not an SQLite database); leave it out of the merge");
  }
  if (WalBeside(path)) return;  // a writer's header may still be in its -wal
  const uint32_t application_id = BigEndian32(&header[kApplicationIdOffset]);
  if (application_id != static_cast<uint32_t>(Store::kApplicationId)) {
    char hex[16];
    std::snprintf(hex, sizeof hex, "0x%08" PRIx32, application_id);
    throw StoreError(path + ": an SQLite database, but not a feedtune results file (application_id " + hex +
                     "); leave it out of the merge");
  }
  const uint32_t version = BigEndian32(&header[kUserVersionOffset]);
  if (version > static_cast<uint32_t>(Store::kSchemaVersion)) {
    throw StoreError(path + ": results file has schema version " + std::to_string(version) +
                     ", this feedtune understands up to " + std::to_string(Store::kSchemaVersion) +
                     "; merge with a feedtune as new as the one that wrote it");
  }
}

Store OpenMergeInput(const std::string& path) {
  CheckMergeInput(path);
  // Opening reads the schema, which may lie on damaged pages.
  return FromFile(path, [&] { return WalBeside(path) ? Store::OpenReadOnly(path) : Store::OpenImmutable(path); });
}

// The rows of `source` into `out`, in the caller's transaction.
MergeStats MergeRows(Store& out, const Store& source) {
  const std::string operation = "merge " + source.path();
  MergeStats stats;
  sqlite3* const db = out.db_.get();
  const std::string& path = out.path_;
  // The source is another connection (maybe an older schema, read as it is).
  // Its machines and runs are listed before this file's write lock is taken;
  // each run's trials are read as the run is copied.
  const std::vector<StoredMachine> machines = FromSource(source, [&] { return source.LoadMachines(); });
  const std::vector<RunRecord> runs = FromSource(source, [&] { return source.LoadRuns(); });

  std::map<int64_t, int64_t> machine_ids;  // source id -> id here
  for (const StoredMachine& m : machines) {
    Statement find(*out.statements_, db, path, operation, "SELECT id FROM machines WHERE hash = ?");
    find.BindAll(m.hash);
    if (find.Step()) {
      machine_ids[m.id] = find.Int(0);
    } else {
      machine_ids[m.id] = out.InsertMachine(m.hash, m.fingerprint, NullIfEmpty(m.first_seen));
      ++stats.machines_added;
    }
  }

  for (const RunRecord& run : runs) {
    bool replacing = false;
    {
      Statement find(*out.statements_, db, path, operation, "SELECT id, status FROM runs WHERE uid = ?");
      find.BindAll(run.uid);
      if (find.Step()) {
        const int64_t existing = find.Int(0);
        if (ParseRunStatus(find.Text(1)) != RunStatus::kRunning || run.status == RunStatus::kRunning) {
          ++stats.runs_skipped;
          continue;
        }
        // Trials and repeats go with it (ON DELETE CASCADE); the run's own
        // references to its trials are dropped first so no row points at a deleted trial.
        Statement clear(*out.statements_, db, path, operation,
                        "UPDATE runs SET best_trial_id = NULL, baseline_trial_id = NULL WHERE id = ?");
        clear.BindAll(existing).Run();
        Statement remove(*out.statements_, db, path, operation, "DELETE FROM runs WHERE id = ?");
        remove.BindAll(existing).Run();
        replacing = true;
      }
    }
    const auto machine = machine_ids.find(run.machine_id);
    if (machine == machine_ids.end()) {
      throw StoreError(source.path() + ": run " + std::to_string(run.id) + " names machine " +
                       std::to_string(run.machine_id) +
                       ", which is not in the file; the file is damaged, nothing was merged");
    }
    RunRecord row = run;
    row.machine_id = machine->second;
    const int64_t run_id = out.InsertRun(row, operation);
    ++(replacing ? stats.runs_updated : stats.runs_added);

    std::map<int64_t, int64_t> trial_ids;
    for (const TrialRecord& trial : FromSource(source, [&] { return source.LoadTrials(run.id); })) {
      trial_ids[trial.id] = out.InsertTrial(run_id, trial, operation);
      ++stats.trials_added;
    }
    const auto mapped = [&trial_ids](const std::optional<int64_t>& id) -> std::optional<int64_t> {
      if (!id) return std::nullopt;
      const auto it = trial_ids.find(*id);
      if (it == trial_ids.end()) return std::nullopt;
      return it->second;
    };
    Statement link(*out.statements_, db, path, operation,
                   "UPDATE runs SET best_trial_id = ?, baseline_trial_id = ? WHERE id = ?");
    link.BindAll(mapped(run.best_trial_id), mapped(run.baseline_trial_id), run_id).Run();
    // The verdict goes with its run, so a fleet file answers "where does the time go" per host.
    if (const std::optional<Verdict> verdict = FromSource(source, [&] { return source.LoadVerdict(run.id); })) out.InsertVerdict(run_id, *verdict, operation);
  }
  // A job's observed run goes beside the sweeps, so `check` on the fleet file
  // holds each job against its host's sweep. A later write of the same job wins.
  for (const ObservedRecord& observed : FromSource(source, [&] { return source.LoadObserved(); })) {
    {
      Statement find(*out.statements_, db, path, operation, "SELECT ended_at FROM observed WHERE uid = ?");
      find.BindAll(observed.uid);
      if (find.Step() && find.Text(0) >= observed.ended_at) continue;
    }
    const auto machine = machine_ids.find(observed.machine_id);
    if (machine == machine_ids.end()) {
      throw StoreError(source.path() + ": observed run " + observed.uid + " names machine " +
                       std::to_string(observed.machine_id) +
                       ", which is not in the file; the file is damaged, nothing was merged");
    }
    out.InsertObserved(machine->second, observed, operation);
    ++stats.observed_added;
  }
  return stats;
}

MergeStats MergeInto(Store& out, const Store& source) {
  Transaction transaction(out.db_.get(), out.path_, "merge " + source.path());
  const MergeStats stats = MergeRows(out, source);
  transaction.Commit();
  return stats;
}

Merger::Merger(Store& out, int inputs_per_commit) : out_(out), inputs_per_commit_(inputs_per_commit) {}

Merger::~Merger() {
  // What was not committed goes: an exception is on its way, or Commit was skipped.
  if (open_) sqlite3_exec(out_.db_.get(), "ROLLBACK", nullptr, nullptr, nullptr);
}

MergeStats Merger::Add(const Store& source) {
  sqlite3* const db = out_.db_.get();
  const std::string operation = "merge " + source.path();
  if (!open_) {
    Exec(db, out_.path_, operation + " (begin)", "BEGIN IMMEDIATE");
    open_ = true;
  }
  Exec(db, out_.path_, operation, "SAVEPOINT merge_input");
  MergeStats stats;
  try {
    stats = MergeRows(out_, source);
  } catch (...) {
    // Only this input's rows go; the batch's earlier inputs stay.
    sqlite3_exec(db, "ROLLBACK TO merge_input; RELEASE merge_input", nullptr, nullptr, nullptr);
    throw;
  }
  Exec(db, out_.path_, operation, "RELEASE merge_input");
  if (++pending_ >= inputs_per_commit_) Commit();
  return stats;
}

void Merger::Commit() {
  if (!open_) return;
  Exec(out_.db_.get(), out_.path_, "merge (commit)", "COMMIT");
  open_ = false;
  pending_ = 0;
}

}  // namespace feedtune::results
