// The command workload: success, each way a run fails (exit code, signal,
// timeout, bad or missing JSON), placeholders and environment, leftovers that
// hold the pipes, and Ctrl-C.
#include "tuner/measure/command_measurer.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "results/memory_growth.h"
#include "workloads/command_args.h"

namespace feedtune::tuner {
namespace {

using Clock = std::chrono::steady_clock;

SweepConfig ShellConfig(const std::string& script, int repeats = 1, double timeout_s = 30) {
  SweepConfig config;
  config.workload.kind = workloads::WorkloadKind::kCommand;
  config.workload.command.argv = {"/bin/sh", "-c", script, "sh", "{num_workers}", "{pin_memory}", "{batch_size}"};
  config.workload.command.timeout_s = timeout_s;
  config.sweep.repeats = repeats;
  return config;
}

results::TrialRecord MeasureShell(const std::string& script, int repeats = 1, double timeout_s = 30,
                                  loader::Knobs knobs = {}) {
  CommandMeasurer measurer(ShellConfig(script, repeats, timeout_s), nullptr);
  return measurer.Measure(knobs);
}

double SecondsOf(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

TEST(CommandMeasurer, ReadsTheLastJsonLineOfEachRepeat) {
  const results::TrialRecord t = MeasureShell(
      "echo starting; echo 'warning: noise' >&2; "
      "echo '{\"samples_per_s\": '$((100 + FEEDTUNE_REPEAT * 10))', \"gpu_idle_frac\": 0.25, "
      "\"wait_p50_us\": 800, \"wait_p99_us\": 2500, \"startup_s\": 1.5, \"peak_rss_bytes\": 1000000, "
      "\"mb_per_s\": 12.5, \"batches_per_epoch\": 15, \"time_to_first_batch_s\": 0.75, "
      "\"worker_busy_frac\": 0.'$((4 + FEEDTUNE_REPEAT))', \"worker_peak_rss_bytes\": '$((2000000 + FEEDTUNE_REPEAT))', "
      "\"epoch_boundary_ms\": -1.5, \"extra\": \"ignored\"}'",
      3);
  ASSERT_EQ(t.status, results::TrialStatus::kOk) << t.error.value_or("");
  EXPECT_EQ(t.samples_per_s, 110);  // median of 100, 110, 120
  EXPECT_LE(t.ci_low, 110);
  EXPECT_GE(t.ci_high, 110);
  EXPECT_EQ(t.gpu_idle_frac, 0.25);
  EXPECT_EQ(t.wait_p50_us, 800);
  EXPECT_EQ(t.wait_p99_us, 2500);
  EXPECT_EQ(t.worker_startup_s, 1.5);
  EXPECT_EQ(t.mb_per_s, 12.5);
  EXPECT_GE(t.peak_rss_bytes, 1000000);
  EXPECT_EQ(t.batches_per_epoch, 15);
  EXPECT_EQ(t.time_to_first_batch_s, 0.75);
  EXPECT_DOUBLE_EQ(t.worker_busy_frac, 0.5);       // median of 0.4, 0.5, 0.6
  EXPECT_EQ(t.worker_rss_bytes, 2000002);          // the largest: the budget holds the peak
  EXPECT_EQ(t.epoch_boundary_ms, -1.5);
  EXPECT_EQ(t.repeats, 3);
  ASSERT_EQ(t.repeat_rows.size(), 3u);
  EXPECT_EQ(t.repeat_rows[2].samples_per_s, 120);
  EXPECT_GT(t.repeat_rows[0].wall_s, 0);
}

// A command that reports samples/s alone: every figure it did not report is
// NaN (not measured), in the trial and in each repeat, never 0. What feedtune
// measures itself (CPU, the tree's peak RSS) is there.
TEST(CommandMeasurer, FiguresNotReportedAreNotMeasured) {
  CommandMeasurer measurer(ShellConfig("echo '{\"samples_per_s\": 100}'", 2), nullptr);
  const results::TrialRecord t = measurer.Measure({});
  ASSERT_EQ(t.status, results::TrialStatus::kOk) << t.error.value_or("");
  EXPECT_EQ(t.samples_per_s, 100);
  for (const auto& [name, value] : std::vector<std::pair<const char*, double>>{
           {"mb_per_s", t.mb_per_s},
           {"gpu_idle_frac", t.gpu_idle_frac},
           {"copy_s", t.copy_s},
           {"wait_p50_us", t.wait_p50_us},
           {"wait_p99_us", t.wait_p99_us},
           {"worker_startup_s", t.worker_startup_s},
           {"time_to_first_batch_s", t.time_to_first_batch_s},
           {"epoch_boundary_ms", t.epoch_boundary_ms},
           {"worker_busy_frac", t.worker_busy_frac},
           {"pinned_alloc_s", t.pinned_alloc_s},
           {"worker_rss_bytes", t.worker_rss_bytes},
           {"worker_rss_start_bytes", t.worker_rss_start_bytes},
           {"worker_rss_peak_bytes", t.worker_rss_peak_bytes},
           {"worker_rss_growth_bytes_per_epoch", t.worker_rss_growth_bytes_per_epoch},
           {"worker_rss_epochs", t.worker_rss_epochs}}) {
    EXPECT_TRUE(std::isnan(value)) << name << " = " << value;
  }
  ASSERT_EQ(t.repeat_rows.size(), 2u);
  for (const results::RepeatRecord& r : t.repeat_rows) {
    EXPECT_EQ(r.samples_per_s, 100);
    EXPECT_TRUE(std::isnan(r.mb_per_s));
    EXPECT_TRUE(std::isnan(r.gpu_idle_frac));
    EXPECT_TRUE(std::isnan(r.wait_p50_us));
    EXPECT_TRUE(std::isnan(r.wait_p99_us));
  }
  EXPECT_FALSE(t.batches_per_epoch.has_value());
  EXPECT_EQ(t.worker_rss_samples, 0);
  EXPECT_GT(t.peak_rss_bytes, 0);  // the shell's, as feedtune saw it
  EXPECT_EQ(measurer.last_warning(), "the command reported no gpu_idle_frac; GPU idle is not measured");
  measurer.Measure({});
  EXPECT_EQ(measurer.last_warning(), "") << "said once per sweep, not at every trial";
}

// The run protocol: a process, so a sampler, per repeat. The trial's growth
// is the repeats' median (and so is its span), its peak the largest, its
// samples all of theirs; flagged as a native trial would be.
TEST(CommandMeasurer, WorkerMemoryOverTheRepeats) {
  const results::TrialRecord t = MeasureShell(
      "echo '{\"samples_per_s\": 1, \"worker_rss_start_bytes\": '$((1000 + FEEDTUNE_REPEAT))', "
      "\"worker_rss_peak_bytes\": '$((300000000 - FEEDTUNE_REPEAT * 1000))', "
      "\"worker_rss_growth_bytes_per_epoch\": '$((70 + FEEDTUNE_REPEAT * 10))'000000, "
      "\"worker_rss_samples\": 12, \"worker_rss_epochs\": '$((1 + FEEDTUNE_REPEAT))'.5}'",
      3, 30, [] {
        loader::Knobs k;
        k.num_workers = 2;
        return k;
      }());
  ASSERT_EQ(t.status, results::TrialStatus::kOk) << t.error.value_or("");
  EXPECT_EQ(t.worker_rss_growth_bytes_per_epoch, 80e6);  // median of 70, 80, 90 MB
  EXPECT_EQ(t.worker_rss_epochs, 2.5);                   // median of 1.5, 2.5, 3.5
  EXPECT_EQ(t.worker_rss_peak_bytes, 300000000);
  EXPECT_EQ(t.worker_rss_start_bytes, 1001);
  EXPECT_EQ(t.worker_rss_samples, 36);
  EXPECT_FALSE(t.worker_rss_in_consumer);
  EXPECT_TRUE(results::GrowthFlagged(t));
  EXPECT_EQ(results::GrowthText(t).rfind("memory grows 76 MiB per epoch per worker: a cache or a leak; ", 0), 0u)
      << results::GrowthText(t);
}

// serve: one sampler over the trial's windows, so the last window's figures
// hold every window; a window with "num_workers": 0 sampled the command itself.
TEST(CommandMeasurer, WorkerMemoryOfAServedTrialIsItsLastWindows) {
  std::vector<CommandReport> windows(3);
  windows[0].worker_rss_start_bytes = 10;
  windows[0].worker_rss_peak_bytes = 20;
  windows[0].worker_rss_samples = 3;
  windows[0].worker_rss_epochs = 0.4;  // too short a span for a growth
  windows[1] = windows[0];
  windows[1].worker_rss_peak_bytes = 40;
  windows[1].worker_rss_samples = 7;
  windows[1].worker_rss_epochs = 1.4;
  windows[1].worker_rss_growth_bytes_per_epoch = -5;  // it may shrink
  windows[1].num_workers = 0;
  // The last window reported none (a command that stopped saying): the one before it counts.
  results::TrialRecord t;
  FillWorkerMemory(windows, /*cumulative=*/true, /*num_workers=*/4, &t);
  EXPECT_EQ(t.worker_rss_start_bytes, 10);
  EXPECT_EQ(t.worker_rss_peak_bytes, 40);
  EXPECT_EQ(t.worker_rss_samples, 7);
  EXPECT_EQ(t.worker_rss_epochs, 1.4);
  EXPECT_EQ(t.worker_rss_growth_bytes_per_epoch, -5);
  EXPECT_TRUE(t.worker_rss_in_consumer);

  results::TrialRecord first;
  FillWorkerMemory({windows[0]}, true, 4, &first);
  EXPECT_TRUE(std::isnan(first.worker_rss_growth_bytes_per_epoch));
  EXPECT_EQ(first.worker_rss_epochs, 0.4);
  EXPECT_FALSE(first.worker_rss_in_consumer);

  results::TrialRecord none;
  FillWorkerMemory({CommandReport{}}, true, 4, &none);
  EXPECT_TRUE(std::isnan(none.worker_rss_peak_bytes));
  EXPECT_EQ(none.worker_rss_samples, 0);
}

TEST(CommandMeasurer, FollowsThePlansRepeats) {
  CommandMeasurer measurer(ShellConfig("echo '{\"samples_per_s\": '$((FEEDTUNE_REPEAT + 1))'}'", 3), nullptr);
  TrialPlan plan;
  plan.repeats = 5;
  plan.window_epochs = 1;  // the command's own business
  const results::TrialRecord t = measurer.MeasurePlanned({}, plan);
  ASSERT_EQ(t.status, results::TrialStatus::kOk) << t.error.value_or("");
  EXPECT_EQ(t.repeats, 5);
  EXPECT_EQ(t.samples_per_s, 3);  // median of 1..5
  EXPECT_GT(t.cv, 0);
}

TEST(CommandMeasurer, SubstitutesKnobsIntoArgvAndExportsThem) {
  loader::Knobs knobs;
  knobs.num_workers = 6;
  knobs.pin_memory = true;
  knobs.batch_size = 32;
  // $1 $2 $3 are {num_workers} {pin_memory} {batch_size}; the environment must agree.
  const results::TrialRecord t = MeasureShell(
      "[ \"$1\" = 6 ] && [ \"$2\" = true ] && [ \"$3\" = 32 ] && [ \"$FEEDTUNE_NUM_WORKERS\" = 6 ] && "
      "[ \"$FEEDTUNE_PIN_MEMORY\" = true ] && [ \"$FEEDTUNE_NON_BLOCKING\" = false ] && "
      "[ \"$FEEDTUNE_PREFETCH_FACTOR\" = 2 ] && [ \"$FEEDTUNE_PERSISTENT_WORKERS\" = false ] && "
      "[ \"$FEEDTUNE_BATCH_SIZE\" = 32 ] && [ \"$FEEDTUNE_MEASURE_SECONDS\" = 2 ] && "
      "[ \"$FEEDTUNE_WARMUP_BATCHES\" = 8 ] && [ \"$FEEDTUNE_STEP_US\" = 20000 ] && "
      "[ \"$FEEDTUNE_REPEAT\" = 0 ] || { echo \"got $1 $2 $3\" >&2; exit 9; }; "
      "echo '{\"samples_per_s\": 1}'",
      1, 30, knobs);
  EXPECT_EQ(t.status, results::TrialStatus::kOk) << t.error.value_or("");
}

// The worker_threads knob (the search's phase) reaches a command started per
// trial as OMP_NUM_THREADS and MKL_NUM_THREADS; unset, the command's own
// environment decides.
TEST(CommandMeasurer, WorkerThreadsBecomeTheIntraOpThreadEnvironment) {
  loader::Knobs knobs;
  knobs.worker_threads = 3;
  const results::TrialRecord set = MeasureShell(
      "[ \"$OMP_NUM_THREADS\" = 3 ] && [ \"$MKL_NUM_THREADS\" = 3 ] || { echo \"got $OMP_NUM_THREADS\" >&2; exit 9; }; "
      "echo '{\"samples_per_s\": 1}'",
      1, 30, knobs);
  EXPECT_EQ(set.status, results::TrialStatus::kOk) << set.error.value_or("");
  ::unsetenv("OMP_NUM_THREADS");
  const results::TrialRecord unset = MeasureShell(
      "[ -z \"$OMP_NUM_THREADS\" ] || exit 9; echo '{\"samples_per_s\": 1}'", 1, 30, loader::Knobs{});
  EXPECT_EQ(unset.status, results::TrialStatus::kOk) << unset.error.value_or("");
}

TEST(CommandArgs, Placeholders) {
  workloads::CommandContext c;
  c.knobs.num_workers = 3;
  c.measure_seconds = 0.25;
  EXPECT_EQ(workloads::ExpandPlaceholders("--nw={num_workers}/{num_workers} {x} {\"a\": 1} {measure_seconds}", c),
            "--nw=3/3 {x} {\"a\": 1} 0.25");
  EXPECT_EQ(workloads::UnknownPlaceholder("a {x_y} {num_workers}"), "x_y");
  EXPECT_EQ(workloads::UnknownPlaceholder("{num_workers} {} {A} {\"q\"}"), "");
}

TEST(CommandMeasurer, NonZeroExitFailsWithTheStderrTail) {
  const results::TrialRecord t =
      MeasureShell("for i in $(seq 1 30); do echo \"line $i\" >&2; done; echo 'ValueError: bad' >&2; exit 3");
  ASSERT_EQ(t.status, results::TrialStatus::kFailed);
  const std::string& e = *t.error;
  EXPECT_EQ(e.rfind("repeat 1 of 1: the command exited with code 3\n  command: /bin/sh -c ", 0), 0u) << e;
  EXPECT_NE(e.find("\n  stderr (last lines):\nline 20\nline 21\n"), std::string::npos) << e;
  EXPECT_NE(e.find("line 30\nValueError: bad"), std::string::npos) << e;
  EXPECT_EQ(e.find("line 19\n"), std::string::npos) << e;  // only the tail
}

TEST(CommandMeasurer, AFailedRepeatFailsTheTrial) {
  const results::TrialRecord t =
      MeasureShell("[ \"$FEEDTUNE_REPEAT\" = 1 ] && exit 4; echo '{\"samples_per_s\": 5}'", 3);
  ASSERT_EQ(t.status, results::TrialStatus::kFailed);
  EXPECT_EQ(t.error->rfind("repeat 2 of 3: the command exited with code 4", 0), 0u) << *t.error;
  EXPECT_NE(t.error->find("stderr: (empty)"), std::string::npos) << *t.error;
}

TEST(CommandMeasurer, DeathBySignal) {
  const results::TrialRecord t = MeasureShell("kill -SEGV $$");
  ASSERT_EQ(t.status, results::TrialStatus::kFailed);
  EXPECT_EQ(t.error->rfind("repeat 1 of 1: the command was killed by signal 11 (SIGSEGV)", 0), 0u) << *t.error;
}

TEST(CommandMeasurer, TimeoutKillsTheWholeGroup) {
  const std::string pid_file =
      (std::filesystem::temp_directory_path() / ("feedtune-cmd-" + std::to_string(getpid()))).string();
  const auto start = Clock::now();
  const results::TrialRecord t =
      MeasureShell("sleep 30 & echo $! > " + pid_file + "; echo 'still going' >&2; sleep 30", 1, 0.5);
  EXPECT_LT(SecondsOf(Clock::now() - start), 5.0);
  ASSERT_EQ(t.status, results::TrialStatus::kFailed);
  EXPECT_EQ(t.error->rfind("repeat 1 of 1: the command timed out after 0.5 s (workload.timeout_s) and was killed", 0),
            0u)
      << *t.error;
  EXPECT_NE(t.error->find("still going"), std::string::npos) << *t.error;
  // The background child went with it.
  pid_t child = 0;
  std::ifstream(pid_file) >> child;
  std::filesystem::remove(pid_file);
  ASSERT_GT(child, 0);
  // Gone, or a zombie waiting for init to reap it: either way, not running.
  const auto running = [](pid_t pid) {
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    if (!std::getline(stat, line)) return false;
    const size_t paren = line.rfind(')');
    return paren != std::string::npos && paren + 2 < line.size() && line[paren + 2] != 'Z';
  };
  bool gone = false;
  for (int i = 0; i < 50 && !gone; ++i) {
    gone = !running(child);
    if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE(gone) << "pid " << child << " survived";
}

TEST(CommandMeasurer, BadOrMissingJson) {
  results::TrialRecord t = MeasureShell("echo 'done: 123 samples/s'");
  ASSERT_EQ(t.status, results::TrialStatus::kFailed);
  EXPECT_EQ(t.error->rfind("repeat 1 of 1: the command's last stdout line is not a JSON object: 'done: 123 "
                           "samples/s'; expected a JSON line such as {\"samples_per_s\": 1234.5} last",
                           0),
            0u)
      << *t.error;
  t = MeasureShell("echo '{\"samples_per_sec\": 5}'");
  EXPECT_EQ(t.error->rfind("repeat 1 of 1: the command's JSON line has no \"samples_per_s\"", 0), 0u) << *t.error;
  t = MeasureShell("echo '{\"samples_per_s\": \"fast\"}'");
  EXPECT_EQ(t.error->rfind("repeat 1 of 1: the command's JSON line has \"samples_per_s\": \"fast\", expected a "
                           "number in [0, 1e+18]",
                           0),
            0u)
      << *t.error;
  t = MeasureShell("echo '{\"samples_per_s\": 5, \"gpu_idle_frac\": 1.5}'");
  EXPECT_NE(t.error->find("\"gpu_idle_frac\": 1.5, expected a number in [0, 1]"), std::string::npos) << *t.error;
  t = MeasureShell("echo '{\"samples_per_s\": 5, \"batches_per_epoch\": 2.5}'");
  EXPECT_NE(t.error->find("\"batches_per_epoch\": 2.5, expected a whole number >= 1"), std::string::npos) << *t.error;
  t = MeasureShell("echo '{\"samples_per_s\": 5, \"worker_rss_samples\": 2.5}'");
  EXPECT_NE(t.error->find("\"worker_rss_samples\": 2.5, expected a whole number >= 0"), std::string::npos) << *t.error;
  t = MeasureShell("echo '{\"samples_per_s\": 5, \"worker_rss_peak_bytes\": -1}'");
  EXPECT_NE(t.error->find("\"worker_rss_peak_bytes\": -1, expected a number in [0, 1e+18]"), std::string::npos)
      << *t.error;
  t = MeasureShell("echo '{\"samples_per_s\": 5, \"num_workers\": \"four\"}'");  // informative: not an error
  EXPECT_EQ(t.status, results::TrialStatus::kOk) << t.error.value_or("");
  t = MeasureShell("echo '{\"samples_per_s\": 5}'");
  EXPECT_FALSE(t.batches_per_epoch.has_value());  // not said: unknown, not 0
  t = MeasureShell("true");
  EXPECT_EQ(t.error->rfind("repeat 1 of 1: the command printed nothing on stdout", 0), 0u) << *t.error;
  t = MeasureShell("echo '[1, 2]'");
  EXPECT_NE(t.error->find("is not a JSON object: '[1, 2]'"), std::string::npos) << *t.error;
}

TEST(CommandMeasurer, CommandNotFound) {
  SweepConfig config = ShellConfig("");
  config.workload.command.argv = {"/nonexistent/feedtune-probe"};
  CommandMeasurer measurer(config, nullptr);
  const results::TrialRecord t = measurer.Measure({});
  ASSERT_EQ(t.status, results::TrialStatus::kFailed);
  EXPECT_EQ(t.error->rfind("repeat 1 of 1: the command could not be started: '/nonexistent/feedtune-probe' not "
                           "found or not executable",
                           0),
            0u)
      << *t.error;
  EXPECT_EQ(ResolveCommand("sh").empty(), false);
  EXPECT_EQ(ResolveCommand("feedtune-no-such-command"), "");
}

// A command that exits but leaves a process holding its stdout: the result
// counts, the leftover is killed, and the wait for it is short.
TEST(CommandMeasurer, LeftoversDoNotHoldTheTrial) {
  const auto start = Clock::now();
  const results::TrialRecord t = MeasureShell("sleep 30 & echo '{\"samples_per_s\": 7}'");
  EXPECT_LT(SecondsOf(Clock::now() - start), 8.0);
  ASSERT_EQ(t.status, results::TrialStatus::kOk) << t.error.value_or("");
  EXPECT_EQ(t.samples_per_s, 7);
}

TEST(CommandMeasurer, StopFlagInterrupts) {
  std::atomic<bool> stop{false};
  CommandMeasurer measurer(ShellConfig("sleep 30"), &stop);
  std::thread raiser([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    stop = true;
  });
  const auto start = Clock::now();
  EXPECT_THROW(measurer.Measure({}), Interrupted);
  raiser.join();
  EXPECT_LT(SecondsOf(Clock::now() - start), 3.0);
}

}  // namespace
}  // namespace feedtune::tuner
