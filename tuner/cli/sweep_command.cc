// `feedtune sweep`: the search on this machine, every trial stored. (`feedtune trial`, one
// setting without a search, is tuner/cli/trial_command.cc.)
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>

#include "results/background.h"
#include "results/fingerprint.h"
#include "results/json_form.h"
#include "results/fleet.h"
#include "results/report.h"
#include "results/store.h"
#include "results/units.h"
#include "storage/object_client.h"
#include "storage/probe.h"
#include "tuner/search/budget.h"
#include "tuner/cli/cli_util.h"
#include "tuner/cli/torch_costs_probe.h"
#include "tuner/cli/install_paths.h"
#include "workloads/format_inspect.h"
#include "workloads/format_io.h"
#include "tuner/cli/trace_files.h"
#include "tuner/cli/version.h"
#include "tuner/measure/stage_runner.h"
#include "tuner/search/verdict_rules.h"
#include "tuner/measure/measurer_factory.h"
#include "tuner/search/formula_trials.h"
#include "tuner/measure/cpu_affinity.h"
#include "tuner/measure/node_measurer.h"
#include "tuner/measure/proc_stats.h"
#include "tuner/measure/python_preflight.h"
#include "tuner/search/preflight.h"
#include "tuner/cli/progress.h"
#include "tuner/cli/sweep_args.h"
#include "tuner/cli/setting_budget.h"
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

