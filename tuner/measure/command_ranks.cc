#include "tuner/measure/command_ranks.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <system_error>

#include "tuner/measure/child_output.h"
#include "tuner/measure/command_measurer.h"
#include "tuner/measure/command_server.h"
#include "tuner/measure/cpu_affinity.h"
#include "tuner/measure/rank_aggregate.h"
#include "tuner/measure/rank_facts.h"
#include "tuner/measure/stats.h"
#include "tuner/measure/trial_runner.h"

namespace feedtune::tuner::node {
namespace {

using Clock = std::chrono::steady_clock;
using child_output::Drain;
using child_output::kDrainGrace;
using child_output::kStderrKeep;
using child_output::kStdoutKeep;

constexpr int kPollMs = 100;
// How often the ranks' process trees are read (/proc: masks, processes, threads).
constexpr auto kFactsEvery = std::chrono::milliseconds(500);
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// `env` with NAME=value set: replaced where NAME is, else appended.
void SetEnv(std::vector<std::string>& env, const std::string& name, const std::string& value) {
  const std::string prefix = name + "=";
  for (std::string& e : env) {
    if (e.rfind(prefix, 0) == 0) {
      e = prefix + value;
      return;
    }
  }
  env.push_back(prefix + value);
}


// "0-3,8": CPUs (ascending) as a Cpus_allowed_list.
std::string CpuListText(const std::vector<int>& cpus) {
  std::string text;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!text.empty()) text += ',';
    text += std::to_string(cpus[i]);
    if (j > i) {
      text += '-';  // appended apart: GCC 12's -Wrestrict misreads "-" + std::string at -O2
      text += std::to_string(cpus[j]);
    }
    i = j + 1;
  }
  return text;
}

// One rank process of one repeat.
struct RankProcess {
  int rank = 0;
  std::vector<std::string> argv;
  std::vector<int> cpus;  // its binding; empty: the inherited mask
  pid_t pid = -1;
  int out_fd = -1, err_fd = -1;  // read ends, non-blocking
  bool out_open = false, err_open = false;
  bool exited = false;  // the leader exited (seen without reaping)
  bool reaped = false;
  Clock::time_point exited_at{};
  CommandRun run;
  TreeFacts facts;  // the fullest tree seen while it ran
};

// Starts `p`, with its binding taken by this thread just around the spawn:
// the child inherits the spawning thread's mask, so it runs on its share
// from its first instruction (and so do the threads and workers it makes).
void Spawn(RankProcess& p, const std::string& path, const std::vector<std::string>& env) {
  int out_pipe[2], err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0) throw std::system_error(errno, std::generic_category(), "pipe");
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) {
    const int error = errno;
    ::close(out_pipe[0]);
    ::close(out_pipe[1]);
    throw std::system_error(error, std::generic_category(), "pipe");
  }
  cpu_set_t saved;
  const bool bind = !p.cpus.empty() && sched_getaffinity(0, sizeof saved, &saved) == 0;
  if (bind) {
    cpu_set_t share;
    CPU_ZERO(&share);
    for (int cpu : p.cpus) CPU_SET(cpu, &share);
    if (sched_setaffinity(0, sizeof share, &share) != 0) {
      p.run.spawn_error = "sched_setaffinity to CPUs " + CpuListText(p.cpus) + ": " +
                          std::generic_category().message(errno);
    }
  }
  int spawn_error = 0;
  if (p.run.spawn_error.empty()) {
    spawn_error = SpawnInOwnGroup(path, p.argv, env, /*stdin_fd=*/-1, out_pipe[1], err_pipe[1], &p.pid);
  }
  if (bind) sched_setaffinity(0, sizeof saved, &saved);
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  if (!p.run.spawn_error.empty() || spawn_error != 0) {
    if (spawn_error != 0) p.run.spawn_error = path + ": " + std::generic_category().message(spawn_error);
    ::close(out_pipe[0]);
    ::close(err_pipe[0]);
    return;
  }
  p.run.started = true;
  p.out_fd = out_pipe[0];
  p.err_fd = err_pipe[0];
  p.out_open = p.err_open = true;
  ::fcntl(p.out_fd, F_SETFL, O_NONBLOCK);
  ::fcntl(p.err_fd, F_SETFL, O_NONBLOCK);
}

