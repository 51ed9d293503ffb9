// The command workload's serve protocol (workload.protocol serve,
// docs/command-protocol.md) against a fake serving command
// (tests/testdata/serve/fake_server.py, no torch, milliseconds per trial):
// one process for many trials; each way a trial can fail (crash, hang, a
// malformed line, a missing window, a wrong trial number, an exit) fails that
// trial alone, kills the process group, and the next trial starts a new
// process; the command's own {"error": ...} keeps it; a user's prints are
// ignored; Ctrl-C (the stop flag, and SIGINT to a whole `feedtune sweep`)
// and the measurer's destruction leave no process behind.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/common/process_tree.h"
#include "tests/common/read_file.h"
#include "tuner/measure/command_measurer.h"
#include "tuner/measure/command_server.h"

namespace feedtune::tuner {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;
using testing_util::ReadFile;
using testing_util::ReadProcStat;

const std::string kFakeServer = FEEDTUNE_SOURCE_DIR "/tests/testdata/serve/fake_server.py";

// The batch sizes that make the fake server misbehave (see its docstring).
enum Fault : int {
  kCrash = 1001,
  kHang = 1002,
  kMalformed = 1003,
  kMissing = 1004,
  kError = 1005,
  kNoisy = 1006,
  kWrongTrial = 1007,
  kExit = 1008,
  kSlow = 1009,
  kExtra = 1010,
};

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// Running: present and not a zombie.
bool Running(pid_t pid) {
  const auto stat = ReadProcStat(pid);
  return stat && stat->state != 'Z';
}

// Waits up to 2 s for `pid` to stop running.
bool GoneSoon(pid_t pid) {
  for (int i = 0; i < 100; ++i) {
    if (!Running(pid)) return true;
    std::this_thread::sleep_for(20ms);
  }
  return false;
}

class CommandServe : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("feedtune-serve-" + std::to_string(getpid()) + "-" +
                                        testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    log_ = (dir_ / "log").string();
  }
  void TearDown() override { fs::remove_all(dir_); }

  SweepConfig Config(double timeout_s = 30, int repeats = 2) const {
    SweepConfig config;
    config.workload.kind = workloads::WorkloadKind::kCommand;
    config.workload.command.protocol = workloads::CommandProtocol::kServe;
    config.workload.command.argv = {"python3", kFakeServer, log_};
    config.workload.command.timeout_s = timeout_s;
    config.sweep.repeats = repeats;
    return config;
  }

  // (server pid, its sleeping child's pid) per start, from the fake server's log.
  std::vector<std::pair<pid_t, pid_t>> Starts() const {
    std::vector<std::pair<pid_t, pid_t>> starts;
    std::istringstream in(ReadFile(log_));
    std::string word;
    pid_t server = 0, child = 0;
    while (in >> word >> server >> child) starts.emplace_back(server, child);
    return starts;
  }

  static loader::Knobs Knobs(int num_workers, int batch_size = 32) {
    loader::Knobs knobs;
    knobs.num_workers = num_workers;
    knobs.batch_size = batch_size;
    return knobs;
  }

  fs::path dir_;
  std::string log_;
};

TEST_F(CommandServe, OneProcessServesEveryTrial) {
  CommandMeasurer measurer(Config(), nullptr);
  EXPECT_EQ(measurer.server_pid(), -1);  // started lazily, at the first trial
  for (int workers : {1, 2, 4}) {
    const results::TrialRecord t = measurer.Measure(Knobs(workers));
    ASSERT_EQ(t.status, results::TrialStatus::kOk) << t.error.value_or("");
    EXPECT_EQ(t.repeats, 2);
    ASSERT_EQ(t.repeat_rows.size(), 2u);
    EXPECT_EQ(t.repeat_rows[0].samples_per_s, 100.0 * workers);
    EXPECT_EQ(t.repeat_rows[1].samples_per_s, 100.0 * workers + 1);
    EXPECT_EQ(t.samples_per_s, 100.0 * workers + 0.5);
    EXPECT_EQ(t.gpu_idle_frac, 0.5);
    EXPECT_EQ(t.wait_p50_us, 10);
    EXPECT_TRUE(std::isnan(t.epoch_boundary_ms));  // time windows: not reported
    EXPECT_GT(t.peak_rss_bytes, 0);                // sampled from the process tree
    EXPECT_EQ(t.time_to_first_batch_s, 0.125);
    EXPECT_EQ(t.worker_busy_frac, 0.5);                   // median of 0.25 and 0.75
    EXPECT_EQ(t.worker_rss_bytes, 1000000.0 * workers + 1);  // the larger window
    EXPECT_TRUE(std::isnan(t.wait_p99_us));               // not reported: not measured, not 0
    EXPECT_TRUE(std::isnan(t.mb_per_s));
    EXPECT_TRUE(std::isnan(t.repeat_rows[0].wait_p99_us));
  }
  EXPECT_EQ(measurer.servers_started(), 1);
  ASSERT_EQ(Starts().size(), 1u);
  EXPECT_EQ(Starts()[0].first, measurer.server_pid());

  // The plan's repeats and whole-epoch windows travel in the request.
  TrialPlan plan;
  plan.repeats = 3;
  plan.window_epochs = 1;
  const results::TrialRecord t = measurer.MeasurePlanned(Knobs(1), plan);
  ASSERT_EQ(t.status, results::TrialStatus::kOk) << t.error.value_or("");
  EXPECT_EQ(t.repeats, 3);
  EXPECT_EQ(t.samples_per_s, 101);  // median of 100, 101, 102
  EXPECT_EQ(t.epoch_boundary_ms, 2.5);
  EXPECT_EQ(Starts().size(), 1u);
}

