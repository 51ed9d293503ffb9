// End to end: a sweep interrupted by SIGINT or SIGTERM ends cleanly (exit 130,
// no worker process and no shared memory left, run marked interrupted), and
// `sweep --resume RUN` finishes it from the stored trials without measuring
// them again.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <thread>

#include "tests/common/cli_scratch.h"
#include "tests/common/read_file.h"
#include "tests/common/tiny_sweep.h"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

// Long enough that the signal lands while workers run (max_workers 4, two
// repeats of 0.2 s), short enough for a test.
const std::string kInterruptConfig =
    feedtune::testing_util::TinySweepYaml({.name = "interrupt", .measure_seconds = "0.2", .sweep_extra = ""});

using feedtune::testing_util::ReadFile;

std::set<std::string> ShmEntries() {
  std::set<std::string> names;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/dev/shm", ec)) names.insert(e.path().filename().string());
  return names;
}

// Processes in the process group `pgid` (the sweep and its workers), by /proc.
int ProcessesInGroup(pid_t pgid) {
  int n = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/proc", ec)) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat(e.path() / "stat");
    std::string line;
    if (!std::getline(stat, line)) continue;
    // pid (comm) state ppid pgrp ...: comm may hold spaces, so parse after the last ')'.
    const size_t close = line.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(line.substr(close + 2));
    char state = 0;
    long ppid = 0, pgrp = 0;
    rest >> state >> ppid >> pgrp;
    if (pgrp == pgid && state != 'Z') ++n;
  }
  return n;
}

