#include "tuner/measure/command_measurer.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string_view>
#include <system_error>
#include <thread>

#include "tuner/measure/child_output.h"
#include "tuner/measure/command_server.h"
#include "tuner/measure/command_ranks.h"
#include "tuner/measure/node_measurer.h"
#include "tuner/measure/stats.h"
#include "workloads/command_args.h"

namespace feedtune::tuner {
namespace {

using Clock = std::chrono::steady_clock;
using child_output::AppendTail;
using child_output::Drain;
using child_output::Errno;
using child_output::FormatSeconds;
using child_output::kDrainGrace;
using child_output::kPoll;
using child_output::kStderrKeep;
using child_output::kStdoutKeep;

constexpr size_t kErrorTailLines = 12;
constexpr size_t kErrorTailChars = 2000;


struct Fd {
  int fd = -1;
  Fd() = default;
  explicit Fd(int f) : fd(f) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { Close(); }
  void Close() {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
};


void Trim(std::string& tail, size_t keep) {
  if (tail.size() > keep) tail.erase(0, tail.size() - keep);
}



}  // namespace

// The last lines of `text`, at most kErrorTailLines and kErrorTailChars.
std::string LastLines(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.remove_suffix(1);
  size_t pos = text.size();
  size_t lines = 0;
  while (pos > 0) {
    --pos;
    if (text[pos] == '\n' && ++lines == kErrorTailLines) {
      ++pos;
      break;
    }
  }
  std::string_view tail = text.substr(pos);
  if (tail.size() > kErrorTailChars) tail = tail.substr(tail.size() - kErrorTailChars);
  return std::string(tail);
}

std::string JoinArgv(const std::vector<std::string>& argv) {
  std::string out;
  for (const std::string& a : argv) {
    if (!out.empty()) out += ' ';
    const bool plain = !a.empty() && a.find_first_of(" \t\n'\"\\$`") == std::string::npos;
    out += plain ? a : "'" + a + "'";
  }
  return out;
}

std::string CommandRun::Cause(double timeout_s) const {
  if (!started) return "could not be started: " + spawn_error;
  if (timed_out) return "timed out after " + FormatSeconds(timeout_s) + " s (workload.timeout_s) and was killed";
  if (signal != 0) return "was killed by signal " + DescribeSignal(signal);
  if (exit_code != 0) return "exited with code " + std::to_string(exit_code);
  return "succeeded";
}

std::string ResolveCommand(const std::string& argv0) {
  if (argv0.empty()) return {};
  if (argv0.find('/') != std::string::npos) return ::access(argv0.c_str(), X_OK) == 0 ? argv0 : std::string();
  const char* path_env = std::getenv("PATH");
  const std::string path = path_env != nullptr ? path_env : "/usr/local/bin:/usr/bin:/bin";
  size_t start = 0;
  for (;;) {
    const size_t colon = path.find(':', start);
    std::string dir = path.substr(start, colon == std::string::npos ? std::string::npos : colon - start);
    if (dir.empty()) dir = ".";
    const std::string candidate = dir + "/" + argv0;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
    if (colon == std::string::npos) return {};
    start = colon + 1;
  }
}

CommandRun RunCommand(const std::vector<std::string>& argv, const std::vector<std::string>& extra_env,
                      double timeout_s, const std::atomic<bool>* stop) {
  CommandRun run;
  if (argv.empty()) {
    run.spawn_error = "empty command";
    return run;
  }
  const std::string path = ResolveCommand(argv[0]);
  if (path.empty()) {
    run.spawn_error = "'" + argv[0] + "' not found" +
                      (argv[0].find('/') == std::string::npos ? " in PATH" : " or not executable");
    return run;
  }

  int out_pipe[2], err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0) throw std::system_error(errno, std::generic_category(), "pipe");
  Fd out_read(out_pipe[0]), out_write(out_pipe[1]);
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) throw std::system_error(errno, std::generic_category(), "pipe");
  Fd err_read(err_pipe[0]), err_write(err_pipe[1]);