TEST_F(CommandServe, UserPrintsAreIgnored) {
  CommandMeasurer measurer(Config(), nullptr);
  const results::TrialRecord t = measurer.Measure(Knobs(3, kNoisy));
  ASSERT_EQ(t.status, results::TrialStatus::kOk) << t.error.value_or("");
  EXPECT_EQ(t.samples_per_s, 300.5);
}

// Each fault fails its trial alone, with the cause and stderr's tail; the
// process group goes (the server and its child), and the next trial runs in a
// new process.
struct FaultCase {
  Fault fault;
  std::string cause;   // the error starts with this
  std::string stderr;  // and holds this
};

TEST_F(CommandServe, AFaultFailsOneTrialAndTheNextStartsANewProcess) {
  const std::vector<FaultCase> cases = {
      {kCrash, "the serving command was killed by signal 11 (SIGSEGV) in trial 2 after 1 of 2 windows",
       "fake_server: about to crash"},
      {kMalformed,
       "the serving command printed a line that is not a JSON object in trial 2 after 1 of 2 windows: "
       "'{samples_per_s: oops'",
       "stderr: (empty)"},
      {kMissing,
       "the serving command ended trial 2 after 1 of 2 windows; expected 2 window lines before "
       "{\"trial_end\": 2}",
       "stderr: (empty)"},
      {kWrongTrial, "the serving command ended trial 3 while trial 2 was running: '{\"trial_end\": 3}'",
       "stderr: (empty)"},
      {kExit, "the serving command exited with code 3 in trial 2 after 0 of 2 windows", "exiting on purpose"},
      {kExtra,
       "the serving command printed more than the 2 window lines asked in trial 2: '{\"samples_per_s\": 202.0",
       "stderr: (empty)"},
  };
  for (const FaultCase& c : cases) {
    SCOPED_TRACE(c.fault);
    fs::remove(log_);
    CommandMeasurer measurer(Config(), nullptr);
    ASSERT_EQ(measurer.Measure(Knobs(1)).status, results::TrialStatus::kOk);
    const auto first = Starts();
    ASSERT_EQ(first.size(), 1u);

    const results::TrialRecord bad = measurer.Measure(Knobs(2, c.fault));
    ASSERT_EQ(bad.status, results::TrialStatus::kFailed);
    const std::string& e = *bad.error;
    EXPECT_EQ(e.rfind(c.cause, 0), 0u) << e;
    EXPECT_NE(e.find("\n  command: python3 " + kFakeServer), std::string::npos) << e;
    EXPECT_NE(e.find(c.stderr), std::string::npos) << e;
    EXPECT_EQ(measurer.server_pid(), -1);
    EXPECT_TRUE(GoneSoon(first[0].first)) << "the server survived";
    EXPECT_TRUE(GoneSoon(first[0].second)) << "the server's child survived";

    const results::TrialRecord next = measurer.Measure(Knobs(4));
    ASSERT_EQ(next.status, results::TrialStatus::kOk) << next.error.value_or("");
    EXPECT_EQ(next.samples_per_s, 400.5);
    EXPECT_EQ(Starts().size(), 2u);
    EXPECT_EQ(measurer.servers_started(), 2);
  }
}

