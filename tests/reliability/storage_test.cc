// The results file under storage faults: a full file system (a small tmpfs made
// by the test when it may mount, and always a file-size limit as the fault shim),
// a read-only location, a file locked by another writer, and four sweeps writing
// one file at once. Each time: a clear error (or none), the file passes
// PRAGMA integrity_check, and every trial the sweep reported is in it.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tests/reliability/harness.h"

namespace feedtune::reliability {
namespace {

// Trials of the newest run.
int64_t TrialsOfNewestRun(const std::string& db) {
  return QueryInt(db, "SELECT count(*) FROM trials WHERE run_id = (SELECT max(id) FROM runs)");
}

// A tmpfs mounted for the test, unmounted at the end; or nothing, where this
// process may not mount (not root, no CAP_SYS_ADMIN).
class Tmpfs {
 public:
  Tmpfs(const fs::path& where, const std::string& options) : where_(where) {
    fs::create_directories(where_);
    mounted_ = mount("tmpfs", where_.c_str(), "tmpfs", 0, options.c_str()) == 0;
    error_ = std::strerror(errno);
  }
  Tmpfs(const Tmpfs&) = delete;
  Tmpfs& operator=(const Tmpfs&) = delete;
  ~Tmpfs() {
    if (mounted_) umount2(where_.c_str(), MNT_DETACH);
  }
  bool mounted() const { return mounted_; }
  const std::string& error() const { return error_; }
  bool RemountReadOnly() const {
    return mount("tmpfs", where_.c_str(), "tmpfs", MS_REMOUNT | MS_RDONLY, nullptr) == 0;
  }