  pid_t pid = -1;
  const auto start = Clock::now();
  const int spawn_error =
      SpawnInOwnGroup(path, argv, extra_env, /*stdin_fd=*/-1, out_write.fd, err_write.fd, &pid);
  if (spawn_error != 0) {
    run.spawn_error = path + ": " + Errno(spawn_error);
    return run;
  }
  run.started = true;
  out_write.Close();
  err_write.Close();
  ::fcntl(out_read.fd, F_SETFL, O_NONBLOCK);
  ::fcntl(err_read.fd, F_SETFL, O_NONBLOCK);

  const auto deadline = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
  bool out_open = true, err_open = true, exited = false, killed = false, interrupted = false;
  Clock::time_point exited_at{};
  const auto kill_group = [&] {
    ::kill(-pid, SIGKILL);  // the group outlives its leader while it has members
    killed = true;
  };
  while (out_open || err_open || !exited) {
    const auto now = Clock::now();
    if (!killed && stop != nullptr && stop->load(std::memory_order_relaxed)) {
      interrupted = true;
      kill_group();
    }
    if (!killed && !exited && now >= deadline) {
      run.timed_out = true;
      kill_group();
    }
    // Leftover processes of a command that has exited keep the pipes open; do not wait for them long.
    if (!killed && exited && now - exited_at >= kDrainGrace) kill_group();

    pollfd fds[2];
    nfds_t n = 0;
    if (out_open) fds[n++] = {out_read.fd, POLLIN, 0};
    if (err_open) fds[n++] = {err_read.fd, POLLIN, 0};
    if (n > 0) {
      const int ready = ::poll(fds, n, static_cast<int>(kPoll.count()));
      if (ready < 0 && errno != EINTR) break;
      if (out_open && !Drain(out_read.fd, run.stdout_tail, kStdoutKeep)) out_open = false;
      if (err_open && !Drain(err_read.fd, run.stderr_tail, kStderrKeep)) err_open = false;
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (!exited) {
      // Look without reaping: the group must still exist when it is killed below.
      siginfo_t info{};
      if (::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == pid) {
        exited = true;
        exited_at = Clock::now();
        run.wall_s = std::chrono::duration<double>(exited_at - start).count();
      }
    }
  }
  // Whatever the command left running (its DataLoader workers, say) goes with it.
  ::kill(-pid, SIGKILL);
  int status = 0;
  rusage usage{};
  while (::wait4(pid, &status, 0, &usage) < 0 && errno == EINTR) {
  }
  if (run.wall_s == 0) run.wall_s = std::chrono::duration<double>(Clock::now() - start).count();
  if (WIFEXITED(status)) run.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status) && !(killed && WTERMSIG(status) == SIGKILL)) run.signal = WTERMSIG(status);
  run.cpu_s = static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
              static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
  run.max_rss_bytes = static_cast<int64_t>(usage.ru_maxrss) * 1024;
  Trim(run.stdout_tail, kStdoutKeep);
  Trim(run.stderr_tail, kStderrKeep);
  if (interrupted) throw Interrupted();
  return run;
}

