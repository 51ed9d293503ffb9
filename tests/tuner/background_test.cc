// Other processes' CPU (tuner/measure/proc_stats.h, docs/measurement.md): the
// arithmetic on recorded /proc/stat, cgroup and process-tree samples; where
// the box's busy CPU is read from; the top consumers; a trial's disturbed
// windows measured again; and a hog this test starts, named in the warning
// the sweep gives before its baseline.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "tests/common/hog.h"
#include "tests/common/tiny_trial.h"
#include "results/background.h"
#include "tuner/measure/proc_stats.h"
#include "tuner/measure/trial_runner.h"
#include "workloads/synthetic_dataset.h"

namespace feedtune::tuner {
namespace {

namespace fs = std::filesystem;

// /proc/stat of a 2-CPU box one second apart (USER_HZ 100): 200 ticks in all.
// Busy: user +120, nice +3, system +30, irq +1, softirq +2, steal +4 = 160
// ticks; idle +35 and iowait +5 are not busy.
constexpr const char* kStatBefore =
    "cpu  2102006 502491 852693 3880485 12067 10 11936 50 0 0\n"
    "cpu0 1008604 239312 407520 2017755 2421 5 5361 25 0 0\n"
    "intr 1 2 3\n";
constexpr const char* kStatAfter =
    "cpu  2102126 502494 852723 3880520 12072 11 11938 54 0 0\n"
    "cpu0 1008664 239314 407535 2017773 2423 6 5362 27 0 0\n"
    "intr 4 5 6\n";

TEST(BackgroundArithmetic, ProcStatBusyIsEverythingButIdleAndIowait) {
  const auto before = ParseProcStatBusy(kStatBefore, 100);
  const auto after = ParseProcStatBusy(kStatAfter, 100);
  ASSERT_TRUE(before && after);
  EXPECT_DOUBLE_EQ(*before, (2102006.0 + 502491 + 852693 + 10 + 11936 + 50) / 100);
  EXPECT_NEAR(*after - *before, 1.60, 1e-9);
  EXPECT_FALSE(ParseProcStatBusy("intr 1 2 3\n", 100));
  EXPECT_FALSE(ParseProcStatBusy(kStatBefore, 0));
}

TEST(BackgroundArithmetic, OthersAreTheBoxLessTheTree) {
  const double box_before = *ParseProcStatBusy(kStatBefore, 100);
  const double box_after = *ParseProcStatBusy(kStatAfter, 100);
  // The trial's tree took 0.57 s of CPU in the same second (its
  // /proc/PID/stat utime + stime + cutime + cstime, summed): the others, 1.03.
  const CpuReading before{box_before, 41.20, 100.0};
  const CpuReading after{box_after, 41.77, 101.0};
  EXPECT_NEAR(BackgroundCpu(before, after), 1.03, 1e-9);
  // Over two seconds, half the CPUs.
  EXPECT_NEAR(BackgroundCpu(before, {box_after, 41.77, 102.0}), 0.515, 1e-9);
  // A tree that read a hair more than the box (read a moment apart): 0, never below.
  EXPECT_EQ(BackgroundCpu(before, {box_after, 43.0, 101.0}), 0.0);
  EXPECT_TRUE(std::isnan(BackgroundCpu(before, before)));
}

TEST(BackgroundArithmetic, CgroupUsageFiles) {
  // cgroup v2 cpu.stat: usage_usec is the cgroup's CPU in microseconds.
  EXPECT_NEAR(*ParseCgroupUsage("usage_usec 123456789\nuser_usec 100000000\nsystem_usec 23456789\n"
                                "nr_periods 10\nnr_throttled 2\nthrottled_usec 5000\n"),
              123.456789, 1e-9);
  // cgroup v1 cpuacct.usage: one number of nanoseconds.
  EXPECT_NEAR(*ParseCgroupUsage("987654321000\n"), 987.654321, 1e-9);
  EXPECT_FALSE(ParseCgroupUsage("user_usec 5\nsystem_usec 6\n"));
  EXPECT_FALSE(ParseCgroupUsage(""));
  // Two readings of a v2 cgroup a second apart, its tree 0.25 s of it: others 0.75.
  const double before = *ParseCgroupUsage("usage_usec 5000000\n");
  const double after = *ParseCgroupUsage("usage_usec 6500000\n");
  EXPECT_NEAR(BackgroundCpu({before, 2.0, 10.0}, {after, 2.75, 12.0}), 0.375, 1e-9);
}

// A folder laid out like / for FindBoxCpuSource.
class FakeRoot {
 public:
  FakeRoot() {
    char name[] = "/tmp/feedtune-bg-XXXXXX";
    root_ = mkdtemp(name);
  }
  ~FakeRoot() { fs::remove_all(root_); }
  void Write(const std::string& path, const std::string& text) const {
    fs::create_directories(fs::path(root_ + path).parent_path());
    std::ofstream(root_ + path) << text;
  }
  const std::string& root() const { return root_; }

