// `feedtune sweep` and `feedtune trial`: measuring on this machine.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>

#include "results/fingerprint.h"
#include "results/fleet.h"
#include "results/node_report.h"
#include "results/store.h"
#include "tuner/search/budget.h"
#include "tuner/cli/cli_util.h"
#include "tuner/cli/trace_files.h"
#include "tuner/cli/version.h"
#include "tuner/measure/stage_runner.h"
#include "tuner/search/verdict_rules.h"
#include "tuner/measure/measurer_factory.h"
#include "tuner/search/formula_trials.h"
#include "tuner/measure/node_measurer.h"
#include "tuner/search/preflight.h"
#include "tuner/cli/progress.h"
#include "tuner/search/replay.h"
#include "tuner/search/search.h"
#include "tuner/search/seed.h"

namespace feedtune::cli {
namespace {

constexpr int kAutoMaxWorkers = 64;
constexpr int kSafeWorkersLimit = 1024;  // the largest safe num_workers reported

// max_workers: the configured cap, or with `auto` the default of 64. Budgets
// (tuner/search/budget.h) then skip any trial that would not fit, and the doubling
// stops there. Deliberately a function of the config alone, so a resumed run
// gets the cap the first run had.
int ResolveMaxWorkers(const tuner::SweepConfig& config, std::string* why) {
  if (config.sweep.max_workers > 0) {
    *why = "max_workers " + std::to_string(config.sweep.max_workers) + " (from the config)";
    return config.sweep.max_workers;
  }
  *why = "max_workers auto: " + std::to_string(kAutoMaxWorkers) + ", less where a budget stops the doubling";
  return kAutoMaxWorkers;
}

// Samples per epoch and slot bytes where the config tells them; 0 = unknown
// (the budget learns the batch size from the first trial).
// Of a native workload (its dataset); 0 for a command, which may report its
// own epoch length in its trials (the search reads it from the baseline).
int64_t SamplesPerEpoch(const tuner::OpenedWorkload& workload) {
  return workload.dataset ? workload.dataset->size() : 0;
}

int64_t BatchesPerEpoch(int64_t samples, const loader::LoaderOptions& loader) {
  const int64_t batch = loader.knobs.batch_size;
  if (samples <= 0 || batch <= 0) return 0;
  return loader.drop_last ? samples / batch : (samples + batch - 1) / batch;
}

int64_t BatchBytes(const tuner::SweepConfig& config) {
  if (config.workload.kind == workloads::WorkloadKind::kSynthetic) {
    return config.loader.knobs.batch_size * config.workload.synthetic.sample_bytes;
  }
  return 0;
}

std::string G(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

std::string Fixed(double value, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, value);
  return buf;
}

// NaN (not measured) as null.
nlohmann::json Number(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); }

std::string MiB(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f MiB", static_cast<double>(bytes) / (1 << 20));
  return buf;
}

// What the run stores beside its trials (runs.calibration_json), one object:
// "cpu" the workload's CPU calibration, "budget_facts" (so --resume predicts
// as the first run did), "max_workers" the resolved cap, and at the end
// "phases", each phase's decision. `existing` is that object as stored so far,
// or at the start the bare CPU calibration (or empty).
std::string RunJson(const std::string& existing, const tuner::BudgetFacts& facts, int max_workers,
                    const tuner::SearchOutcome* outcome, const tuner::SafeLimit* safe = nullptr) {
  nlohmann::json j = nlohmann::json::object();
  if (!existing.empty()) {
    const auto parsed = nlohmann::json::parse(existing, nullptr, /*allow_exceptions=*/false);
    if (parsed.is_object() && parsed.contains("budget_facts")) {
      j = parsed;
    } else if (!parsed.is_discarded()) {
      j["cpu"] = parsed;
    }
  }
  j["budget_facts"] = nlohmann::json::parse(tuner::BudgetFactsJson(facts));
  j["max_workers"] = max_workers;
  if (outcome != nullptr) {
    nlohmann::json phases = nlohmann::json::array();
    for (const auto& p : outcome->phases) phases.push_back({{"phase", p.phase}, {"kept", p.kept}, {"why", p.why}});
    j["phases"] = phases;
  }
  if (safe != nullptr) {
    // What the safe limit rests on; the report and the summary print it.
    j["safe_limit"] = {{"workers", safe->workers ? nlohmann::json(*safe->workers) : nlohmann::json(nullptr)},
                       {"basis", safe->basis},
                       {"trial", safe->basis_trial ? nlohmann::json(*safe->basis_trial) : nlohmann::json(nullptr)},
                       {"worker_rss_bytes", safe->worker_rss_bytes ? nlohmann::json(*safe->worker_rss_bytes)
                                                                   : nlohmann::json(nullptr)}};
  }
  return j.dump();
}

constexpr const char* kSweepUsage = R"(Usage: feedtune sweep CONFIG [options]
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

--trace DIR measures the baseline and the best setting once more at the end,
with a timeline of each (Chrome trace JSON, docs/trace.md) in DIR/baseline.json
and DIR/best.json, and keeps 200 ms of both for `feedtune report --format html`.

Examples:
  feedtune sweep configs/quickstart.yaml --db results/feedtune.db --label gpu-box-1
  feedtune sweep --resume 3 --db results/feedtune.db
  feedtune sweep configs/quickstart.yaml --db node-7.db --seed-from fleet.db
  feedtune sweep configs/quickstart.yaml --trace results/traces)";