// Why a finished rank failed, or nothing: its exit, then its result line.
std::optional<std::string> RankFailure(const RankProcess& p, double timeout_s, CommandReport* report,
                                       double* window_s) {
  if (!p.run.ok()) return "the command " + p.run.Cause(timeout_s);
  try {
    *report = ParseCommandReport(p.run.stdout_tail);
  } catch (const std::runtime_error& e) {
    return std::string(e.what());
  }
  // The rank's own window ("seconds", as the probe prints it), else its wall time.
  std::string_view text = p.run.stdout_tail;
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.remove_suffix(1);
  const size_t nl = text.rfind('\n');
  const auto j = nlohmann::json::parse(nl == std::string_view::npos ? text : text.substr(nl + 1), nullptr, false);
  *window_s = p.run.wall_s;
  if (j.is_object()) {
    if (const auto it = j.find("seconds"); it != j.end() && it->is_number() && it->get<double>() > 0) {
      *window_s = it->get<double>();
    }
    if (const auto it = j.find("rank"); it != j.end() && it->is_number_integer() && it->get<int>() != p.rank) {
      return "its result line says rank " + it->dump() + ", not " + std::to_string(p.rank) +
             " (does the command read RANK or {rank}?)";
    }
  }
  return std::nullopt;
}

// What one repeat gave: every rank's report and window, or the failure.
struct RepeatResult {
  std::string failure;  // empty: ok
  std::vector<CommandReport> reports;
  std::vector<double> windows_s;
  std::vector<RankProcess> ranks;
};

// A repeat while it runs: its ranks, its clock, and how it is ending.
struct RepeatState {
  std::vector<RankProcess> ranks;
  Clock::time_point start;
  Clock::time_point deadline;
  Clock::time_point next_facts;      // when the ranks' trees are read next
  std::optional<size_t> failed;      // the rank that failed first
  bool killed_all = false, timed_out = false, interrupted = false;

  RepeatState(std::vector<RankProcess> processes, double timeout_s)
      : ranks(std::move(processes)), start(Clock::now()),
        deadline(start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s))),
        next_facts(start) {}

  // Every rank's group at once: the first failure stops the node, so no rank
  // waits in a collective for the process group's timeout.
  void KillAll() {
    for (RankProcess& p : ranks) {
      if (p.run.started && !p.reaped) ::kill(-p.pid, SIGKILL);
    }
    killed_all = true;
  }

  // Some rank has not exited, or its output is still open.
  bool Busy() const {
    for (const RankProcess& p : ranks) {
      if (p.run.started && (p.out_open || p.err_open || !p.exited)) return true;
    }
    return false;
  }
};

// Spawns the ranks in order; one that cannot start fails the repeat, and
// those already started are killed.
void StartRanks(RepeatState& s, const std::string& path, const std::vector<std::vector<std::string>>& envs) {
  for (size_t r = 0; r < s.ranks.size(); ++r) {
    Spawn(s.ranks[r], path, envs[r]);
    if (!s.ranks[r].run.started) break;
  }
  for (size_t r = 0; r < s.ranks.size(); ++r) {
    if (!s.failed && !s.ranks[r].run.started) s.failed = r;
  }
  if (s.failed) s.KillAll();
}

// A stop request or the deadline ends the repeat: every rank is killed, and
// on the deadline the ranks still running are the ones that timed out.
void CheckStopAndDeadline(RepeatState& s, const std::atomic<bool>* stop) {
  const auto now = Clock::now();
  if (!s.killed_all && stop != nullptr && stop->load(std::memory_order_relaxed)) {
    s.interrupted = true;
    s.KillAll();
  }
  if (!s.killed_all && now >= s.deadline) {
    s.timed_out = true;
    for (RankProcess& p : s.ranks) p.run.timed_out = p.run.started && !p.exited;
    s.KillAll();
  }
}