CommandReport ParseCommandReport(const std::string& stdout_text) {
  std::string_view text = stdout_text;
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.remove_suffix(1);
  if (text.empty()) {
    throw std::runtime_error(
        "the command printed nothing on stdout; expected a JSON line such as {\"samples_per_s\": 1234.5} last");
  }
  const size_t nl = text.rfind('\n');
  std::string_view line = nl == std::string_view::npos ? text : text.substr(nl + 1);
  while (!line.empty() && std::isspace(static_cast<unsigned char>(line.front()))) line.remove_prefix(1);
  std::string shown(line.substr(0, 200));
  if (line.size() > 200) shown += "...";
  const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    throw std::runtime_error("the command's last stdout line is not a JSON object: '" + shown +
                             "'; expected a JSON line such as {\"samples_per_s\": 1234.5} last");
  }
  const auto number = [&](const char* name, bool required, double lo, double hi) -> std::optional<double> {
    const auto it = j.find(name);
    if (it == j.end() || it->is_null()) {
      if (required) {
        throw std::runtime_error(std::string("the command's JSON line has no \"") + name + "\": '" + shown + "'");
      }
      return std::nullopt;
    }
    if (!it->is_number() || !std::isfinite(it->get<double>()) || it->get<double>() < lo || it->get<double>() > hi) {
      throw std::runtime_error(std::string("the command's JSON line has \"") + name + "\": " + it->dump() +
                               ", expected a number in [" + FormatSeconds(lo) + ", " + FormatSeconds(hi) + "]");
    }
    return it->get<double>();
  };
  constexpr double kBig = 1e18;
  CommandReport r;
  r.samples_per_s = *number("samples_per_s", true, 0, kBig);
  r.gpu_idle_frac = number("gpu_idle_frac", false, 0, 1);
  r.wait_p50_us = number("wait_p50_us", false, 0, kBig);
  r.wait_p99_us = number("wait_p99_us", false, 0, kBig);
  r.startup_s = number("startup_s", false, 0, kBig);
  r.peak_rss_bytes = number("peak_rss_bytes", false, 0, kBig);
  r.mb_per_s = number("mb_per_s", false, 0, kBig);
  r.epoch_boundary_ms = number("epoch_boundary_ms", false, -kBig, kBig);  // below the median wait: negative
  r.time_to_first_batch_s = number("time_to_first_batch_s", false, 0, kBig);
  r.worker_busy_frac = number("worker_busy_frac", false, 0, 1);
  r.worker_peak_rss_bytes = number("worker_peak_rss_bytes", false, 0, kBig);
  const auto whole = [&](const char* name, double lo) -> std::optional<int64_t> {
    const auto value = number(name, false, lo, kBig);
    if (!value) return std::nullopt;
    if (*value != std::floor(*value)) {
      throw std::runtime_error(std::string("the command's JSON line has \"") + name + "\": " + j[name].dump() +
                               ", expected a whole number >= " + FormatSeconds(lo));
    }
    return static_cast<int64_t>(*value);
  };
  r.batches_per_epoch = whole("batches_per_epoch", 1);
  r.worker_rss_start_bytes = number("worker_rss_start_bytes", false, 0, kBig);
  r.worker_rss_peak_bytes = number("worker_rss_peak_bytes", false, 0, kBig);
  r.worker_rss_growth_bytes_per_epoch = number("worker_rss_growth_bytes_per_epoch", false, -kBig, kBig);  // may shrink
  r.worker_rss_samples = whole("worker_rss_samples", 0);
  r.worker_rss_epochs = number("worker_rss_epochs", false, 0, kBig);
  // Informative only (a user's command may print anything under it): read when a whole number.
  if (const auto it = j.find("num_workers"); it != j.end() && it->is_number_integer() && it->get<int64_t>() >= 0) {
    r.num_workers = it->get<int64_t>();
  }
  return r;
}

results::RepeatRecord ReportSeries::Add(const CommandReport& c, double wall_s) {
  constexpr double kNotMeasured = std::numeric_limits<double>::quiet_NaN();
  results::RepeatRecord rep;
  rep.index = static_cast<int>(rates.size());
  rep.wall_s = wall_s;
  rep.samples_per_s = c.samples_per_s;
  rep.mb_per_s = c.mb_per_s.value_or(kNotMeasured);
  rep.gpu_idle_frac = c.gpu_idle_frac.value_or(kNotMeasured);
  rep.wait_p50_us = c.wait_p50_us.value_or(kNotMeasured);
  rep.wait_p99_us = c.wait_p99_us.value_or(kNotMeasured);
  rates.push_back(c.samples_per_s);
  const auto add = [](std::vector<double>& series, const std::optional<double>& value) {
    if (value) series.push_back(*value);
  };
  add(mbps, c.mb_per_s);
  add(idles, c.gpu_idle_frac);
  add(p50s, c.wait_p50_us);
  add(p99s, c.wait_p99_us);
  add(startups, c.startup_s);
  add(boundaries, c.epoch_boundary_ms);
  add(first_batches, c.time_to_first_batch_s);
  add(busy, c.worker_busy_frac);
  if (c.batches_per_epoch) batches_per_epoch = c.batches_per_epoch;
  return rep;
}