struct Output {
  tuner::Progress& progress;
  bool json;
  void Event(const std::string& line) const {
    if (!json) return;
    std::fputs((line + "\n").c_str(), stdout);
    std::fflush(stdout);
  }
};

}  // namespace

int RunSweep(const Args& args, const std::atomic<bool>& stop) {
  po::options_description options("Options");
  std::string config_path, db_path, label, trace_dir, seed_from;
  double trace_seconds = 1.0;
  int64_t resume_id = 0;
  options.add_options()("help,h", "this help")("config", po::value(&config_path), "the sweep config (YAML)")(
      "db", po::value(&db_path)->default_value(kDefaultDb), "results file (SQLite)")(
      "label", po::value(&label), "display name for this machine (default: hostname)")(
      "resume", po::value(&resume_id), "continue the interrupted run RUN from its stored trials")(
      "quiet,q", "no progress output, only the summary")(
      "json", "one JSON event per line on stdout (start, trial, done) instead of the summary")(
      "trace", po::value(&trace_dir),
      "after the search, trace the baseline and the best setting into DIR/baseline.json and DIR/best.json")(
      "trace-seconds", po::value(&trace_seconds)->default_value(1.0), kTraceSecondsHelp)(
      "seed-from", po::value(&seed_from),
      "start from the stored run of the nearest machine in FILE (a fleet's results file): its knee and best setting");
  po::positional_options_description positional;
  positional.add("config", 1);
  int code = kExitOk;
  const auto vm = Parse(args, options, positional, kSweepUsage, &code);
  if (!vm) return code;
  // The trace files are opened before anything runs: a wrong folder costs no trial.
  SweepTraceFiles trace_files;
  if (!trace_dir.empty()) {
    std::string error;
    if (!OpenSweepTraceFiles(trace_dir, trace_seconds, &trace_files, &error)) {
      std::cerr << "feedtune: " << error << "\n";
      return kExitUsage;
    }
  }
  const bool resuming = vm->count("resume") > 0;
  if (resuming == !config_path.empty()) {
    std::cerr << "feedtune: sweep takes a CONFIG, or --resume RUN (which uses the config stored with the run)\n\n"
              << kSweepUsage << "\n";
    return kExitUsage;
  }

  if (resuming && !seed_from.empty()) {
    std::cerr << "feedtune: --resume re-seeds from the seed stored with the run; drop --seed-from\n";
    return kExitUsage;
  }
  // The seed's file is opened (read only) before anything runs: a wrong path costs no trial.
  std::optional<results::Store> seed_store;
  if (!seed_from.empty()) {
    std::error_code error;
    if (!std::filesystem::is_regular_file(seed_from, error)) {
      std::cerr << "feedtune: --seed-from " << seed_from
                << ": no such file; give the results file of a sweep or of `feedtune merge`\n";
      return kExitUsage;
    }
    try {
      seed_store.emplace(results::Store::OpenReadOnly(seed_from));
    } catch (const results::StoreError& e) {
      std::cerr << "feedtune: --seed-from " << seed_from << " is no results file to seed from: " << e.what() << "\n";
      return kExitUsage;
    }
  }

  const bool json = vm->count("json") > 0;
  tuner::Progress progress(stderr, tuner::DetectProgressMode(stderr, vm->count("quiet") > 0));
  const Output output{progress, json};

  // A fresh sweep checks its config before the results file is touched, so a
  // mistake leaves no file behind.
  tuner::SweepConfig config;
  if (!resuming) {
    try {
      config = tuner::LoadConfig(config_path);
    } catch (const tuner::ConfigError& e) {
      std::cerr << "feedtune: " << e.what() << "\n";
      return kExitUsage;
    }
  }

  try {
    // Opened here to resume; for a new run, once the workload has opened.
    std::optional<results::Store> store;

    // The run: a new one, or the interrupted one with its config and trials.
    results::RunRecord run;
    std::vector<results::TrialRecord> stored;
    std::optional<tuner::BudgetFacts> facts;
    if (resuming) {
      store.emplace(results::Store::Open(db_path));
      const auto found = store->LoadRun(resume_id);
      if (!found) {
        std::cerr << "feedtune: no run " << resume_id << " in " << db_path << "\n";
        return kExitUsage;
      }
      run = *found;
      if (run.status == "done") {
        std::cerr << "feedtune: run " << run.id << " is done; nothing to resume\n";
        return kExitUsage;
      }
      try {
        config = tuner::ParseConfig(run.config_yaml, "run " + std::to_string(run.id) + " (stored config)");
      } catch (const tuner::ConfigError& e) {
        std::cerr << "feedtune: cannot resume: " << e.what() << "\n";
        return kExitFailure;
      }
      stored = store->LoadTrials(run.id);
      if (!run.calibration_json.empty()) {
        const auto j = nlohmann::json::parse(run.calibration_json, nullptr, /*allow_exceptions=*/false);
        if (j.is_object() && j.contains("budget_facts")) {
          facts = tuner::BudgetFactsFromJson(j["budget_facts"].dump());
        }
      }
    }

    // The workload (dataset and fork server) first, while this process has one
    // thread: the machine fingerprint's GPU query and the device both start the
    // CUDA driver, which starts threads. See tuner/measure/measurer_factory.h.
    tuner::OpenedWorkload workload;
    if (!OpenWorkloadOrExplain(config, &workload, &code)) return code;
    if (trace_files.best && !workload.dataset) {
      std::cerr << "feedtune: --trace records feedtune's own loader; a command workload runs its own "
                   "(trace it with torch.profiler)\n";
      return kExitUsage;
    }

    const results::Fingerprint machine = MachineFingerprint(label);
    int64_t machine_id = 0;
    if (resuming) {
      machine_id = store->UpsertMachine(machine);
      if (run.machine_id != machine_id) {
        std::cerr << "feedtune: run " << run.id << " was measured on another machine (or this one changed); "
                  << "resume it there, or start a new sweep here\n";
        return kExitUsage;
      }
    }
    // A node sweep (sweep.ranks > 1, tuner/measure/node_measurer.h): what could make it wrong, said
    // before any trial; and each rank gets its share of the node's budgets.
    const int ranks = tuner::node::ResolveRanks(config);  // a command's ranks too (node/command_ranks.h)
    const std::vector<std::string> preflight =
        tuner::node::Preflight(config, ranks, BatchBytes(config), tuner::node::ReadPreflightFacts());
    if (!facts) {
      facts = tuner::ReadBudgetFacts(machine.cgroup_mem_limit_bytes, machine.usable_cpus, BatchBytes(config));
      tuner::node::ShareBudget(ranks, &*facts);
    }

    std::unique_ptr<device::Device> device;
    try {
      std::string note;
      device = device::CreateDevice(config.device, &note);
      if (!note.empty()) progress.Note("feedtune: " + note);
    } catch (const device::DeviceError& e) {
      std::cerr << "feedtune: " << e.what() << "\n";
      return kExitUsage;
    }
    const auto measurer = tuner::MakeMeasurer(config, workload, *device, &stop);

    // The seed: found in --seed-from's file for this machine, or on resume the one stored with the run.
    std::optional<tuner::SweepSeed> seed;
    std::string no_seed;
    if (resuming) {
      seed = tuner::SeedFromRunJson(run.calibration_json);
    } else if (seed_store) {
      seed = tuner::FindSeed(*seed_store, seed_from, config.name, machine, results::HostOf(machine),
                             /*match_name=*/!label.empty());
      if (!seed) {
        no_seed = "feedtune: --seed-from " + seed_from + ": no run of workload '" + config.name +
                  "' with a best setting (the file holds: " + results::DescribeStoredWorkloads(*seed_store) +
                  "); sweeping unseeded";
      }
      seed_store.reset();
    }

    std::string why;
    const int max_workers = ResolveMaxWorkers(config, &why);
    if (!resuming) {
      store.emplace(results::Store::Open(db_path));
      machine_id = store->UpsertMachine(machine);
      run.machine_id = machine_id;
      run.host = results::HostOf(machine);  // the host apart from its hardware class (docs/fleets.md)
      run.workload_name = config.name;
      run.workload_hash = tuner::WorkloadHash(config);
      run.config_yaml = tuner::ToYaml(config);
      run.backend = device->backend_name();
      run.version = kVersion;
      run.started_at = NowIso8601();
      run.calibration_json = RunJson(workload.calibration_json, *facts, max_workers, nullptr);
      if (!preflight.empty()) {  // stored with the run; RunJson keeps it at the end
        auto j = nlohmann::json::parse(run.calibration_json);
        j["preflight"] = preflight;
        run.calibration_json = j.dump();
      }
      if (seed) {  // stored with the run: --resume re-seeds from it
        auto j = nlohmann::json::parse(run.calibration_json);
        j["seed"] = nlohmann::json::parse(tuner::SeedJson(*seed));
        run.calibration_json = j.dump();
      }
      run.id = store->BeginRun(run);
    }
    progress.Note("feedtune sweep: " + config.name + " on " + device->description() + ", run " +
                  std::to_string(run.id) + " in " + db_path +
                  (resuming ? " (resuming: " + std::to_string(stored.size()) + " stored trials)" : ""));
    progress.Note(workload.description);
    if (seed) progress.Note(tuner::SeedText(*seed) + (resuming ? " (as stored with the run)" : ""));
    if (!no_seed.empty()) progress.Note(no_seed);
    for (const std::string& warning : preflight) progress.Note("feedtune: warning: " + warning);
    progress.Note(why);
    progress.Note("budgets: memory " + G(config.sweep.budget.memory_fraction) + " x " +
                  MiB(facts->mem_available_bytes) + " available, /dev/shm " + G(config.sweep.budget.shm_fraction) +
                  " x " + MiB(facts->shm_free_bytes) + " free, open files " + std::to_string(facts->nofile_limit) +
                  ", usable CPUs " + G(facts->usable_cpus));
    output.Event(tuner::StartEventJson(run.id, config.name, device->backend_name(), max_workers, resuming));
    if (seed) {
      output.Event(nlohmann::json{{"event", "seed"},
                                  {"text", tuner::SeedText(*seed)},
                                  {"seed", nlohmann::json::parse(tuner::SeedJson(*seed))}}
                       .dump());
    }

    // A command's workers are not the process tree feedtune sees: its budget
    // rests on the worker memory the command measured (tuner/search/budget.h).
    tuner::Budget budget(*facts, config.sweep.budget,
                         config.workload.kind == workloads::WorkloadKind::kCommand ? tuner::WorkerMemory::kReported
                                                                                    : tuner::WorkerMemory::kProcessTree);
    tuner::BudgetGate gate(budget, *measurer);
    tuner::ReplayMeasurer replay(stored, gate);

    int kept = 0;
    bool cpu_noted = false;
    tuner::SearchEvents events;
    events.on_start = [&](const tuner::TrialPlan& plan, const loader::Knobs& knobs,
                          const tuner::SearchProgress& p) { progress.Start(plan, knobs, p); };
    events.on_trial = [&](results::TrialRecord& trial, const tuner::SearchProgress& p) {
      const bool replayed = replay.last_replayed();
      if (!replayed) trial.id = store->AddTrial(run.id, trial);
      budget.Observe(trial);  // with its id: the safe limit names the trial it rests on
      ++kept;
      progress.Trial(trial, p, replayed);
      output.Event(tuner::TrialEventJson(trial, p, progress.elapsed_s(), progress.left_s(p), replayed));
      if (replayed) return;
      if (!replay.last_warning().empty()) progress.Note("warning: " + replay.last_warning());
      const std::string& cpu = gate.last_prediction().note;
      if (!cpu.empty() && !cpu_noted) {
        progress.Note("note: " + cpu + " (from here on, workers share CPUs; waiting workers need none)");
        cpu_noted = true;
      }
    };

    tuner::SearchSetup setup;
    setup.max_workers = max_workers;
    setup.samples_per_epoch = SamplesPerEpoch(workload);
    setup.batches_per_epoch = BatchesPerEpoch(setup.samples_per_epoch, config.loader);
    setup.usable_cpus = facts->usable_cpus;  // stored with the run: a resume decides alike
    if (seed) setup.seed = seed->search;
    setup.ranks = ranks;
    if (ranks > 1) {
      const std::vector<int> nodes = tuner::node::GpuNumaNodes(config, ranks);
      setup.numa_known = std::all_of(nodes.begin(), nodes.end(), [](int n) { return n >= 0; });
    }
    // What a worker runs its CPU work on when the knob is unset (search.h).
    if (config.workload.kind == workloads::WorkloadKind::kCommand) {
      setup.default_worker_threads = static_cast<int>(machine.usable_cpus);
    } else {  // a native dataset's workload.cpu_threads (workloads/sample_cost.h)
      setup.default_worker_threads = config.workload.synthetic.cpu_threads;
    }
    tuner::SearchOutcome outcome;
    try {
      outcome = tuner::RunSearch(config.sweep, setup, config.loader.knobs, replay, events);
      // A node sweep's formulas row gets a figure for every pick (report, export).
      if (ranks > 1) {
        tuner::node::MeasureFormulaSettings(outcome, static_cast<int>(machine.usable_cpus), max_workers, replay,
                                            events);
      }
    } catch (const tuner::Interrupted&) {
      progress.Clear();
      run.status = "interrupted";
      run.ended_at = NowIso8601();
      store->FinishRun(run);
      output.Event(tuner::InterruptedEventJson(run.id, kept));
      std::cerr << "feedtune: interrupted; run " << run.id << " is marked interrupted, its " << kept
                << " finished trials are kept in " << db_path << "; continue it with `feedtune sweep --resume "
                << run.id << " --db " << db_path << "`\n";
      return kExitInterrupted;
    } catch (const tuner::ReplayMismatch& e) {
      progress.Clear();
      std::cerr << "feedtune: cannot resume run " << run.id << ": " << e.what() << "\n";
      return kExitFailure;
    }
    progress.Clear();

    run.ended_at = NowIso8601();
    run.status = outcome.best ? "done" : "failed";
    if (outcome.baseline) run.baseline_trial_id = outcome.trials[*outcome.baseline].id;
    std::optional<tuner::SafeLimit> safe;
    if (outcome.best) {
      const auto& best = outcome.trials[*outcome.best];
      run.best_trial_id = best.id;
      safe = budget.SafeLimitFor(best.knobs, kSafeWorkersLimit);
      run.safe_max_workers = safe->workers;  // NULL when nothing supports a number
    }
    if (outcome.knee_workers) {
      run.knee_workers = outcome.knee_workers;
      run.knee_samples_per_s = outcome.knee_samples_per_s;
    }
    run.knee_kneedle_workers = outcome.kneedle_workers;
    run.speedup = outcome.speedup;
    run.speedup_ci_low = outcome.speedup_ci_low;
    run.speedup_ci_high = outcome.speedup_ci_high;
    run.calibration_json = RunJson(run.calibration_json, *facts, max_workers, &outcome, safe ? &*safe : nullptr);
    store->FinishRun(run);
    // Where the time goes at the best setting (tuner/search/verdict_rules.h), once the
    // run is finished: an interruption here keeps it done, without a verdict.
    std::optional<results::Verdict> verdict;
    if (outcome.best && config.sweep.diagnose && ranks > 1) {
      // The stage trials measure one loader alone on the whole machine, which
      // is not what a rank of this node sees: no verdict rather than a wrong one.
      progress.Note("diagnose: not run: the stage trials measure one loader alone, not a rank among " +
                    std::to_string(ranks) + "; `feedtune diagnose CONFIG --set sweep.ranks=1` gives one "
                    "loader's verdict (sweep.diagnose: false silences this)");
    } else if (outcome.best && config.sweep.diagnose) {
      tuner::DiagnoseSetup diagnose;
      diagnose.config = &config;
      diagnose.workload = &workload;
      diagnose.device = device.get();
      diagnose.stop = &stop;
      diagnose.usable_cpus = facts->usable_cpus;
      diagnose.command_measurer = measurer.get();
      diagnose.on_stage = [&](const std::string& line) { progress.Note("diagnose: " + line); };
      diagnose.copy_limits = tuner::CopyLimits;
      try {
        verdict = tuner::ComputeVerdict(tuner::RunStageTrials(diagnose, outcome.trials[*outcome.best].knobs));
        store->SaveVerdict(run.id, *verdict);
      } catch (const tuner::Interrupted&) {
        progress.Clear();
        std::cerr << "feedtune: interrupted in the stage trials; run " << run.id
                  << " is done and kept, without a verdict (`feedtune diagnose` measures one)\n";
        return kExitInterrupted;
      }
    }
    if (trace_files.best && outcome.baseline && outcome.best) {
      try {
        const SweepTimelines timelines = TraceBaselineAndBest(
            trace_files, *measurer, outcome.trials[*outcome.baseline].knobs, outcome.trials[*outcome.best].knobs,
            config.name, device->description(), [&](const std::string& line) { progress.Note(line); });
        // Kept with the run for the HTML report: two excerpts of ~200 ms, a few KB.
        run.calibration_json = WithTimelines(run.calibration_json, timelines);
        store->FinishRun(run);
      } catch (const tuner::Interrupted&) {
        progress.Clear();
        std::cerr << "feedtune: interrupted while tracing; run " << run.id << " is done and kept\n";
        return kExitInterrupted;
      }
    }
    if (json) {
      // The verdict rides in the done event, which stays the last line.
      std::string done = tuner::DoneEventJson(outcome, run);
      if (verdict) {
        nlohmann::json j = nlohmann::json::parse(done);
        j["verdict"] = nlohmann::json::parse(results::VerdictToJson(*verdict));
        done = j.dump();
      }
      output.Event(done);
    } else {
      std::cout << tuner::SummaryText(outcome, run, db_path);
      if (verdict) {
        std::cout << "\nwhere the time goes at the best setting (stage trials, docs/verdict.md):\n"
                  << results::VerdictText(*verdict, "  ");
      }
    }
    return outcome.best ? kExitOk : kExitFailure;
  } catch (const results::StoreError& e) {
    progress.Clear();
    std::cerr << "feedtune: " << e.what() << "\n";
    return kExitFailure;
  } catch (const std::exception& e) {
    progress.Clear();
    std::cerr << "feedtune: sweep failed: " << e.what() << "\n";
    return kExitFailure;
  }
}

