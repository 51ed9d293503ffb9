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

#include "tuner/measure/command_measurer.h"
#include "tuner/measure/command_server.h"
#include "tuner/measure/node_measurer.h"
#include "tuner/measure/rank_facts.h"
#include "tuner/measure/stats.h"
#include "tuner/measure/trial_runner.h"

namespace feedtune::tuner::node {
namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kStdoutKeep = 64 * 1024;
constexpr size_t kStderrKeep = 16 * 1024;
constexpr int kPollMs = 100;
// After a rank exits, how long its leftovers may hold its output pipes open.
constexpr auto kDrainGrace = std::chrono::seconds(2);
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

// Reads what is there into `tail` (its last `keep` bytes kept); false at end of file.
bool Drain(int fd, std::string& tail, size_t keep) {
  char buf[16384];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n > 0) {
      tail.append(buf, static_cast<size_t>(n));
      if (tail.size() > 2 * keep) tail.erase(0, tail.size() - keep);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
  }
}

// "0-3,8": CPUs (ascending) as a Cpus_allowed_list.
std::string CpuListText(const std::vector<int>& cpus) {
  std::string text;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!text.empty()) text += ',';
    text += std::to_string(cpus[i]);
    if (j > i) text += "-" + std::to_string(cpus[j]);
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

