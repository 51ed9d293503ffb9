#include "tuner/cli/commands.h"

#include <sys/statvfs.h>
#include <unistd.h>

#include <boost/program_options.hpp>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "loader/device/device.h"
#include "results/fingerprint.h"
#include "results/report.h"
#include "results/store.h"
#include "tuner/cli/version.h"
#include "tuner/config.h"
#include "tuner/progress.h"
#include "tuner/search.h"
#include "tuner/trial_runner.h"
#include "workloads/synthetic_dataset.h"

namespace feedtune::cli {
namespace {

namespace po = boost::program_options;

constexpr const char* kDefaultDb = "results/feedtune.db";

// Parses `args` against `options` (+ positionals); prints help or the error.
// Returns nullopt with `*exit_code` set when the command should end now.
std::optional<po::variables_map> Parse(const Args& args, const po::options_description& options,
                                       const po::positional_options_description& positional, const char* usage,
                                       int* exit_code) {
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(args).options(options).positional(positional).run(), vm);
    if (vm.count("help")) {
      std::cout << usage << "\n" << options << "\n";
      *exit_code = kExitOk;
      return std::nullopt;
    }
    po::notify(vm);
  } catch (const po::error& e) {
    std::cerr << "feedtune: " << e.what() << "\n\n" << usage << "\n" << options << "\n";
    *exit_code = kExitUsage;
    return std::nullopt;
  }
  return vm;
}

std::string NowIso8601() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

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

struct Session {
  tuner::SweepConfig config;
  std::unique_ptr<device::Device> device;
  std::shared_ptr<const loader::Dataset> dataset;
};

// Loads the config and creates the device and dataset; prints the error and
// returns nullopt (with the exit code) when it cannot.
std::optional<Session> OpenSession(const std::string& path, const std::vector<std::string>& overrides,
                                   int* exit_code) {
  Session s;
  try {
    s.config = tuner::LoadConfig(path);
    for (const auto& o : overrides) tuner::ApplyOverride(s.config, o);
  } catch (const tuner::ConfigError& e) {
    std::cerr << "feedtune: " << e.what() << "\n";
    *exit_code = kExitUsage;
    return std::nullopt;
  }
  try {
    std::string note;
    s.device = device::CreateDevice(s.config.device, &note);
    if (!note.empty()) std::cerr << "feedtune: " << note << "\n";
  } catch (const device::DeviceError& e) {
    std::cerr << "feedtune: " << e.what() << "\n";
    *exit_code = kExitUsage;
    return std::nullopt;
  }
  s.dataset = std::make_shared<workloads::SyntheticDataset>(s.config.workload.synthetic);
  return s;
}

results::Fingerprint MachineFingerprint(const std::string& label) {
  results::Fingerprint fp = results::ReadFingerprint();
  fp.label = label.empty() ? fp.hostname : label;
  return fp;
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

    tuner::TrialRunner runner(session->config, *session->device, session->dataset, &stop);
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

  tuner::TrialRunner runner(session->config, *session->device, session->dataset, &stop);
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

namespace {
constexpr const char* kValidateUsage = R"(Usage: feedtune validate CONFIG

Checks a sweep config strictly (unknown keys, types, ranges) and prints the
effective config, every default filled in. Exit 2 with file:line:column on error.

Example:
  feedtune validate configs/quickstart.yaml)";
}  // namespace

int RunValidate(const Args& args) {
  po::options_description options("Options");
  std::string config_path;
  options.add_options()("help,h", "this help")("config", po::value(&config_path)->required(), "the config (YAML)");
  po::positional_options_description positional;
  positional.add("config", 1);
  int code = kExitOk;
  const auto vm = Parse(args, options, positional, kValidateUsage, &code);
  if (!vm) return code;
  try {
    const tuner::SweepConfig config = tuner::LoadConfig(config_path);
    std::cout << "# " << config_path << ": valid; effective config (workload hash " << tuner::WorkloadHash(config)
              << ")\n"
              << tuner::ToYaml(config);
    return kExitOk;
  } catch (const tuner::ConfigError& e) {
    std::cerr << "feedtune: " << e.what() << "\n";
    return kExitUsage;
  }
}

