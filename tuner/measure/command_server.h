// CommandServer: one serving process of a command workload with
// workload.protocol serve (docs/command-protocol.md), and the spawn helper it
// shares with the run protocol's RunCommand.
//
// The serve protocol, in short (the doc has the details and an example):
//   - feedtune starts workload.argv once per sweep, lazily at the first trial,
//     in its own process group, stdin a socket, stdout and stderr pipes, with
//     FEEDTUNE_PROTOCOL=serve in the environment. The command builds its
//     dataset once.
//   - Per trial feedtune writes one request line on stdin, a JSON object:
//       {"trial": 7, "num_workers": 4, "pin_memory": true, "non_blocking": false,
//        "prefetch_factor": 2, "persistent_workers": false, "batch_size": 32,
//        "repeats": 2, "warmup_batches": 8, "measure_seconds": 2.0,
//        "window_epochs": 0, "step_us": 10000, "sync_every_steps": 1}
//     (window_epochs > 0: each window is that many whole epochs, not
//     measure_seconds). The command builds a new DataLoader over its dataset,
//     warms up, and measures `repeats` windows back to back.
//   - It prints one line per window, the run protocol's result object
//     ({"samples_per_s": ...} required; the optional figures are those
//     command_measurer.h lists: left out, a figure is not measured), then
//     {"trial_end": 7}. Or, instead of the rest of the trial,
//     {"error": "why"}: that trial fails and the process stays for the next.
//   - stdout lines whose first non-blank character is not '{' are ignored
//     (a user's print); every line that starts with '{' must be one of the
//     three objects above.
//   - A death, a hang past workload.timeout_s (per trial; the first trial's
//     time includes the start-up), a malformed line, too few or too many
//     windows, or a wrong trial number fails the trial with the cause and
//     the tail of stderr, and the whole process group is killed; the next
//     trial starts a new process. At the end of the sweep the group is killed.
//
// Attached (CommandServer::Attach, `sweep --serve-fd`, feedtune.autotune in
// python/feedtune/autotune/controller.py): the serving process is the training
// job that started feedtune, and requests and answers travel on one socket it
// handed down. The protocol is the same; feedtune never kills or reaps that
// process: a failure that would kill a started command only marks the
// connection dead, and closing the socket (at the end of the sweep) tells the
// job it is over. The job closing it first means the job has ended (or was
// killed): JobGone, and the sweep marks the run interrupted. A job that stops
// tuning early signals feedtune (SIGINT) before it closes the socket; the stop
// flag is looked at first, so that too ends as an interruption.
//
// Ownership: a CommandServer owns its process group and the three pipe ends
// (RAII: the destructor kills the group with SIGKILL and reaps the leader);
// attached, it owns only the socket.
// Threading: one thread uses a CommandServer. The stop flag is polled every
// 100 ms while a trial runs; when raised, the group is killed and Interrupted
// is thrown.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tuner/measure/command_measurer.h"

namespace feedtune::tuner {

// Starts `path` with `argv` and this process's environment plus `extra_env`
// (NAME=value, replacing same-named entries) as the leader of a new process
// group, with default signal dispositions and an empty signal mask. stdin is
// `stdin_fd`, or /dev/null when it is -1; stdout and stderr are the given fds.
// Returns 0 and sets *pid, or the posix_spawn error number.
int SpawnInOwnGroup(const std::string& path, const std::vector<std::string>& argv,
                    const std::vector<std::string>& extra_env, int stdin_fd, int stdout_fd, int stderr_fd,
                    pid_t* pid);

// "11 (SIGSEGV)": a signal's number and name, for messages.
std::string DescribeSignal(int sig);

// What one served trial gave.
struct ServedTrial {
  bool ok = false;
  std::string failure;                 // when !ok: what went wrong, one sentence
  std::vector<CommandReport> windows;  // when ok: one per window, in order
  // Seconds between a window's line and the one before it (the first: since
  // the request, so with the DataLoader's start and the warm-up).
  std::vector<double> window_wall_s;
  double wall_s = 0;                   // from the request to the end line
  double cpu_s = 0;                    // CPU of the process and the children it reaped, during the trial
  int64_t peak_rss_bytes = 0;          // the process tree's resident memory, sampled at each window line
};

class CommandServer {
 public:
  // Starts the command. Returns null with *error set when it cannot be
  // started (not found, not executable, no pipes).
  static std::unique_ptr<CommandServer> Start(const std::vector<std::string>& argv,
                                              const std::vector<std::string>& extra_env, std::string* error);

  // Serves through the process that started this one (attached, above) on
  // `fd`, a stream socket. Returns null with *error set when `fd` is not one.
  static std::unique_ptr<CommandServer> Attach(int fd, std::string* error);

  CommandServer(const CommandServer&) = delete;
  CommandServer& operator=(const CommandServer&) = delete;
  ~CommandServer();

  // Sends `request_line` (one JSON object, no newline) for trial `trial_id`
  // and reads `windows` window lines and the end line, within `timeout_s`
  // (counted from the start of the process for its first trial). On any
  // failure but the command's own {"error": ...} line the group is killed and
  // alive() turns false. Throws Interrupted when `stop` is raised, and
  // attached, JobGone when the job closed the socket (it ended).
  ServedTrial RunTrial(const std::string& request_line, int64_t trial_id, int windows, double timeout_s,
                       const std::atomic<bool>* stop);

  bool alive() const { return !dead_; }
  // Whether the process still runs: one that exited since the last trial (it
  // may, after a {"trial_end": N}) is reaped here with its group, so the next
  // trial starts a new one instead of failing on a closed stdin.
  bool StillRunning();
  pid_t pid() const { return pid_; }
  // The last 16 KiB of what the process wrote on stderr since it started.
  const std::string& stderr_tail() const { return stderr_tail_; }

 private:
  CommandServer() = default;

  // Kills the group, reaps the leader, and says how it ended ("exited with
  // code 3", "was killed by signal 11 (SIGSEGV)", or "" when it was our kill).
  std::string KillAndReap();
  // Waits up to the drain grace for the leader to exit on its own (its stdout
  // closed), then kills and reaps; how it ended.
  std::string ReapAfterEof();
  void DrainStderr();
  // Writes the request line whole. Empty when sent, else why not (and the
  // command is then reaped or killed).
  std::string SendRequest(const std::string& request_line, int64_t trial_id);
  // Waits for output until `deadline` (at most one poll interval) and reads
  // what came. Returns whether the output has ended: stdout closed, or the
  // leader exited (*leader_exited). A poll failure sets *poll_error.
  bool AwaitOutput(std::chrono::steady_clock::time_point deadline, bool* leader_exited, std::string* poll_error);

  pid_t pid_ = -1;           // attached: the parent, whose CPU and memory a trial reads
  bool attached_ = false;   // the parent serves: never killed, never reaped
  bool dead_ = false;       // killed (or found dead) and reaped
  bool started_any_ = false;  // a first trial was requested (its timeout counts from the start)
  std::chrono::steady_clock::time_point started_at_{};
  int stdin_fd_ = -1;       // our end of the stdin socket
  int stdout_fd_ = -1;      // read ends of the pipes, non-blocking
  int stderr_fd_ = -1;
  std::string stdout_buffer_;  // an incomplete stdout line
  std::string stderr_tail_;
};

}  // namespace feedtune::tuner