// A streaming dataset gives each reader (a worker of a rank) whole shards:
// past shards / ranks workers, the extra ones read nothing, so a doubling
// beyond would measure noise. The cap and its reason go
// where max_workers' do.
void CapWorkersAtShards(const tuner::OpenedWorkload& workload, int ranks, int* max_workers, std::string* why,
                        std::string* cap_why) {
  const int64_t shards = workload.dataset ? workload.dataset->num_shards() : 0;
  if (shards <= 0) return;
  const int cap = static_cast<int>(std::max<int64_t>(1, shards / ranks));
  if (cap >= *max_workers) return;
  *max_workers = cap;
  *cap_why = "the stream has " + std::to_string(shards) + " shards" +
             (ranks > 1 ? " over " + std::to_string(ranks) + " ranks" : "") +
             " and each worker reads whole shards, so more workers would read nothing";
  *why += "; capped at " + std::to_string(cap) + ": " + *cap_why;
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

struct Output {
  tuner::Progress& progress;
  bool json;
  void Event(const std::string& line) const {
    if (!json) return;
    std::fputs((line + "\n").c_str(), stdout);
    std::fflush(stdout);
  }
};

// Everything a sweep holds, filled step by step, in the order of
// docs/architecture.md ("The loader behaves like torch"): the workload opens
// while this process has one thread, the device after.
struct SweepSession {
  tuner::SweepConfig config;
  std::optional<results::Store> seed_store;  // --seed-from, read only, until the seed is found
  std::optional<results::Store> store;
  results::RunRecord run;
  std::vector<results::TrialRecord> stored;  // a resumed run's trials, replayed
  std::optional<tuner::BudgetFacts> facts;
  tuner::OpenedWorkload workload;
  results::Fingerprint machine;
  int ranks = 1;
  std::vector<std::string> preflight;
  std::string store_probe_json;  // remote data: ProbeRemoteStore's figures (RunFacts::store_probe_json)
  std::unique_ptr<device::Device> device;
  std::unique_ptr<tuner::TrialMeasurer> measurer;
  std::optional<tuner::SweepSeed> seed;
  std::string no_seed;  // why --seed-from found nothing, for the progress notes
  int max_workers = 0;
  std::string max_workers_why;
  std::string max_workers_cap_why;  // why max_workers is below the config's (tuner::SearchSetup)
  std::string shards_warning;  // a streaming dataset with fewer shards than the box's readers
  std::optional<tuner::PythonPreflight> python;  // a Python command's preflight (python_preflight.h)
  bool torch_costs_measured = false;  // this sweep measured them: stored with its run
  results::BackgroundFacts background;  // other processes' CPU: the sample before the baseline, the thresholds
  bool attached = false;  // --serve-fd: the training job serves the trials (feedtune.autotune)
};

// --seed-from's file, opened read only before anything runs: a wrong path costs no trial.
void OpenSeedStore(const SweepArgs& a, SweepSession& s) {
  if (a.seed_from.empty()) return;
  std::error_code error;
  if (!std::filesystem::is_regular_file(a.seed_from, error)) {
    throw SweepStop{kExitUsage, "--seed-from " + a.seed_from +
                                    ": no such file; give the results file of a sweep or of `feedtune merge`"};
  }
  try {
    s.seed_store.emplace(results::Store::OpenReadOnly(a.seed_from));
  } catch (const results::StoreError& e) {
    throw SweepStop{kExitUsage, "--seed-from " + a.seed_from + " is no results file to seed from: " + e.what()};
  }
}

// Opens the results file for writing, saying which runs it found left
// running by a process that has ended (marked interrupted, results/store.h).
void OpenStore(const SweepArgs& a, SweepSession& s, tuner::Progress& progress) {
  s.store.emplace(results::Store::Open(a.db_path));
  for (const results::StaleRun& stale : s.store->stale_runs()) {
    progress.Note("feedtune: " + a.db_path + ": " + results::StaleRunText(stale));
  }
}

// The run --continue-unfinished goes on from: this host's latest interrupted
// run of `config`'s workload (name and hash) with trials, measured the same
// way (in the job, or not); none when there is none.
std::optional<results::RunRecord> UnfinishedRun(const SweepArgs& a, const results::Store& store,
                                                const tuner::SweepConfig& config) {
  const std::string host = results::HostOf(results::ReadFingerprint()).Key();
  const std::string hash = tuner::WorkloadHash(config);
  const bool in_job = a.serve_fd >= 0;
  std::vector<results::RunRecord> runs = store.LoadRuns();
  for (auto run = runs.rbegin(); run != runs.rend(); ++run) {
    if (run->status != results::RunStatus::kInterrupted || run->host.Key() != host ||
        run->workload_name != config.name || run->workload_hash != hash || (run->backend == "in-job") != in_job) {
      continue;
    }
    if (!store.LoadTrials(run->id).empty()) return *run;
  }
  return std::nullopt;
}

// --resume's run: its stored config, its trials and its budget facts.
void ResumeRun(const SweepArgs& a, SweepSession& s) {
  const auto found = s.store->LoadRun(a.resume_id);
  if (!found) throw SweepStop{kExitUsage, "no run " + std::to_string(a.resume_id) + " in " + a.db_path};
  s.run = *found;
  s.run.end_note.clear();  // it goes on: how it stopped before is no longer how it ended
  if (s.run.status == results::RunStatus::kDone) {
    throw SweepStop{kExitUsage, "run " + std::to_string(s.run.id) + " is done; nothing to resume"};
  }
  try {
    s.config = tuner::ParseConfig(s.run.config_yaml, "run " + std::to_string(s.run.id) + " (stored config)");
  } catch (const tuner::ConfigError& e) {
    throw SweepStop{kExitFailure, std::string("cannot resume: ") + e.what()};
  }
  ResolveCommandPaths(s.config);
  s.stored = s.store->LoadTrials(s.run.id);
  s.facts = s.run.facts.budget;  // so a resume predicts as the first run did
}

// A fresh sweep checks its config before the results file is touched, so a
// mistake leaves no file behind; a resumed one takes the run's stored config,
// its trials and its budget facts. With --continue-unfinished a fresh sweep
// becomes a resume when the file holds an unfinished run of its workload.
void LoadConfigOrRun(SweepArgs& a, SweepSession& s, tuner::Progress& progress) {
  if (!a.resuming) {
    try {
      s.config = tuner::LoadConfig(ResolveDataPath(a.config_path));
      for (const std::string& assignment : a.sets) tuner::ApplyOverride(s.config, assignment);
    } catch (const tuner::ConfigError& e) {
      throw SweepStop{kExitUsage, e.what()};
    }
    ResolveCommandPaths(s.config);
    if (!a.continue_unfinished || !std::filesystem::is_regular_file(a.db_path)) return;
    OpenStore(a, s, progress);
    const std::optional<results::RunRecord> unfinished = UnfinishedRun(a, *s.store, s.config);
    if (!unfinished) return;
    progress.Note("feedtune: going on from run " + std::to_string(unfinished->id) + " of " + a.db_path +
                  ", which ended unfinished (" + (unfinished->end_note.empty() ? "interrupted" : unfinished->end_note) +
                  "): its trials are replayed, not measured again, with the config stored with it");
    a.resuming = true;
    a.resume_id = unfinished->id;
    a.seed_from.clear();
    s.seed_store.reset();  // a resume re-seeds from the seed stored with the run
    ResumeRun(a, s);
    return;
  }
  OpenStore(a, s, progress);
  ResumeRun(a, s);
}

// A Python command's preflight (tuner/measure/python_preflight.h), before any
// trial: the interpreter for the run record, and the pickling trap, which
// stops the sweep (exit 2) when the Dataset does not pickle and the sweep
// would start workers by forkserver or spawn. A resumed run keeps the facts
// stored with it, so its phases decide as before.
void PythonPreflight(const SweepArgs& a, const std::atomic<bool>& stop, tuner::Progress& progress, SweepSession& s) {
  // Attached, the job that serves is already running, and starting its argv
  // again would start a second job: it may say its preflight itself.
  if (!tuner::IsPythonCommand(s.config) || (a.serve_fd >= 0 && !a.serve_preflight)) return;
  if (a.resuming && !s.run.python.empty()) {
    s.python.emplace();
    s.python->answered = true;
    s.python->facts = s.run.python;
    return;
  }
  tuner::PythonPreflight preflight;
  if (a.serve_preflight) {
    preflight = *a.serve_preflight;
  } else {
    progress.Note("feedtune: preflight: the command starts once to say its Python, torch and start method");
    preflight = tuner::RunPythonPreflight(s.config, &stop);  // throws Interrupted
  }
  if (!preflight.pickle_error.empty()) {
    throw SweepStop{kExitUsage, s.config.source + ": the workers cannot be started by forkserver or spawn, which "
                                    "this sweep would use (loader.multiprocessing_context, sweep.start_methods, or "
                                    "the interpreter's default): " + preflight.pickle_error + "\nNo trial was run."};
  }
  if (!preflight.answered) {
    progress.Note("feedtune: note: " + preflight.note);
  } else {
    const results::PythonFacts& f = preflight.facts;
    progress.Note("feedtune: Python " + f.python_version + ", torch " + f.torch_version + ", default start method " +
                  f.default_start_method +
                  (preflight.pickle_checked ? "; the Dataset pickles (forkserver and spawn can start workers)" : ""));
  }
  s.python = std::move(preflight);
}

// --serve-fd: the served trials go to the process that started feedtune.
void CheckAttachable(SweepSession& s) {
  if (s.config.workload.kind != workloads::WorkloadKind::kCommand ||
      s.config.workload.command.protocol != workloads::CommandProtocol::kServe || s.ranks > 1) {
    throw SweepStop{kExitUsage, s.config.source + ": --serve-fd needs workload.kind command with protocol serve "
                                "and one rank (sweep.ranks 1): the process on the socket answers serve requests"};
  }
  s.attached = true;
}

// Remote data (docs/storage.md#the-probe): what the store looks like from
// this box, said before the baseline and stored with the run, so that the
// report shows it and `compare` puts machines side by side on the same
// bucket. kProbeSeconds bounds it; the dataset opened already, so a probe
// the store refuses is a warning, not a failed sweep.
constexpr double kProbeSeconds = 2;

void ProbeRemoteStore(SweepSession& s, tuner::Progress& progress) {
  const std::string& path = s.config.workload.files.path;
  if (!storage::IsRemote(path)) return;
  try {
    storage::ObjectClient client(storage::ParseLocation(path), storage::ResolveAwsConfig(storage::ProcessEnvironment()));
    storage::ProbeOptions options;
    options.budget_s = kProbeSeconds;
    const storage::ProbeResult probe = storage::ProbeStore(client, options);
    s.store_probe_json = storage::ProbeJson(probe).dump();
    progress.Note("feedtune: the store from this box (stored with the run; `feedtune inspect " + path +
                  "` measures it alone):\n" + storage::ProbeText(probe));
  } catch (const std::exception& e) {
    s.preflight.push_back("the store's probe failed, so the run keeps no figures of it: " + std::string(e.what()));
  }
}

// The workload, the machine, the preflight, the device and the measurer, in
// that order (tuner/measure/measurer_factory.h says why), then the seed.
void BuildSetup(const SweepArgs& a, const std::atomic<bool>& stop, tuner::Progress& progress, SweepSession& s) {
  int code = kExitOk;
  // The torch costs the native trials pay: those a resumed run paid, else this
  // host's in the results file, measured first on its first sweep there.
  // (Not when attached: that is a command's sweep, or an error said below.)
  std::optional<results::TorchCosts> torch_costs;
  if (a.resuming) {
    torch_costs = s.run.facts.torch_costs;
  } else if (a.serve_fd < 0) {
    torch_costs = SweepTorchCosts(s.config, a.db_path, [&progress](const std::string& n) { progress.Note(n); },
                                  &s.torch_costs_measured);
  }
  if (!OpenWorkloadOrExplain(s.config, &s.workload, &code, torch_costs ? &*torch_costs : nullptr)) {
    throw SweepStop{code, ""};
  }
  PythonPreflight(a, stop, progress, s);
  if (a.trace_files.best && !s.workload.dataset) {
    throw SweepStop{kExitUsage,
                    "--trace records feedtune's own loader; a command workload runs its own "
                    "(trace it with torch.profiler)"};
  }
  s.machine = MachineFingerprint(a.label);
  if (a.resuming && s.run.machine_id != s.store->UpsertMachine(s.machine)) {
    throw SweepStop{kExitUsage, "run " + std::to_string(s.run.id) +
                                    " was measured on another machine (or this one changed); resume it there, or "
                                    "start a new sweep here"};
  }
  // A node sweep (sweep.ranks > 1, tuner/measure/node_measurer.h): what could
  // make it wrong, said before any trial; and each rank gets its share of the
  // node's budgets. A command's ranks count too (tuner/measure/command_ranks.h).
  s.ranks = tuner::node::ResolveRanks(s.config);
  s.preflight = tuner::node::Preflight(s.config, s.ranks, BatchBytes(s.config), tuner::node::ReadPreflightFacts());
  if (!s.facts) {
    s.facts = tuner::ReadBudgetFacts(s.machine.cgroup_mem_limit_bytes, s.machine.usable_cpus, BatchBytes(s.config));
    if (s.workload.dataset && s.workload.dataset->num_shards() > 0) {
      s.facts->stream_buffer_bytes = s.config.loader.shuffle_buffer * s.workload.dataset->max_sample_bytes();
    }
    tuner::node::ShareBudget(s.ranks, &*s.facts);
  }
  try {
    std::string note;
    s.device = device::CreateDevice(s.config.device, &note);
    if (!note.empty()) progress.Note("feedtune: " + note);
  } catch (const device::DeviceError& e) {
    throw SweepStop{kExitUsage, e.what()};
  }
  if (a.serve_fd >= 0) CheckAttachable(s);
  s.measurer = tuner::MakeMeasurer(s.config, s.workload, *s.device, &stop, a.serve_fd);
  // The seed: found in --seed-from's file for this machine, or on resume the one stored with the run.
  if (a.resuming) {
    if (s.run.facts.seed) s.seed = tuner::SeedFromFacts(*s.run.facts.seed);
  } else if (s.seed_store) {
    s.seed = tuner::FindSeed(*s.seed_store, a.seed_from, s.config.name, s.machine, results::HostOf(s.machine),
                             /*match_name=*/!a.label.empty());
    if (!s.seed) {
      s.no_seed = "feedtune: --seed-from " + a.seed_from + ": no run of workload '" + s.config.name +
                  "' with a best setting (the file holds: " + results::DescribeStoredWorkloads(*s.seed_store) +
                  "); sweeping unseeded";
    }
    s.seed_store.reset();
  }
  s.max_workers = ResolveMaxWorkers(s.config, &s.max_workers_why);
  CapWorkersAtShards(s.workload, std::max(s.ranks, 1), &s.max_workers, &s.max_workers_why, &s.max_workers_cap_why);
  if (const std::string note = workloads::NetworkFileSystemNote(s.config.workload.files.path); !note.empty()) {
    s.preflight.push_back(note);  // stored with the run: the report says it
  }
  if (!a.resuming) ProbeRemoteStore(s, progress);
  if (s.workload.dataset && s.workload.dataset->num_shards() > 0) {
    const int ranks = std::max(s.ranks, 1);
    s.shards_warning = workloads::FewShardsWarning(s.workload.dataset->num_shards(), ranks,
                                                   std::max(1, s.machine.usable_cpus / ranks));
  }
}

// The run's end note when a signal stops the sweep (the report prints it
// beside "interrupted"). Attached, the signal is the training job's: it sends
// SIGINT when it stops tuning early (Ctrl-C, its loader closed mid-tuning).
std::string StoppedNote(const SweepSession& s, int trials) {
  const std::string after = " after " + std::to_string(trials) + " trial" + (trials == 1 ? "" : "s");
  if (s.attached) {
    return "stopped by a signal" + after +
           " (the training job's, when it stops tuning early: Ctrl-C, its loader closed, a fallback)";
  }
  return "stopped by SIGINT or SIGTERM" + after;
}

// Other processes' CPU before the baseline (docs/measurement.md, "A busy
// box"): sampled for sweep.background.sample_seconds while this tree is
// idle. Above sweep.background.warn_cpu it is said up front, with the top
// consumers, and the sweep goes on; at or below it, it is the quiet reference
// the trials judge their windows against. A resumed run keeps the sample and
// the reference stored with it. After the run is stored (a results file that
// cannot be written fails first); the warning joins its preflight warnings.
void SampleBox(const SweepArgs& a, const std::atomic<bool>& stop, tuner::Progress& progress, SweepSession& s) {
  const tuner::BackgroundOptions& options = s.config.sweep.background;
  results::BackgroundFacts& facts = s.background;
  if (a.resuming && s.run.facts.background) {
    facts = *s.run.facts.background;
  } else {
    facts.warn_cpu = options.warn_cpu;
    facts.disturbed_cpu = options.disturbed_cpu;
    // Attached (--serve-fd), the training job that started feedtune is its
    // parent: its CPU is the trial's, not another process's, so nothing is sampled.
    if (options.sample_seconds > 0 && !s.attached) {
      progress.Note("feedtune: other processes' CPU: sampling the box for " +
                    results::ShortNumber(options.sample_seconds) + " s first");
      tuner::BackgroundSample sample = tuner::SampleBackground(options.sample_seconds, &stop);
      if (stop.load()) {
        s.run.status = results::RunStatus::kInterrupted;
        s.run.ended_at = NowIso8601();
        s.run.end_note = StoppedNote(s, 0);
        s.store->FinishRun(s.run);
        throw SweepStop{kExitInterrupted, "interrupted before the first trial; run " + std::to_string(s.run.id) +
                                              " is marked interrupted (`feedtune sweep --resume " +
                                              std::to_string(s.run.id) + "` continues it)"};
      }
      facts.source = sample.source.path;
      facts.start_cpu = sample.cpu;
      facts.sample_s = sample.seconds;
      facts.top = std::move(sample.top);
    } else {
      facts.source = tuner::FindBoxCpuSource().path;
    }
    if (std::isfinite(facts.start_cpu) && facts.start_cpu <= facts.warn_cpu) facts.reference_cpu = facts.start_cpu;
    if (const std::string warning = results::StartWarning(facts); !warning.empty()) s.preflight.push_back(warning);
    // Stored with the run's facts at its end (or its interruption).
    s.run.facts.preflight = s.preflight;
    s.run.facts.background = facts;
  }
  s.measurer->SetQuietBackground(facts.reference_cpu);
}

// A fresh sweep's run record, stored: from here on every trial is kept.
void BeginRun(const SweepArgs& a, SweepSession& s, tuner::Progress& progress) {
  if (a.resuming) return;
  OpenStore(a, s, progress);
  results::RunRecord& run = s.run;
  run.machine_id = s.store->UpsertMachine(s.machine);
  run.host = results::HostOf(s.machine);  // the host apart from its hardware class (docs/fleets.md)
  run.workload_name = s.config.name;
  run.workload_hash = tuner::WorkloadHash(s.config);
  run.config_yaml = tuner::ToYaml(s.config);
  // Attached, every figure is the training job's own (its step, its device):
  // the run is marked as measured in the job, not by a feedtune backend.
  run.backend = s.attached ? "in-job" : s.device->backend_name();
  run.version = BuildString();
  run.started_at = NowIso8601();
  if (s.python) run.python = s.python->facts;
  run.facts.budget = s.facts;
  run.facts.max_workers = s.max_workers;
  // Stored with the run: --resume re-seeds from it.
  if (s.seed) run.facts.seed = tuner::SeedFactsOf(*s.seed);
  run.facts.cpu = s.workload.cpu_calibration;
  run.facts.torch_costs = s.workload.torch_costs;
  if (s.torch_costs_measured && s.workload.torch_costs) StoreTorchCosts(*s.store, *s.workload.torch_costs);
  run.facts.preflight = s.preflight;
  run.facts.store_probe_json = s.store_probe_json;
  run.id = s.store->BeginRun(run);
}

void AnnounceRun(const SweepArgs& a, const SweepSession& s, tuner::Progress& progress, const Output& output) {
  const tuner::SweepConfig& config = s.config;
  progress.Note("feedtune sweep: " + config.name + " on " + s.device->description() + ", run " +
                std::to_string(s.run.id) + " in " + a.db_path +
                (a.resuming ? " (resuming: " + std::to_string(s.stored.size()) + " stored trials)" : ""));
  progress.Note(s.workload.description);
  if (s.seed) progress.Note(tuner::SeedText(*s.seed) + (a.resuming ? " (as stored with the run)" : ""));
  if (!s.no_seed.empty()) progress.Note(s.no_seed);
  for (const std::string& warning : s.preflight) progress.Note("feedtune: warning: " + warning);
  progress.Note(s.max_workers_why);
  if (!s.shards_warning.empty()) progress.Note("warning: " + s.shards_warning);
  progress.Note("budgets: memory " + results::ShortNumber(config.sweep.budget.memory_fraction) + " x " +
                results::MiB(s.facts->mem_available_bytes) + " available, /dev/shm " +
                results::ShortNumber(config.sweep.budget.shm_fraction) + " x " + results::MiB(s.facts->shm_free_bytes) +
                " free, open files " + std::to_string(s.facts->nofile_limit) + ", usable CPUs " +
                results::ShortNumber(s.facts->usable_cpus));
  output.Event(tuner::StartEventJson(s.run.id, config.name, s.device->backend_name(), s.max_workers, a.resuming,
                                     static_cast<int>(s.stored.size())));
  if (s.seed) {
    output.Event(nlohmann::ordered_json{{"event", "seed"},
                                        {"text", tuner::SeedText(*s.seed)},
                                        {"seed", results::SeedJson(tuner::SeedFactsOf(*s.seed))}}
                     .dump());
  }
}

// What the search starts from: the epoch, the CPUs, the seed, the ranks.
tuner::SearchSetup MakeSearchSetup(const SweepSession& s) {
  tuner::SearchSetup setup;
  setup.max_workers = s.max_workers;
  setup.max_workers_cap_why = s.max_workers_cap_why;
  setup.samples_per_epoch = SamplesPerEpoch(s.workload);
  setup.batches_per_epoch = BatchesPerEpoch(setup.samples_per_epoch, s.config.loader);
  setup.usable_cpus = s.facts->usable_cpus;  // stored with the run: a resume decides alike
  if (s.seed) setup.seed = s.seed->search;
  setup.ranks = s.ranks;
  if (s.ranks > 1) {
    const std::vector<int> nodes = tuner::node::GpuNumaNodes(s.config, s.ranks);
    setup.numa_known = std::all_of(nodes.begin(), nodes.end(), [](int n) { return n >= 0; });
  }
  // What a worker runs its CPU work on when the knob is unset (search.h).
  if (s.config.workload.kind == workloads::WorkloadKind::kCommand) {
    setup.default_worker_threads = static_cast<int>(s.machine.usable_cpus);
  } else {  // a native dataset's workload.cpu_threads (workloads/sample_cost.h)
    setup.default_worker_threads = s.config.workload.synthetic.cpu_threads;
  }
  if (s.attached) {
    // The job's own setting is what the answer must beat (the final check's
    // reference). Its main process's intra-op threads run the user's training
    // step, a choice of the user's, not the loader's: no worker_threads phase.
    setup.reference = s.config.loader.knobs;
    setup.default_worker_threads = 0;
    // A stored answer of this job (--seed-from) gets one check, not a search.
    setup.check_seed = true;
  }
  if (s.python && s.python->answered) {  // the multiprocessing_context phase (search.h)
    setup.python_workload = true;
    setup.default_start_method = tuner::DefaultStartMethod(s.python->facts);
  }
  // Remote data (an object store): the fetch_concurrency phase (search.h).
  setup.remote_reads = (s.workload.dataset && s.workload.dataset->reads_concurrently()) ||
                       (s.config.workload.kind == workloads::WorkloadKind::kCommand &&
                        s.config.workload.command.remote_reads);
  return setup;
}

// The search, every trial stored as it ends. An interruption marks the run
// interrupted (its trials kept for --resume) and stops the sweep with 130.
tuner::SearchOutcome Search(const SweepArgs& a, SweepSession& s, tuner::Budget& budget, tuner::Progress& progress,
                            const Output& output) {
  tuner::BudgetGate gate(budget, *s.measurer);
  tuner::ReplayMeasurer replay(s.stored, gate);
  int kept = 0;
  bool cpu_noted = false;
  tuner::SearchEvents events;
  events.on_start = [&](const tuner::TrialPlan& plan, const loader::Knobs& knobs,
                        const tuner::SearchProgress& p) { progress.Start(plan, knobs, p); };
  events.on_trial = [&](results::TrialRecord& trial, const tuner::SearchProgress& p) {
    const bool replayed = replay.last_replayed();
    // What other processes did to its windows, a function of the record (a
    // replayed trial says the same).
    trial.decision += results::TrialBackgroundNote(trial, s.background);
    if (!replayed) trial.id = s.store->AddTrial(s.run.id, trial);
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
  tuner::SearchSetup setup = MakeSearchSetup(s);
  setup.fitting_workers = [&budget, &s](const loader::Knobs& knobs) {
    return budget.SafeMaxWorkers(knobs, s.max_workers);
  };
  // A resumed search's clock goes on from the first run's (ReplayMeasurer::ElapsedS),
  // so a time budget weighs the trials as it did there.
  setup.elapsed_s = [&replay, began = std::chrono::steady_clock::now()] { return replay.ElapsedS(began); };
  try {
    tuner::SearchOutcome outcome = tuner::RunSearch(s.config.sweep, setup, s.config.loader.knobs, replay, events);
    // A node sweep's formulas row gets a figure for every pick (report, export).
    if (s.ranks > 1) {
      tuner::node::MeasureFormulaSettings(outcome, static_cast<int>(s.machine.usable_cpus), s.max_workers, replay,
                                          events);
    }
    progress.Clear();
    return outcome;
  } catch (const tuner::Interrupted& e) {
    progress.Clear();
    const bool job_gone = dynamic_cast<const tuner::JobGone*>(&e) != nullptr;
    s.run.status = results::RunStatus::kInterrupted;
    s.run.ended_at = NowIso8601();
    s.run.end_note = job_gone ? e.what() : StoppedNote(s, kept);
    s.store->FinishRun(s.run);
    output.Event(tuner::InterruptedEventJson(s.run.id, kept));
    const std::string id = std::to_string(s.run.id);
    // An in-job run is the job's own: `--resume` would start its argv as a
    // serving command, which a training script is not.
    throw SweepStop{kExitInterrupted, (job_gone ? std::string(e.what()) : std::string("interrupted")) + "; run " +
                                          id + " is marked interrupted, its " + std::to_string(kept) +
                                          " finished trials are kept in " + a.db_path +
                                          (s.attached ? std::string()
                                                      : "; continue it with `feedtune sweep --resume " + id +
                                                            " --db " + a.db_path + "`")};
  } catch (const tuner::ReplayMismatch& e) {
    progress.Clear();
    if (a.continue_unfinished) {
      // Found, not named: a run that does not replay would be found again by
      // every next job. Marked failed, it is not; the next one starts anew.
      s.run.status = results::RunStatus::kFailed;
      s.run.ended_at = NowIso8601();
      s.run.end_note = std::string("going on from it failed: ") + e.what();
      s.store->FinishRun(s.run);
      throw SweepStop{kExitFailure, "cannot go on from run " + std::to_string(s.run.id) + ": " + e.what() +
                                        "; it is marked failed, and the next sweep of this workload starts a new run"};
    }
    throw SweepStop{kExitFailure, "cannot resume run " + std::to_string(s.run.id) + ": " + e.what()};
  }
}

// The run's figures from the outcome, stored: the run is done (or failed).
void FinishRun(const tuner::SearchOutcome& outcome, const tuner::Budget& budget, SweepSession& s) {
  results::RunRecord& run = s.run;
  run.ended_at = NowIso8601();
  run.status = outcome.best ? results::RunStatus::kDone : results::RunStatus::kFailed;
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
  run.facts.budget = s.facts;
  run.facts.max_workers = s.max_workers;
  run.facts.safe_limit = safe;  // what the safe limit rests on; the report and the summary print it
  run.facts.phases = outcome.phases;
  run.facts.background = results::SummarizeBackground(s.background, outcome.trials, static_cast<double>(s.machine.usable_cpus));
  s.store->FinishRun(run);
}

// Where the time goes at the best setting (tuner/search/verdict_rules.h), once
// the run is finished: an interruption here keeps it done, without a verdict.
std::optional<results::Verdict> DiagnoseBest(const tuner::SearchOutcome& outcome, const std::atomic<bool>& stop,
                                             tuner::Progress& progress, SweepSession& s) {
  if (!outcome.best || !s.config.sweep.diagnose) return std::nullopt;
  if (s.ranks > 1) {
    // The stage trials measure one loader alone on the whole machine, which
    // is not what a rank of this node sees: no verdict rather than a wrong one.
    progress.Note("diagnose: not run: the stage trials measure one loader alone, not a rank among " +
                  std::to_string(s.ranks) + "; `feedtune diagnose CONFIG --set sweep.ranks=1` gives one "
                  "loader's verdict (sweep.diagnose: false silences this)");
    return std::nullopt;
  }
  tuner::DiagnoseSetup diagnose;
  diagnose.config = &s.config;
  diagnose.workload = &s.workload;
  diagnose.device = s.device.get();
  diagnose.stop = &stop;
  diagnose.usable_cpus = s.facts->usable_cpus;
  diagnose.command_measurer = s.measurer.get();
  diagnose.python_package = s.python && s.python->answered;
  diagnose.on_stage = [&](const std::string& line) { progress.Note("diagnose: " + line); };
  diagnose.copy_limits = tuner::CopyLimits;
  try {
    results::Verdict verdict =
        tuner::ComputeVerdict(tuner::RunStageTrials(diagnose, outcome.trials[*outcome.best].knobs));
    s.store->SaveVerdict(s.run.id, verdict);
    return verdict;
  } catch (const tuner::Interrupted&) {
    progress.Clear();
    throw SweepStop{kExitInterrupted, "interrupted in the stage trials; run " + std::to_string(s.run.id) +
                                          " is done and kept, without a verdict (`feedtune diagnose` measures one)"};
  }
}

// --trace: the baseline's and the best setting's timelines, kept with the run.
void TraceBest(SweepArgs& a, const tuner::SearchOutcome& outcome, tuner::Progress& progress,
               SweepSession& s) {
  if (!a.trace_files.best || !outcome.baseline || !outcome.best) return;
  try {
    const SweepTimelines timelines = TraceBaselineAndBest(
        a.trace_files, *s.measurer, outcome.trials[*outcome.baseline].knobs, outcome.trials[*outcome.best].knobs,
        s.config.name, s.device->description(), [&](const std::string& line) { progress.Note(line); });
    // Kept with the run for the HTML report: two excerpts of ~200 ms, a few KB.
    s.run.facts.timelines_json = TimelinesJson(timelines);
    s.store->FinishRun(s.run);
  } catch (const tuner::Interrupted&) {
    progress.Clear();
    throw SweepStop{kExitInterrupted, "interrupted while tracing; run " + std::to_string(s.run.id) +
                                          " is done and kept"};
  }
}

// The summary's line on other processes' CPU: the busy mark and what it
// means, or what the windows measured; empty when none did (a command).
std::string BackgroundSummary(const results::RunRecord& run) {
  if (!run.facts.background || run.facts.background->windows == 0) return "";
  const results::BackgroundFacts& bg = *run.facts.background;
  if (bg.busy) {
    return "busy:      " + results::BusyText(bg) +
           ": the knee and the best describe the contention with them. The run is marked busy: export, "
           "loader_kwargs and --seed-from take a quiet run of this host or class over it (docs/measurement.md)\n";
  }
  return "background: " + results::QuietText(bg) + "\n";
}

// The summary (text), or the done event (JSON lines) with the verdict in it,
// which stays the last line.
void PrintOutcome(const SweepArgs& a, const tuner::SearchOutcome& outcome,
                  const std::optional<results::Verdict>& verdict, const SweepSession& s, const Output& output) {
  if (a.json) {
    nlohmann::json done = tuner::DoneEvent(outcome, s.run);
    done["background"] = results::BackgroundJson(s.run.facts.background);
    if (verdict) done["verdict"] = results::VerdictJson(*verdict);
    output.Event(done.dump());
    return;
  }
  std::cout << tuner::SummaryText(outcome, s.run, a.db_path);
  std::cout << BackgroundSummary(s.run);
  if (verdict) {
    std::cout << "\nwhere the time goes at the best setting (stage trials, docs/verdict.md):\n"
              << results::VerdictText(*verdict, "  ");
  }
}

}  // namespace

int RunSweep(const Args& args, const std::atomic<bool>& stop) {
  std::optional<tuner::Progress> progress;
  try {
    int code = kExitOk;
    std::optional<SweepArgs> a = ParseSweepArgs(args, &code);
    if (!a) return code;
    SweepSession s;
    OpenSeedStore(*a, s);
    progress.emplace(stderr, tuner::DetectProgressMode(stderr, a->quiet));
    const Output output{*progress, a->json};
    LoadConfigOrRun(*a, s, *progress);
    BuildSetup(*a, stop, *progress, s);
    BeginRun(*a, s, *progress);
    SampleBox(*a, stop, *progress, s);
    AnnounceRun(*a, s, *progress, output);
    // A command's workers are not the process tree feedtune sees: its budget
    // rests on the worker memory the command measured (tuner/search/budget.h).
    tuner::Budget budget(*s.facts, s.config.sweep.budget,
                         s.config.workload.kind == workloads::WorkloadKind::kCommand
                             ? tuner::WorkerMemory::kReported
                             : tuner::WorkerMemory::kProcessTree);
    const tuner::SearchOutcome outcome = Search(*a, s, budget, *progress, output);
    FinishRun(outcome, budget, s);
    const std::optional<results::Verdict> verdict = DiagnoseBest(outcome, stop, *progress, s);
    TraceBest(*a, outcome, *progress, s);
    PrintOutcome(*a, outcome, verdict, s, output);
    return outcome.best ? kExitOk : kExitFailure;
  } catch (const SweepStop& e) {
    if (!e.message.empty()) std::cerr << "feedtune: " << e.message << "\n";
    return e.code;
  } catch (const results::StoreError& e) {
    if (progress) progress->Clear();
    std::cerr << "feedtune: " << e.what() << "\n";
    return kExitFailure;
  } catch (const std::exception& e) {
    if (progress) progress->Clear();
    std::cerr << "feedtune: sweep failed: " << e.what() << "\n";
    return kExitFailure;
  }
}

}  // namespace feedtune::cli

