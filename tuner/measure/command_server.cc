#include "tuner/measure/command_server.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string_view>
#include <system_error>
#include <thread>
#include <unordered_map>

#include "tuner/measure/child_output.h"
#include "tuner/measure/line_socket.h"
#include "tuner/measure/trial_runner.h"

extern char** environ;

namespace feedtune::tuner {
namespace {

using Clock = std::chrono::steady_clock;
using child_output::Errno;
using child_output::FormatSeconds;
using child_output::kPoll;
using child_output::kStderrKeep;

constexpr size_t kMaxLine = 1 << 20;  // a window line is a few hundred bytes
// After stdout closes, how long the leader may take to exit before it is killed.
constexpr auto kExitGrace = std::chrono::seconds(2);



// A line as shown in a message: at most 200 characters.
std::string Shown(std::string_view line) {
  std::string shown(line.substr(0, 200));
  if (line.size() > 200) shown += "...";
  return shown;
}

void CloseFd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

// Reads what is available into `out`; false at end of file (or on error).
bool ReadAvailable(int fd, std::string& out) {
  char buf[16384];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n > 0) {
      out.append(buf, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    return false;
  }
}

// Fields after the command name in /proc/PID/stat (the name may hold spaces).
std::vector<std::string> StatFields(pid_t pid) {
  // getline, not istreambuf_iterator: a process that exits between the open
  // and the read fails the read with ESRCH, which libstdc++ throws through the
  // iterator but getline turns into an empty line.
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  std::getline(in, stat);
  std::vector<std::string> fields;
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return fields;
  size_t pos = close + 1;
  while (pos < stat.size()) {
    while (pos < stat.size() && stat[pos] == ' ') ++pos;
    const size_t end = stat.find(' ', pos);
    if (pos < stat.size()) fields.push_back(stat.substr(pos, end == std::string::npos ? std::string::npos : end - pos));
    if (end == std::string::npos) break;
    pos = end;
  }
  return fields;  // fields[0] is the state (field 3 of proc(5))
}

// User + system CPU of `pid` and of the children it has reaped, in seconds.
double ProcessCpuSeconds(pid_t pid) {
  const std::vector<std::string> f = StatFields(pid);
  if (f.size() < 15) return 0;
  double ticks = 0;
  for (size_t i = 11; i <= 14; ++i) ticks += std::strtod(f[i].c_str(), nullptr);  // utime stime cutime cstime
  return ticks / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

// Resident memory of `root` and its live descendants (the DataLoader workers).
int64_t TreeRssBytes(pid_t root) {
  std::unordered_map<pid_t, pid_t> parent;
  if (DIR* dir = ::opendir("/proc")) {
    while (const dirent* e = ::readdir(dir)) {
      if (e->d_name[0] < '1' || e->d_name[0] > '9') continue;
      const pid_t pid = static_cast<pid_t>(std::atoi(e->d_name));
      const std::vector<std::string> f = StatFields(pid);
      if (f.size() > 1 && f[0] != "Z") parent[pid] = static_cast<pid_t>(std::atoi(f[1].c_str()));
    }
    ::closedir(dir);
  }
  const long page = ::sysconf(_SC_PAGESIZE);
  int64_t total = 0;
  for (const auto& [pid, ppid] : parent) {
    bool in_tree = pid == root;
    for (pid_t up = ppid, hops = 0; !in_tree && up > 1 && hops < 64; ++hops) {
      in_tree = up == root;
      const auto it = parent.find(up);
      up = it == parent.end() ? 0 : it->second;
    }
    if (!in_tree) continue;
    std::ifstream statm("/proc/" + std::to_string(pid) + "/statm");
    int64_t size = 0, resident = 0;
    if (statm >> size >> resident) total += resident * page;
  }
  return total;
}

std::string ExitText(int status) {
  if (WIFEXITED(status)) return "exited with code " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return "was killed by signal " + DescribeSignal(WTERMSIG(status));
  return "ended";
}

std::string Windows(size_t got, int asked) {
  return std::to_string(got) + " of " + std::to_string(asked) + " window" + (asked == 1 ? "" : "s");
}

}  // namespace

std::string DescribeSignal(int sig) {
  std::string text = std::to_string(sig);
  if (const char* abbrev = sigabbrev_np(sig)) text += std::string(" (SIG") + abbrev + ")";
  return text;
}

int SpawnInOwnGroup(const std::string& path, const std::vector<std::string>& argv,
                    const std::vector<std::string>& extra_env, int stdin_fd, int stdout_fd, int stderr_fd,
                    pid_t* pid) {
  // Everything the child needs is built before it exists.
  std::vector<char*> child_argv;
  for (const std::string& a : argv) child_argv.push_back(const_cast<char*>(a.c_str()));
  child_argv.push_back(nullptr);
  std::vector<std::string> env_storage;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string_view entry(*e);
    const std::string_view name = entry.substr(0, entry.find('='));
    const bool overridden = std::any_of(extra_env.begin(), extra_env.end(), [&](const std::string& x) {
      return std::string_view(x).substr(0, x.find('=')) == name;
    });
    if (!overridden) env_storage.emplace_back(entry);
  }
  env_storage.insert(env_storage.end(), extra_env.begin(), extra_env.end());
  std::vector<char*> child_env;
  for (std::string& e : env_storage) child_env.push_back(e.data());
  child_env.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (stdin_fd < 0) {
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  } else {
    posix_spawn_file_actions_adddup2(&actions, stdin_fd, 0);
  }
  posix_spawn_file_actions_adddup2(&actions, stdout_fd, 1);
  posix_spawn_file_actions_adddup2(&actions, stderr_fd, 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  // Its own process group, so a timeout can kill everything it started; default
  // signal dispositions and an empty mask, whatever this process has set.
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  posix_spawnattr_setpgroup(&attr, 0);
  sigset_t empty, defaults;
  sigemptyset(&empty);
  posix_spawnattr_setsigmask(&attr, &empty);
  sigemptyset(&defaults);
  for (int sig : {SIGINT, SIGTERM, SIGQUIT, SIGPIPE, SIGCHLD, SIGHUP}) sigaddset(&defaults, sig);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  const int error = ::posix_spawn(pid, path.c_str(), &actions, &attr, child_argv.data(), child_env.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  return error;
}

std::unique_ptr<CommandServer> CommandServer::Start(const std::vector<std::string>& argv,
                                                    const std::vector<std::string>& extra_env, std::string* error) {
  if (argv.empty()) {
    *error = "empty command";
    return nullptr;
  }
  const std::string path = ResolveCommand(argv[0]);
  if (path.empty()) {
    *error = "'" + argv[0] + "' not found" + (argv[0].find('/') == std::string::npos ? " in PATH" : " or not executable");
    return nullptr;
  }
  // stdin is a socket, not a pipe: send(MSG_NOSIGNAL) to a process that died
  // gives EPIPE instead of a SIGPIPE that would end feedtune.
  int in_pair[2], out_pipe[2], err_pipe[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, in_pair) != 0) {
    *error = std::string("socketpair: ") + Errno(errno);
    return nullptr;
  }
  if (::pipe2(out_pipe, O_CLOEXEC) != 0) {
    *error = std::string("pipe: ") + Errno(errno);
    ::close(in_pair[0]);
    ::close(in_pair[1]);
    return nullptr;
  }
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) {
    *error = std::string("pipe: ") + Errno(errno);
    for (int fd : {in_pair[0], in_pair[1], out_pipe[0], out_pipe[1]}) ::close(fd);
    return nullptr;
  }
  std::unique_ptr<CommandServer> server(new CommandServer());
  server->stdin_fd_ = in_pair[0];
  server->stdout_fd_ = out_pipe[0];
  server->stderr_fd_ = err_pipe[0];
  server->started_at_ = Clock::now();
  pid_t pid = -1;
  const int spawn_error = SpawnInOwnGroup(path, argv, extra_env, in_pair[1], out_pipe[1], err_pipe[1], &pid);
  for (int fd : {in_pair[1], out_pipe[1], err_pipe[1]}) ::close(fd);  // the child's ends
  if (spawn_error != 0) {
    *error = path + ": " + Errno(spawn_error);
    server->dead_ = true;
    return nullptr;
  }
  server->pid_ = pid;
  ::fcntl(server->stdout_fd_, F_SETFL, O_NONBLOCK);
  ::fcntl(server->stderr_fd_, F_SETFL, O_NONBLOCK);
  return server;
}

std::unique_ptr<CommandServer> CommandServer::Attach(int fd, std::string* error) {
  struct stat st {};
  int type = 0;
  socklen_t type_len = sizeof type;
  if (::fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode) ||
      ::getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &type_len) != 0 || type != SOCK_STREAM) {
    *error = "fd " + std::to_string(fd) + " is not an open stream socket (--serve-fd takes the socket that the "
             "process which started feedtune serves requests on: feedtune.autotune passes it)";
    return nullptr;
  }
  // Reads go through a second descriptor made non-blocking; O_NONBLOCK is
  // shared by the two, so SendRequest waits out EAGAIN.
  const int read_fd = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (read_fd < 0) {
    *error = std::string("dup of fd ") + std::to_string(fd) + ": " + Errno(errno);
    return nullptr;
  }
  ::fcntl(fd, F_SETFD, FD_CLOEXEC);  // the search's own children must not hold the job's socket open
  std::unique_ptr<CommandServer> server(new CommandServer());
  server->attached_ = true;
  server->pid_ = ::getppid();
  server->stdin_fd_ = fd;
  server->stdout_fd_ = read_fd;
  server->started_at_ = Clock::now();
  ::fcntl(read_fd, F_SETFL, O_NONBLOCK);
  return server;
}