// workload.timeout_s is 6 s: the hang is killed then, and the first trial's
// and the next one's new process (python start-up included) have that long
// too, which a loaded box needs (1 s was not always enough for a CI box under
// ASan, 3 s not for one beside two CPU hogs at load 9).
TEST_F(CommandServe, AHangTimesOutAndKillsTheGroup) {
  CommandMeasurer measurer(Config(/*timeout_s=*/6.0), nullptr);
  const results::TrialRecord first = measurer.Measure(Knobs(1));
  ASSERT_EQ(first.status, results::TrialStatus::kOk) << first.error.value_or("");
  const pid_t server = Starts().at(0).first, child = Starts().at(0).second;
  const auto start = Clock::now();
  const results::TrialRecord t = measurer.Measure(Knobs(2, kHang));
  EXPECT_LT(Seconds(Clock::now() - start), 9.0);
  ASSERT_EQ(t.status, results::TrialStatus::kFailed);
  EXPECT_EQ(t.error->rfind("trial 2 timed out after 6 s (workload.timeout_s) with 1 of 2 windows done; the "
                           "serving command was killed",
                           0),
            0u)
      << *t.error;
  EXPECT_NE(t.error->find("fake_server: hanging"), std::string::npos) << *t.error;
  EXPECT_TRUE(GoneSoon(server));
  EXPECT_TRUE(GoneSoon(child));
  const results::TrialRecord next = measurer.Measure(Knobs(1));
  EXPECT_EQ(next.status, results::TrialStatus::kOk) << next.error.value_or("");
  EXPECT_EQ(Starts().size(), 2u);
}

TEST_F(CommandServe, ItsOwnErrorFailsTheTrialAndKeepsTheProcess) {
  CommandMeasurer measurer(Config(), nullptr);
  ASSERT_EQ(measurer.Measure(Knobs(1)).status, results::TrialStatus::kOk);
  const pid_t server = measurer.server_pid();
  const results::TrialRecord t = measurer.Measure(Knobs(1, kError));
  ASSERT_EQ(t.status, results::TrialStatus::kFailed);
  EXPECT_EQ(t.error->rfind("the serving command reported an error in trial 2 after 0 of 2 windows: ValueError: "
                           "no such thing",
                           0),
            0u)
      << *t.error;
  EXPECT_EQ(measurer.server_pid(), server);
  EXPECT_EQ(measurer.Measure(Knobs(1)).status, results::TrialStatus::kOk);
  EXPECT_EQ(Starts().size(), 1u);
}

TEST_F(CommandServe, CommandNotFound) {
  SweepConfig config = Config();
  config.workload.command.argv = {"/nonexistent/feedtune-server"};
  CommandMeasurer measurer(config, nullptr);
  const results::TrialRecord t = measurer.Measure(Knobs(1));
  ASSERT_EQ(t.status, results::TrialStatus::kFailed);
  EXPECT_EQ(t.error->rfind("the serving command could not be started: '/nonexistent/feedtune-server' not found or "
                           "not executable",
                           0),
            0u)
      << *t.error;
}

// The environment tells the command which protocol it speaks and the sweep's
// settings, but not the knobs (those come per trial).
TEST_F(CommandServe, Environment) {
  SweepConfig config = Config();
  config.workload.command.argv = {
      "/bin/sh", "-c",
      "[ \"$FEEDTUNE_PROTOCOL\" = serve ] && [ \"$FEEDTUNE_MEASURE_SECONDS\" = 2 ] && [ -z \"$FEEDTUNE_NUM_WORKERS\" ] "
      "&& [ \"$1\" = 2 ] || { echo \"bad environment\" >&2; exit 9; }; read line; "
      "echo '{\"samples_per_s\": 5}'; echo '{\"samples_per_s\": 6}'; echo '{\"trial_end\": 1}'; sleep 30",
      "sh", "{measure_seconds}"};
  CommandMeasurer measurer(config, nullptr);
  const results::TrialRecord t = measurer.Measure(Knobs(1));
  EXPECT_EQ(t.status, results::TrialStatus::kOk) << t.error.value_or("");
  EXPECT_EQ(t.samples_per_s, 5.5);
}

TEST_F(CommandServe, DestroyingTheMeasurerKillsTheGroup) {
  pid_t server = 0, child = 0;
  {
    CommandMeasurer measurer(Config(), nullptr);
    ASSERT_EQ(measurer.Measure(Knobs(1)).status, results::TrialStatus::kOk);
    server = Starts().at(0).first;
    child = Starts().at(0).second;
    ASSERT_TRUE(Running(server));
    ASSERT_TRUE(Running(child));
  }
  EXPECT_FALSE(Running(server));  // killed and reaped at once
  EXPECT_TRUE(GoneSoon(child));   // killed with its group (init reaps it)
}

TEST_F(CommandServe, StopFlagInterruptsATrial) {
  std::atomic<bool> stop{false};
  CommandMeasurer measurer(Config(), &stop);
  ASSERT_EQ(measurer.Measure(Knobs(1)).status, results::TrialStatus::kOk);
  const pid_t server = Starts().at(0).first, child = Starts().at(0).second;
  std::thread raiser([&] {
    std::this_thread::sleep_for(300ms);
    stop = true;
  });
  const auto start = Clock::now();
  EXPECT_THROW(measurer.Measure(Knobs(2, kHang)), Interrupted);
  raiser.join();
  EXPECT_LT(Seconds(Clock::now() - start), 3.0);
  EXPECT_FALSE(Running(server));
  EXPECT_TRUE(GoneSoon(child));
}

