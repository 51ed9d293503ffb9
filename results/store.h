// Store: the SQLite results file (docs/architecture.md, the results schema). One Store owns one sqlite3
// connection; it is not thread-safe (use one per thread). Every write is one
// IMMEDIATE transaction, so a crash loses at most the trial being written and
// never leaves half of one. Values are always bound, never formatted into SQL.
//
// The file is marked with application_id; PRAGMA user_version is the schema
// version, upgraded by ordered migrations when it is opened for writing (a
// read-only open reads an older file as it is). A file that is not SQLite,
// not feedtune's, or from a newer version is refused and left untouched.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "results/records.h"
#include "results/torch_costs.h"
#include "results/verdict.h"

struct sqlite3;

namespace feedtune::results {

class StoreError : public std::runtime_error {
 public:
  explicit StoreError(const std::string& what, int sqlite_code = 0)
      : std::runtime_error(what), sqlite_code_(sqlite_code) {}
  // SQLite's (extended) result code when SQLite reported it; 0 otherwise.
  int sqlite_code() const { return sqlite_code_; }

 private:
  int sqlite_code_;
};

// A machines row with what identifies it in this file and across files.
struct StoredMachine {
  int64_t id = 0;
  std::string hash;        // as stored: the identity `merge` and `compare` match on
  std::string first_seen;  // ISO 8601 UTC
  Fingerprint fingerprint;
};

// A run that Store::Open found left running by a process that has ended
// (results/run_owner.h), and marked interrupted, its trials kept.
struct StaleRun {
  int64_t run_id = 0;
  RunOwner owner;       // the process that left it
  std::string how;      // OwnerEnded's phrase: ", which has ended", " before the host restarted", ...
  int64_t trials = 0;   // its stored trials
};
// "run 3 was left running by pid 1234, which has ended; marked interrupted, its
// 5 trials kept": what a command that opened the file says of it.
std::string StaleRunText(const StaleRun& stale);

struct MergeStats;      // results/merge.h
class Merger;
class StatementCache;  // results/sqlite.h

class Store {
 public:
  static constexpr int kSchemaVersion = 23;
  static constexpr int32_t kApplicationId = 0x46656564;  // "Feed"

  // Opens (creating when missing, with its parent folder) the results file.
  // Throws StoreError with the path and the reason. Every run still marked
  // running whose process, on this host, has ended without finishing it
  // (results/run_owner.h: killed, or its host restarted) is marked
  // interrupted with a note that says so (stale_runs()); runs of other hosts,
  // and runs whose process may still run, are left as they are.
  static Store Open(const std::string& path);
  // Opens an existing file read-only; throws when missing. A file of an older
  // schema version is read as it is (columns it lacks read as unset), never migrated.
  static Store OpenReadOnly(const std::string& path);
  // Opens a finished results file read-only and immutable (SQLite's
  // immutable=1): no lock, no -wal or -shm beside it, one descriptor. Only
  // for a file nothing is writing: a writer's later pages would go unseen
  // (results/merge.h decides, docs/fleets.md says why it is safe).
  static Store OpenImmutable(const std::string& path);

  Store(Store&&) noexcept;
  Store& operator=(Store&&) noexcept;
  ~Store();

  // Inserts the machine if its hash is new (updating its label when given); returns its id.
  int64_t UpsertMachine(const Fingerprint& fingerprint);
  // Replaces the machine's host-to-device bandwidth matrix and pinning cost
  // (`feedtune machine --db` on CUDA), in one transaction.
  void SetBandwidth(int64_t machine_id, const std::vector<BandwidthRecord>& points, double pin_seconds_per_gib);
  // Inserts a run with status "running" (with the start time, uid and host
  // filled in where empty, and the calling process as its owner unless the
  // record names one), and its facts; returns its id. The figures FinishRun
  // sets are stored as the record holds them: none in a new run.
  int64_t BeginRun(const RunRecord& run);
  // Inserts a trial with its repeat rows in one transaction; returns its id.
  int64_t AddTrial(int64_t run_id, const TrialRecord& trial);
  // Sets the run's end time, status, end note, knee, best and baseline trial.
  void FinishRun(const RunRecord& run);

