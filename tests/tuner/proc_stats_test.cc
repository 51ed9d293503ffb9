// ReadTreeUsage counts the whole process tree: feedtune, its fork server (a
// child) and the workers (grandchildren), live or already reaped by the server.
#include "tuner/measure/proc_stats.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstring>
#include <vector>

namespace feedtune::tuner {
namespace {

void BurnCpu(double seconds) {
  timespec t{};
  do {
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  } while (static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) / 1e9 < seconds);
}

// A child that starts a grandchild running `grandchild`, then tells the parent
// on `ready` (after reaping the grandchild when `reap`), and waits to be killed.
template <typename Fn>
pid_t StartTree(int ready, bool reap, Fn grandchild) {
  const pid_t child = fork();
  if (child != 0) return child;
  int done[2];
  if (pipe(done) != 0) _exit(1);
  const pid_t g = fork();
  if (g == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);  // dies with the child, which the test kills
    grandchild(done[1]);
    pause();
    _exit(0);
  }
  char c;
  if (read(done[0], &c, 1) != 1) _exit(1);
  if (reap) {
    kill(g, SIGKILL);
    waitpid(g, nullptr, 0);
  }
  if (write(ready, "x", 1) != 1) _exit(1);
  pause();
  _exit(0);
}

void Stop(pid_t child) {
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
}

TEST(ReadTreeUsage, CountsTheCpuOfAGrandchildItsParentReaped) {
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const TreeUsage before = ReadTreeUsage();
  const pid_t child = StartTree(ready[1], /*reap=*/true, [](int done) {
    BurnCpu(0.3);
    if (write(done, "x", 1) != 1) _exit(1);
  });
  char c;
  ASSERT_EQ(read(ready[0], &c, 1), 1);
  const TreeUsage after = ReadTreeUsage();
  Stop(child);
  EXPECT_GE(after.cpu_s - before.cpu_s, 0.25);
}

TEST(ReadTreeUsage, CountsTheMemoryOfALiveGrandchild) {
  constexpr size_t kBytes = size_t{64} << 20;
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const TreeUsage before = ReadTreeUsage();
  const pid_t child = StartTree(ready[1], /*reap=*/false, [](int done) {
    std::vector<char> memory(kBytes);
    std::memset(memory.data(), 1, memory.size());
    if (write(done, "x", 1) != 1) _exit(1);
    pause();
  });
  char c;
  ASSERT_EQ(read(ready[0], &c, 1), 1);
  const TreeUsage after = ReadTreeUsage();
  Stop(child);  // and the grandchild with it
  EXPECT_GE(after.rss_bytes - before.rss_bytes, static_cast<int64_t>(kBytes * 3 / 4));
}

}  // namespace
}  // namespace feedtune::tuner
