// What killed a trial: the cgroup's OOM-kill count read from a fake cgroup
// tree (v2 memory.events, v1 memory.oom_control) and the wording a trial's
// error gets before and after the count moves.
#include "tuner/measure/kill_cause.h"

#include <gtest/gtest.h>

#include <string>

#include "tests/common/fake_root.h"

namespace feedtune::tuner {
namespace {

// A cgroup v2 box whose process sits in /job.slice/trial with `oom_kills`.
void WriteV2(const testing_util::FakeRoot& fake, int oom_kills) {
  fake.Write("proc/self/cgroup", "0::/job.slice/trial\n");
  fake.Write("sys/fs/cgroup/job.slice/trial/memory.events",
             "low 0\nhigh 0\nmax 12\noom 2\noom_kill " + std::to_string(oom_kills) + "\noom_group_kill 0\n");
}

TEST(OomKills, ReadsTheLeafCgroupsMemoryEvents) {
  const testing_util::FakeRoot fake;
  WriteV2(fake, 3);
  // The parent counts its other children too: the leaf's count is the one read.
  fake.Write("sys/fs/cgroup/job.slice/memory.events", "oom 9\noom_kill 9\n");
  const auto kills = results::ReadOomKills(fake.root());
  ASSERT_TRUE(kills.has_value());
  EXPECT_EQ(kills->count, 3);
  EXPECT_EQ(kills->file, fake.path("sys/fs/cgroup/job.slice/trial/memory.events"));
}

TEST(OomKills, ReadsCgroupV1OomControl) {
  const testing_util::FakeRoot fake;
  fake.Write("proc/self/cgroup", "4:memory:/docker/abc\n0::/\n");
  fake.Write("sys/fs/cgroup/memory/docker/abc/memory.oom_control", "oom_kill_disable 0\nunder_oom 0\noom_kill 5\n");
  const auto kills = results::ReadOomKills(fake.root());
  ASSERT_TRUE(kills.has_value());
  EXPECT_EQ(kills->count, 5);
}

TEST(OomKills, NoneWithoutAReadableCount) {
  const testing_util::FakeRoot fake;
  fake.Write("proc/self/cgroup", "0::/job\n");
  fake.Write("sys/fs/cgroup/job/memory.events", "oom 1\n");  // a kernel before the oom_kill field
  EXPECT_FALSE(results::ReadOomKills(fake.root()).has_value());
}

TEST(OomWatch, TheCountRisingNamesTheOomKiller) {
  const testing_util::FakeRoot fake;
  WriteV2(fake, 3);
  const OomWatch watch(fake.root());
  WriteV2(fake, 4);  // the kernel killed one process of the cgroup meanwhile
  EXPECT_EQ(WithKillCause("worker 1 (pid 42) was killed by signal 9 (SIGKILL) while loading batch 7", watch),
            "worker 1 (pid 42) was killed by signal 9 (SIGKILL) while loading batch 7; the kernel's OOM killer did "
            "it (oom_kill 3 -> 4 in " +
                fake.path("sys/fs/cgroup/job.slice/trial/memory.events") +
                "): the box or its cgroup ran out of memory; lower num_workers, prefetch_factor or batch_size, and "
                "see the memory budget (sweep.budget.memory_fraction)");
}

TEST(OomWatch, TheCountUnchangedSaysItWasNotTheOomKiller) {
  const testing_util::FakeRoot fake;
  WriteV2(fake, 3);
  const OomWatch watch(fake.root());
  EXPECT_EQ(watch.Explain(), "not the kernel's OOM killer (oom_kill 3 -> 3 in " +
                                 fake.path("sys/fs/cgroup/job.slice/trial/memory.events") +
                                 "): another process sent the SIGKILL");
}

TEST(OomWatch, NoCountSaysItCannotTell) {
  const testing_util::FakeRoot fake;
  fake.Write("proc/self/cgroup", "0::/job\n");
  const OomWatch watch(fake.root());
  EXPECT_EQ(watch.Explain(),
            "whether the kernel's OOM killer did it is unknown: this process's cgroup has no readable memory.events "
            "(or memory.oom_control) with an oom_kill count");
}

TEST(OomWatch, OnlyASigkillIsExplainedAndOnlyOnce) {
  const testing_util::FakeRoot fake;
  WriteV2(fake, 0);
  const OomWatch watch(fake.root());
  const std::string segv = "worker 0 (pid 7) was killed by signal 11 (SIGSEGV) while loading batch 2";
  EXPECT_EQ(WithKillCause(segv, watch), segv);
  // A rank's error already carries its own answer.
  const std::string rank = "rank 1 killed by SIGKILL; not the kernel's OOM killer (oom_kill 0 -> 0 in x)";
  EXPECT_EQ(WithKillCause(rank, watch), rank);
}

}  // namespace
}  // namespace feedtune::tuner