  // The run with this id, or the newest run when id is nullopt; nullopt when there is none.
  std::optional<RunRecord> LoadRun(std::optional<int64_t> id) const;
  std::vector<RunRecord> LoadRuns() const;
  std::vector<TrialRecord> LoadTrials(int64_t run_id) const;  // in id order, with repeats
  std::optional<Fingerprint> LoadMachine(int64_t machine_id) const;
  std::vector<StoredMachine> LoadMachines() const;  // in id order
  std::vector<BandwidthRecord> LoadBandwidth(int64_t machine_id) const;  // empty when never measured
  // This host's torch DataLoader costs (results/torch_costs.h), keyed by
  // HostIdentity::Key(): the latest `feedtune calibrate` replaces the row.
  void SetTorchCosts(const std::string& host, const TorchCosts& costs);
  std::optional<TorchCosts> LoadTorchCosts(const std::string& host) const;  // empty when never measured
  // The run's bottleneck verdict (tuner/measure/stage_runner.h), replacing any before;
  // nullopt when it has none (or the file predates verdicts).
  void SaveVerdict(int64_t run_id, const Verdict& verdict);
  std::optional<Verdict> LoadVerdict(int64_t run_id) const;

  // Records what training jobs saw (`feedtune observe`), with the machine they
  // ran on (inserted when new), all in one transaction; returns the rows' ids.
  // A record whose uid is already here replaces that row (a job writing every
  // K steps); an empty uid gets a new one. An empty host takes the machine's
  // label and hostname (as BeginRun does), empty times the present.
  std::vector<int64_t> AddObserved(const Fingerprint& machine, const std::vector<ObservedRecord>& observed);
  // Every observed run, in id order, with its host; empty for files before schema v11.
  std::vector<ObservedRecord> LoadObserved() const;


  const std::string& path() const { return path_; }
  // The schema version of the file as opened (kSchemaVersion unless opened read-only).
  int schema_version() const { return schema_version_; }
  // The runs Open found left running and marked interrupted, in id order.
  const std::vector<StaleRun>& stale_runs() const { return stale_runs_; }

 private:
  // Copies runs between two files through the row writers below (results/merge.h).
  friend MergeStats MergeInto(Store& out, const Store& source);
  friend MergeStats MergeRows(Store& out, const Store& source);
  friend class Merger;

  Store(sqlite3* db, std::string path, int schema_version);

  // Bodies shared by the public writers; the caller holds the transaction.
  int64_t InsertMachine(const std::string& hash, const Fingerprint& fingerprint,
                        const std::optional<std::string>& first_seen);
  // A node trial's figures and ranks (trial_nodes, trial_ranks).
  void InsertNode(int64_t trial_id, const NodeFigures& node, const std::string& operation);
  void LoadNodes(int64_t run_id, std::vector<TrialRecord>& trials,
                 const std::map<int64_t, size_t>& index_by_id) const;
  // A run's row (every column of kRunColumns but its id and its best and
  // baseline trials) and its facts; returns its id.
  int64_t InsertRun(const RunRecord& run, const std::string& operation);
  int64_t InsertTrial(int64_t run_id, const TrialRecord& trial, const std::string& operation);
  void InsertVerdict(int64_t run_id, const Verdict& verdict, const std::string& operation);
  // The one writer of a run's facts (schema v14's run_facts row), in the caller's transaction.
  void WriteRunFacts(int64_t run_id, const RunFacts& facts, const std::string& operation);
  void InsertObserved(int64_t machine_id, const ObservedRecord& observed, const std::string& operation);
  // The id of the machine with this fingerprint's hash, inserting it when new.
  int64_t FindOrInsertMachine(const Fingerprint& fingerprint, const std::string& operation);
  // Open's check of the running runs: marks those whose process has ended (stale_runs_).
  void MarkStaleRuns();

  struct DbCloser {
    void operator()(sqlite3* db) const;
  };
  std::unique_ptr<sqlite3, DbCloser> db_;
  // After db_: its statements are finalized before the connection closes.
  std::unique_ptr<StatementCache> statements_;
  std::string path_;
  int schema_version_;
  std::vector<StaleRun> stale_runs_;
};

}  // namespace feedtune::results