// Waits (up to kPollMs) for output from any rank.
void WaitForOutput(const std::vector<RankProcess>& ranks) {
  std::vector<pollfd> fds;
  for (const RankProcess& p : ranks) {
    if (p.out_open) fds.push_back({p.out_fd, POLLIN, 0});
    if (p.err_open) fds.push_back({p.err_fd, POLLIN, 0});
  }
  if (!fds.empty()) {
    ::poll(fds.data(), fds.size(), kPollMs);
  } else {
    ::usleep(10000);
  }
}

// Each rank: its output drained, its tree read (every kFactsEvery), and
// whether it exited; the first rank to exit unclean stops the others.
void PollRanks(RepeatState& s) {
  const bool read_facts = Clock::now() >= s.next_facts;
  if (read_facts) s.next_facts = Clock::now() + kFactsEvery;
  for (size_t r = 0; r < s.ranks.size(); ++r) {
    RankProcess& p = s.ranks[r];
    if (!p.run.started) continue;
    if (p.out_open && !Drain(p.out_fd, p.run.stdout_tail, kStdoutKeep)) p.out_open = false;
    if (p.err_open && !Drain(p.err_fd, p.run.stderr_tail, kStderrKeep)) p.err_open = false;
    if (p.exited) {
      // Leftovers (its DataLoader workers) holding the pipes go with it.
      if (Clock::now() - p.exited_at >= kDrainGrace) ::kill(-p.pid, SIGKILL);
      continue;
    }
    if (read_facts && !s.killed_all) {
      TreeFacts f = ReadTreeFacts(p.pid);
      if (f.processes >= p.facts.processes) p.facts = std::move(f);
    }
    // Look without reaping: its group must still exist when it is killed.
    siginfo_t info{};
    if (::waitid(P_PID, static_cast<id_t>(p.pid), &info, WEXITED | WNOHANG | WNOWAIT) != 0 || info.si_pid != p.pid) {
      continue;
    }
    p.exited = true;
    p.exited_at = Clock::now();
    p.run.wall_s = std::chrono::duration<double>(p.exited_at - s.start).count();
    const bool clean = info.si_code == CLD_EXITED && info.si_status == 0;
    if (!clean && !s.killed_all) {
      s.failed = r;
      s.KillAll();
    }
  }
}

// Reaps every started rank (what it left running is killed with its group)
// and records how it ended, its CPU time and peak RSS.
void ReapRanks(RepeatState& s) {
  for (RankProcess& p : s.ranks) {
    if (!p.run.started) continue;
    ::kill(-p.pid, SIGKILL);  // whatever a rank left running goes with it
    int status = 0;
    rusage usage{};
    while (::wait4(p.pid, &status, 0, &usage) < 0 && errno == EINTR) {
    }
    p.reaped = true;
    if (p.out_fd >= 0) ::close(p.out_fd);
    if (p.err_fd >= 0) ::close(p.err_fd);
    p.out_fd = p.err_fd = -1;
    if (p.run.wall_s == 0) p.run.wall_s = std::chrono::duration<double>(Clock::now() - s.start).count();
    if (WIFEXITED(status)) p.run.exit_code = WEXITSTATUS(status);
    // Our own kill is not the rank's failure (a timeout says so itself).
    const bool ours = s.killed_all && (!s.failed || *s.failed != static_cast<size_t>(p.rank));
    if (WIFSIGNALED(status) && !(ours && WTERMSIG(status) == SIGKILL)) p.run.signal = WTERMSIG(status);
    p.run.cpu_s = static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
                  static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
    p.run.max_rss_bytes = static_cast<int64_t>(usage.ru_maxrss) * 1024;
    if (p.run.stdout_tail.size() > kStdoutKeep) p.run.stdout_tail.erase(0, p.run.stdout_tail.size() - kStdoutKeep);
    if (p.run.stderr_tail.size() > kStderrKeep) p.run.stderr_tail.erase(0, p.run.stderr_tail.size() - kStderrKeep);
  }
}

