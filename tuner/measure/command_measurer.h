// CommandMeasurer: measures a trial by running the user's own pipeline
// (workload.kind command), since a real PyTorch job cannot go through the
// native loader. Two protocols (workload.protocol; docs/command-protocol.md):
//
// run (the default): one process per repeat. The knobs are substituted into
// workload.argv ({num_workers}, ..., workloads/command_args.h) and exported as
// FEEDTUNE_NUM_WORKERS, ... (plus FEEDTUNE_REPEAT, the 0-based repeat, and
// FEEDTUNE_PROTOCOL=run); the command runs in its own process group with stdin
// from /dev/null and stdout/stderr captured; after workload.timeout_s the
// whole group is killed (SIGKILL). The command's last non-empty stdout line
// must be one JSON object:
//
//   {"samples_per_s": 1234.5,                          required, >= 0
//    "gpu_idle_frac": 0.12, "wait_p50_us": 800, "wait_p99_us": 2500,
//    "startup_s": 0.2, "peak_rss_bytes": 123456789, "mb_per_s": 180.2,
//    "epoch_boundary_ms": 35.0, "batches_per_epoch": 15,
//    "time_to_first_batch_s": 1.9, "worker_busy_frac": 0.8,
//    "worker_peak_rss_bytes": 98765432,
//    "worker_rss_start_bytes": 41943040, "worker_rss_peak_bytes": 109051904,
//    "worker_rss_growth_bytes_per_epoch": 33554432, "worker_rss_samples": 34,
//    "worker_rss_epochs": 2.0, "num_workers": 4}                          optional
//
// batches_per_epoch (len(loader)) lets the search see short epochs, whose
// curve is stepped by rounds of non-persistent workers (tuner/search/search.h).
//
// Warm-up is the command's job (feedtune_probe.py does it). A non-zero exit, a
// death by signal, a timeout, or a missing or invalid JSON line fails the trial
// with the cause and the tail of stderr; the sweep goes on. The plan's
// window_epochs has no placeholder, so run-protocol commands measure their own
// time windows.
//
// serve: one process per sweep, started at the first trial, that builds its
// dataset once and answers one JSON request line per trial on stdin (the
// knobs, repeats, warmup_batches, measure_seconds, window_epochs, step_us,
// sync_every_steps) with one result line per window and {"trial_end": N}
// (tuner/measure/command_server.h has the protocol, docs/command-protocol.md the
// details). Knob placeholders in argv are a config error with serve; the
// sweep-level ones ({measure_seconds}, ...) and their FEEDTUNE_* variables are
// given, plus FEEDTUNE_PROTOCOL=serve. A failed trial that leaves the process
// in doubt (death, timeout, malformed or missing line) kills its group, and
// the next trial starts a new process; the command's own {"error": ...} line
// fails the trial and keeps the process.
//
// Either way, the trial's figures are the median over the windows (samples/s
// with its 95% interval, tuner/measure/stats.h), each over the windows that reported
// it. A figure no window reported is NaN ("not measured": NULL in the store,
// null in JSON, a dash or "not measured" in text), never 0; so is what a
// command cannot report (copy_s, pinned_alloc_s). What feedtune measures
// itself is always there: CPU utilisation and the process tree's peak RSS.
// worker_peak_rss_bytes (one worker's peak RSS) becomes the trial's
// worker_rss_bytes, the budget's per-worker memory (tuner/search/budget.h).
// The worker_rss_* keys (the workers' private RSS sampled through the trial,
// as tuner/measure/worker_memory.h samples a native trial's; the probe's
// python/feedtune/memory.py) fill the trial's worker_rss_* figures
// (FillWorkerMemory), which the growth flag (results/memory_growth.h) and the
// budget's growth read as they read a native trial's.
//
// One thread uses a CommandMeasurer. The stop flag is polled every 100 ms while
// a command runs; when raised, the group is killed and Interrupted is thrown.
// The measurer owns the serving process: destroying it kills the group.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tuner/config/config.h"
#include "tuner/measure/proc_stats.h"
#include "tuner/measure/trial_runner.h"
#include "workloads/command_args.h"

