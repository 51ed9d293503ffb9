// `feedtune sweep` and `feedtune trial`: measuring on this machine.
#include <sys/statvfs.h>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "results/store.h"
#include "tuner/cli/cli_util.h"
#include "tuner/cli/version.h"
#include "tuner/progress.h"
#include "tuner/search.h"
#include "tuner/measurer_factory.h"

namespace feedtune::cli {
namespace {

int64_t MemAvailableBytes() {
  std::FILE* f = std::fopen("/proc/meminfo", "r");
  if (f == nullptr) return 0;
  char line[256];
  long long kb = 0;
  while (std::fgets(line, sizeof line, f) != nullptr) {
    if (std::sscanf(line, "MemAvailable: %lld kB", &kb) == 1) break;
  }
  std::fclose(f);
  return static_cast<int64_t>(kb) * 1024;
}

int64_t ShmFreeBytes() {
  struct statvfs s {};
  if (statvfs("/dev/shm", &s) != 0) return 0;
  return static_cast<int64_t>(s.f_bavail) * static_cast<int64_t>(s.f_frsize);
}

// max_workers: the configured cap, or with `auto` 64 capped by what the slot
// memory of the largest prefetch_factor allows within the memory and /dev/shm budgets.
int ResolveMaxWorkers(const tuner::SweepConfig& config, std::string* why) {
  if (config.sweep.max_workers > 0) {
    *why = "max_workers " + std::to_string(config.sweep.max_workers) + " (from the config)";
    return config.sweep.max_workers;
  }
  int max_pf = config.loader.knobs.prefetch_factor;
  for (int pf : config.sweep.prefetch_factors) max_pf = std::max(max_pf, pf);
  const double batch = static_cast<double>(config.loader.knobs.batch_size) *
                       static_cast<double>(config.workload.synthetic.sample_bytes);
  const double per_worker = batch * max_pf;
  const double mem_budget = config.sweep.budget.memory_fraction * static_cast<double>(MemAvailableBytes());
  const double shm_budget = config.sweep.budget.shm_fraction * static_cast<double>(ShmFreeBytes());
  int cap = 64;
  std::string reason = "the default";
  const auto limit = [&](double budget, const char* what) {
    if (budget <= 0) return;
    const int fits = std::max(1, static_cast<int>(budget / per_worker) - 1);
    if (fits < cap) {
      cap = fits;
      reason = what;
    }
  };
  limit(mem_budget, "the memory budget (sweep.budget.memory_fraction)");
  limit(shm_budget, "the /dev/shm budget (sweep.budget.shm_fraction)");
  *why = "max_workers auto: " + std::to_string(cap) + " (" + reason + ")";
  return cap;
}

constexpr const char* kSweepUsage = R"(Usage: feedtune sweep CONFIG [options]

Runs the tuning sequence on this machine: baseline, pin_memory, num_workers
(doubling to the knee), non_blocking, prefetch_factor, persistent_workers. Each
trial is measured over sweep.repeats windows and stored in the results file as
soon as it ends. Progress goes to stderr, the summary to stdout.

Example:
  feedtune sweep configs/quickstart.yaml --db results/feedtune.db --label gpu-box-1)";

}  // namespace

int RunSweep(const Args& args, const std::atomic<bool>& stop) {
  po::options_description options("Options");
  std::string config_path, db_path, label;
  options.add_options()("help,h", "this help")(
      "config", po::value(&config_path)->required(), "the sweep config (YAML)")(
      "db", po::value(&db_path)->default_value(kDefaultDb), "results file (SQLite)")(
      "label", po::value(&label), "display name for this machine (default: hostname)")(
      "quiet,q", "no progress lines, only the summary");
  po::positional_options_description positional;
  positional.add("config", 1);
  int code = kExitOk;
  const auto vm = Parse(args, options, positional, kSweepUsage, &code);
  if (!vm) return code;

  auto session = OpenSession(config_path, {}, &code);
  if (!session) return code;
  tuner::Progress progress(stderr, vm->count("quiet") > 0);

  try {
    results::Store store = results::Store::Open(db_path);
    const int64_t machine_id = store.UpsertMachine(MachineFingerprint(label));
    results::RunRecord run;
    run.machine_id = machine_id;
    run.workload_name = session->config.name;
    run.workload_hash = tuner::WorkloadHash(session->config);
    run.config_yaml = tuner::ToYaml(session->config);
    run.backend = session->device->backend_name();
    run.version = kVersion;
    run.started_at = NowIso8601();
    run.id = store.BeginRun(run);

    std::string why;
    const int max_workers = ResolveMaxWorkers(session->config, &why);
    progress.Note("feedtune sweep: " + session->config.name + " on " + session->device->description() + ", run " +
                  std::to_string(run.id) + " in " + db_path);
    progress.Note(why);

    const auto measurer = tuner::MakeMeasurer(session->config, *session->device, &stop);
    tuner::TrialMeasurer& runner = *measurer;
    int number = 0;
    tuner::SearchOutcome outcome;
    try {
      outcome = tuner::RunSearch(session->config.sweep, max_workers, session->config.loader.knobs, runner,
                                 [&](results::TrialRecord& trial) {
                                   trial.id = store.AddTrial(run.id, trial);
                                   progress.Trial(trial, ++number);
                                   if (!runner.last_warning().empty()) progress.Note("warning: " + runner.last_warning());
                                 });
    } catch (const tuner::Interrupted&) {
      run.status = "interrupted";
      run.ended_at = NowIso8601();
      store.FinishRun(run);
      std::cerr << "feedtune: interrupted; run " << run.id << " is marked interrupted, its " << number
                << " finished trials are kept in " << db_path << "\n";
      return kExitInterrupted;
    }

    run.ended_at = NowIso8601();
    run.status = outcome.best ? "done" : "failed";
    if (outcome.baseline) run.baseline_trial_id = outcome.trials[*outcome.baseline].id;
    if (outcome.best) run.best_trial_id = outcome.trials[*outcome.best].id;
    if (outcome.knee_workers) {
      run.knee_workers = outcome.knee_workers;
      run.knee_samples_per_s = outcome.knee_samples_per_s;
    }
    store.FinishRun(run);
    std::cout << tuner::SummaryText(outcome, run.id, db_path);
    return outcome.best ? kExitOk : kExitFailure;
  } catch (const results::StoreError& e) {
    std::cerr << "feedtune: " << e.what() << "\n";
    return kExitFailure;
  } catch (const std::exception& e) {
    std::cerr << "feedtune: sweep failed: " << e.what() << "\n";
    return kExitFailure;
  }
}

