// A process that burns one CPU outside the test's process tree (its parent
// exits at once, so it is re-parented): what a neighbour on a shared box looks
// like to a sweep (docs/measurement.md, "A busy box"). It runs under `name`
// (its /proc comm) until Stop(), the destructor, or the test's end of its
// pipe closing (a test that dies leaves no hog behind).
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>

namespace feedtune::testing_util {

class Hog {
 public:
  explicit Hog(const char* name) {
    int alive[2], report[2];
    if (pipe(alive) != 0) return;
    if (pipe(report) != 0) {
      close(alive[0]);
      close(alive[1]);
      return;
    }
    const pid_t middle = fork();
    if (middle == 0) {
      close(alive[1]);
      close(report[0]);
      const pid_t hog = fork();
      if (hog == 0) {
        prctl(PR_SET_NAME, name);
        fcntl(alive[0], F_SETFL, O_NONBLOCK);
        volatile uint64_t spin = 0;
        while (true) {
          for (int i = 0; i < 1'000'000; ++i) spin = spin + static_cast<uint64_t>(i);
          char c;
          if (read(alive[0], &c, 1) == 0) _exit(0);  // the test's end closed
        }
      }
      const int64_t pid = hog;
      _exit(write(report[1], &pid, sizeof pid) == sizeof pid ? 0 : 1);
    }
    close(alive[0]);
    close(report[1]);
    alive_ = alive[1];
    int64_t pid = 0;
    if (read(report[0], &pid, sizeof pid) == sizeof pid) pid_ = static_cast<pid_t>(pid);
    close(report[0]);
    waitpid(middle, nullptr, 0);
  }
  Hog(const Hog&) = delete;
  Hog& operator=(const Hog&) = delete;
  ~Hog() { Stop(); }

  void Stop() {
    if (alive_ >= 0) close(alive_);
    alive_ = -1;
    if (pid_ > 0) kill(pid_, SIGKILL);
    pid_ = 0;
  }
  pid_t pid() const { return pid_; }

 private:
  int alive_ = -1;
  pid_t pid_ = 0;
};

}  // namespace feedtune::testing_util