namespace feedtune::tuner {

// What one run of a command did.
struct CommandRun {
  bool started = false;         // false: it could not be started (spawn_error says why)
  std::string spawn_error;
  bool timed_out = false;
  int exit_code = -1;           // when it exited
  int signal = 0;               // when a signal killed it (not counting our timeout kill)
  double wall_s = 0;
  double cpu_s = 0;             // user + system of the command and the children it waited for
  int64_t max_rss_bytes = 0;    // the largest resident set among them
  std::string stdout_tail;      // the last 64 KiB
  std::string stderr_tail;      // the last 16 KiB

  bool ok() const { return started && !timed_out && signal == 0 && exit_code == 0; }
  // "exited with code 3", "was killed by signal 11 (SIGSEGV)", "timed out after 5 s", ...
  std::string Cause(double timeout_s) const;
};

// Runs argv[0] (searched in PATH when it has no '/') with `extra_env` added to
// this process's environment. Throws Interrupted when `stop` is raised.
CommandRun RunCommand(const std::vector<std::string>& argv, const std::vector<std::string>& extra_env,
                      double timeout_s, const std::atomic<bool>* stop);

// The last lines of `text` (at most 12 lines, 2000 characters): a stderr
// tail for an error message.
std::string LastLines(std::string_view text);

// argv as one shell-quoted line, for error messages.
std::string JoinArgv(const std::vector<std::string>& argv);

// The figures a command reports on its last stdout line.
struct CommandReport {
  double samples_per_s = 0;
  std::optional<double> gpu_idle_frac;
  std::optional<double> wait_p50_us;
  std::optional<double> wait_p99_us;
  std::optional<double> startup_s;
  std::optional<double> peak_rss_bytes;
  std::optional<double> mb_per_s;
  std::optional<double> epoch_boundary_ms;  // the stall at an epoch change, when the window crossed one
  std::optional<int64_t> batches_per_epoch;  // len(loader): batches in one epoch
  std::optional<double> time_to_first_batch_s;  // from the loader's creation to its first batch
  std::optional<double> worker_busy_frac;       // workers' time in __getitem__ and collate / (workers x window)
  std::optional<double> worker_peak_rss_bytes;  // the workers' peak RSS summed, over their count
  // The workers' private RSS over the trial so far (TrialRecord::worker_rss_*,
  // the same meanings): the series' mean start, one worker's peak, bytes per
  // epoch per worker (may be negative), the samples, the longest span in epochs.
  std::optional<double> worker_rss_start_bytes;
  std::optional<double> worker_rss_peak_bytes;
  std::optional<double> worker_rss_growth_bytes_per_epoch;
  std::optional<int64_t> worker_rss_samples;
  std::optional<double> worker_rss_epochs;
  // The workers the window ran with, as the command says it ("num_workers",
  // read only when a whole number): 0 means the series is the command's own
  // process (a stage trial without a loader's workers, or num_workers 0).
  std::optional<int64_t> num_workers;
};

// Parses the last non-empty line of `stdout_text` (one line, for serve). Throws std::runtime_error
// saying what is missing or wrong.
CommandReport ParseCommandReport(const std::string& stdout_text);

// A command's windows gathered into a trial's record, as the one-loader
// trial (CommandMeasurer) and each rank of a node trial (command_ranks.cc)
// both need: each window's repeat row, and each figure's median over the
// windows that reported it (NaN where none did).
struct ReportSeries {
  std::vector<double> rates, mbps, idles, p50s, p99s, startups, boundaries, first_batches, busy;
  std::optional<int64_t> batches_per_epoch;  // the last window's that said it
  // Adds one window (`wall_s` long) and returns its repeat row (index: the windows added before it).
  results::RepeatRecord Add(const CommandReport& report, double wall_s);
  // The medians into `trial` (samples/s, MB/s, GPU idle, waits, worker
  // start-up, epoch boundary, first batch, worker busy) and batches per epoch.
  void FillMedians(results::TrialRecord* trial) const;
};

// The trial's worker_rss_* figures from its windows' reports; left NaN (0
// samples) when no window reported worker_rss_start_bytes, _peak_bytes and
// _samples. `cumulative` (serve: one process samples the whole trial, so each
// window's figures cover the windows before it): the last such window's.
// Otherwise (run: one process, so one series of samples, per repeat): the
// median start over the repeats, the largest peak, the samples summed, the
// median growth over the repeats that measured one, and the median span of
// those (the longest span of any when none did). worker_rss_in_consumer: the
// windows' "num_workers" is 0 (else `num_workers`, the trial's knob, is).
void FillWorkerMemory(const std::vector<CommandReport>& reports, bool cumulative, int num_workers,
                      results::TrialRecord* trial);

// The full path argv0 runs as: itself when it holds a '/', else the first
// executable match in PATH; empty when there is none.
std::string ResolveCommand(const std::string& argv0);

class CommandServer;

class CommandMeasurer final : public TrialMeasurer {
 public:
  // `stop` may be null.
  CommandMeasurer(const SweepConfig& config, const std::atomic<bool>* stop);
  ~CommandMeasurer() override;

