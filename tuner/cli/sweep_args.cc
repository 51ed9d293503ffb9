// The command line of `feedtune sweep` (tuner/cli/sweep_args.h).
#include "tuner/cli/sweep_args.h"

namespace feedtune::cli {
namespace {

constexpr const char* kSweepUsage = R"(Usage: feedtune sweep CONFIG [--set key=value ...] [options]
       feedtune sweep --resume RUN [--db FILE] [options]

Runs the tuning sequence on this machine: baseline, pin_memory, num_workers
(doubling to the knee, then bisecting), non_blocking, prefetch_factor,
persistent_workers, cpu_binding (with sweep.ranks > 1 and sweep.cpu_binding
auto), worker_threads (when the workload has intra-op threads: a command, or
workload.cpu_threads > 1), and a final interleaved check of baseline against
best. With sweep.ranks N every trial runs N ranks' loaders at once, as DDP
does on one node (docs/node-sweep.md).
A step is kept only if its median gains more than sweep.gain_threshold and its
95% interval does not overlap the current one. Each trial is stored in the
results file as soon as it ends; trials that would exceed the memory, /dev/shm
or open-file budget are skipped and stored with the reason.

Other processes' CPU (docs/measurement.md): before the baseline the sweep
samples the box for sweep.background.sample_seconds (1 s); above
sweep.background.warn_cpu (0.25 CPU) it names the top consumers and goes on.
Each window records what other processes took; one that differs from the quiet
start beyond sweep.background.disturbed_cpu is measured again (at most as many
extra windows as sweep.repeats per trial), and a run whose windows others
shared above warn_cpu is marked busy: export, loader_kwargs and --seed-from
then prefer a quiet run of the same host or class.

Progress goes to stderr (a bar on a terminal, plain lines otherwise), the
summary to stdout; --json prints one JSON event per line on stdout instead.
Ctrl-C ends the current trial cleanly, marks the run interrupted and exits 130;
--resume RUN continues it from its stored trials without re-running them.

--seed-from FILE starts from the stored run of the nearest machine in FILE (a
fleet's merged results file, read only), for the same workload name, chosen as
`export --machine this` chooses: this host's latest run, else its hardware
class's, else the nearest class's (GPU model, then GPU count, usable CPUs and
memory). The doubling starts at that run's knee and confirms one step below
and above it; its pin_memory, non_blocking and prefetch_factor are measured at
the knee against the knee without them, and persistent_workers is tried only
if it kept it (docs/fleets.md). The neighbour is named before the first trial
and stored with the run (--resume re-seeds from that). Nothing matching: the
sweep runs unseeded and says so; a FILE that is not a results file: exit 2.

--serve-fd FD is how feedtune.autotune runs this search inside a training
job (docs/python.md): the job started feedtune and answers each trial's
request on the socket FD (the serve protocol, docs/command-protocol.md), with
its own batches and its own step. The config is a command workload with
protocol serve; no command is started, and the final check measures the best
against the config's own loader setting. With --serve-preflight LINE, the
job's preflight object (docs/command-protocol.md: its Python, torch and
default start method, and whether its Dataset pickles) stands for the
preflight that cannot run, so the multiprocessing_context phase runs as in a
sweep.

--continue-unfinished goes on from this host's latest interrupted run of
the same workload (name and workload hash) in --db, as --resume would, with
the config stored with it; with none, a new run starts (and --seed-from
applies). feedtune.autotune passes it, so a job that ends while tuning
leaves the next job on the same file its trials: the next one goes on from
them instead of starting over. A stored run that no longer replays (its
trials are not what the search asks for) is marked failed and a new run
starts.

--trace DIR measures the baseline and the best setting once more at the end,
with a timeline of each (Chrome trace JSON, docs/trace.md) in DIR/baseline.json
and DIR/best.json, and keeps 200 ms of both for `feedtune report --format html`.

--set key.path=value changes one key of CONFIG for this sweep, as `trial`
does (repeatable; `feedtune config-keys` lists them), so an installed config
need not be copied to vary it. The run stores the config as swept, --set
included, and `report` shows it; --resume takes that stored config as it is.

Examples:
  feedtune sweep configs/quickstart.yaml --db results/feedtune.db --label gpu-box-1
  feedtune sweep configs/quickstart.yaml --set sweep.max_workers=4 --set sweep.repeats=5
  feedtune sweep --resume 3 --db results/feedtune.db
  feedtune sweep configs/quickstart.yaml --db node-7.db --seed-from fleet.db
  feedtune sweep configs/quickstart.yaml --trace results/traces)";

}  // namespace