// Attached (sweep --serve-fd, feedtune.autotune): the job that serves closing
// the socket mid-trial means it has ended, JobGone, and the sweep marks the run
// interrupted rather than failing every later trial and finishing "done". A
// stop raised before the socket closed wins: a job that stops tuning early
// signals feedtune, then closes the socket, and that is an interruption.
TEST(CommandServeAttached, TheJobClosingTheSocketEndsTheTuningAndAStopComesFirst) {
  for (const bool stop_first : {false, true}) {
    SCOPED_TRACE(stop_first ? "the job signals, then closes the socket" : "the job closes the socket");
    int fds[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
    std::string error;
    const std::unique_ptr<CommandServer> server = CommandServer::Attach(fds[0], &error);
    ASSERT_NE(server, nullptr) << error;
    std::atomic<bool> stop{false};
    std::thread job([&] {
      char request[4096];
      EXPECT_GT(read(fds[1], request, sizeof request), 0);  // the request line, then no window
      if (stop_first) stop = true;
      close(fds[1]);
    });
    try {
      server->RunTrial(R"({"trial": 1})", 1, 3, 30, &stop);
      ADD_FAILURE() << "the trial ended without an exception";
    } catch (const JobGone& e) {
      EXPECT_FALSE(stop_first) << e.what();
      EXPECT_STREQ(e.what(), "the training job closed the connection in trial 1 after 0 of 3 windows: it ended or "
                             "was killed");
    } catch (const Interrupted&) {
      EXPECT_TRUE(stop_first);
    }
    job.join();
    EXPECT_FALSE(server->alive());
  }
}

// SIGINT to a whole `feedtune sweep` while a served trial runs: exit 130, the
// run marked interrupted, and neither feedtune's group nor the serving
// command's (its own group) leaves a process behind.
TEST_F(CommandServe, SigintDuringAServedSweepLeavesNoProcess) {
  const std::string config_path = (dir_ / "serve.yaml").string();
  // Slow windows (kSlow) and many repeats, so the signal lands inside a trial.
  std::ofstream(config_path) << "name: serve-interrupt\n"
                                "workload:\n"
                                "  kind: command\n"
                                "  protocol: serve\n"
                                "  argv: [python3, " + kFakeServer + ", " + log_ + "]\n"
                                "loader:\n"
                                "  batch_size: 1009\n"
                                "sweep:\n"
                                "  repeats: 20\n"
                                "  max_workers: 4\n";
  const std::string out = (dir_ / "out").string(), err = (dir_ / "err").string();
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    setpgid(0, 0);
    if (!freopen(out.c_str(), "w", stdout) || !freopen(err.c_str(), "w", stderr)) _exit(127);
    execl(FEEDTUNE_BINARY, FEEDTUNE_BINARY, "sweep", config_path.c_str(), "--db", (dir_ / "r.db").c_str(),
          static_cast<char*>(nullptr));
    _exit(127);
  }
  setpgid(pid, pid);
  const auto deadline = Clock::now() + 30s;
  while (Starts().empty() && Clock::now() < deadline) std::this_thread::sleep_for(20ms);
  ASSERT_EQ(Starts().size(), 1u) << ReadFile(err);
  std::this_thread::sleep_for(500ms);  // inside the baseline's 20 slow windows
  const auto [server, child] = Starts()[0];
  ASSERT_TRUE(Running(server));
  kill(-pid, SIGINT);  // feedtune's group, as a terminal does
  int status = 0;
  const auto wait_deadline = Clock::now() + 20s;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (Clock::now() > wait_deadline) {
      kill(-pid, SIGKILL);
      waitpid(pid, &status, 0);
      FAIL() << "feedtune did not exit after SIGINT";
    }
    std::this_thread::sleep_for(20ms);
  }
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 130) << ReadFile(err);
  EXPECT_NE(ReadFile(err).find("is marked interrupted"), std::string::npos) << ReadFile(err);
  EXPECT_TRUE(GoneSoon(server)) << "the serving command outlived the sweep";
  EXPECT_TRUE(GoneSoon(child)) << "the serving command's child outlived the sweep";
  // Nothing of the server's group (its own, led by it) is left either.
  for (const pid_t p : testing_util::AllPids()) {
    const auto stat = ReadProcStat(p);
    if (stat && stat->state != 'Z') {
      EXPECT_NE(stat->pgrp, server) << "pid " << p << " is left in its group";
    }
  }
}

}  // namespace
}  // namespace feedtune::tuner