namespace {
constexpr const char* kTrialUsage = R"(Usage: feedtune trial CONFIG [--set key=value ...] [--json] [--trace FILE]

Measures one configuration (the loader knobs of the config, changed by --set),
without a search and without storing it. --set takes any config key path.
--trace FILE writes a timeline of the trial's first window (every worker's
sample fetches and batches, the pin stage, the main loop's waits, the device's
copies and steps) as Chrome trace JSON: open it in https://ui.perfetto.dev or
chrome://tracing (docs/trace.md).

Examples:
  feedtune trial configs/quickstart.yaml --set loader.num_workers=4 --set loader.pin_memory=true --json
  feedtune trial configs/quickstart.yaml --set loader.num_workers=4 --trace /tmp/trial.json)";
}  // namespace

int RunTrial(const Args& args, const std::atomic<bool>& stop) {
  po::options_description options("Options");
  std::string config_path, trace_path;
  std::vector<std::string> sets;
  loader::TraceCapture trace;
  options.add_options()("help,h", "this help")("config", po::value(&config_path)->required(), "the config (YAML)")(
      "set", po::value(&sets)->composing(), "override a config key: key.path=value (repeatable)")(
      "json", "print the measurement as one JSON object")(
      "trace", po::value(&trace_path), "write a Chrome trace of the trial's first window to FILE")(
      "trace-seconds", po::value(&trace.seconds)->default_value(1.0), kTraceSecondsHelp);
  po::positional_options_description positional;
  positional.add("config", 1);
  int code = kExitOk;
  const auto vm = Parse(args, options, positional, kTrialUsage, &code);
  if (!vm) return code;
  // The trace file is opened before anything runs: a wrong path costs no trial.
  std::unique_ptr<std::ofstream> trace_file;
  if (!trace_path.empty()) {
    std::string error;
    if (!(trace.seconds > 0)) error = "--trace-seconds must be > 0";
    if (error.empty()) trace_file = OpenTraceFile(trace_path, &error);
    if (!error.empty()) {
      std::cerr << "feedtune: " << error << "\n";
      return kExitUsage;
    }
  }
  auto session = OpenSession(config_path, sets, &code);
  if (!session) return code;
  if (trace_file && !session->workload.dataset) {
    std::cerr << "feedtune: --trace records feedtune's own loader; a command workload runs its own "
                 "(trace it with torch.profiler)\n";
    return kExitUsage;
  }

  const auto measurer = tuner::MakeMeasurer(session->config, session->workload, *session->device, &stop);
  tuner::TrialMeasurer& runner = *measurer;
  results::TrialRecord t;
  try {
    tuner::TrialPlan plan;
    plan.phase = "trial";
    if (trace_file) plan.trace = &trace;
    loader::Knobs knobs = session->config.loader.knobs;
    knobs.cpu_binding = tuner::StartBinding(session->config.sweep.cpu_binding);
    t = runner.MeasurePlanned(knobs, plan);
  } catch (const tuner::Interrupted&) {
    std::cerr << "feedtune: interrupted\n";
    return kExitInterrupted;
  }
  if (!runner.last_warning().empty()) std::cerr << "feedtune: warning: " << runner.last_warning() << "\n";
  if (trace_file && t.status == "ok") {
    std::string error;
    if (!WriteTraceFile(*trace_file, trace_path, trace, session->config.name, t.knobs,
                        session->device->description(), &error)) {
      std::cerr << "feedtune: " << error << "\n";
      return kExitFailure;
    }
    std::cerr << "feedtune: trace of the first " << trace.seconds << " s of the first window ("
              << trace.events.size() << " spans) in " << trace_path << "; open it in https://ui.perfetto.dev\n";
  }
  if (vm->count("json")) {
    nlohmann::json j = {{"backend", session->device->backend_name()},
                        {"config",
                         {{"batch_size", t.knobs.batch_size},
                          {"num_workers", t.knobs.num_workers},
                          {"pin_memory", t.knobs.pin_memory},
                          {"non_blocking", t.knobs.non_blocking},
                          {"prefetch_factor", t.knobs.prefetch_factor},
                          {"persistent_workers", t.knobs.persistent_workers},
                          {"cpu_binding", loader::CpuBindingName(t.knobs.cpu_binding)},
                          {"worker_threads", t.knobs.worker_threads}}},
                        {"status", t.status},
                        {"error", t.error ? nlohmann::json(*t.error) : nlohmann::json(nullptr)},
                        {"samples_per_s", Number(t.samples_per_s)},
                        {"ci", {Number(t.ci_low), Number(t.ci_high)}},
                        {"mb_per_s", Number(t.mb_per_s)},
                        {"gpu_idle_frac", Number(t.gpu_idle_frac)},
                        {"wait_p50_us", Number(t.wait_p50_us)},
                        {"wait_p99_us", Number(t.wait_p99_us)},
                        {"worker_startup_s", Number(t.worker_startup_s)},
                        {"cpu_util", Number(t.cpu_util)},
                        {"peak_rss_bytes", t.peak_rss_bytes},
                        {"cv", Number(t.cv)},
                        {"time_to_first_batch_s", Number(t.time_to_first_batch_s)},
                        {"epoch_boundary_ms", Number(t.epoch_boundary_ms)},
                        {"worker_busy_frac", Number(t.worker_busy_frac)},
                        {"worker_rss_bytes", Number(t.worker_rss_bytes)},
                        {"copy_s", Number(t.copy_s)},
                        {"pinned_alloc_s", Number(t.pinned_alloc_s)},
                        {"batches_per_epoch", t.batches_per_epoch ? nlohmann::json(*t.batches_per_epoch)
                                                                  : nlohmann::json(nullptr)},
                        {"repeats", t.repeats}};
    if (t.node) j["node"] = nlohmann::json::parse(results::NodeFiguresJson(*t.node));  // sweep.ranks > 1
    std::cout << j.dump() << "\n";
  } else if (t.status == "ok") {
    // A figure the workload did not measure (a command's) reads "not measured".
    const auto figure = [](double value, int decimals, const char* unit) {
      return std::isfinite(value) ? Fixed(value, decimals) + unit : std::string("not measured");
    };
    std::printf("%s  %.1f samples/s [%.1f, %.1f]  %s  GPU idle %s  wait p50 %s p99 %s  CPU %.2f  RSS %.0f MiB  (%s)\n",
                tuner::KnobsShort(t.knobs).c_str(), t.samples_per_s, t.ci_low, t.ci_high,
                figure(t.mb_per_s, 1, " MB/s").c_str(), figure(t.gpu_idle_frac * 100, 1, "%").c_str(),
                figure(t.wait_p50_us / 1e3, 2, " ms").c_str(), figure(t.wait_p99_us / 1e3, 2, " ms").c_str(),
                t.cpu_util, static_cast<double>(t.peak_rss_bytes) / (1 << 20), session->device->backend_name());
    // One-off costs, kept out of the figures above.
    std::printf("start-up (outside the windows): first batch %s, workers start in %s, pinned pool %s\n",
                figure(t.time_to_first_batch_s * 1e3, 1, " ms").c_str(),
                figure(t.worker_startup_s * 1e3, 1, " ms").c_str(),
                figure(t.pinned_alloc_s * 1e3, 1, " ms").c_str());
    std::string workers;
    if (std::isfinite(t.worker_busy_frac)) workers += "busy " + Fixed(t.worker_busy_frac * 100, 1) + "%";
    if (std::isfinite(t.worker_rss_bytes)) {
      workers += (workers.empty() ? "" : ", ") + std::string("peak RSS ") + Fixed(t.worker_rss_bytes / (1 << 20), 0) +
                 " MiB each";
    }
    if (!workers.empty()) std::printf("workers: %s\n", workers.c_str());
    if (t.node) std::fputs(results::NodeFiguresText(*t.node, "").c_str(), stdout);
  }
  if (t.status != "ok") {
    std::cerr << "feedtune: trial failed: " << t.error.value_or("unknown error") << "\n";
    return kExitFailure;
  }
  return kExitOk;
}

}  // namespace feedtune::cli