 private:
  fs::path where_;
  bool mounted_ = false;
  std::string error_;
};

// Fills the file system holding `dir` to the last byte; returns the bytes written.
int64_t FillUp(const fs::path& dir) {
  const int fd = open((dir / "filler").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd < 0) return -1;
  std::vector<char> block(4096, 'x');
  int64_t total = 0;
  for (size_t size = block.size(); size > 0;) {
    const ssize_t n = write(fd, block.data(), size);
    if (n > 0) {
      total += n;
    } else {
      size /= 2;  // the last partial block
    }
  }
  close(fd);
  return total;
}

// What every storage test asks of the file after the fault.
void ExpectSound(const std::string& db, int reported_trials) {
  ASSERT_EQ(IntegrityCheck(db), "ok");
  const int64_t stored = TrialsOfNewestRun(db);
  EXPECT_GE(stored, reported_trials) << "a trial reported as stored is missing";
  // Nothing half-written: every ok trial has all its repeat rows (those
  // in its figures, and the disturbed windows others replaced).
  EXPECT_EQ(QueryInt(db,
                     "SELECT count(*) FROM trials t WHERE status = 'ok' AND "
                     "(SELECT count(*) FROM repeats r WHERE r.trial_id = t.id) != t.repeats + t.remeasured_windows"),
            0);
}

TEST(Storage, FullTmpfsFailsClearlyAndKeepsEveryReportedTrial) {
  const TempDir dir("fulltmpfs");
  const Tmpfs tmpfs(dir.path() / "mnt", "size=4m,mode=0700");
  if (!tmpfs.mounted()) GTEST_SKIP() << "cannot mount a tmpfs here (" << tmpfs.error() << "); the shim test covers it";
  const std::string config = dir.Write("c.yaml", TinySweepConfig("full"));
  const std::string db = (dir.path() / "mnt" / "r.db").string();

  Child sweep({"sweep", config, "--db", db});
  ASSERT_TRUE(sweep.WaitForLines(IsTrialLine, 2, Generous(Seconds(60)))) << sweep.err_so_far();
  ASSERT_GT(FillUp(dir.path() / "mnt"), 0);
  const ChildResult r = sweep.Wait(Generous(Seconds(120)));
  ASSERT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("feedtune: " + db + ": "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("database or disk is full (the disk is full)"), std::string::npos) << r.err;
  const int reported = CountTrialLines(r.err);
  EXPECT_GE(reported, 2);

  fs::remove(dir.path() / "mnt" / "filler");
  ExpectSound(db, reported);
  // The file stays usable: a report reads it, a new sweep appends to it.
  EXPECT_EQ(RunFeedtune({"report", "--db", db}, Generous(Seconds(30))).exit_code, 0);
  const ChildResult again = RunFeedtune({"sweep", config, "--db", db}, Generous(Seconds(120)));
  EXPECT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(IntegrityCheck(db), "ok");
  std::printf("[ figures  ] full tmpfs: sweep stopped after %d stored trials with: %s", reported,
              r.err.substr(r.err.rfind("feedtune: ")).c_str());
}

// The fault shim for a full disk where the test may not mount: a file-size
// limit (RLIMIT_FSIZE, SIGXFSZ ignored) makes every write past it fail, as a
// full disk does. The limit is set a little above the write-ahead log's size
// after two trials, measured on a scratch file first, so the third trial's
// commit is the write that fails.
TEST(Storage, FileSizeLimitShimFailsClearlyAndKeepsEveryReportedTrial) {
  const TempDir dir("fsize");
  // Small samples: the batch slots (a memfd, also bound by RLIMIT_FSIZE) stay tiny.
  const std::string config = dir.Write("c.yaml", TinySweepConfig("fsize", 256, 64));
  const std::string scratch = dir / "scratch.db";
  uintmax_t wal_after_two = 0;
  {
    Child sweep({"sweep", config, "--db", scratch});
    ASSERT_TRUE(sweep.WaitForLines(IsTrialLine, 2, Generous(Seconds(60)))) << sweep.err_so_far();
    sweep.Signal(SIGKILL);  // keeps the log as it is
    sweep.Wait(Seconds(30));
    wal_after_two = fs::file_size(scratch + "-wal");
  }
  ASSERT_GT(wal_after_two, 0u);
  const rlim_t limit = wal_after_two + 2 * 4096;

  const std::string db = dir / "r.db";
  ChildOptions options;
  options.rlimits = {{RLIMIT_FSIZE, limit}};
  options.ignored_signals = {SIGXFSZ};
  const ChildResult r = RunFeedtune({"sweep", config, "--db", db}, Generous(Seconds(120)), options);
  ASSERT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("feedtune: " + db + ": "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("disk I/O error"), std::string::npos) << r.err;
  const int reported = CountTrialLines(r.err);
  EXPECT_GE(reported, 1);
  ExpectSound(db, reported);
  EXPECT_EQ(RunFeedtune({"report", "--db", db}, Generous(Seconds(30))).exit_code, 0);
  std::printf("[ figures  ] file-size limit %llu bytes: sweep stopped after %d stored trials with: %s",
              static_cast<unsigned long long>(limit), reported, r.err.substr(r.err.rfind("feedtune: ")).c_str());
}

TEST(Storage, ReadOnlyFolderIsAClearErrorAndCreatesNothing) {
  const TempDir dir("rofolder");
  const std::string config = dir.Write("c.yaml", TinySweepConfig("ro"));
  const fs::path place = dir.path() / "ro";
  std::unique_ptr<Tmpfs> tmpfs;
  if (geteuid() == 0) {
    tmpfs = std::make_unique<Tmpfs>(place, "size=1m,mode=0755");
    if (!tmpfs->mounted() || !tmpfs->RemountReadOnly()) GTEST_SKIP() << "root, but cannot mount a read-only tmpfs";
  } else {
    fs::create_directories(place);
    fs::permissions(place, fs::perms::owner_read | fs::perms::owner_exec);
  }
  const std::string db = (place / "r.db").string();
  const ChildResult r = RunFeedtune({"sweep", config, "--db", db}, Generous(Seconds(60)));
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("feedtune: " + db + ": "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("check that the file and its folder exist and are writable"), std::string::npos) << r.err;
  EXPECT_EQ(CountTrialLines(r.err), 0) << "no trial may run when its result cannot be stored";
  EXPECT_TRUE(fs::is_empty(place));
}

// A results file whose folder has been made read-only after a sweep (results
// archived on read-only media): each test makes one in `place`.
class ReadOnlyResults : public testing::Test {
 protected:
  void SetUp() override {
    config_ = dir_.Write("c.yaml", TinySweepConfig("rofile"));
    place_ = dir_.path() / "mnt";
    if (geteuid() == 0) {
      tmpfs_ = std::make_unique<Tmpfs>(place_, "size=4m,mode=0755");
      if (!tmpfs_->mounted()) GTEST_SKIP() << "root, but cannot mount a tmpfs";
    } else {
      fs::create_directories(place_);
    }
    db_ = (place_ / "r.db").string();
    ASSERT_EQ(RunFeedtune({"sweep", config_, "--db", db_}, Generous(Seconds(120))).exit_code, 0);
    trials_ = TrialsOfNewestRun(db_);
    if (tmpfs_) {
      ASSERT_TRUE(tmpfs_->RemountReadOnly());
    } else {
      fs::permissions(db_, fs::perms::owner_read);
      fs::permissions(place_, fs::perms::owner_read | fs::perms::owner_exec);
    }
    before_ = FileDigest(db_);
  }
  void TearDown() override {
    if (tmpfs_ && tmpfs_->mounted()) mount("tmpfs", place_.c_str(), "tmpfs", MS_REMOUNT, nullptr);
    if (!db_.empty() && fs::exists(db_)) {
      EXPECT_EQ(TrialsOfNewestRun(db_), trials_);
    }
  }