void ReportSeries::FillMedians(results::TrialRecord* trial) const {
  trial->samples_per_s = MedianOrNaN(rates);
  trial->mb_per_s = MedianOrNaN(mbps);
  trial->gpu_idle_frac = MedianOrNaN(idles);
  trial->wait_p50_us = MedianOrNaN(p50s);
  trial->wait_p99_us = MedianOrNaN(p99s);
  trial->worker_startup_s = MedianOrNaN(startups);
  trial->epoch_boundary_ms = MedianOrNaN(boundaries);  // the search prints "not measured" for NaN
  trial->time_to_first_batch_s = MedianOrNaN(first_batches);
  trial->worker_busy_frac = MedianOrNaN(busy);
  if (batches_per_epoch) trial->batches_per_epoch = batches_per_epoch;
}

void FillWorkerMemory(const std::vector<CommandReport>& reports, bool cumulative, int num_workers,
                      results::TrialRecord* trial) {
  // The windows that reported the figures (start, peak and samples go together).
  std::vector<const CommandReport*> measured;
  for (const CommandReport& r : reports) {
    if (r.worker_rss_start_bytes && r.worker_rss_peak_bytes && r.worker_rss_samples) measured.push_back(&r);
  }
  if (measured.empty()) return;
  constexpr double kNotMeasured = std::numeric_limits<double>::quiet_NaN();
  const CommandReport& last = *measured.back();
  trial->worker_rss_in_consumer = last.num_workers.value_or(num_workers) == 0;
  if (cumulative) {
    // One sampler over the whole trial: its last figures hold every window's.
    trial->worker_rss_start_bytes = *last.worker_rss_start_bytes;
    trial->worker_rss_peak_bytes = *last.worker_rss_peak_bytes;
    trial->worker_rss_samples = static_cast<int>(*last.worker_rss_samples);
    trial->worker_rss_epochs = last.worker_rss_epochs.value_or(kNotMeasured);
    trial->worker_rss_growth_bytes_per_epoch = last.worker_rss_growth_bytes_per_epoch.value_or(kNotMeasured);
    return;
  }
  // A process (so a sampler) per repeat: the growth of a typical repeat, the
  // largest peak any worker reached.
  std::vector<double> starts, growths, growth_epochs;
  double peak = 0, longest = kNotMeasured;
  int64_t samples = 0;
  for (const CommandReport* r : measured) {
    starts.push_back(*r->worker_rss_start_bytes);
    peak = std::max(peak, *r->worker_rss_peak_bytes);
    samples += *r->worker_rss_samples;
    if (r->worker_rss_epochs) longest = std::fmax(longest, *r->worker_rss_epochs);  // fmax skips the NaN
    if (r->worker_rss_growth_bytes_per_epoch && r->worker_rss_epochs) {
      growths.push_back(*r->worker_rss_growth_bytes_per_epoch);
      growth_epochs.push_back(*r->worker_rss_epochs);
    }
  }
  trial->worker_rss_start_bytes = Median(starts);
  trial->worker_rss_peak_bytes = peak;
  trial->worker_rss_samples = static_cast<int>(std::min<int64_t>(samples, std::numeric_limits<int>::max()));
  trial->worker_rss_growth_bytes_per_epoch = growths.empty() ? kNotMeasured : Median(growths);
  trial->worker_rss_epochs = growths.empty() ? longest : Median(growth_epochs);
}

CommandMeasurer::CommandMeasurer(const SweepConfig& config, const std::atomic<bool>* stop)
    : config_(config), stop_(stop) {}

CommandMeasurer::~CommandMeasurer() = default;  // kills a serving process group (CommandServer's destructor)

double CommandMeasurer::BackgroundBetween(const std::optional<CpuReading>& before,
                                          const std::optional<CpuReading>& after) const {
  if (attach_fd_ >= 0 || !before || !after) return std::numeric_limits<double>::quiet_NaN();
  return BackgroundCpu(*before, *after);
}