std::optional<SweepArgs> ParseSweepArgs(const Args& args, int* code) {
  po::options_description options("Options");
  SweepArgs a;
  std::string trace_dir, serve_preflight;
  double trace_seconds = 1.0;
  options.add_options()("help,h", "this help")("config", po::value(&a.config_path), "the sweep config (YAML)")(
      "set", po::value(&a.sets)->composing(), "override a config key: key.path=value (repeatable)")(
      "db", po::value(&a.db_path)->default_value(kDefaultDb), "results file (SQLite)")(
      "label", po::value(&a.label), "display name for this machine (default: hostname)")(
      "resume", po::value(&a.resume_id), "continue the interrupted run RUN from its stored trials")(
      "continue-unfinished",
      "go on from this host's latest interrupted run of CONFIG's workload in --db, if any (feedtune.autotune)")(
      "quiet,q", "no progress output, only the summary")(
      "json", "one JSON event per line on stdout (start, trial, done) instead of the summary")(
      "trace", po::value(&trace_dir),
      "after the search, trace the baseline and the best setting into DIR/baseline.json and DIR/best.json")(
      "trace-seconds", po::value(&trace_seconds)->default_value(1.0), kTraceSecondsHelp)(
      "seed-from", po::value(&a.seed_from),
      "start from the stored run of the nearest machine in FILE (a fleet's results file): its knee and best setting")(
      "serve-fd", po::value(&a.serve_fd),
      "the process that started feedtune serves each trial on socket FD (a command workload with protocol serve; "
      "feedtune.autotune passes it, docs/python.md)")(
      "serve-preflight", po::value(&serve_preflight),
      "with --serve-fd: the serving job's preflight object (its Python, torch, start method and pickle check)");
  po::positional_options_description positional;
  positional.add("config", 1);
  const auto vm = Parse(args, options, positional, kSweepUsage, code);
  if (!vm) return std::nullopt;
  a.resuming = vm->count("resume") > 0;
  a.continue_unfinished = vm->count("continue-unfinished") > 0;
  a.json = vm->count("json") > 0;
  a.quiet = vm->count("quiet") > 0;
  if (!trace_dir.empty()) {
    std::string error;
    if (!OpenSweepTraceFiles(trace_dir, trace_seconds, &a.trace_files, &error)) throw SweepStop{kExitUsage, error};
  }
  if (a.resuming == !a.config_path.empty()) {
    throw SweepStop{kExitUsage, "sweep takes a CONFIG, or --resume RUN (which uses the config stored with the run)\n\n" +
                                    std::string(kSweepUsage)};
  }
  if (vm->count("serve-fd") > 0 && (a.serve_fd < 0 || a.resuming)) {
    throw SweepStop{kExitUsage, a.resuming ? "--serve-fd measures a new run; it does not resume one"
                                           : "--serve-fd takes an open socket's descriptor, a number >= 0"};
  }
  if (vm->count("serve-preflight") > 0) {
    if (a.serve_fd < 0) throw SweepStop{kExitUsage, "--serve-preflight goes with --serve-fd (the job that serves)"};
    a.serve_preflight = tuner::PreflightFromText(serve_preflight);
    if (!a.serve_preflight->answered) {
      throw SweepStop{kExitUsage, "--serve-preflight: not a preflight object (docs/command-protocol.md): " +
                                      serve_preflight};
    }
  }
  if (a.resuming && !a.seed_from.empty()) {
    throw SweepStop{kExitUsage, "--resume re-seeds from the seed stored with the run; drop --seed-from"};
  }
  if (a.resuming && a.continue_unfinished) {
    throw SweepStop{kExitUsage, "--continue-unfinished finds the run to go on from; --resume names one: give either"};
  }
  if (a.resuming && !a.sets.empty()) {
    throw SweepStop{kExitUsage, "--resume goes on with the config stored with the run, so its trials stay comparable; "
                                "drop --set, or start a new sweep with it"};
  }
  return a;
}

}  // namespace feedtune::cli