// "rank 1 (pid N): why", the command, and the rank's stderr tail.
std::string DescribeRank(const RankProcess& p, const std::string& why) {
  std::string text = "rank " + std::to_string(p.rank) +
                     (p.pid > 0 ? " (pid " + std::to_string(p.pid) + ")" : std::string()) + ": " + why +
                     "\n  command: " + JoinArgv(p.argv);
  const std::string tail = LastLines(p.run.stderr_tail);
  text += tail.empty() ? "\n  stderr of rank " + std::to_string(p.rank) + ": (empty)"
                       : "\n  stderr of rank " + std::to_string(p.rank) + " (last lines):\n" + tail;
  return text;
}

// Why the finished repeat failed ("" when it did not): the first rank to
// fail, else the timeout and the ranks it caught, else the first rank whose
// result line is bad. Fills each rank's report and window as it reads them.
std::string RepeatFailure(const RepeatState& s, double timeout_s, std::vector<CommandReport>* reports,
                          std::vector<double>* windows) {
  const std::vector<RankProcess>& ranks = s.ranks;
  if (s.failed) {
    return DescribeRank(ranks[*s.failed],
                        "the command " + ranks[*s.failed].run.Cause(timeout_s) + "; the other ranks were stopped");
  }
  if (s.timed_out) {
    std::string hung;
    for (const RankProcess& p : ranks) {
      if (p.run.timed_out) hung += (hung.empty() ? "" : ", ") + std::to_string(p.rank);
    }
    const RankProcess& first = *std::find_if(ranks.begin(), ranks.end(), [](const auto& p) { return p.run.timed_out; });
    return DescribeRank(first, "the command " + first.run.Cause(timeout_s) + " (ranks still running: " + hung +
                                   "; a rank waiting for another in a collective hangs so)");
  }
  for (size_t r = 0; r < ranks.size(); ++r) {
    if (const auto why = RankFailure(ranks[r], timeout_s, &(*reports)[r], &(*windows)[r])) {
      return DescribeRank(ranks[r], *why);
    }
  }
  return "";
}

// Runs the ranks of one repeat to their end. The first rank to fail (exit,
// signal, bad line) or a timeout kills every other rank's group at once.
RepeatResult RunRepeat(std::vector<RankProcess> ranks, const std::string& path,
                       const std::vector<std::vector<std::string>>& envs, double timeout_s,
                       const std::atomic<bool>* stop) {
  RepeatState s(std::move(ranks), timeout_s);
  StartRanks(s, path, envs);
  while (s.Busy()) {
    CheckStopAndDeadline(s, stop);
    WaitForOutput(s.ranks);
    PollRanks(s);
  }
  ReapRanks(s);
  if (s.interrupted) throw Interrupted();
  RepeatResult result;
  result.reports.resize(s.ranks.size());
  result.windows_s.assign(s.ranks.size(), 0);
  result.failure = RepeatFailure(s, timeout_s, &result.reports, &result.windows_s);
  result.ranks = std::move(s.ranks);
  return result;
}

// Each rank's CPUs for this trial's binding (none: the inherited mask, an
// empty list); `note` gets what the binding could not do.
std::vector<std::vector<int>> RankCpus(const SweepConfig& config, loader::CpuBinding binding, int ranks,
                                       const std::vector<int>& usable, std::string* note) {
  std::vector<std::vector<int>> cpus(static_cast<size_t>(ranks));
  if (binding == loader::CpuBinding::kNone) return cpus;
  const std::vector<int> gpu_nodes = GpuNumaNodes(config, ranks);
  for (int r = 0; r < ranks; ++r) {
    std::string rank_note;
    cpus[static_cast<size_t>(r)] = BindingCpus(binding, usable, r, ranks, gpu_nodes, &rank_note);
    if (note->empty()) *note = rank_note;
  }
  return cpus;
}

// What one repeat starts: each rank's process (argv expanded for its rank)
// and its environment.
struct RepeatLaunch {
  std::vector<RankProcess> processes;
  std::vector<std::vector<std::string>> envs;
};

