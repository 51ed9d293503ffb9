// results/merge.h: inputs checked by their header before anything is
// written, then opened one at a time, read-only and immutable, with nothing
// created beside them; each failure names its cause; the batching Merger.
#include "results/merge.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "results/store.h"
#include "results_test_util.h"

namespace feedtune::results {
namespace {

namespace fs = std::filesystem;
using testing::ReadFile;
using testing::TempDir;
using testing::WriteFile;

constexpr uid_t kNobody = 65534;

// A finished sweep of `host` in its own results file, closed (so no -wal).
void WriteHostFile(const std::string& path, const std::string& host) {
  Store store = Store::Open(path);
  testing::WriteSweep(store, testing::Machine(host, host, 8), "quickstart", 1.0);
}

std::set<std::string> Listing(const fs::path& dir) {
  std::set<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) names.insert(entry.path().filename().string());
  return names;
}

int OpenDescriptors() {
  int n = 0;
  for ([[maybe_unused]] const auto& entry : fs::directory_iterator("/proc/self/fd")) ++n;
  return n;
}

void Sql(const std::string& path, const char* sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  char* error = nullptr;
  EXPECT_EQ(sqlite3_exec(db, sql, nullptr, nullptr, &error), SQLITE_OK) << (error ? error : "");
  sqlite3_free(error);
  sqlite3_close(db);
}

std::string CheckError(const std::string& path) {
  try {
    CheckMergeInput(path);
  } catch (const StoreError& e) {
    return e.what();
  }
  return "no error";
}

// Runs `body` in a child process as user nobody (when this test runs as
// root, whom permissions do not stop) and returns what it returned.
std::string AsNonRoot(const std::function<std::string()>& body) {
  if (geteuid() != 0) return body();
  int pipe_fds[2];
  if (pipe(pipe_fds) != 0) return std::string("pipe: ") + std::strerror(errno);
  const pid_t pid = fork();
  if (pid == 0) {
    close(pipe_fds[0]);
    std::string out;
    if (setgid(kNobody) != 0 || setuid(kNobody) != 0) {
      out = std::string("setuid: ") + std::strerror(errno);
    } else {
      try {
        out = body();
      } catch (const std::exception& e) {
        out = std::string("exception: ") + e.what();
      }
    }
    [[maybe_unused]] const ssize_t written = write(pipe_fds[1], out.data(), out.size());
    _exit(0);
  }
  close(pipe_fds[1]);
  std::string out;
  char buffer[4096];
  for (ssize_t got; (got = read(pipe_fds[0], buffer, sizeof buffer)) > 0;) out.append(buffer, static_cast<size_t>(got));
  close(pipe_fds[0]);
  waitpid(pid, nullptr, 0);
  return out;
}

TEST(MergeInputs, OneOpenAtATimeWithNothingBesideThem) {
  const TempDir dir;
  const fs::path in = dir.path() / "in";
  fs::create_directories(in);
  std::vector<std::string> paths;
  for (const char* host : {"node-a", "node-b", "node-c"}) {
    paths.push_back((in / (std::string(host) + ".db")).string());
    WriteHostFile(paths.back(), host);
  }
  const std::set<std::string> before = Listing(in);
  ASSERT_EQ(before.size(), 3u);  // finished: no -wal, no -shm
  std::vector<std::string> bytes;
  for (const std::string& p : paths) bytes.push_back(ReadFile(p));

  Store out = Store::Open(dir / "fleet.db");
  Merger merger(out);
  for (const std::string& p : paths) {
    const int descriptors = OpenDescriptors();
    const Store input = OpenMergeInput(p);
    EXPECT_EQ(OpenDescriptors(), descriptors + 1) << "an immutable input holds one descriptor";
    EXPECT_EQ(merger.Add(input).runs_added, 1);
  }
  merger.Commit();
  EXPECT_EQ(out.LoadRuns().size(), 3u);
  EXPECT_EQ(Listing(in), before);
  for (size_t i = 0; i < paths.size(); ++i) EXPECT_EQ(ReadFile(paths[i]), bytes[i]) << paths[i];
}

TEST(MergeInputs, EachCauseHasItsOwnMessage) {
  const TempDir dir;
  const std::string missing = dir / "missing.db";
  EXPECT_EQ(CheckError(missing), missing + ": no such file; check the path (a --from list names one file per line)");
  const std::string folder = dir / "folder.db";
  fs::create_directories(folder);
  EXPECT_EQ(CheckError(folder), folder + ": is a folder; `feedtune merge OUT DIR` merges the .db files in a folder");
  const std::string empty = dir / "empty.db";
  WriteFile(empty, "");
  EXPECT_EQ(CheckError(empty), empty + ": empty, not a feedtune results file (a sweep that never began?); leave it out");
  const std::string text = dir / "notes.db";
  WriteFile(text, std::string(200, 'x'));
  EXPECT_EQ(CheckError(text), text + ": not a feedtune results file (not an SQLite database); leave it out of the merge");
  const std::string foreign = dir / "foreign.db";
  Sql(foreign, "CREATE TABLE t (x)");
  EXPECT_EQ(CheckError(foreign), foreign +
                                     ": an SQLite database, but not a feedtune results file (application_id "
                                     "0x00000000); leave it out of the merge");
  const std::string newer = dir / "newer.db";
  WriteHostFile(newer, "node-n");
  Sql(newer, "PRAGMA journal_mode = DELETE; PRAGMA user_version = 99");
  EXPECT_EQ(CheckError(newer), newer + ": results file has schema version 99, this feedtune understands up to " +
                                   std::to_string(Store::kSchemaVersion) +
                                   "; merge with a feedtune as new as the one that wrote it");

  const std::string good = dir / "good.db";
  WriteHostFile(good, "node-g");
  // Out of descriptors: every one this process may open is taken.
  std::vector<int> held;
  for (int fd; (fd = open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0;) held.push_back(fd);
  const std::string emfile = CheckError(good);
  for (const int fd : held) close(fd);
  EXPECT_EQ(emfile.rfind(good + ": cannot open: too many open files (ulimit -n is ", 0), 0u) << emfile;
  EXPECT_NE(emfile.find("); the merge holds one input open at a time, so something else holds the descriptors: "
                        "raise the limit (ulimit -n 4096) or close them"),
            std::string::npos)
      << emfile;

  const std::string locked = dir / "locked.db";
  WriteHostFile(locked, "node-l");
  ASSERT_EQ(chmod(locked.c_str(), 0), 0);
  EXPECT_EQ(AsNonRoot([&] { return CheckError(locked); }),
            locked + ": cannot read: permission denied; make it readable (chmod a+r " + locked +
                ") or merge as a user who may read it");
}

TEST(MergeInputs, ADamagedFileIsNamedAndNothingOfItIsMerged) {
  const TempDir dir;
  const std::string damaged = dir / "damaged.db";
  WriteHostFile(damaged, "node-d");
  {
    // The header page stays; every page after it is overwritten.
    std::string bytes = ReadFile(damaged);
    ASSERT_GT(bytes.size(), 8192u);
    std::fill(bytes.begin() + 4096, bytes.end(), '\xa5');
    WriteFile(damaged, bytes);
  }
  Store out = Store::Open(dir / "fleet.db");
  std::string error = "no error";
  try {
    MergeInto(out, OpenMergeInput(damaged));
  } catch (const StoreError& e) {
    error = e.what();
  }
  EXPECT_EQ(error.rfind(damaged + ": the file is damaged (", 0), 0u) << error;
  EXPECT_NE(error.find("), nothing of it was merged; copy it again from its host, or leave it out"), std::string::npos)
      << error;
  EXPECT_TRUE(out.LoadRuns().empty());
}

// A folder the merging user may not write to (a read-only share): the
// inputs are read, nothing is created beside them, and the merge succeeds.
TEST(MergeInputs, AReadOnlyFolderMerges) {
  const TempDir dir;
  const fs::path in = dir.path() / "in";
  fs::create_directories(in);
  for (const char* host : {"node-a", "node-b"}) WriteHostFile((in / (std::string(host) + ".db")).string(), host);
  for (const auto& entry : fs::directory_iterator(in)) ASSERT_EQ(chmod(entry.path().c_str(), 0444), 0);
  ASSERT_EQ(chmod(in.c_str(), 0555), 0);
  const fs::path out_dir = dir.path() / "out";
  fs::create_directories(out_dir);
  ASSERT_EQ(chmod(out_dir.c_str(), 0777), 0);
  ASSERT_EQ(chmod(dir.path().c_str(), 0755), 0);
  const std::set<std::string> before = Listing(in);
  const std::string result = AsNonRoot([&] {
    if (access(in.c_str(), W_OK) == 0) return std::string("the folder is writable: the test proves nothing");
    Store out = Store::Open((out_dir / "fleet.db").string());
    Merger merger(out);
    int runs = 0;
    for (const std::string& name : Listing(in)) runs += merger.Add(OpenMergeInput((in / name).string())).runs_added;
    merger.Commit();
    return "merged " + std::to_string(runs) + " runs";
  });
  EXPECT_EQ(result, "merged 2 runs");
  EXPECT_EQ(Listing(in), before);
  chmod(in.c_str(), 0755);  // so the TempDir can go
}

// A sweep still writing its file (its connection open, a -wal beside it):
// the merge reads it through SQLite's locks up to its last commit, creating
// nothing; the running run is replaced by its finished form at a later merge.
TEST(MergeInputs, AFileBeingWrittenIsReadUpToItsLastCommit) {
  const TempDir dir;
  const fs::path in = dir.path() / "in";
  fs::create_directories(in);
  const std::string path = (in / "running.db").string();
  std::optional<Store> writer = Store::Open(path);
  RunRecord run;
  run.machine_id = writer->UpsertMachine(testing::Machine("node-w", "node-w", 8));
  run.workload_name = "quickstart";
  run.workload_hash = "hash-of-quickstart";
  run.backend = "host-sim";
  run.version = "0.1.0";
  run.started_at = "2024-05-01T10:00:00Z";
  run.id = writer->BeginRun(run);
  TrialRecord trial;
  trial.phase = "baseline";
  trial.samples_per_s = 100;
  writer->AddTrial(run.id, trial);
  writer->AddTrial(run.id, trial);
  const std::set<std::string> during = Listing(in);
  ASSERT_EQ(during.count("running.db-wal"), 1u);

  Store out = Store::Open(dir / "fleet.db");
  const MergeStats first = MergeInto(out, OpenMergeInput(path));
  EXPECT_EQ(first.runs_added, 1);
  EXPECT_EQ(first.trials_added, 2);
  EXPECT_EQ(out.LoadRuns().at(0).status, RunStatus::kRunning);
  EXPECT_EQ(Listing(in), during);

  run.status = RunStatus::kDone;
  run.ended_at = "2024-05-01T10:05:00Z";
  writer->FinishRun(run);
  writer.reset();
  EXPECT_EQ(MergeInto(out, OpenMergeInput(path)).runs_updated, 1);
  EXPECT_EQ(out.LoadRuns().at(0).status, RunStatus::kDone);
}

TEST(Merger, AFailingInputLeavesTheOthersOfItsBatch) {
  const TempDir dir;
  const std::string a = dir / "a.db", b = dir / "b.db", bad = dir / "bad.db";
  WriteHostFile(a, "node-a");
  WriteHostFile(b, "node-b");
  WriteHostFile(bad, "node-x");
  std::string bytes = ReadFile(bad);
  std::fill(bytes.begin() + 4096, bytes.end(), '\xa5');
  WriteFile(bad, bytes);
  Store out = Store::Open(dir / "fleet.db");
  {
    Merger merger(out, 10);
    merger.Add(OpenMergeInput(a));
    EXPECT_THROW(merger.Add(OpenMergeInput(bad)), StoreError);
    merger.Add(OpenMergeInput(b));
    merger.Commit();
  }
  EXPECT_EQ(out.LoadRuns().size(), 2u);
  {
    Merger uncommitted(out, 10);
    WriteHostFile(dir / "c.db", "node-c");
    uncommitted.Add(OpenMergeInput(dir / "c.db"));
  }  // destroyed before Commit: rolled back
  EXPECT_EQ(out.LoadRuns().size(), 2u);
}

}  // namespace
}  // namespace feedtune::results