namespace {
constexpr const char* kReportUsage = R"(Usage: feedtune report [--db FILE] [--run N|latest] [--format table|json] [--out FILE]

Shows a stored run: every trial with its phase, knobs, samples/s with its 95%
interval, GPU idle, data wait and the phase's decision; then the knee, the best
config and the speedup. The JSON form is a stable interface for scripts.

Examples:
  feedtune report
  feedtune report --run 3 --format json --out run3.json)";
}  // namespace

int RunReport(const Args& args) {
  po::options_description options("Options");
  std::string db_path, run_arg, format, out_path;
  options.add_options()("help,h", "this help")("db", po::value(&db_path)->default_value(kDefaultDb),
                                               "results file (SQLite)")(
      "run", po::value(&run_arg)->default_value("latest"), "run id, or latest")(
      "format", po::value(&format)->default_value("table"), "table | json")(
      "out", po::value(&out_path), "write to this file instead of stdout");
  po::positional_options_description positional;
  int code = kExitOk;
  const auto vm = Parse(args, options, positional, kReportUsage, &code);
  if (!vm) return code;
  if (format != "table" && format != "json") {
    std::cerr << "feedtune: --format must be table or json, got '" << format << "'\n";
    return kExitUsage;
  }
  std::optional<int64_t> run_id;
  if (run_arg != "latest") {
    try {
      size_t used = 0;
      run_id = std::stoll(run_arg, &used);
      if (used != run_arg.size() || *run_id < 1) throw std::invalid_argument(run_arg);
    } catch (const std::exception&) {
      std::cerr << "feedtune: --run must be a run id (a positive integer) or latest, got '" << run_arg << "'\n";
      return kExitUsage;
    }
  }
  try {
    const results::Store store = results::Store::OpenReadOnly(db_path);
    const results::RunView view = results::LoadRunView(store, run_id);
    const std::string text = format == "json" ? results::RenderJson(view) : results::RenderTable(view);
    if (out_path.empty()) {
      std::cout << text;
    } else {
      std::FILE* f = std::fopen(out_path.c_str(), "w");
      if (f == nullptr || std::fwrite(text.data(), 1, text.size(), f) != text.size() || std::fclose(f) != 0) {
        std::cerr << "feedtune: cannot write " << out_path << ": " << std::strerror(errno) << "\n";
        return kExitFailure;
      }
    }
    return kExitOk;
  } catch (const results::StoreError& e) {
    std::cerr << "feedtune: " << e.what() << "\n";
    return kExitFailure;
  }
}

namespace {
constexpr const char* kMachineUsage = R"(Usage: feedtune machine [--json]

Prints this machine's fingerprint: CPU model, logical and usable CPUs (affinity
and cgroup quota), NUMA nodes, memory and cgroup limit, /dev/shm, open-file
limit, kernel, and the hash that identifies the machine in results files.

Example:
  feedtune machine --json)";
}  // namespace

int RunMachine(const Args& args) {
  po::options_description options("Options");
  options.add_options()("help,h", "this help")("json", "print as one JSON object");
  po::positional_options_description positional;
  int code = kExitOk;
  const auto vm = Parse(args, options, positional, kMachineUsage, &code);
  if (!vm) return code;
  const results::Fingerprint fp = MachineFingerprint("");
  nlohmann::ordered_json j = {{"hash", fp.Hash()},
                              {"hostname", fp.hostname},
                              {"cpu_model", fp.cpu_model},
                              {"logical_cpus", fp.logical_cpus},
                              {"usable_cpus", fp.usable_cpus},
                              {"cgroup_cpu_limit", fp.cgroup_cpu_limit},
                              {"numa_nodes", fp.numa_nodes},
                              {"mem_total_bytes", fp.mem_total_bytes},
                              {"cgroup_mem_limit_bytes", fp.cgroup_mem_limit_bytes},
                              {"shm_bytes", fp.shm_bytes},
                              {"nofile_limit", fp.nofile_limit},
                              {"kernel", fp.kernel},
                              {"cuda_backend_built", device::CudaCompiledIn()}};
  if (vm->count("json")) {
    std::cout << j.dump() << "\n";
  } else {
    for (const auto& [key, value] : j.items()) {
      std::printf("%-24s %s\n", key.c_str(), value.is_string() ? value.get<std::string>().c_str() : value.dump().c_str());
    }
  }
  return kExitOk;
}

}  // namespace feedtune::cli