namespace {
constexpr const char* kTrialUsage = R"(Usage: feedtune trial CONFIG [--set key=value ...] [--json]

Measures one configuration (the loader knobs of the config, changed by --set),
without a search and without storing it. --set takes any config key path.

Example:
  feedtune trial configs/quickstart.yaml --set loader.num_workers=4 --set loader.pin_memory=true --json)";
}  // namespace

int RunTrial(const Args& args, const std::atomic<bool>& stop) {
  po::options_description options("Options");
  std::string config_path;
  std::vector<std::string> sets;
  options.add_options()("help,h", "this help")("config", po::value(&config_path)->required(), "the config (YAML)")(
      "set", po::value(&sets)->composing(), "override a config key: key.path=value (repeatable)")(
      "json", "print the measurement as one JSON object");
  po::positional_options_description positional;
  positional.add("config", 1);
  int code = kExitOk;
  const auto vm = Parse(args, options, positional, kTrialUsage, &code);
  if (!vm) return code;
  auto session = OpenSession(config_path, sets, &code);
  if (!session) return code;

  const auto measurer = tuner::MakeMeasurer(session->config, *session->device, &stop);
  tuner::TrialMeasurer& runner = *measurer;
  results::TrialRecord t;
  try {
    t = runner.Measure(session->config.loader.knobs);
  } catch (const tuner::Interrupted&) {
    std::cerr << "feedtune: interrupted\n";
    return kExitInterrupted;
  }
  if (!runner.last_warning().empty()) std::cerr << "feedtune: warning: " << runner.last_warning() << "\n";
  if (vm->count("json")) {
    nlohmann::json j = {{"backend", session->device->backend_name()},
                        {"config",
                         {{"batch_size", t.knobs.batch_size},
                          {"num_workers", t.knobs.num_workers},
                          {"pin_memory", t.knobs.pin_memory},
                          {"non_blocking", t.knobs.non_blocking},
                          {"prefetch_factor", t.knobs.prefetch_factor},
                          {"persistent_workers", t.knobs.persistent_workers}}},
                        {"status", t.status},
                        {"error", t.error ? nlohmann::json(*t.error) : nlohmann::json(nullptr)},
                        {"samples_per_s", t.samples_per_s},
                        {"ci", {t.ci_low, t.ci_high}},
                        {"mb_per_s", t.mb_per_s},
                        {"gpu_idle_frac", t.gpu_idle_frac},
                        {"wait_p50_us", t.wait_p50_us},
                        {"wait_p99_us", t.wait_p99_us},
                        {"worker_startup_s", t.worker_startup_s},
                        {"cpu_util", t.cpu_util},
                        {"peak_rss_bytes", t.peak_rss_bytes},
                        {"repeats", t.repeats}};
    std::cout << j.dump() << "\n";
  } else if (t.status == "ok") {
    std::printf("%s  %.1f samples/s [%.1f, %.1f]  %.1f MB/s  GPU idle %.1f%%  wait p50 %.2f ms p99 %.2f ms  "
                "CPU %.2f  RSS %.0f MiB  (%s)\n",
                tuner::KnobsShort(t.knobs).c_str(), t.samples_per_s, t.ci_low, t.ci_high, t.mb_per_s,
                t.gpu_idle_frac * 100, t.wait_p50_us / 1e3, t.wait_p99_us / 1e3, t.cpu_util,
                static_cast<double>(t.peak_rss_bytes) / (1 << 20), session->device->backend_name());
  }
  if (t.status != "ok") {
    std::cerr << "feedtune: trial failed: " << t.error.value_or("unknown error") << "\n";
    return kExitFailure;
  }
  return kExitOk;
}

}  // namespace feedtune::cli