pid_t CommandMeasurer::server_pid() const { return server_ != nullptr && server_->alive() ? server_->pid() : -1; }

workloads::CommandContext CommandMeasurer::Context(const loader::Knobs& knobs) const {
  workloads::CommandContext context;
  context.knobs = knobs;
  context.measure_seconds = config_.sweep.measure_seconds;
  context.warmup_batches = config_.sweep.warmup_batches;
  context.step_us = config_.device.step_us;
  context.sync_every_steps = config_.device.sync_every_steps;
  return context;
}

results::TrialRecord CommandMeasurer::MeasurePlanned(const loader::Knobs& knobs, const TrialPlan& plan) {
  last_warning_.clear();
  const int repeats = plan.repeats > 0 ? plan.repeats : config_.sweep.repeats;
  if (config_.workload.command.protocol == workloads::CommandProtocol::kServe) {
    return MeasureServed(knobs, plan, repeats);
  }
  results::TrialRecord trial;
  trial.knobs = knobs;
  const workloads::CommandContext context = Context(knobs);
  std::vector<std::string> argv;
  for (const std::string& a : config_.workload.command.argv) argv.push_back(workloads::ExpandPlaceholders(a, context));
  std::vector<std::string> env = workloads::PlaceholderEnvironment(context);
  env.push_back("FEEDTUNE_PROTOCOL=run");
  // The worker_threads knob (search.h): torch, OpenMP and MKL read these at
  // start, so a command started per trial runs its intra-op work on that many.
  if (knobs.worker_threads > 0) {
    env.push_back("OMP_NUM_THREADS=" + std::to_string(knobs.worker_threads));
    env.push_back("MKL_NUM_THREADS=" + std::to_string(knobs.worker_threads));
  }
  const double timeout_s = config_.workload.command.timeout_s;
  // sweep.ranks > 1: N processes per repeat, the node's aggregate (tuner/measure/command_ranks.h).
  if (const int ranks = node::ResolveRanks(config_); ranks > 1) {
    return node::MeasureCommandRanks(config_, context, env, repeats, ranks, stop_, &last_warning_);
  }

  std::vector<Window> windows;
  double cpu_util = 0;
  int64_t peak_rss = 0;
  for (int r = 0; r < repeats; ++r) {
    std::vector<std::string> run_env = env;
    run_env.push_back("FEEDTUNE_REPEAT=" + std::to_string(r));
    if (stop_ != nullptr && stop_->load(std::memory_order_relaxed)) throw Interrupted();
    const std::optional<CpuReading> box_before = meter_.Read();
    const CommandRun run = RunCommand(argv, run_env, timeout_s, stop_);  // throws Interrupted
    const std::optional<CpuReading> box_after = meter_.Read();
    std::string failure;
    CommandReport report;
    if (!run.ok()) {
      failure = "the command " + run.Cause(timeout_s);
    } else {
      try {
        report = ParseCommandReport(run.stdout_tail);
      } catch (const std::runtime_error& e) {
        failure = e.what();
      }
    }
    if (!failure.empty()) {
      std::string error = "repeat " + std::to_string(r + 1) + " of " + std::to_string(repeats) + ": " + failure +
                          "\n  command: " + JoinArgv(argv);
      const std::string tail = LastLines(run.stderr_tail);
      error += tail.empty() ? "\n  stderr: (empty)" : "\n  stderr (last lines):\n" + tail;
      trial.status = results::TrialStatus::kFailed;
      trial.error = error;
      trial.repeats = r;
      return trial;
    }
    windows.push_back({report, run.wall_s, BackgroundBetween(box_before, box_after)});
    if (run.wall_s > 0) cpu_util = std::max(cpu_util, run.cpu_s / run.wall_s);
    peak_rss = std::max(peak_rss, run.max_rss_bytes);
  }
  Aggregate(windows, cpu_util, peak_rss, /*cumulative=*/false, trial);
  return trial;
}