CommandServer::~CommandServer() {
  if (!dead_ && pid_ > 0 && !attached_) KillAndReap();
  CloseFd(stdin_fd_);
  CloseFd(stdout_fd_);
  CloseFd(stderr_fd_);
}

std::string CommandServer::KillAndReap() {
  if (dead_) return {};
  if (attached_) {  // the job is not ours to kill: the connection is over
    dead_ = true;
    return {};
  }
  // Kill before reaping: the group (its workers too) must still exist, and
  // the leader's pid must not be free for reuse while we signal it.
  ::kill(-pid_, SIGKILL);
  int status = 0;
  while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  dead_ = true;
  DrainStderr();
  if (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) return {};  // ours (or indistinguishable from it)
  return ExitText(status);
}

bool CommandServer::StillRunning() {
  if (dead_) return false;
  if (attached_) return true;  // a closed socket shows at the next request
  siginfo_t info{};
  if (::waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == pid_) {
    KillAndReap();
    return false;
  }
  return true;
}

std::string CommandServer::ReapAfterEof() {
  if (attached_) {
    dead_ = true;
    return "closed the connection";
  }
  const auto deadline = Clock::now() + kExitGrace;
  while (Clock::now() < deadline) {
    siginfo_t info{};
    // Look without reaping: the group must still exist when it is killed.
    if (::waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == pid_) {
      break;
    }
    DrainStderr();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const std::string how = KillAndReap();
  return how.empty() ? "closed its stdout and was killed" : how;
}

void CommandServer::DrainStderr() {
  if (stderr_fd_ < 0) return;
  if (!ReadAvailable(stderr_fd_, stderr_tail_)) CloseFd(stderr_fd_);
  if (stderr_tail_.size() > kStderrKeep) stderr_tail_.erase(0, stderr_tail_.size() - kStderrKeep);
}

ServedTrial CommandServer::RunTrial(const std::string& request_line, int64_t trial_id, int windows,
                                    double timeout_s, const std::atomic<bool>* stop) {
  ServedTrial trial;
  const auto fail = [&](std::string why) {
    trial.ok = false;
    trial.failure = std::move(why);
    return trial;
  };
  if (dead_) return fail("the serving command is not running");

  const auto requested_at = Clock::now();
  // The first trial waits for the start-up too (python, imports, the dataset).
  const auto clock_start = started_any_ ? requested_at : started_at_;
  started_any_ = true;
  const auto deadline = clock_start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
  const double cpu_before = ProcessCpuSeconds(pid_);

  if (std::string why = SendRequest(request_line, trial_id); !why.empty()) return fail(std::move(why));

  auto last_line_at = requested_at;
  bool ending = false;         // its stdout closed or the leader exited: the lines read are all there is
  bool leader_exited = false;
  for (;;) {
    // Whole lines first: several may have come in one read.
    std::string text;
    while (line_socket::TakeLine(stdout_buffer_, &text)) {
      const size_t first = text.find_first_not_of(" \t\r");
      if (first == std::string::npos || text[first] != '{') continue;  // a user's print
      const std::string where = "trial " + std::to_string(trial_id) + " after " + Windows(trial.windows.size(), windows);
      const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
      if (j.is_discarded() || !j.is_object()) {
        KillAndReap();
        return fail("the serving command printed a line that is not a JSON object in " + where + ": '" + Shown(text) +
                    "' (lines that start with '{' are protocol lines; see docs/command-protocol.md)");
      }
      if (const auto end = j.find("trial_end"); end != j.end()) {
        if (!end->is_number_integer() || end->get<int64_t>() != trial_id) {
          KillAndReap();
          return fail("the serving command ended trial " + end->dump() + " while trial " + std::to_string(trial_id) +
                      " was running: '" + Shown(text) + "'");
        }
        if (trial.windows.size() != static_cast<size_t>(windows)) {
          KillAndReap();
          return fail("the serving command ended " + where + "; expected " + std::to_string(windows) +
                      " window lines before {\"trial_end\": " + std::to_string(trial_id) + "}");
        }
        trial.ok = true;
        trial.wall_s = std::chrono::duration<double>(Clock::now() - requested_at).count();
        trial.cpu_s = std::max(0.0, ProcessCpuSeconds(pid_) - cpu_before);
        DrainStderr();
        return trial;
      }
      if (const auto error = j.find("error"); error != j.end()) {
        // The command caught its own failure and can serve the next trial.
        std::string said = error->is_string() ? error->get<std::string>() : error->dump();
        DrainStderr();
        return fail("the serving command reported an error in " + where + ": " + Shown(said));
      }
      if (trial.windows.size() == static_cast<size_t>(windows)) {
        KillAndReap();
        return fail("the serving command printed more than the " + std::to_string(windows) + " window lines asked in trial " +
                    std::to_string(trial_id) + ": '" + Shown(text) + "'");
      }
      CommandReport report;
      try {
        report = ParseCommandReport(text);
      } catch (const std::runtime_error& e) {
        KillAndReap();
        return fail(std::string(e.what()) + " (" + where + ")");
      }
      const auto now = Clock::now();
      trial.windows.push_back(report);
      trial.window_wall_s.push_back(std::chrono::duration<double>(now - last_line_at).count());
      last_line_at = now;
      // The workers are alive until the trial ends, so this sees them.
      trial.peak_rss_bytes = std::max(trial.peak_rss_bytes, TreeRssBytes(pid_));
    }
    // A stop comes before the end of the connection it may have caused: a
    // job that closes its loader signals the sweep, then closes the socket
    // (python/feedtune/autotune/controller.py), and its run is interrupted,
    // not failed.
    if (stop != nullptr && stop->load(std::memory_order_relaxed)) {
      KillAndReap();
      throw Interrupted();
    }
    if (ending && attached_) {
      // The job serves on the socket only while it runs: the tuning ends with
      // it. Failing this trial and every later one would let the search
      // finish "done" with a best that no job runs.
      dead_ = true;
      throw JobGone("the training job closed the connection in trial " + std::to_string(trial_id) + " after " +
                    Windows(trial.windows.size(), windows) + ": it ended or was killed");
    }
    if (ending) {
      const std::string how = leader_exited ? KillAndReap() : ReapAfterEof();
      return fail("the serving command " + (how.empty() ? std::string("closed its stdout and was killed") : how) +
                  " in trial " + std::to_string(trial_id) + " after " + Windows(trial.windows.size(), windows) +
                  " (a serving command answers each request line with its window lines and {\"trial_end\": N}; "
                  "see docs/command-protocol.md)");
    }
    if (stdout_buffer_.size() > kMaxLine) {
      KillAndReap();
      return fail("the serving command printed a stdout line longer than " + std::to_string(kMaxLine) +
                  " bytes in trial " + std::to_string(trial_id));
    }

    if (Clock::now() >= deadline) {
      KillAndReap();
      return fail("trial " + std::to_string(trial_id) + " timed out after " + FormatSeconds(timeout_s) +
                  " s (workload.timeout_s" + (clock_start == started_at_ ? ", counted from the command's start" : "") +
                  ") with " + Windows(trial.windows.size(), windows) + " done; the serving command was killed");
    }
    std::string poll_error;
    ending = AwaitOutput(deadline, &leader_exited, &poll_error);
    if (!poll_error.empty()) {
      KillAndReap();
      return fail(poll_error);
    }
  }
}

std::string CommandServer::SendRequest(const std::string& request_line, int64_t trial_id) {
  const std::string line = request_line + "\n";
  for (size_t sent = 0; sent < line.size();) {
    const ssize_t n = ::send(stdin_fd_, line.data() + sent, line.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {  // attached: the socket is non-blocking
      pollfd out{stdin_fd_, POLLOUT, 0};
      ::poll(&out, 1, static_cast<int>(kPoll.count()));
      continue;
    }
    if (n < 0) {
      const int error = errno;
      if (attached_ && (error == EPIPE || error == ECONNRESET)) {
        dead_ = true;
        throw JobGone("the training job closed the connection before it read trial " + std::to_string(trial_id) +
                      "'s request: it ended or was killed");
      }
      const std::string how = error == EPIPE ? ReapAfterEof() : KillAndReap();
      return "the serving command " + (how.empty() ? "could not be sent the request (" + Errno(error) + ")" : how) +
             " before it read trial " + std::to_string(trial_id) + "'s request";
    }
    sent += static_cast<size_t>(n);
  }
  return {};
}

bool CommandServer::AwaitOutput(Clock::time_point deadline, bool* leader_exited, std::string* poll_error) {
  pollfd fds[2];
  nfds_t n = 0;
  fds[n++] = {stdout_fd_, POLLIN, 0};
  if (stderr_fd_ >= 0) fds[n++] = {stderr_fd_, POLLIN, 0};
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  const int wait_ms = static_cast<int>(std::clamp<int64_t>(left.count() + 1, 0, kPoll.count()));
  if (::poll(fds, n, wait_ms) < 0 && errno != EINTR) {
    *poll_error = std::string("poll: ") + Errno(errno);
    return false;
  }
  DrainStderr();
  const bool stdout_open = ReadAvailable(stdout_fd_, stdout_buffer_);
  // The leader can die while its children (DataLoader workers) hold stdout
  // open, so its exit is looked for too, without reaping: the group must
  // still exist when it is killed.
  siginfo_t info{};
  *leader_exited = !attached_ && ::waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
                   info.si_pid == pid_;
  if (!stdout_open || *leader_exited) {
    ReadAvailable(stdout_fd_, stdout_buffer_);  // what it wrote before it went
    // An unfinished last line counts as a line; the lines left may still end
    // the trial (the next trial then finds the process gone). Attached, it is
    // what a job killed mid-write left: the job is gone (JobGone), not wrong.
    if (!attached_ && !stdout_buffer_.empty() && stdout_buffer_.back() != '\n') stdout_buffer_ += '\n';
    return true;
  }
  return false;
}

}  // namespace feedtune::tuner