// Repeat `rep`'s ranks: the command's argv with rank r's placeholders, and
// `base_env` with rank r's placeholders, FEEDTUNE_REPEAT and the
// torch.distributed variables (a MASTER_PORT free now).
RepeatLaunch PrepareRepeat(const SweepConfig& config, const workloads::CommandContext& context,
                           const std::vector<std::string>& base_env, const std::vector<std::vector<int>>& cpus,
                           int rep) {
  const int ranks = static_cast<int>(cpus.size());
  const int port = FreeLocalPort();
  RepeatLaunch launch;
  launch.processes.resize(cpus.size());
  launch.envs.resize(cpus.size());
  const auto set = [](std::vector<std::string>& env, const std::string& e) {
    SetEnv(env, e.substr(0, e.find('=')), e.substr(e.find('=') + 1));
  };
  for (int r = 0; r < ranks; ++r) {
    workloads::CommandContext rank_context = context;
    rank_context.rank = r;
    rank_context.world_size = ranks;
    RankProcess& p = launch.processes[static_cast<size_t>(r)];
    p.rank = r;
    p.cpus = cpus[static_cast<size_t>(r)];
    for (const std::string& a : config.workload.command.argv) {
      p.argv.push_back(workloads::ExpandPlaceholders(a, rank_context));
    }
    std::vector<std::string>& env = launch.envs[static_cast<size_t>(r)];
    env = base_env;
    for (const std::string& e : workloads::PlaceholderEnvironment(rank_context)) set(env, e);
    SetEnv(env, "FEEDTUNE_REPEAT", std::to_string(rep));
    for (const std::string& e : RankEnvironment(r, ranks, port)) set(env, e);
  }
  return launch;
}

// Per rank, its windows over the repeats.
struct RankWindows {
  std::vector<CommandReport> reports;
  std::vector<double> windows_s;
  double cpu_util = 0;
  int64_t peak_rss = 0;
  int64_t pid = 0;
  TreeFacts facts;
};

// A finished repeat's figures, into each rank's windows.
void AddRepeat(const RepeatResult& result, std::vector<RankWindows>& per_rank) {
  for (size_t r = 0; r < per_rank.size(); ++r) {
    RankWindows& w = per_rank[r];
    const RankProcess& p = result.ranks[r];
    w.reports.push_back(result.reports[r]);
    w.windows_s.push_back(result.windows_s[r]);
    if (p.run.wall_s > 0) w.cpu_util = std::max(w.cpu_util, p.run.cpu_s / p.run.wall_s);
    w.peak_rss = std::max({w.peak_rss, p.run.max_rss_bytes, static_cast<int64_t>(result.reports[r].peak_rss_bytes.value_or(0))});
    w.pid = p.pid;
    if (p.facts.processes >= w.facts.processes) w.facts = p.facts;
  }
}

// One rank as a one-loader trial: medians over its repeats of what it
// reported. `worker_rss` takes the largest worker RSS any repeat reported.
results::TrialRecord RankTrial(const RankWindows& w, const loader::Knobs& knobs, double* worker_rss) {
  results::TrialRecord t;
  t.knobs = knobs;
  ReportSeries series;
  for (size_t i = 0; i < w.reports.size(); ++i) {
    const CommandReport& c = w.reports[i];
    t.repeat_rows.push_back(series.Add(c, w.windows_s[i]));
    if (c.worker_peak_rss_bytes) {
      *worker_rss = std::isfinite(*worker_rss) ? std::max(*worker_rss, *c.worker_peak_rss_bytes) : *c.worker_peak_rss_bytes;
    }
  }
  series.FillMedians(&t);
  FillWorkerMemory(w.reports, /*cumulative=*/false, knobs.num_workers, &t);  // a process per repeat
  t.cpu_util = w.cpu_util;
  t.peak_rss_bytes = w.peak_rss;
  t.repeats = static_cast<int>(w.reports.size());
  t.status = results::TrialStatus::kOk;
  return t;
}

// Rank `rank`'s row of the node figures: its trial's figures and what it ran
// on. `given` is the mask it was spawned with.
results::RankRecord RankRow(int rank, const RankWindows& w, const results::TrialRecord& t,
                            const std::vector<int>& given) {
  results::RankRecord row;
  row.rank = rank;
  row.pid = w.pid;
  row.samples_per_s = t.samples_per_s;
  row.gpu_idle_frac = t.gpu_idle_frac;
  row.wait_p50_us = t.wait_p50_us;
  row.wait_p99_us = t.wait_p99_us;
  // What /proc said while it ran; a rank too quick for that had its binding.
  row.cpu_mask = w.facts.cpu_mask.empty() ? CpuListText(given) : w.facts.cpu_mask;
  row.worker_cpu_masks = w.facts.worker_cpu_masks;
  row.processes = w.facts.processes;
  row.threads = w.facts.threads;
  row.shm_bytes = w.facts.shm_bytes;
  return row;
}

}  // namespace