results::TrialRecord CommandMeasurer::MeasureServed(const loader::Knobs& knobs, const TrialPlan& plan, int repeats) {
  results::TrialRecord trial;
  trial.knobs = knobs;
  if (stop_ != nullptr && stop_->load(std::memory_order_relaxed)) throw Interrupted();
  const workloads::CommandContext context = Context(knobs);
  // Config validation keeps the knob placeholders out of a serving argv; the
  // sweep's own ({measure_seconds}, ...) are the same for every trial.
  std::vector<std::string> argv;
  for (const std::string& a : config_.workload.command.argv) argv.push_back(workloads::ExpandPlaceholders(a, context));
  const double timeout_s = config_.workload.command.timeout_s;
  const auto failed = [&](const std::string& why, const std::string& stderr_tail) {
    std::string error = why;
    if (attach_fd_ < 0) {  // attached, the job's own stderr is the user's terminal: nothing to quote
      error += "\n  command: " + JoinArgv(argv);
      const std::string tail = LastLines(stderr_tail);
      error += tail.empty() ? "\n  stderr: (empty)" : "\n  stderr (last lines):\n" + tail;
    }
    trial.status = results::TrialStatus::kFailed;
    trial.error = error;
    trial.repeats = 0;
    return trial;
  };

  if (attach_fd_ >= 0) {
    if (servers_started_ > 0 && (server_ == nullptr || !server_->alive())) {
      return failed("the job that started feedtune closed the connection or broke the protocol in an earlier trial; "
                    "no further trial can run", "");
    }
    if (server_ == nullptr) {
      std::string error;
      server_ = CommandServer::Attach(attach_fd_, &error);
      ++servers_started_;
      if (server_ == nullptr) return failed("cannot serve through the job: " + error, "");
    }
  } else if (server_ == nullptr || !server_->StillRunning()) {
    server_.reset();
    std::vector<std::string> env;
    for (std::string& e : workloads::PlaceholderEnvironment(context)) {
      const std::string name = e.substr(std::string("FEEDTUNE_").size(), e.find('=') - std::string("FEEDTUNE_").size());
      std::string lower;
      for (char c : name) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      if (!workloads::IsKnobPlaceholder(lower)) env.push_back(std::move(e));  // knobs come per trial, on stdin
    }
    env.push_back("FEEDTUNE_PROTOCOL=serve");
    std::string error;
    server_ = CommandServer::Start(argv, env, &error);
    if (server_ == nullptr) return failed("the serving command could not be started: " + error, "");
    ++servers_started_;
  }

  const int64_t trial_id = ++trials_requested_;
  static constexpr std::string_view kStagePhasePrefix = "diagnose-";
  nlohmann::json request = {
      {"trial", trial_id},
      {"num_workers", knobs.num_workers},
      {"pin_memory", knobs.pin_memory},
      {"non_blocking", knobs.non_blocking},
      {"prefetch_factor", knobs.prefetch_factor},
      {"persistent_workers", knobs.persistent_workers},
      {"batch_size", knobs.batch_size},
      {"repeats", repeats},
      {"warmup_batches", WarmupBatches(config_.sweep.warmup_batches, knobs)},
      {"measure_seconds", config_.sweep.measure_seconds},
      {"window_epochs", plan.window_epochs},
      {"step_us", config_.device.step_us},
      {"sync_every_steps", config_.device.sync_every_steps},
  };
  // A stage trial of the verdict (tuner/measure/stage_runner.h: phase "diagnose-<stage>"):
  // the serving probe runs that stage (docs/verdict.md).
  if (plan.phase.rfind(kStagePhasePrefix, 0) == 0) request["stage"] = plan.phase.substr(kStagePhasePrefix.size());
  // A serving command was started once, so its thread count comes per trial:
  // the probe calls torch.set_num_threads with it (docs/command-protocol.md).
  if (knobs.worker_threads > 0) request["worker_threads"] = knobs.worker_threads;
  // Requests in flight per process, for a command that reads an object store
  // (workload.remote_reads); left out otherwise, as for a command that predates it.
  if (config_.workload.command.remote_reads) request["fetch_concurrency"] = knobs.fetch_concurrency;
  // The workers' start method; left out for the interpreter's default, so a
  // serving command that predates the knob reads the request as before.
  if (knobs.multiprocessing_context != loader::StartMethod::kDefault) {
    request["multiprocessing_context"] = loader::StartMethodName(knobs.multiprocessing_context);
  }
  const std::optional<CpuReading> box_before = meter_.Read();
  const ServedTrial served = server_->RunTrial(request.dump(), trial_id, repeats, timeout_s, stop_);  // throws Interrupted
  const double background = BackgroundBetween(box_before, meter_.Read());
  if (!served.ok) {
    const std::string stderr_tail = server_->stderr_tail();
    if (!server_->alive() && attach_fd_ < 0) server_.reset();  // the next trial starts a new process
    return failed(served.failure, stderr_tail);
  }
  std::vector<Window> windows;
  // The served trial's windows are timed inside the command: each takes the
  // background over the whole trial.
  for (size_t i = 0; i < served.windows.size(); ++i) {
    windows.push_back({served.windows[i], served.window_wall_s[i], background});
  }
  Aggregate(windows, served.wall_s > 0 ? served.cpu_s / served.wall_s : 0, served.peak_rss_bytes,
            /*cumulative=*/true, trial);
  return trial;
}