class Interrupt : public feedtune::testing_util::CliScratchTest {
 protected:
  void SetUp() override {
    CliScratchTest::SetUp();
    Write("c.yaml", kInterruptConfig);
    db_ = (dir_ / "r.db").string();
  }
  void TearDown() override {
    if (pid_ > 0) {
      kill(-pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    CliScratchTest::TearDown();
  }

  // Starts `feedtune ARGS` in its own process group, as a shell starts a job.
  void Start(const std::vector<std::string>& args) {
    const std::string out = (dir_ / "out").string(), err = (dir_ / "err").string();
    pid_ = fork();
    ASSERT_GE(pid_, 0);
    if (pid_ == 0) {
      setpgid(0, 0);
      if (!freopen(out.c_str(), "w", stdout) || !freopen(err.c_str(), "w", stderr)) _exit(127);
      std::vector<char*> argv;
      argv.push_back(const_cast<char*>(FEEDTUNE_BINARY));
      for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      execv(FEEDTUNE_BINARY, argv.data());
      _exit(127);
    }
    setpgid(pid_, pid_);  // also here, so the group exists before we signal it
  }

  // Waits for the started process; its exit code (128 + signal when killed).
  int Wait(std::chrono::seconds limit) {
    const auto deadline = Clock::now() + limit;
    int status = 0;
    while (waitpid(pid_, &status, WNOHANG) == 0) {
      if (Clock::now() > deadline) {
        ADD_FAILURE() << "feedtune did not exit within " << limit.count() << " s";
        kill(-pid_, SIGKILL);
        waitpid(pid_, &status, 0);
        break;
      }
      std::this_thread::sleep_for(20ms);
    }
    const pid_t pgid = pid_;
    pid_ = -1;
    last_pgid_ = pgid;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

  // Runs feedtune to the end; its exit code, stdout and stderr.
  int Run(const std::vector<std::string>& args, std::string* out, std::string* err) {
    Start(args);
    const int code = Wait(120s);
    *out = ReadFile(dir_ / "out");
    *err = ReadFile(dir_ / "err");
    return code;
  }

  // Interrupts a fresh sweep with `signo` once a trial with workers runs.
  int InterruptSweep(int signo) {
    Start({"sweep", (dir_ / "c.yaml").string(), "--db", db_});
    // Wait until the worker trials have started: the second trial (pin_memory,
    // no workers) is done and the sweep's group holds more than the sweep.
    const auto deadline = Clock::now() + 60s;
    while (ReadFile(dir_ / "err").find("[ 2] ") == std::string::npos && Clock::now() < deadline) {
      std::this_thread::sleep_for(10ms);
    }
    while (ProcessesInGroup(pid_) < 2 && Clock::now() < deadline) std::this_thread::sleep_for(10ms);
    EXPECT_GE(ProcessesInGroup(pid_), 2) << "no worker process appeared";
    std::this_thread::sleep_for(100ms);
    kill(-pid_, signo);  // the whole group, as the terminal does on Ctrl-C
    return Wait(30s);
  }

  nlohmann::json Report() {
    std::string out, err;
    EXPECT_EQ(Run({"report", "--db", db_, "--format", "json"}, &out, &err), 0) << err;
    return nlohmann::json::parse(out);
  }

  std::string db_;
  pid_t pid_ = -1;
  pid_t last_pgid_ = -1;
};

TEST_F(Interrupt, SigintEndsCleanlyAndResumeFinishesTheRun) {
  const std::set<std::string> shm_before = ShmEntries();
  ASSERT_EQ(InterruptSweep(SIGINT), 130);
  const std::string err = ReadFile(dir_ / "err");
  EXPECT_NE(err.find("is marked interrupted"), std::string::npos) << err;
  EXPECT_NE(err.find("--resume 1"), std::string::npos) << err;

  // Nothing left behind: no process of the sweep's group, no new /dev/shm entry.
  const auto deadline = Clock::now() + 2s;
  while (ProcessesInGroup(last_pgid_) > 0 && Clock::now() < deadline) std::this_thread::sleep_for(20ms);
  EXPECT_EQ(ProcessesInGroup(last_pgid_), 0) << "a worker outlived the interrupted sweep";
  for (const auto& name : ShmEntries()) {
    if (!shm_before.count(name)) {
      EXPECT_EQ(name.find("feedtune"), std::string::npos) << "left in /dev/shm: " << name;
    }
  }

  const nlohmann::json interrupted = Report();
  EXPECT_EQ(interrupted["status"], "interrupted");
  EXPECT_EQ(interrupted["end_note"].get<std::string>().rfind("stopped by SIGINT or SIGTERM after ", 0), 0u)
      << interrupted["end_note"];
  const size_t stored = interrupted["trials"].size();
  ASSERT_GE(stored, 2u);  // baseline and pin_memory ran before the workers did
  std::vector<int64_t> stored_ids;
  for (const auto& t : interrupted["trials"]) stored_ids.push_back(t["id"].get<int64_t>());

  // Resume, with JSON events: the stored trials are replayed, not measured.
  std::string out, resume_err;
  ASSERT_EQ(Run({"sweep", "--resume", "1", "--db", db_, "--json"}, &out, &resume_err), 0) << resume_err;
  EXPECT_NE(resume_err.find("resuming: " + std::to_string(stored) + " stored trials"), std::string::npos)
      << resume_err;
  std::istringstream lines(out);
  std::string line;
  std::vector<nlohmann::json> events;
  while (std::getline(lines, line)) events.push_back(nlohmann::json::parse(line));  // one object per line
  ASSERT_GE(events.size(), 3u);
  EXPECT_EQ(events.front()["event"], "start");
  EXPECT_EQ(events.front()["resumed"], true);
  EXPECT_EQ(events.back()["event"], "done");
  EXPECT_EQ(events.back()["status"], "done");
  // The check's outcome as fields, for the job (feedtune.autotune reads them, never the phase's words).
  const nlohmann::json& done_event = events.back();
  EXPECT_EQ(done_event["best_is_reference"].get<bool>(),
            done_event["best"]["config"] == done_event["baseline"]["config"])
      << done_event;
  EXPECT_EQ(done_event["slower_than_reference"].get<bool>(),
            done_event["speedup_ci"].is_array() && done_event["speedup_ci"][1].get<double>() < 1.0)
      << done_event;
  size_t replayed = 0, trials = 0;
  for (const auto& e : events) {
    if (e["event"] != "trial") continue;
    ++trials;
    if (e["replayed"].get<bool>()) {
      EXPECT_EQ(e["id"].get<int64_t>(), stored_ids[replayed]);
      ++replayed;
    } else {
      EXPECT_EQ(replayed, stored) << "a replayed trial after a measured one";
    }
  }
  EXPECT_EQ(replayed, stored);
  EXPECT_GT(trials, stored);

  const nlohmann::json done = Report();
  EXPECT_EQ(done["status"], "done");
  EXPECT_TRUE(done["end_note"].is_null()) << "how it stopped before is not how it ended";
  EXPECT_EQ(done["trials"].size(), trials);  // each trial stored once
  for (size_t i = 0; i < stored; ++i) EXPECT_EQ(done["trials"][i]["id"].get<int64_t>(), stored_ids[i]);
  EXPECT_TRUE(done["best"].is_object());

  // A finished run cannot be resumed.
  std::string out2, err2;
  EXPECT_EQ(Run({"sweep", "--resume", "1", "--db", db_}, &out2, &err2), 2);
  EXPECT_NE(err2.find("nothing to resume"), std::string::npos) << err2;
}

TEST_F(Interrupt, SigtermEndsCleanlyToo) {
  ASSERT_EQ(InterruptSweep(SIGTERM), 130);
  const auto deadline = Clock::now() + 2s;
  while (ProcessesInGroup(last_pgid_) > 0 && Clock::now() < deadline) std::this_thread::sleep_for(20ms);
  EXPECT_EQ(ProcessesInGroup(last_pgid_), 0);
  EXPECT_EQ(Report()["status"], "interrupted");
}

// SIGKILL gives the sweep no word: its run stays "running" (a read-only
// report changes nothing) until the next sweep opens the file, finds its
// process gone, marks it interrupted and says so; a resume then finishes it.
TEST_F(Interrupt, SigkillLeavesARunningRunTheNextSweepMarksInterrupted) {
  ASSERT_EQ(InterruptSweep(SIGKILL), 128 + SIGKILL);
  const pid_t killed = last_pgid_;
  const nlohmann::json left = Report();
  EXPECT_EQ(left["status"], "running");
  ASSERT_GE(left["trials"].size(), 2u);

  std::string out, err;
  ASSERT_EQ(Run({"sweep", "--resume", "1", "--db", db_}, &out, &err), 0) << err;
  EXPECT_NE(err.find("feedtune: " + db_ + ": run 1 was left running by pid " + std::to_string(killed) +
                     ", which has ended; marked interrupted, its " + std::to_string(left["trials"].size()) +
                     " trials kept\n"),
            std::string::npos)
      << err;
  const nlohmann::json done = Report();
  EXPECT_EQ(done["status"], "done");
  EXPECT_TRUE(done["end_note"].is_null());
}

TEST_F(Interrupt, ResumeUsageErrors) {
  std::string out, err;
  EXPECT_EQ(Run({"sweep", "--resume", "7", "--db", db_}, &out, &err), 2);
  EXPECT_NE(err.find("no run 7"), std::string::npos) << err;
  EXPECT_EQ(Run({"sweep", (dir_ / "c.yaml").string(), "--resume", "1", "--db", db_}, &out, &err), 2);
  EXPECT_EQ(Run({"sweep", "--db", db_}, &out, &err), 2);
}

}  // namespace
