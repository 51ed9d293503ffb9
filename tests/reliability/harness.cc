#include "tests/reliability/harness.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <regex>
#include <stdexcept>
#include <thread>

#include "tests/common/process_tree.h"
#include "tests/common/read_file.h"
#include "tests/common/tiny_sweep.h"

namespace feedtune::reliability {
namespace {

using Clock = std::chrono::steady_clock;
using testing_util::ReadFile;

}  // namespace

std::string FeedtuneBinary() { return FEEDTUNE_BINARY; }
fs::path SourceDir() { return FEEDTUNE_SOURCE_DIR; }

bool UnderSanitizer() {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  return true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
  return true;
#else
  return false;
#endif
#else
  return false;
#endif
}

Seconds Generous(Seconds limit) { return UnderSanitizer() ? limit * 4 : limit; }

TempDir::TempDir(const std::string& tag) {
  std::string pattern = (fs::temp_directory_path() / ("feedtune-rel-" + tag + ".XXXXXX")).string();
  if (mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp: " + std::string(std::strerror(errno)));
  path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code error;
  // A test may have left a read-only folder behind; make it removable first.
  for (auto it = fs::recursive_directory_iterator(path_, error); !error && it != fs::recursive_directory_iterator();
       it.increment(error)) {
    if (it->is_directory(error)) fs::permissions(it->path(), fs::perms::owner_all, fs::perm_options::add, error);
  }
  fs::permissions(path_, fs::perms::owner_all, fs::perm_options::add, error);
  fs::remove_all(path_, error);
}

std::string TempDir::Write(const std::string& name, const std::string& text) const {
  const fs::path p = path_ / name;
  std::ofstream(p, std::ios::binary) << text;
  return p.string();
}

Child::Child(const std::vector<std::string>& args, const ChildOptions& options) : start_(Clock::now()) {
  static int counter = 0;
  out_path_ = fs::temp_directory_path() /
              ("feedtune-rel-out-" + std::to_string(getpid()) + "-" + std::to_string(++counter));
  int err_pipe[2];
  if (pipe2(err_pipe, O_CLOEXEC) != 0) throw std::runtime_error("pipe: " + std::string(std::strerror(errno)));
  std::vector<std::string> argv_text = {FeedtuneBinary()};
  argv_text.insert(argv_text.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_text) argv.push_back(a.data());
  argv.push_back(nullptr);
  const std::string out_path = out_path_.string();

  pid_ = fork();
  if (pid_ < 0) throw std::runtime_error("fork: " + std::string(std::strerror(errno)));
  if (pid_ == 0) {
    setpgid(0, 0);
    const int in = open("/dev/null", O_RDONLY);
    const int out = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (in < 0 || out < 0) _exit(127);
    dup2(in, STDIN_FILENO);
    dup2(out, STDOUT_FILENO);
    dup2(err_pipe[1], STDERR_FILENO);
    for (const auto& [resource, value] : options.rlimits) {
      const rlimit limit{value, value};
      if (setrlimit(resource, &limit) != 0) _exit(126);
    }
    for (int signo : options.ignored_signals) signal(signo, SIG_IGN);
    if (!options.cwd.empty() && chdir(options.cwd.c_str()) != 0) _exit(125);
    execv(argv[0], argv.data());
    _exit(127);
  }
  setpgid(pid_, pid_);  // also here, so that it holds before the test looks
  close(err_pipe[1]);
  err_fd_ = err_pipe[0];
}

Child::~Child() {
  if (!reaped_ && pid_ > 0) {
    kill(-pid_, SIGKILL);
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    WaitGroupGone(pid_, Seconds(5));
  }
  if (err_fd_ >= 0) close(err_fd_);
  std::error_code error;
  fs::remove(out_path_, error);
}

bool Child::ReadErr(int timeout_ms) {
  if (err_fd_ < 0) return false;
  pollfd p{err_fd_, POLLIN, 0};
  const int r = poll(&p, 1, timeout_ms);
  if (r <= 0) return true;
  char buf[8192];
  const ssize_t n = read(err_fd_, buf, sizeof buf);
  if (n < 0 && errno == EINTR) return true;
  if (n <= 0) {
    close(err_fd_);
    err_fd_ = -1;
    return false;
  }
  err_.append(buf, static_cast<size_t>(n));
  return true;
}

bool Child::WaitForLines(const std::function<bool(const std::string&)>& match, int count, Seconds timeout) {
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(timeout);
  while (true) {
    // Count whole lines not yet scanned.
    for (size_t nl; (nl = err_.find('\n', scanned_)) != std::string::npos; scanned_ = nl + 1) {
      if (match(err_.substr(scanned_, nl - scanned_))) ++lines_matched_;
    }
    if (lines_matched_ >= count) return true;
    if (Clock::now() >= deadline) return false;
    if (!ReadErr(50)) {
      // EOF: count a last unterminated line too.
      if (scanned_ < err_.size() && match(err_.substr(scanned_))) ++lines_matched_;
      scanned_ = err_.size();
      return lines_matched_ >= count;
    }
  }
}

void Child::Signal(int signo) const {
  if (!reaped_) kill(pid_, signo);
}

ChildResult Child::Wait(Seconds timeout) {
  ChildResult result;
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(timeout);
  int status = 0;
  rusage usage{};
  while (true) {
    ReadErr(20);
    const pid_t r = wait4(pid_, &status, WNOHANG, &usage);
    if (r == pid_) break;
    if (r < 0 && errno == ECHILD) throw std::runtime_error("feedtune child " + std::to_string(pid_) + " was reaped elsewhere");
    if (Clock::now() >= deadline) {
      result.timed_out = true;
      kill(-pid_, SIGKILL);
      kill(pid_, SIGKILL);
      wait4(pid_, &status, 0, &usage);
      break;
    }
  }
  reaped_ = true;
  // Drain what is left. A worker that outlived feedtune may hold the pipe open:
  // stop when it stays quiet, rather than waiting for its end.
  const auto drain_until = Clock::now() + std::chrono::seconds(2);
  while (err_fd_ >= 0 && Clock::now() < drain_until) {
    pollfd p{err_fd_, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) break;
    if (!ReadErr(0)) break;
  }
  result.wall_s = Seconds(Clock::now() - start_).count();
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) result.signal = WTERMSIG(status);
  result.max_rss_kib = usage.ru_maxrss;
  result.out = ReadFile(out_path_);
  result.err = err_;
  return result;
}

std::string TinySweepConfig(const std::string& name, int samples, int sample_bytes) {
  return testing_util::TinySweepYaml({.name = name,
                                      .samples = samples,
                                      .sample_bytes = sample_bytes,
                                      .measure_seconds = "0.2",
                                      .sweep_extra = "  diagnose: false\n"});
}

ChildResult RunFeedtune(const std::vector<std::string>& args, Seconds timeout, const ChildOptions& options) {
  Child child(args, options);
  return child.Wait(timeout);
}

bool IsTrialLine(const std::string& line) {
  static const std::regex kTrial(R"(^\[\s*\d+\] )");
  return std::regex_search(line, kTrial);
}

int CountTrialLines(const std::string& err) {
  int count = 0;
  size_t start = 0;
  while (start < err.size()) {
    size_t nl = err.find('\n', start);
    if (nl == std::string::npos) nl = err.size();
    if (IsTrialLine(err.substr(start, nl - start))) ++count;
    start = nl + 1;
  }
  return count;
}

std::vector<pid_t> LivingInGroup(pid_t pgid) {
  std::vector<pid_t> living;
  for (const pid_t pid : testing_util::AllPids()) {
    const auto stat = testing_util::ReadProcStat(pid);
    if (!stat || stat->pgrp != pgid) continue;
    if (stat->state == 'Z' || stat->state == 'X') {
      // Reap orphaned workers reparented here; the leader is its Child's to reap.
      if (stat->ppid == getpid() && pid != pgid) waitpid(pid, nullptr, WNOHANG);
      continue;
    }
    living.push_back(pid);
  }
  return living;
}

std::vector<pid_t> WaitGroupGone(pid_t pgid, Seconds timeout) {
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(timeout);
  while (true) {
    std::vector<pid_t> living = LivingInGroup(pgid);
    if (living.empty() || Clock::now() >= deadline) return living;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

void BecomeSubreaper() { prctl(PR_SET_CHILD_SUBREAPER, 1); }

std::vector<std::string> FeedtuneShmEntries() {
  std::vector<std::string> entries;
  std::error_code error;
  for (const auto& e : fs::directory_iterator("/dev/shm", error)) {
    const std::string name = e.path().filename().string();
    if (name.find("feedtune") != std::string::npos) entries.push_back(name);
  }
  return entries;
}

std::string IntegrityCheck(const std::string& db_path) {
  try {
    std::string text;
    for (const auto& row : QueryColumn(db_path, "PRAGMA integrity_check")) text += (text.empty() ? "" : "; ") + row;
    return text;
  } catch (const std::exception& e) {
    return e.what();
  }
}

std::vector<std::string> QueryColumn(const std::string& db_path, const std::string& sql) {
  sqlite3* db = nullptr;
  // Read-write (not read-only) so that a WAL left by a killed writer can be recovered.
  int rc = sqlite3_open_v2(db_path.c_str(), &db, SQLITE_OPEN_READWRITE, nullptr);
  std::vector<std::string> rows;
  std::string error;
  if (rc == SQLITE_OK) {
    sqlite3_busy_timeout(db, 10000);
    sqlite3_stmt* stmt = nullptr;
    rc = sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt, nullptr);
    while (rc == SQLITE_OK || rc == SQLITE_ROW) {
      rc = sqlite3_step(stmt);
      if (rc != SQLITE_ROW) break;
      const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0));
      rows.emplace_back(text != nullptr ? text : "NULL");
    }
    sqlite3_finalize(stmt);
    if (rc != SQLITE_DONE) error = sqlite3_errmsg(db);
  } else {
    error = db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  }
  sqlite3_close(db);
  if (!error.empty()) throw std::runtime_error(db_path + ": " + sql + ": " + error);
  return rows;
}

int64_t QueryInt(const std::string& db_path, const std::string& sql) {
  const auto rows = QueryColumn(db_path, sql);
  if (rows.empty()) throw std::runtime_error(db_path + ": " + sql + ": no row");
  return std::stoll(rows[0]);
}

std::string FileDigest(const std::string& path) {
  std::error_code error;
  if (!fs::exists(path, error)) return "missing";
  const std::string bytes = ReadFile(path);
  uint64_t hash = 0xcbf29ce484222325ull;
  for (unsigned char c : bytes) {
    hash ^= c;
    hash *= 0x100000001b3ull;
  }
  return std::to_string(bytes.size()) + ":" + std::to_string(hash);
}

}  // namespace feedtune::reliability