std::vector<std::string> RankEnvironment(int rank, int ranks, int master_port) {
  return {"RANK=" + std::to_string(rank),
          "LOCAL_RANK=" + std::to_string(rank),
          "WORLD_SIZE=" + std::to_string(ranks),
          "LOCAL_WORLD_SIZE=" + std::to_string(ranks),
          "MASTER_ADDR=127.0.0.1",
          "MASTER_PORT=" + std::to_string(master_port)};
}

int FreeLocalPort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw std::system_error(errno, std::generic_category(), "socket for MASTER_PORT");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    const int error = errno;
    ::close(fd);
    throw std::system_error(error, std::generic_category(), "bind 127.0.0.1:0 for MASTER_PORT");
  }
  ::close(fd);
  return ntohs(addr.sin_port);
}

results::TrialRecord MeasureCommandRanks(const SweepConfig& config, const workloads::CommandContext& context,
                                         const std::vector<std::string>& base_env, int repeats, int ranks,
                                         const std::atomic<bool>* stop, std::string* warning) {
  results::TrialRecord trial;
  trial.knobs = context.knobs;
  const std::string& argv0 = config.workload.command.argv.empty() ? std::string() : config.workload.command.argv[0];
  const std::string path = ResolveCommand(argv0);
  if (path.empty()) {
    trial.status = results::TrialStatus::kFailed;
    trial.error = "'" + argv0 + "' not found" + (argv0.find('/') == std::string::npos ? " in PATH" : " or not executable");
    return trial;
  }
  std::string binding_note;
  const std::vector<int> usable = AffinityCpus();
  const std::vector<std::vector<int>> cpus = RankCpus(config, context.knobs.cpu_binding, ranks, usable, &binding_note);

  std::vector<RankWindows> per_rank(static_cast<size_t>(ranks));
  for (int rep = 0; rep < repeats; ++rep) {
    if (stop != nullptr && stop->load(std::memory_order_relaxed)) throw Interrupted();
    RepeatLaunch launch = PrepareRepeat(config, context, base_env, cpus, rep);
    const RepeatResult result =
        RunRepeat(std::move(launch.processes), path, launch.envs, config.workload.command.timeout_s, stop);
    if (!result.failure.empty()) {
      trial.status = results::TrialStatus::kFailed;
      trial.error = "repeat " + std::to_string(rep + 1) + " of " + std::to_string(repeats) + ": " + result.failure;
      trial.repeats = rep;
      return trial;
    }
    AddRepeat(result, per_rank);
  }

  // Each rank as a one-loader trial, then the node's aggregate (AggregateRanks).
  std::vector<results::TrialRecord> rank_trials;
  std::vector<results::RankRecord> rows;
  double worker_rss = kNaN;
  for (int r = 0; r < ranks; ++r) {
    const RankWindows& w = per_rank[static_cast<size_t>(r)];
    rank_trials.push_back(RankTrial(w, context.knobs, &worker_rss));
    const std::vector<int>& given = cpus[static_cast<size_t>(r)].empty() ? usable : cpus[static_cast<size_t>(r)];
    rows.push_back(RankRow(r, w, rank_trials.back(), given));
  }
  results::TrialRecord node = AggregateRanks(context.knobs, rank_trials, std::move(rows));
  // What a command cannot report apart from its windows, as for one command.
  node.copy_s = kNaN;
  node.pinned_alloc_s = kNaN;
  node.worker_rss_bytes = worker_rss;
  node.node->processes += 1;  // the tuner itself
  node.node->threads += OwnThreads();
  if (warning != nullptr) *warning = binding_note;
  return node;
}

}  // namespace feedtune::tuner::node
