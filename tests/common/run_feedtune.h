// Runs the feedtune binary of this build as a user would, through the shell,
// and returns its exit code and output, or starts it and signals it when a
// condition holds (kill -9 or Ctrl-C mid-run). FEEDTUNE_BINARY comes from
// tests/CMakeLists.txt.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>

#include "tests/common/read_file.h"

namespace feedtune::testing_util {

struct CliResult {
  int code = -1;    // exit code, or 128 + the signal that ended it
  std::string out;  // stdout
  std::string err;  // stderr
};

// `feedtune ARGS` (ARGS as typed in a shell), run in `cwd` when given; its
// output goes through files in `scratch`.
inline CliResult RunFeedtune(const std::string& args, const std::filesystem::path& scratch,
                             const std::string& cwd = {}) {
  const std::string cmd = (cwd.empty() ? std::string() : "cd " + cwd + " && ") + FEEDTUNE_BINARY + " " + args +
                          " >" + (scratch / "out").string() + " 2>" + (scratch / "err").string();
  const int status = std::system(cmd.c_str());
  CliResult r;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = ReadFile(scratch / "out");
  r.err = ReadFile(scratch / "err");
  return r;
}

// `feedtune ARGS` started in the background, its stderr to `err_path`
// (/dev/null when empty); when `until()` holds (or after `timeout`), sent
// `signal` and reaped. Returns its wait status: a test asserts whether the
// signal ended it (WIFSIGNALED) or it exited first.
inline int SignalFeedtuneWhen(const std::string& args, const std::function<bool()>& until, int signal,
                              std::chrono::seconds timeout, const std::string& err_path = {}) {
  const pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    const std::string err = err_path.empty() ? std::string("/dev/null") : err_path;
    ::execl("/bin/sh", "sh", "-c", (std::string("exec ") + FEEDTUNE_BINARY + " " + args + " 2>" + err).c_str(),
            static_cast<char*>(nullptr));
    _exit(127);
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!until() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ::kill(pid, signal);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return status;
}

}  // namespace feedtune::testing_util