// Runs the ranks of one repeat to their end. The first rank to fail (exit,
// signal, bad line) or a timeout kills every other rank's group at once.
RepeatResult RunRepeat(std::vector<RankProcess> ranks, const std::string& path,
                       const std::vector<std::vector<std::string>>& envs, double timeout_s,
                       const std::atomic<bool>* stop) {
  RepeatResult result;
  const auto start = Clock::now();
  for (size_t r = 0; r < ranks.size(); ++r) {
    Spawn(ranks[r], path, envs[r]);
    if (!ranks[r].run.started) break;
  }
  const auto deadline = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
  std::optional<size_t> failed;  // the rank that failed first
  bool killed_all = false, timed_out = false, interrupted = false;
  for (size_t r = 0; r < ranks.size(); ++r) {
    if (!failed && !ranks[r].run.started) failed = r;
  }
  const auto kill_all = [&] {
    for (RankProcess& p : ranks) {
      if (p.run.started && !p.reaped) ::kill(-p.pid, SIGKILL);
    }
    killed_all = true;
  };
  if (failed) kill_all();
  auto next_facts = start;
  std::vector<CommandReport> reports(ranks.size());
  std::vector<double> windows(ranks.size(), 0);
  while (true) {
    bool busy = false;
    for (const RankProcess& p : ranks) busy = busy || (p.run.started && (p.out_open || p.err_open || !p.exited));
    if (!busy) break;
    const auto now = Clock::now();
    if (!killed_all && stop != nullptr && stop->load(std::memory_order_relaxed)) {
      interrupted = true;
      kill_all();
    }
    if (!killed_all && now >= deadline) {
      timed_out = true;
      for (RankProcess& p : ranks) p.run.timed_out = p.run.started && !p.exited;  // the ranks still running
      kill_all();
    }
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
    const bool read_facts = Clock::now() >= next_facts;
    if (read_facts) next_facts = Clock::now() + kFactsEvery;
    for (size_t r = 0; r < ranks.size(); ++r) {
      RankProcess& p = ranks[r];
      if (!p.run.started) continue;
      if (p.out_open && !Drain(p.out_fd, p.run.stdout_tail, kStdoutKeep)) p.out_open = false;
      if (p.err_open && !Drain(p.err_fd, p.run.stderr_tail, kStderrKeep)) p.err_open = false;
      if (p.exited) {
        // Leftovers (its DataLoader workers) holding the pipes go with it.
        if (Clock::now() - p.exited_at >= kDrainGrace) ::kill(-p.pid, SIGKILL);
        continue;
      }
      if (read_facts && !killed_all) {
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
      p.run.wall_s = std::chrono::duration<double>(p.exited_at - start).count();
      const bool clean = info.si_code == CLD_EXITED && info.si_status == 0;
      if (!clean && !killed_all) {
        failed = r;
        kill_all();
      }
    }
  }
  for (RankProcess& p : ranks) {
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
    if (p.run.wall_s == 0) p.run.wall_s = std::chrono::duration<double>(Clock::now() - start).count();
    if (WIFEXITED(status)) p.run.exit_code = WEXITSTATUS(status);
    // Our own kill is not the rank's failure (a timeout says so itself).
    const bool ours = killed_all && (!failed || *failed != static_cast<size_t>(p.rank));
    if (WIFSIGNALED(status) && !(ours && WTERMSIG(status) == SIGKILL)) p.run.signal = WTERMSIG(status);
    p.run.cpu_s = static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
                  static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
    p.run.max_rss_bytes = static_cast<int64_t>(usage.ru_maxrss) * 1024;
    if (p.run.stdout_tail.size() > kStdoutKeep) p.run.stdout_tail.erase(0, p.run.stdout_tail.size() - kStdoutKeep);
    if (p.run.stderr_tail.size() > kStderrKeep) p.run.stderr_tail.erase(0, p.run.stderr_tail.size() - kStderrKeep);
  }
  if (interrupted) throw Interrupted();

  const auto describe = [&](const RankProcess& p, const std::string& why) {
    std::string text = "rank " + std::to_string(p.rank) +
                       (p.pid > 0 ? " (pid " + std::to_string(p.pid) + ")" : std::string()) + ": " + why +
                       "\n  command: " + JoinArgv(p.argv);
    const std::string tail = LastLines(p.run.stderr_tail);
    text += tail.empty() ? "\n  stderr of rank " + std::to_string(p.rank) + ": (empty)"
                         : "\n  stderr of rank " + std::to_string(p.rank) + " (last lines):\n" + tail;
    return text;
  };
  const double timeout = timeout_s;
  if (failed) {
    result.failure = describe(ranks[*failed], "the command " + ranks[*failed].run.Cause(timeout) +
                                                  "; the other ranks were stopped");
  } else if (timed_out) {
    std::string hung;
    for (const RankProcess& p : ranks) {
      if (p.run.timed_out) hung += (hung.empty() ? "" : ", ") + std::to_string(p.rank);
    }
    const RankProcess& first = *std::find_if(ranks.begin(), ranks.end(), [](const auto& p) { return p.run.timed_out; });
    result.failure = describe(first, "the command " + first.run.Cause(timeout) + " (ranks still running: " + hung +
                                         "; a rank waiting for another in a collective hangs so)");
  } else {
    for (size_t r = 0; r < ranks.size() && result.failure.empty(); ++r) {
      if (const auto why = RankFailure(ranks[r], timeout, &reports[r], &windows[r])) {
        result.failure = describe(ranks[r], *why);
      }
    }
  }
  result.reports = std::move(reports);
  result.windows_s = std::move(windows);
  result.ranks = std::move(ranks);
  return result;
}

double MedianOr(const std::vector<double>& values) { return values.empty() ? kNaN : Median(values); }

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
    trial.status = "failed";
    trial.error = "'" + argv0 + "' not found" + (argv0.find('/') == std::string::npos ? " in PATH" : " or not executable");
    return trial;
  }
  // Each rank's CPUs for this trial's binding (none: the inherited mask).
  std::vector<std::vector<int>> cpus(static_cast<size_t>(ranks));
  std::string binding_note;
  const std::vector<int> usable = AffinityCpus();
  if (context.knobs.cpu_binding != loader::CpuBinding::kNone) {
    const std::vector<int> gpu_nodes = GpuNumaNodes(config, ranks);
    for (int r = 0; r < ranks; ++r) {
      std::string note;
      cpus[static_cast<size_t>(r)] = BindingCpus(context.knobs.cpu_binding, usable, r, ranks, gpu_nodes, &note);
      if (binding_note.empty()) binding_note = note;
    }
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
  std::vector<RankWindows> per_rank(static_cast<size_t>(ranks));
  for (int rep = 0; rep < repeats; ++rep) {
    if (stop != nullptr && stop->load(std::memory_order_relaxed)) throw Interrupted();
    const int port = FreeLocalPort();
    std::vector<RankProcess> processes(static_cast<size_t>(ranks));
    std::vector<std::vector<std::string>> envs(static_cast<size_t>(ranks));
    for (int r = 0; r < ranks; ++r) {
      workloads::CommandContext rank_context = context;
      rank_context.rank = r;
      rank_context.world_size = ranks;
      RankProcess& p = processes[static_cast<size_t>(r)];
      p.rank = r;
      p.cpus = cpus[static_cast<size_t>(r)];
      for (const std::string& a : config.workload.command.argv) {
        p.argv.push_back(workloads::ExpandPlaceholders(a, rank_context));
      }
      std::vector<std::string>& env = envs[static_cast<size_t>(r)];
      env = base_env;
      for (const std::string& e : workloads::PlaceholderEnvironment(rank_context)) {
        SetEnv(env, e.substr(0, e.find('=')), e.substr(e.find('=') + 1));
      }
      SetEnv(env, "FEEDTUNE_REPEAT", std::to_string(rep));
      for (const std::string& e : RankEnvironment(r, ranks, port)) {
        SetEnv(env, e.substr(0, e.find('=')), e.substr(e.find('=') + 1));
      }
    }
    RepeatResult result = RunRepeat(std::move(processes), path, envs, config.workload.command.timeout_s, stop);
    if (!result.failure.empty()) {
      trial.status = "failed";
      trial.error = "repeat " + std::to_string(rep + 1) + " of " + std::to_string(repeats) + ": " + result.failure;
      trial.repeats = rep;
      return trial;
    }
    for (int r = 0; r < ranks; ++r) {
      RankWindows& w = per_rank[static_cast<size_t>(r)];
      const RankProcess& p = result.ranks[static_cast<size_t>(r)];
      w.reports.push_back(result.reports[static_cast<size_t>(r)]);
      w.windows_s.push_back(result.windows_s[static_cast<size_t>(r)]);
      if (p.run.wall_s > 0) w.cpu_util = std::max(w.cpu_util, p.run.cpu_s / p.run.wall_s);
      w.peak_rss = std::max({w.peak_rss, p.run.max_rss_bytes,
                             static_cast<int64_t>(result.reports[static_cast<size_t>(r)].peak_rss_bytes.value_or(0))});
      w.pid = p.pid;
      if (p.facts.processes >= w.facts.processes) w.facts = p.facts;
    }
  }

  // Each rank as a one-loader trial, then the node's aggregate (AggregateRanks).
  std::vector<results::TrialRecord> rank_trials;
  std::vector<results::RankRecord> rows;
  double worker_rss = kNaN;
  for (int r = 0; r < ranks; ++r) {
    const RankWindows& w = per_rank[static_cast<size_t>(r)];
    results::TrialRecord t;
    t.knobs = context.knobs;
    std::vector<double> rates, idles, p50s, p99s, startups, boundaries, first_batches, busy;
    for (size_t i = 0; i < w.reports.size(); ++i) {
      const CommandReport& c = w.reports[i];
      results::RepeatRecord rep;
      rep.index = static_cast<int>(i);
      rep.wall_s = w.windows_s[i];
      rep.samples_per_s = c.samples_per_s;
      rep.mb_per_s = c.mb_per_s.value_or(kNaN);
      rep.gpu_idle_frac = c.gpu_idle_frac.value_or(kNaN);
      rep.wait_p50_us = c.wait_p50_us.value_or(kNaN);
      rep.wait_p99_us = c.wait_p99_us.value_or(kNaN);
      t.repeat_rows.push_back(rep);
      rates.push_back(c.samples_per_s);
      if (c.gpu_idle_frac) idles.push_back(*c.gpu_idle_frac);
      if (c.wait_p50_us) p50s.push_back(*c.wait_p50_us);
      if (c.wait_p99_us) p99s.push_back(*c.wait_p99_us);
      if (c.startup_s) startups.push_back(*c.startup_s);
      if (c.epoch_boundary_ms) boundaries.push_back(*c.epoch_boundary_ms);
      if (c.time_to_first_batch_s) first_batches.push_back(*c.time_to_first_batch_s);
      if (c.worker_busy_frac) busy.push_back(*c.worker_busy_frac);
      if (c.worker_peak_rss_bytes) {
        worker_rss = std::isfinite(worker_rss) ? std::max(worker_rss, *c.worker_peak_rss_bytes) : *c.worker_peak_rss_bytes;
      }
      if (c.batches_per_epoch) t.batches_per_epoch = c.batches_per_epoch;
    }
    t.samples_per_s = MedianOr(rates);
    t.gpu_idle_frac = MedianOr(idles);
    t.wait_p50_us = MedianOr(p50s);
    t.wait_p99_us = MedianOr(p99s);
    t.worker_startup_s = MedianOr(startups);
    t.epoch_boundary_ms = MedianOr(boundaries);
    t.time_to_first_batch_s = MedianOr(first_batches);
    t.worker_busy_frac = MedianOr(busy);
    t.cpu_util = w.cpu_util;
    t.peak_rss_bytes = w.peak_rss;
    t.repeats = static_cast<int>(w.reports.size());
    t.status = "ok";
    rank_trials.push_back(t);

    results::RankRecord row;
    row.rank = r;
    row.pid = w.pid;
    row.samples_per_s = t.samples_per_s;
    row.gpu_idle_frac = t.gpu_idle_frac;
    row.wait_p50_us = t.wait_p50_us;
    row.wait_p99_us = t.wait_p99_us;
    // What /proc said while it ran; a rank too quick for that had its binding.
    const std::vector<int>& given = cpus[static_cast<size_t>(r)].empty() ? usable : cpus[static_cast<size_t>(r)];
    row.cpu_mask = w.facts.cpu_mask.empty() ? CpuListText(given) : w.facts.cpu_mask;
    row.worker_cpu_masks = w.facts.worker_cpu_masks;
    row.processes = w.facts.processes;
    row.threads = w.facts.threads;
    row.shm_bytes = w.facts.shm_bytes;
    rows.push_back(row);
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