  results::TrialRecord Measure(const loader::Knobs& knobs) override { return MeasurePlanned(knobs, {}); }
  // Follows plan.repeats (runs of the command, or windows of a served trial);
  // plan.window_epochs goes to a serving command in its request.
  results::TrialRecord MeasurePlanned(const loader::Knobs& knobs, const TrialPlan& plan) override;
  std::string last_warning() const override { return last_warning_; }

  // serve, attached: the process that started feedtune serves the requests
  // on `fd` (tuner/measure/command_server.h; `sweep --serve-fd`). No process
  // is started, and once the connection fails every later trial fails.
  void AttachToCaller(int fd) { attach_fd_ = fd; }

  // serve: the serving process now (-1 when none runs), and how many were started.
  pid_t server_pid() const;
  int servers_started() const { return servers_started_; }

 private:
  struct Window {
    CommandReport report;
    double wall_s = 0;
    // Other processes' CPU over the command's run (protocol run) or the
    // served trial (serve); NaN where not read.
    double background_cpu = std::numeric_limits<double>::quiet_NaN();
  };
  // Other processes' CPU between two readings; NaN when either is missing
  // or the trial is attached (the job that started feedtune is its parent,
  // its CPU the trial's, yet outside this tree).
  double BackgroundBetween(const std::optional<CpuReading>& before, const std::optional<CpuReading>& after) const;

  workloads::CommandContext Context(const loader::Knobs& knobs) const;
  results::TrialRecord MeasureServed(const loader::Knobs& knobs, const TrialPlan& plan, int repeats);
  // Fills trial's figures (status ok) from its windows.
  // `cumulative`: the windows are one served trial's (FillWorkerMemory).
  void Aggregate(const std::vector<Window>& windows, double cpu_util, int64_t peak_rss, bool cumulative,
                 results::TrialRecord& trial);

  const SweepConfig config_;
  const std::atomic<bool>* const stop_;
  std::string last_warning_;
  std::unique_ptr<CommandServer> server_;  // serve: started at the first trial, again after a failure
  int servers_started_ = 0;
  int attach_fd_ = -1;            // AttachToCaller's socket; -1: serve starts workload.argv
  BackgroundMeter meter_{FindBoxCpuSource()};  // other processes' CPU (docs/measurement.md)
  int64_t trials_requested_ = 0;  // the serve protocol's trial numbers
  bool idle_warned_ = false;      // the missing gpu_idle_frac was said (once per measurer)
};

}  // namespace feedtune::tuner
