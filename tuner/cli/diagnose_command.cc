// `feedtune diagnose`: the stage trials and the bottleneck verdict for one
// setting (tuner/search/verdict_rules.h, docs/verdict.md).
#include <iostream>
#include <nlohmann/json.hpp>

#include "results/store.h"
#include "results/verdict.h"
#include "tuner/cli/cli_util.h"
#include "tuner/cli/version.h"
#include "tuner/measure/python_preflight.h"
#include "tuner/measure/stage_runner.h"
#include "tuner/search/verdict_rules.h"
#include "tuner/measure/node_measurer.h"
#include "tuner/cli/progress.h"
#include "tuner/cli/setting_budget.h"

namespace feedtune::cli {

using results::TrialStatus;
namespace {

constexpr const char* kDiagnoseUsage = R"(Usage: feedtune diagnose CONFIG [--set key=value ...] [--format table|json] [--db FILE]

Where the time goes at one setting (the config's loader knobs, changed by
--set): short trials with everything after one stage made free, each with the
sweep's repeats and 95% interval, then the stage that limits and what to do.

  step       batches already on the device, no loader: the model step alone
  copy       one resident host batch copied each step (pinned or pageable as
             set, non_blocking as set)
  transport  workers producing free samples of the real size: process start,
             slots, collate, the pin stage
  prep       the real workload, its files read into the page cache first
  fetch      file-backed workloads: the real workload with a cold page cache

Each stage's rate is what it sustains alone (derived from its trial and the
one before); the bottleneck is the lowest, the runner-up is what limits once
it is fixed. The input-bound share is (wait for the batch + copy) over the
step time of the real workload: under 5% not input-bound, 5-20% moderately,
20% and over highly. `feedtune sweep` runs the same at its best setting
(sweep.diagnose: true). docs/verdict.md has the rules.

Options:
  --set key=value   override a config key (repeatable)
  --format F        table (default) or json: {"bottleneck", "runner_up",
                    "headroom", "input_bound_frac", "band", "stages":
                    [{"stage", "samples_per_s", "ci", ...}], "advice", "notes"}
  --db FILE         also store it as a run in FILE (the stage trials, the
                    verdict), for `feedtune report`
  --force           run the stage trials even when the setting is over a
                    memory, /dev/shm or open-file budget

Before any stage trial starts, the setting is checked against the sweep's
budgets (docs/search.md#budgets), with each worker's memory as the newest
sweep of this host and workload in --db (default results/feedtune.db)
measured it, else an estimate; a setting over one is refused with exit 2
and the arithmetic.

Example:
  feedtune diagnose configs/quickstart.yaml --set loader.num_workers=2 --format json)";

}  // namespace

int RunDiagnose(const Args& args, const std::atomic<bool>& stop) {
  po::options_description options("Options");
  std::string config_path, format = "table", db_path;
  std::vector<std::string> sets;
  po::positional_options_description positional;
  AddConfigOptions(options, positional, &config_path, &sets);
  options.add_options()("format", po::value(&format), "table | json")(
      "db", po::value(&db_path), "store the stage trials as a run")(
      "force", "run even when the setting is over a budget");
  int code = kExitOk;
  const auto vm = Parse(args, options, positional, kDiagnoseUsage, &code);
  if (!vm) return code;
  if (format != "table" && format != "json") {
    std::cerr << "feedtune: diagnose --format: expected table or json, got '" << format << "'\n";
    return kExitUsage;
  }
  auto session = OpenSession(config_path, sets, &code);
  if (!session) return code;
  const tuner::SweepConfig& config = session->config;
  // The stage trials run the setting's slots and workers (transport, prep,
  // fetch) or less (step, copy): one check covers them all.
  if (!SettingFitsBudgets(*session, config.loader.knobs, db_path.empty() ? kDefaultDb : db_path,
                          vm->count("force") > 0, "diagnose", &code)) {
    return code;
  }
  const results::Fingerprint machine = MachineFingerprint("");

  tuner::DiagnoseSetup setup;
  setup.config = &config;
  setup.workload = &session->workload;
  setup.device = session->device.get();
  setup.stop = &stop;
  setup.usable_cpus = machine.usable_cpus;
  const auto measurer = tuner::MakeMeasurer(config, session->workload, *session->device, &stop);
  setup.command_measurer = measurer.get();
  // A served tune.py (feedtune.serve) says so by answering the preflight.
  if (tuner::IsPythonCommand(config)) {
    try {
      setup.python_package = tuner::RunPythonPreflight(config, &stop).answered;
    } catch (const tuner::Interrupted&) {
      std::cerr << "feedtune: interrupted\n";
      return kExitInterrupted;
    }
  }
  setup.on_stage = [](const std::string& line) { std::cerr << "feedtune diagnose: " << line << "\n"; };
  setup.copy_limits = tuner::CopyLimits;
  std::cerr << "feedtune diagnose: " << tuner::KnobsShort(config.loader.knobs) << " on "
            << session->device->description() << "\n"
            << session->workload.description << "\n";
  if (const int ranks = tuner::node::ResolveRanks(config); ranks > 1) {
    std::cerr << "feedtune diagnose: sweep.ranks " << ranks
              << " is not diagnosed as a node: the stage trials measure one loader alone on this machine\n";
  }

  tuner::StageTrials trials;
  try {
    trials = tuner::RunStageTrials(setup, config.loader.knobs);
  } catch (const tuner::Interrupted&) {
    std::cerr << "feedtune: interrupted\n";
    return kExitInterrupted;
  }
  const results::Verdict verdict = tuner::ComputeVerdict(trials);

  if (!db_path.empty()) {
    try {
      results::Store store = results::Store::Open(db_path);
      results::RunRecord run;
      run.machine_id = store.UpsertMachine(machine);
      run.workload_name = config.name;
      run.workload_hash = tuner::WorkloadHash(config);
      run.config_yaml = tuner::ToYaml(config);
      run.backend = session->device->backend_name();
      run.version = BuildString();
      run.started_at = NowIso8601();
      run.id = store.BeginRun(run);
      for (const auto& [stage, trial] : trials.trials) {
        results::TrialRecord stored = trial;
        stored.phase = "diagnose-" + stage;
        const int64_t id = store.AddTrial(run.id, stored);
        // The real workload at the setting.
        if (stage == "prep" && trial.status == TrialStatus::kOk) run.best_trial_id = id;
      }
      run.ended_at = NowIso8601();
      run.status = verdict.bottleneck.empty() ? results::RunStatus::kFailed : results::RunStatus::kDone;
      store.FinishRun(run);
      store.SaveVerdict(run.id, verdict);
      std::cerr << "feedtune diagnose: stored as run " << run.id << " in " << db_path << "\n";
    } catch (const results::StoreError& e) {
      std::cerr << "feedtune: " << e.what() << "\n";
      return kExitFailure;
    }
  }

  if (format == "json") {
    std::cout << results::VerdictToJson(verdict) << "\n";
  } else {
    std::cout << "diagnose: " << tuner::KnobsShort(config.loader.knobs) << " (" << session->device->backend_name()
              << ")\n"
              << results::VerdictText(verdict);
  }
  if (verdict.bottleneck.empty()) {
    std::cerr << "feedtune: no stage could be measured; see the notes above\n";
    return kExitFailure;
  }
  return kExitOk;
}

}  // namespace feedtune::cli
