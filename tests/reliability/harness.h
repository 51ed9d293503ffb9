// Test harness for the reliability suite: runs the feedtune binary as a child
// in its own process group with its output captured, kills it at chosen points,
// checks that nothing it started survives, and inspects results files with a
// plain sqlite3 connection (as another tool would, not through results::Store).
//
// Who owns what: a Child owns its process until Wait() has reaped it (the
// destructor SIGKILLs and reaps a child still running, and its group). A
// TempDir owns its folder. All of it is for one test thread.
#pragma once

#include <sys/resource.h>
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace feedtune::reliability {

namespace fs = std::filesystem;
using Seconds = std::chrono::duration<double>;

// The feedtune binary under test and the source tree.
std::string FeedtuneBinary();
fs::path SourceDir();

// True in builds with AddressSanitizer or ThreadSanitizer (slower; no RLIMIT_AS).
bool UnderSanitizer();

// Scales a time limit for sanitizer builds, which run several times slower.
Seconds Generous(Seconds limit);

// A fresh folder under the temp dir, removed with its contents at the end.
class TempDir {
 public:
  explicit TempDir(const std::string& tag);
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir();
  const fs::path& path() const { return path_; }
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }
  // Writes `text` to `name` in this folder; returns the path.
  std::string Write(const std::string& name, const std::string& text) const;

 private:
  fs::path path_;
};

struct ChildOptions {
  std::vector<std::pair<int, rlim_t>> rlimits;  // (RLIMIT_*, soft = hard value) set before exec
  std::vector<int> ignored_signals;             // set to SIG_IGN before exec (e.g. SIGXFSZ)
  std::string cwd;                              // empty: the test's
};

struct ChildResult {
  int exit_code = -1;  // -1 when killed by a signal
  int signal = 0;      // the signal that killed it, or 0
  bool timed_out = false;
  std::string out;  // stdout
  std::string err;  // stderr
  double wall_s = 0;
  int64_t max_rss_kib = 0;  // peak RSS of the child (not of its own children)
};

// One feedtune process: stdin /dev/null, stdout to a file, stderr through a pipe
// so that the test can wait for progress lines as they appear.
class Child {
 public:
  Child(const std::vector<std::string>& args, const ChildOptions& options = {});
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  ~Child();

  pid_t pid() const { return pid_; }
  // Waits until stderr holds `count` lines for which `match` is true; false on
  // timeout or when the child closes stderr (exits) first.
  bool WaitForLines(const std::function<bool(const std::string&)>& match, int count, Seconds timeout);
  // The stderr read so far.
  const std::string& err_so_far() const { return err_; }
  void Signal(int signo) const;
  // Waits for the exit (SIGKILLing the child and its group at `timeout`), reaps
  // it, and returns its result with all output.
  ChildResult Wait(Seconds timeout);

 private:
  bool ReadErr(int timeout_ms);  // false at EOF

  pid_t pid_ = -1;
  int err_fd_ = -1;
  fs::path out_path_;
  std::string err_;
  size_t scanned_ = 0;  // stderr bytes already split into lines
  int lines_matched_ = 0;
  std::chrono::steady_clock::time_point start_;
  bool reaped_ = false;
};

// A sweep config of about ten trials of a fraction of a second each on the
// host-sim device: a 300 us wait per sample (not CPU: the tests that use it run
// side by side, and a wait costs none), so workers help and the search goes
// through every phase; no stage trials after it (sweep.diagnose: false; they have their own
// tests). `samples` and `sample_bytes` size the batch slots and the epoch.
std::string TinySweepConfig(const std::string& name, int samples = 256, int sample_bytes = 4096);

// Runs feedtune to completion.
ChildResult RunFeedtune(const std::vector<std::string>& args, Seconds timeout, const ChildOptions& options = {});

// A progress line of `feedtune sweep` on a non-terminal stderr: "[ 3] num_workers ...".
bool IsTrialLine(const std::string& line);
int CountTrialLines(const std::string& err);

// Living (not zombie) processes whose process group is `pgid`; reaps the zombies
// among them that are this process's children (it is a child subreaper, see below).
std::vector<pid_t> LivingInGroup(pid_t pgid);
// Waits up to `timeout` for the group to be empty; returns what still lives.
std::vector<pid_t> WaitGroupGone(pid_t pgid, Seconds timeout);
// Makes this process the reaper of orphaned descendants, so that workers whose
// parent was killed are reparented here and can be seen and reaped.
void BecomeSubreaper();

// Entries of /dev/shm whose name contains "feedtune".
std::vector<std::string> FeedtuneShmEntries();

// --- Results files, through a plain sqlite3 connection -----------------------

// "ok", or sqlite's list of problems, or the error opening the file.
std::string IntegrityCheck(const std::string& db_path);
// The first column of each row of `sql` as text (NULL as "NULL"); throws on error.
std::vector<std::string> QueryColumn(const std::string& db_path, const std::string& sql);
int64_t QueryInt(const std::string& db_path, const std::string& sql);

// A SHA-256-free fingerprint of a file's bytes (size + FNV-1a); "missing" when absent.
std::string FileDigest(const std::string& path);

}  // namespace feedtune::reliability