 private:
  std::string root_;
};

TEST(BoxCpuSource, ACgroupWithAQuotaIsReadInsteadOfTheBox) {
  FakeRoot box;
  box.Write("/proc/stat", kStatBefore);
  box.Write("/proc/self/cgroup", "0::/slurm/job_42/step_0\n");
  box.Write("/sys/fs/cgroup/slurm/job_42/step_0/cpu.stat", "usage_usec 1\n");
  box.Write("/sys/fs/cgroup/slurm/job_42/step_0/cpu.max", "max 100000\n");
  // No quota anywhere on the path: the job shares the box, which is what to read.
  BoxCpuSource source = FindBoxCpuSource(box.root());
  EXPECT_FALSE(source.cgroup);
  EXPECT_EQ(source.path, box.root() + "/proc/stat");
  // A quota on the job (an ancestor of the leaf): its cgroup is the box.
  box.Write("/sys/fs/cgroup/slurm/job_42/cpu.max", "200000 100000\n");
  source = FindBoxCpuSource(box.root());
  EXPECT_TRUE(source.cgroup);
  EXPECT_EQ(source.path, box.root() + "/sys/fs/cgroup/slurm/job_42/step_0/cpu.stat");
}

TEST(BoxCpuSource, TheRootCgroupAndV1) {
  FakeRoot box;
  box.Write("/proc/stat", kStatBefore);
  box.Write("/proc/self/cgroup", "0::/\n");
  box.Write("/sys/fs/cgroup/cpu.max", "100000 100000\n");
  EXPECT_FALSE(FindBoxCpuSource(box.root()).cgroup) << "the root cgroup is the whole box";

  FakeRoot v1;
  v1.Write("/proc/stat", kStatBefore);
  v1.Write("/proc/self/cgroup", "4:memory:/docker/abc\n3:cpu,cpuacct:/docker/abc\n");
  v1.Write("/sys/fs/cgroup/cpu,cpuacct/docker/abc/cpuacct.usage", "123\n");
  v1.Write("/sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_quota_us", "-1\n");
  EXPECT_FALSE(FindBoxCpuSource(v1.root()).cgroup) << "no quota (-1)";
  v1.Write("/sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_quota_us", "150000\n");
  const BoxCpuSource source = FindBoxCpuSource(v1.root());
  EXPECT_TRUE(source.cgroup);
  EXPECT_EQ(source.path, v1.root() + "/sys/fs/cgroup/cpu,cpuacct/docker/abc/cpuacct.usage");
}

TEST(TopConsumers, ByNameLargestFirstWithoutTheSweepsTree) {
  const std::vector<ProcessTimes> before = {{1, 0, "systemd", 5.0},   {100, 1, "yes", 10.0},
                                            {200, 1, "cc1plus", 3.0}, {201, 1, "cc1plus", 1.0},
                                            {300, 1, "feedtune", 2.0}, {301, 300, "feedtune", 0.5},
                                            {500, 1, "sshd", 0.2}};
  const std::vector<ProcessTimes> after = {{1, 0, "systemd", 5.0},    {100, 1, "yes", 11.0},
                                           {200, 1, "cc1plus", 3.4},  {201, 1, "cc1plus", 1.45},
                                           {300, 1, "feedtune", 3.2}, {301, 300, "feedtune", 1.5},
                                           {400, 1, "make", 0.05},    {500, 1, "sshd", 0.203}};
  const std::vector<int64_t> tree = TreePids(after, 300);
  EXPECT_EQ(tree, (std::vector<int64_t>{300, 301}));
  const auto top = TopConsumers(before, after, 1.0, tree);
  ASSERT_EQ(top.size(), 3u);
  EXPECT_EQ(top[0].name, "yes");
  EXPECT_EQ(top[0].pid, 100);
  EXPECT_NEAR(top[0].cpu, 1.0, 1e-9);
  EXPECT_EQ(top[1].name, "cc1plus");
  EXPECT_EQ(top[1].processes, 2);
  EXPECT_NEAR(top[1].cpu, 0.85, 1e-9);
  EXPECT_EQ(top[2].name, "make");  // new since the first snapshot: counted from its start
  EXPECT_NEAR(top[2].cpu, 0.05, 1e-9);
  EXPECT_EQ(results::TopConsumersText(top), "yes (pid 100) 1.00 CPU, cc1plus (2 processes) 0.85 CPU, make (pid 400) 0.05 CPU");
  // sshd's 0.003 CPU is below the list's floor; over half a second the figures double.
  EXPECT_NEAR(TopConsumers(before, after, 0.5, tree, 1)[0].cpu, 2.0, 1e-9);
}

// One trial of 16 tiny samples in the main process, two windows of an epoch each.
results::TrialRecord SmallTrial(double quiet_reference) {
  const SweepConfig config = testing_util::TinyTrialConfig("background");
  return testing_util::TinyTrial(config, std::make_shared<workloads::SyntheticDataset>(config.workload.synthetic),
                                 config.loader.knobs, quiet_reference);
}

TEST(DisturbedWindows, AreMeasuredAgainWithinTheTrialsRepeats) {
  // A reference no box can be near (-10 CPUs): every window is disturbed.
  const results::TrialRecord t = SmallTrial(-10);
  ASSERT_EQ(t.status, results::TrialStatus::kOk) << t.error.value_or("");
  EXPECT_EQ(t.repeats, 2);
  EXPECT_EQ(t.remeasured_windows, 2) << "as many again as the trial's windows, no more";
  ASSERT_EQ(t.repeat_rows.size(), 4u);
  for (size_t i = 0; i < t.repeat_rows.size(); ++i) {
    const results::RepeatRecord& r = t.repeat_rows[i];
    EXPECT_EQ(r.index, static_cast<int>(i));
    EXPECT_TRUE(std::isfinite(r.background_cpu) && r.background_cpu >= 0) << i;
    EXPECT_TRUE(r.disturbed) << i;
    EXPECT_EQ(r.remeasured, i < 2) << "the first two replaced, the last two in the figures once the budget is spent";
  }
  // The figures are the last two windows'.
  const double low = std::min(t.repeat_rows[2].samples_per_s, t.repeat_rows[3].samples_per_s);
  const double high = std::max(t.repeat_rows[2].samples_per_s, t.repeat_rows[3].samples_per_s);
  EXPECT_GE(t.samples_per_s, low);
  EXPECT_LE(t.samples_per_s, high);
  EXPECT_NEAR(t.background_cpu, (t.repeat_rows[2].background_cpu + t.repeat_rows[3].background_cpu) / 2, 1e-9);

  results::BackgroundFacts facts;
  facts.reference_cpu = 0.04;
  facts.warn_cpu = 0.25;
  const std::string note = results::TrialBackgroundNote(t, facts);
  EXPECT_EQ(note.find("; re-measured 2 windows that other processes disturbed ("), 0u) << note;
  EXPECT_NE(note.find(" CPU against the quiet 0.04)"), std::string::npos) << note;
}

TEST(DisturbedWindows, NoReferenceNoneJudged) {
  const results::TrialRecord t = SmallTrial(std::nan(""));
  ASSERT_EQ(t.status, results::TrialStatus::kOk) << t.error.value_or("");
  ASSERT_EQ(t.repeat_rows.size(), 2u);
  EXPECT_EQ(t.remeasured_windows, 0);
  for (const results::RepeatRecord& r : t.repeat_rows) {
    EXPECT_FALSE(r.disturbed);
    EXPECT_FALSE(r.remeasured);
    EXPECT_GE(r.background_cpu, 0);
  }
  EXPECT_TRUE(std::isfinite(t.background_cpu));
}

TEST(BackgroundHog, NamedInTheWarningBeforeTheBaseline) {
  testing_util::Hog hog("feedtune_hog");
  const pid_t pid = hog.pid();
  ASSERT_GT(pid, 0);
  // Every consumer named, so that on a box busy with others (a test suite
  // beside it) the hog is still among them.
  const BackgroundSample sample = SampleBackground(1.0, nullptr, 1000);
  hog.Stop();
  ASSERT_TRUE(std::isfinite(sample.cpu)) << sample.source.path;
  EXPECT_NEAR(sample.seconds, 1.0, 0.5);
  // One CPU spinning; a shared box gives it less when others run too (a
  // fifth of a CPU under a loaded test suite), so the bound is generous:
  // what matters is that it shows and is named.
  EXPECT_GE(sample.cpu, 0.05) << sample.source.path;
  bool named = false;
  for (const results::ProcessCpu& p : sample.top) {
    if (p.name != "feedtune_hog") continue;
    named = true;
    EXPECT_EQ(p.pid, pid);
    EXPECT_GE(p.cpu, 0.05);
  }
  EXPECT_TRUE(named) << results::TopConsumersText(sample.top);

  results::BackgroundFacts facts;
  facts.source = sample.source.path;
  facts.start_cpu = sample.cpu;
  facts.sample_s = sample.seconds;
  facts.top = sample.top;
  facts.warn_cpu = 0.25;
  const std::string warning = results::StartWarning(facts);
  EXPECT_EQ(warning.find("other processes took "), 0u) << warning;
  EXPECT_NE(warning.find("before the baseline (above sweep.background.warn_cpu 0.25"), std::string::npos) << warning;
  EXPECT_NE(warning.find("feedtune_hog (pid " + std::to_string(pid) + ") "), std::string::npos) << warning;
}

}  // namespace
}  // namespace feedtune::tuner