void CommandMeasurer::Aggregate(const std::vector<Window>& windows, double cpu_util, int64_t peak_rss,
                                bool cumulative, results::TrialRecord& trial) {
  constexpr double kNotMeasured = std::numeric_limits<double>::quiet_NaN();
  ReportSeries series;
  std::vector<double> backgrounds, worker_rss;
  bool idle_missing = false;
  for (const Window& w : windows) {
    const CommandReport& report = w.report;
    results::RepeatRecord rep = series.Add(report, w.wall_s);
    rep.background_cpu = w.background_cpu;
    if (std::isfinite(rep.background_cpu)) backgrounds.push_back(rep.background_cpu);
    trial.repeat_rows.push_back(rep);
    if (report.worker_peak_rss_bytes) worker_rss.push_back(*report.worker_peak_rss_bytes);
    idle_missing = idle_missing || !report.gpu_idle_frac;
    peak_rss = std::max(peak_rss, static_cast<int64_t>(report.peak_rss_bytes.value_or(0)));
  }
  series.FillMedians(&trial);
  const Summary s = Summarize(series.rates);
  for (size_t i = 0; i < s.outliers.size() && i < trial.repeat_rows.size(); ++i) {
    trial.repeat_rows[i].outlier = s.outliers[i];
  }
  trial.samples_per_s = s.median;
  trial.ci_low = s.ci_low;
  trial.ci_high = s.ci_high;
  trial.background_cpu = MedianOrNaN(backgrounds);
  // The peak, not the median: the budget must hold the largest a worker took.
  trial.worker_rss_bytes = worker_rss.empty() ? kNotMeasured : *std::max_element(worker_rss.begin(), worker_rss.end());
  // The workers' memory over the trial, and so its growth flag (results/memory_growth.h).
  std::vector<CommandReport> reports;
  for (const Window& w : windows) reports.push_back(w.report);
  FillWorkerMemory(reports, cumulative, trial.knobs.num_workers, &trial);
  // A command cannot report these apart from its windows.
  trial.copy_s = kNotMeasured;
  trial.pinned_alloc_s = kNotMeasured;
  trial.cpu_util = cpu_util;
  trial.peak_rss_bytes = peak_rss;
  trial.cv = s.cv;
  trial.repeats = static_cast<int>(windows.size());
  trial.status = results::TrialStatus::kOk;
  // Said once per sweep: every progress line shows it too ("GPU idle not measured").
  if (idle_missing && !idle_warned_) {
    idle_warned_ = true;
    last_warning_ = series.idles.empty() ? "the command reported no gpu_idle_frac; GPU idle is not measured"
                                         : "some windows reported no gpu_idle_frac; GPU idle is the median of the others";
  }
}

}  // namespace feedtune::tuner
