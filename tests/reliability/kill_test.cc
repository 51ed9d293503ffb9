// feedtune killed with SIGKILL at seeded pseudo-random points of a sweep: the
// results file stays sound (PRAGMA integrity_check), every trial the sweep
// reported as stored is there, neither the fork server nor a worker outlives
// feedtune, and no shared-memory segment is left behind.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <optional>
#include <vector>
#include <random>
#include <string>
#include <thread>

#include "tests/common/process_tree.h"
#include "tests/reliability/harness.h"

namespace feedtune::reliability {
namespace {

struct KillPoint {
  int after_trials;  // 0: counted from the start of the process
  int delay_ms;
};

std::string Describe(const KillPoint& p) {
  return "kill after " + std::to_string(p.after_trials) + " trial lines + " + std::to_string(p.delay_ms) + " ms";
}

bool IsNewTrialLine(const std::string& line) {
  return IsTrialLine(line) && line.find(", stored)") == std::string::npos;
}

int CountLines(const std::string& text, bool (*match)(const std::string&)) {
  int count = 0;
  size_t start = 0;
  while (start < text.size()) {
    size_t nl = text.find('\n', start);
    if (nl == std::string::npos) nl = text.size();
    if (match(text.substr(start, nl - start))) ++count;
    start = nl + 1;
  }
  return count;
}

int64_t TrialsOf(const std::string& db, int64_t run) {
  return QueryInt(db, "SELECT count(*) FROM trials WHERE run_id = " + std::to_string(run));
}

// The run a resume should continue: the newest one, unless it is done (or none).
std::optional<int64_t> Resumable(const std::string& db) {
  if (!fs::exists(db) || QueryInt(db, "SELECT count(*) FROM sqlite_master WHERE name = 'runs'") == 0) {
    return std::nullopt;
  }
  const auto rows = QueryColumn(db, "SELECT id || ' ' || status FROM runs ORDER BY id DESC LIMIT 1");
  if (rows.empty()) return std::nullopt;
  const int64_t id = std::stoll(rows[0]);
  if (rows[0].substr(rows[0].find(' ') + 1) == "done") return std::nullopt;
  return id;
}

// "run 3: 11 trials" in a sweep's summary: the trials of the whole run.
std::optional<int64_t> SummaryTrials(const std::string& out, int64_t run) {
  const std::string key = "run " + std::to_string(run) + ": ";
  const size_t at = out.find(key);
  if (at == std::string::npos) return std::nullopt;
  return std::stoll(out.substr(at + key.size()));
}

class KillTest : public testing::Test {
 protected:
  void SetUp() override { BecomeSubreaper(); }
};

// Twelve SIGKILLs at points drawn from a fixed seed: some during start-up
// (opening or creating the results file), most in the middle of trials with
// worker processes running. After each: the file passes integrity_check, every
// trial the sweep reported (and every trial of earlier runs) is stored, no
// process of the sweep survives it, /dev/shm holds nothing of it. Each kill is
// followed by `sweep --resume` of the killed run (itself killed in turn at the
// next point), and at the end the last run is resumed to completion: it then
// holds exactly the trials its summary counts, none lost or measured twice.
TEST_F(KillTest, SigkillAtSeededPointsThenResume) {
  const TempDir dir("kill");
  const std::string config = dir.Write("c.yaml", TinySweepConfig("killme"));
  const std::string db = dir / "results/r.db";
  ASSERT_TRUE(FeedtuneShmEntries().empty()) << "/dev/shm holds feedtune entries before the test";

  std::mt19937 random(20261130);
  std::map<int64_t, int64_t> known;  // run id -> its stored trials, as last checked
  int kills = 0, kills_with_workers = 0, resumes = 0, completed = 0;
  for (int attempt = 0; kills < 12 && attempt < 30; ++attempt) {
    KillPoint point;
    point.after_trials = attempt < 3 ? 0 : 1 + static_cast<int>(random() % 6);
    point.delay_ms = point.after_trials == 0 ? static_cast<int>(random() % 150) : static_cast<int>(random() % 400);
    const std::optional<int64_t> resume = Resumable(db);
    std::vector<std::string> args = {"sweep", config, "--db", db};
    if (resume) args = {"sweep", "--resume", std::to_string(*resume), "--db", db};
    const int64_t prior = resume ? known[*resume] : 0;
    const std::string context =
        Describe(point) + (resume ? " of a resume of run " + std::to_string(*resume) : " of a new sweep");
    SCOPED_TRACE(context);

    Child sweep(args);
    bool reached = true;
    if (point.after_trials > 0) {
      reached = sweep.WaitForLines(IsNewTrialLine, point.after_trials, Generous(Seconds(60)));
    }
    if (reached) std::this_thread::sleep_for(std::chrono::milliseconds(point.delay_ms));
    const size_t group = LivingInGroup(sweep.pid()).size();  // feedtune, its fork server and the workers
    sweep.Signal(SIGKILL);
    const ChildResult r = sweep.Wait(Generous(Seconds(60)));
    ASSERT_FALSE(r.timed_out);
    resumes += resume ? 1 : 0;
    const int new_lines = CountLines(r.err, IsNewTrialLine);
    if (r.signal == SIGKILL) {
      ++kills;
      if (group > 1) ++kills_with_workers;
    } else {
      ASSERT_EQ(r.exit_code, 0) << "finished before the kill, so it must have succeeded\n" << r.err;
      ++completed;
    }
    std::printf("[ kill     ] %s: %s, %d new trials reported, %zu worker processes running\n", context.c_str(),
                r.signal == SIGKILL ? "killed" : "finished first", new_lines, group > 0 ? group - 1 : 0);

    // Workers die with their parent (PR_SET_PDEATHSIG): the group empties at once.
    const std::vector<pid_t> survivors = WaitGroupGone(sweep.pid(), Seconds(5));
    EXPECT_TRUE(survivors.empty()) << survivors.size() << " processes of the sweep survived it";
    EXPECT_TRUE(FeedtuneShmEntries().empty()) << "a feedtune entry was left in /dev/shm";

    if (!fs::exists(db)) {
      EXPECT_EQ(new_lines, 0) << "trials were reported but there is no results file";
      continue;
    }
    ASSERT_EQ(IntegrityCheck(db), "ok");
    for (const auto& [run, trials] : known) {
      if (resume && run == *resume) continue;
      EXPECT_EQ(TrialsOf(db, run), trials) << "run " << run << " changed while another run was measured";
    }
    std::optional<int64_t> run = resume;
    if (!run && QueryInt(db, "SELECT count(*) FROM sqlite_master WHERE name = 'runs'") > 0) {
      const auto newest = QueryColumn(db, "SELECT max(id) FROM runs");
      if (!newest.empty() && newest[0] != "NULL" && known.count(std::stoll(newest[0])) == 0) {
        run = std::stoll(newest[0]);
      }
    }
    if (!run) {
      EXPECT_EQ(new_lines, 0) << "trials were reported but no run was created";
      continue;
    }
    const int64_t stored = TrialsOf(db, *run);
    // A trial is printed right after its transaction commits, so at most one
    // stored trial was not yet reported when the kill came.
    EXPECT_GE(stored, prior + new_lines) << "a reported trial is missing from the results file";
    EXPECT_LE(stored, prior + new_lines + 1);
    // Every stored trial is whole: its repeat rows came in the same
    // transaction (re-measured windows beside those in its figures).
    EXPECT_EQ(QueryInt(db, "SELECT count(*) FROM trials t WHERE run_id = " + std::to_string(*run) +
                               " AND status = 'ok' AND (SELECT count(*) FROM repeats r WHERE r.trial_id = t.id) "
                               "!= t.repeats + t.remeasured_windows"),
              0);
    if (r.exit_code == 0) {
      EXPECT_EQ(SummaryTrials(r.out, *run), stored) << r.out;
    }
    known[*run] = stored;
    if (HasFatalFailure()) return;
  }
  EXPECT_EQ(kills, 12);
  // Most of a sweep's time is spent in trials with workers; the kills must hit some.
  EXPECT_GE(kills_with_workers, 3);

  // The last run, resumed to completion, holds exactly the trials of a whole run.
  if (const std::optional<int64_t> run = Resumable(db)) {
    const ChildResult r =
        RunFeedtune({"sweep", "--resume", std::to_string(*run), "--db", db}, Generous(Seconds(120)));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    ++resumes;
    EXPECT_EQ(CountLines(r.err, [](const std::string& l) { return IsTrialLine(l) && !IsNewTrialLine(l); }),
              known[*run])
        << "every stored trial is replayed, not measured again\n"
        << r.err;
    EXPECT_EQ(SummaryTrials(r.out, *run), TrialsOf(db, *run)) << r.out;
  }
  EXPECT_EQ(IntegrityCheck(db), "ok");
  EXPECT_EQ(QueryInt(db, "SELECT count(*) FROM runs WHERE status != 'done'"), 0);
  const ChildResult report = RunFeedtune({"report", "--db", db, "--format", "json"}, Generous(Seconds(30)));
  EXPECT_EQ(report.exit_code, 0) << report.err;
  std::printf("[ figures  ] %d SIGKILLs of feedtune sweep survived (%d with worker processes running); %d resumes, "
              "%d runs in all (%d finished before their kill point), every one done\n",
              kills, kills_with_workers, resumes, static_cast<int>(known.size()), completed);
}

// SIGKILL from outside on one worker process in the middle of a sweep (as the
// OOM killer would): that trial is recorded as failed with the signal, and the
// sweep goes on to finish the run.
TEST_F(KillTest, AWorkerKilledFromOutsideFailsOneTrialAndTheSweepGoesOn) {
  const TempDir dir("workerkill");
  // A longer wait per sample than the tiny sweep's, so that the doubling
  // surely reaches two workers; long epochs, so that the worker killed is
  // inside a trial, not being stopped at an epoch's end.
  std::string yaml = TinySweepConfig("workerkill", 2048, 4096);
  yaml.replace(yaml.find("io_us_per_sample: 300"), 21, "io_us_per_sample: 1000");
  const std::string config = dir.Write("c.yaml", yaml);
  const std::string db = dir / "r.db";
  Child sweep({"sweep", config, "--db", db});
  // After baseline, pin_memory and one worker, the trial with two workers: kill
  // one of them, so that later phases (which go on with one worker) run.
  ASSERT_TRUE(sweep.WaitForLines(IsTrialLine, 3, Generous(Seconds(120)))) << sweep.err_so_far();
  pid_t victim = 0;
  const auto deadline = std::chrono::steady_clock::now() + Generous(Seconds(60));
  while (victim == 0 && std::chrono::steady_clock::now() < deadline) {
    // The sweep, its fork server (its child) and two workers (the server's children).
    std::vector<pid_t> group = LivingInGroup(sweep.pid());
    const std::vector<pid_t> servers = testing_util::ChildrenOf(sweep.pid());
    if (group.size() >= 4) {
      for (pid_t pid : group) {
        const bool is_server = std::find(servers.begin(), servers.end(), pid) != servers.end();
        if (pid != sweep.pid() && !is_server && kill(pid, SIGKILL) == 0) {
          victim = pid;
          break;
        }
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_NE(victim, 0) << "no worker process appeared\n" << sweep.err_so_far();
  const ChildResult r = sweep.Wait(Generous(Seconds(180)));
  ASSERT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  ASSERT_EQ(IntegrityCheck(db), "ok");
  EXPECT_EQ(QueryColumn(db, "SELECT status FROM runs")[0], "done");
  const auto failed = QueryColumn(db, "SELECT error FROM trials WHERE status = 'failed'");
  ASSERT_EQ(failed.size(), 1u) << r.err;
  EXPECT_NE(failed[0].find("(pid " + std::to_string(victim) + ") was killed by signal 9 (SIGKILL)"),
            std::string::npos)
      << failed[0];
  // The kill is recorded with whether the kernel's OOM killer sent it (here
  // it did not, or the cgroup cannot tell).
  EXPECT_TRUE(failed[0].find("; not the kernel's OOM killer (oom_kill ") != std::string::npos ||
              failed[0].find("; whether the kernel's OOM killer did it is unknown") != std::string::npos)
      << failed[0];
  // The sweep went on: trials were measured after the failed one.
  EXPECT_GE(QueryInt(db, "SELECT count(*) FROM trials WHERE status = 'ok' AND id > "
                         "(SELECT id FROM trials WHERE status = 'failed')"),
            1)
      << r.err;
  std::printf("[ figures  ] worker %d SIGKILLed from outside: its trial failed, the sweep finished: %s\n",
              static_cast<int>(victim), failed[0].c_str());
}

}  // namespace
}  // namespace feedtune::reliability