  TempDir dir_{"rofile"};
  std::string config_;
  fs::path place_;
  std::unique_ptr<Tmpfs> tmpfs_;
  std::string db_;
  int64_t trials_ = 0;
  std::string before_;
};

TEST_F(ReadOnlyResults, ASweepIsRefusedClearlyAndTheFileIsUntouched) {
  const ChildResult r = RunFeedtune({"sweep", config_, "--db", db_}, Generous(Seconds(60)));
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("feedtune: " + db_ + ": "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("writable"), std::string::npos) << r.err;
  EXPECT_EQ(CountTrialLines(r.err), 0) << "no trial may run when its result cannot be stored";
  EXPECT_EQ(FileDigest(db_), before_);
}

// A results file in WAL mode in a read-only folder: sqlite cannot create the
// -shm file beside it, so OpenReadOnly falls back to reading it as immutable.
TEST_F(ReadOnlyResults, TheFileCanStillBeReported) {
  const ChildResult report = RunFeedtune({"report", "--db", db_, "--format", "json"}, Generous(Seconds(30)));
  EXPECT_EQ(report.exit_code, 0) << report.err;
  EXPECT_EQ(FileDigest(db_), before_);
}

// Holds the write lock of a results file, as another writer would, until Release().
class WriteLock {
 public:
  explicit WriteLock(const std::string& db) {
    sqlite3_open(db.c_str(), &db_);
    sqlite3_busy_timeout(db_, 30000);
    ok_ = sqlite3_exec(db_, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr) == SQLITE_OK;
  }
  WriteLock(const WriteLock&) = delete;
  WriteLock& operator=(const WriteLock&) = delete;
  ~WriteLock() {
    Release();
    sqlite3_close(db_);
  }
  bool ok() const { return ok_; }
  void Release() {
    if (ok_) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    ok_ = false;
  }

 private:
  sqlite3* db_ = nullptr;
  bool ok_ = false;
};

TEST(Storage, ABriefLockByAnotherWriterIsWaitedFor) {
  const TempDir dir("brieflock");
  const std::string config = dir.Write("c.yaml", TinySweepConfig("brief"));
  const std::string db = dir / "r.db";
  Child sweep({"sweep", config, "--db", db});
  ASSERT_TRUE(sweep.WaitForLines(IsTrialLine, 2, Generous(Seconds(60)))) << sweep.err_so_far();
  {
    WriteLock lock(db);
    ASSERT_TRUE(lock.ok());
    std::this_thread::sleep_for(std::chrono::seconds(3));  // over a trial's length: the sweep must wait
  }
  const ChildResult r = sweep.Wait(Generous(Seconds(120)));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  ExpectSound(db, CountTrialLines(r.err));
  EXPECT_EQ(QueryColumn(db, "SELECT status FROM runs")[0], "done");
}

TEST(Storage, ALockHeldPastTheBusyTimeoutIsAClearErrorAndLosesNothing) {
  const TempDir dir("longlock");
  const std::string config = dir.Write("c.yaml", TinySweepConfig("long"));
  const std::string db = dir / "r.db";
  Child sweep({"sweep", config, "--db", db});
  ASSERT_TRUE(sweep.WaitForLines(IsTrialLine, 2, Generous(Seconds(60)))) << sweep.err_so_far();
  WriteLock lock(db);
  ASSERT_TRUE(lock.ok());
  const ChildResult r = sweep.Wait(Generous(Seconds(120)));
  lock.Release();
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("feedtune: " + db + ": "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("another process kept the results file locked for more than"), std::string::npos) << r.err;
  const int reported = CountTrialLines(r.err);
  EXPECT_GE(reported, 2);
  ExpectSound(db, reported);
  std::printf("[ figures  ] lock held past the timeout: sweep stopped after %d stored trials with: %s", reported,
              r.err.substr(r.err.rfind("feedtune: ")).c_str());
}

TEST(Storage, FourSweepsWritingOneFileLoseNothing) {
  const TempDir dir("four");
  const std::string db = dir / "r.db";  // created by whichever sweep comes first
  std::vector<std::unique_ptr<Child>> sweeps;
  for (int i = 0; i < 4; ++i) {
    const std::string config = dir.Write("c" + std::to_string(i) + ".yaml", TinySweepConfig("four" + std::to_string(i)));
    sweeps.push_back(std::make_unique<Child>(std::vector<std::string>{"sweep", config, "--db", db}));
  }
  int reported = 0;
  for (auto& sweep : sweeps) {
    const ChildResult r = sweep->Wait(Generous(Seconds(300)));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.err.find("locked"), std::string::npos) << r.err;
    reported += CountTrialLines(r.err);
  }
  ASSERT_EQ(IntegrityCheck(db), "ok");
  EXPECT_EQ(QueryInt(db, "SELECT count(*) FROM runs WHERE status = 'done'"), 4);
  EXPECT_EQ(QueryInt(db, "SELECT count(DISTINCT workload_name) FROM runs"), 4);
  EXPECT_EQ(QueryInt(db, "SELECT count(*) FROM trials"), reported);
  std::printf("[ figures  ] four concurrent sweeps stored %d trials, none lost\n", reported);
}

}  // namespace
}  // namespace feedtune::reliability
