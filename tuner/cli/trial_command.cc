// `feedtune trial`: one setting measured on this machine, without a search
// and without storing it, in a supervised child (tuner/cli/setting_budget.h).
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "loader/options.h"
#include "results/json_form.h"
#include "results/memory_growth.h"
#include "results/node_report.h"
#include "results/store_probe.h"
#include "results/units.h"
#include "tuner/cli/cli_util.h"
#include "tuner/cli/setting_budget.h"
#include "tuner/cli/trace_files.h"
#include "tuner/measure/measurer_factory.h"

namespace feedtune::cli {
namespace {

// `trial --json`: the backend, then the trial as the report's "trials" hold it.
nlohmann::ordered_json TrialJson(const results::TrialRecord& t, const std::string& backend) {
  nlohmann::ordered_json j = {{"backend", backend}};
  j.update(results::TrialJson(t));
  return j;
}

// `trial`: the trial's figures as text, then its one-off costs and its workers.
void PrintTrialText(const results::TrialRecord& t, const std::string& backend) {
  // A figure the workload did not measure (a command's) reads "not measured".
  const auto figure = [](double value, int decimals, const char* unit) {
    return std::isfinite(value) ? results::Fixed(value, decimals) + unit : std::string("not measured");
  };
  std::printf("%s  %.1f samples/s [%.1f, %.1f]  %s  GPU idle %s  wait p50 %s p99 %s  CPU %.2f  RSS %.0f MiB  (%s)\n",
              loader::KnobsShort(t.knobs).c_str(), t.samples_per_s, t.ci_low, t.ci_high,
              figure(t.mb_per_s, 1, " MB/s").c_str(), figure(t.gpu_idle_frac * 100, 1, "%").c_str(),
              figure(t.wait_p50_us / 1e3, 2, " ms").c_str(), figure(t.wait_p99_us / 1e3, 2, " ms").c_str(),
              t.cpu_util, static_cast<double>(t.peak_rss_bytes) / (1 << 20), backend.c_str());
  // One-off costs, kept out of the figures above.
  std::printf("start-up (outside the windows): first batch %s, workers start in %s, pinned pool %s\n",
              figure(t.time_to_first_batch_s * 1e3, 1, " ms").c_str(),
              figure(t.worker_startup_s * 1e3, 1, " ms").c_str(),
              figure(t.pinned_alloc_s * 1e3, 1, " ms").c_str());
  std::string workers;
  if (std::isfinite(t.worker_busy_frac)) workers += "busy " + results::Fixed(t.worker_busy_frac * 100, 1) + "%";
  if (std::isfinite(t.worker_rss_bytes)) {
    workers += (workers.empty() ? "" : ", ") + std::string("peak RSS ") + results::Fixed(t.worker_rss_bytes / (1 << 20), 0) +
               " MiB each";
  }
  if (std::isfinite(t.worker_rss_peak_bytes)) {
    workers += (workers.empty() ? "" : ", ") + std::string("memory ") + results::MiB(std::llround(t.worker_rss_start_bytes)) +
               " at the start, " + results::MiB(std::llround(t.worker_rss_peak_bytes)) + " at the peak";
    if (std::isfinite(t.worker_rss_growth_bytes_per_epoch)) {
      workers += ", " + results::MiB(std::llround(t.worker_rss_growth_bytes_per_epoch)) + " growth per epoch over " +
                 results::Fixed(t.worker_rss_epochs, 1) + " epochs";
    }
  }
  if (!workers.empty()) std::printf("workers: %s\n", workers.c_str());
  if (results::GrowthFlagged(t)) std::printf("warning: %s\n", results::GrowthText(t).c_str());
  if (std::isfinite(t.background_cpu)) {
    std::printf("background: other processes took %.2f CPU during the windows (docs/measurement.md)\n",
                t.background_cpu);
  }
  if (t.node) std::fputs(results::NodeFiguresText(*t.node, "").c_str(), stdout);
  // Remote data: the workers' reads from the store in the windows (docs/storage.md).
  if (t.store) std::printf("store: %s\n", results::StoreFiguresText(*t.store).c_str());
}

constexpr const char* kTrialUsage = R"(Usage: feedtune trial CONFIG [--set key=value ...] [--json] [--trace FILE] [--db FILE] [--force]

Measures one configuration (the loader knobs of the config, changed by --set),
without a search and without storing it. --set takes any config key path.

Before any loader starts, the setting is checked against the sweep's memory,
/dev/shm and open-file budgets (sweep.budget, docs/search.md#budgets): the
batch slots, the pinned copies and each worker's memory, as measured by the
newest sweep of this host and workload in --db (default results/feedtune.db),
else estimated from feedtune's own size. A setting over a budget is refused
with exit 2 and the arithmetic; --force runs it anyway. The trial runs in a
child process: if the kernel kills it or a worker (SIGKILL), the failure says
so and whether the OOM killer did it (the cgroup's memory.events), exit 1.
--trace FILE writes a timeline of the trial's first window (every worker's
sample fetches and batches, the pin stage, the main loop's waits, the device's
copies and steps) as Chrome trace JSON: open it in https://ui.perfetto.dev or
chrome://tracing (docs/trace.md). A native workload pays this host's torch
DataLoader costs stored in --db (`feedtune calibrate`; workload.torch_costs
off: the native core alone).

Examples:
  feedtune trial configs/quickstart.yaml --set loader.num_workers=4 --set loader.pin_memory=true --json
  feedtune trial configs/quickstart.yaml --set loader.num_workers=4 --trace /tmp/trial.json)";

// `trial` after its options, in the supervised child (RunSupervised).
int MeasureTrial(const po::variables_map& vm, const std::string& config_path, const std::string& trace_path,
                 const std::string& db_path, const std::vector<std::string>& sets, loader::TraceCapture& trace,
                 const std::atomic<bool>& stop);

}  // namespace

int RunTrial(const Args& args, const std::atomic<bool>& stop) {
  po::options_description options("Options");
  std::string config_path, trace_path, db_path = kDefaultDb;
  std::vector<std::string> sets;
  loader::TraceCapture trace;
  po::positional_options_description positional;
  AddConfigOptions(options, positional, &config_path, &sets);
  options.add_options()("json", "print the measurement as one JSON object")(
      "trace", po::value(&trace_path), "write a Chrome trace of the trial's first window to FILE")(
      "trace-seconds", po::value(&trace.seconds)->default_value(1.0), kTraceSecondsHelp)(
      "db", po::value(&db_path),
      "results file whose sweep of this host and workload gives the worker memory, and whose torch costs for this "
      "host a native trial pays (feedtune calibrate)")(
      "force", "run the setting even when it is over a memory, /dev/shm or open-file budget");
  int code = kExitOk;
  const auto vm = Parse(args, options, positional, kTrialUsage, &code);
  if (!vm) return code;
  return RunSupervised([&] { return MeasureTrial(*vm, config_path, trace_path, db_path, sets, trace, stop); }, stop,
                       "trial");
}

namespace {

int MeasureTrial(const po::variables_map& vm, const std::string& config_path, const std::string& trace_path,
                 const std::string& db_path, const std::vector<std::string>& sets, loader::TraceCapture& trace,
                 const std::atomic<bool>& stop) {
  int code = kExitOk;
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
  auto session = OpenSession(config_path, sets, &code, db_path);
  if (!session) return code;
  if (trace_file && !session->workload.dataset) {
    std::cerr << "feedtune: --trace records feedtune's own loader; a command workload runs its own "
                 "(trace it with torch.profiler)\n";
    return kExitUsage;
  }

  loader::Knobs knobs = session->config.loader.knobs;
  knobs.cpu_binding = tuner::StartBinding(session->config.sweep.cpu_binding);
  std::string refusal;
  if (!SettingFitsBudgets(*session, knobs, db_path, vm.count("force") > 0, "trial", &code, &refusal)) {
    // As data too, for a caller that runs trials (`feedtune layout`): no prose to parse.
    if (vm.count("json")) std::cout << nlohmann::ordered_json{{"status", "refused"}, {"refused_by", "budget"},
                                                              {"error", refusal}}.dump() << "\n";
    return code;
  }
  const auto measurer = tuner::MakeMeasurer(session->config, session->workload, *session->device, &stop);
  tuner::TrialMeasurer& runner = *measurer;
  results::TrialRecord t;
  try {
    tuner::TrialPlan plan;
    plan.phase = "trial";
    if (trace_file) plan.trace = &trace;
    t = runner.MeasurePlanned(knobs, plan);
  } catch (const tuner::Interrupted&) {
    std::cerr << "feedtune: interrupted\n";
    return kExitInterrupted;
  }
  if (!runner.last_warning().empty()) std::cerr << "feedtune: warning: " << runner.last_warning() << "\n";
  if (trace_file && t.status == results::TrialStatus::kOk) {
    std::string error;
    if (!WriteTraceFile(*trace_file, trace_path, trace, session->config.name, t.knobs,
                        session->device->description(), &error)) {
      std::cerr << "feedtune: " << error << "\n";
      return kExitFailure;
    }
    std::cerr << "feedtune: trace of the first " << trace.seconds << " s of the first window ("
              << trace.events.size() << " spans) in " << trace_path << "; open it in https://ui.perfetto.dev\n";
  }
  if (vm.count("json")) {
    nlohmann::ordered_json j = TrialJson(t, session->device->backend_name());
    // What the measurer said about the trial's data (cache cold's eviction and what stayed resident): null when nothing.
    j["warning"] = runner.last_warning().empty() ? nlohmann::ordered_json(nullptr)
                                                 : nlohmann::ordered_json(runner.last_warning());
    // The same eviction as a number, for a caller that decides on it (`feedtune layout`): null when not counted.
    const std::optional<double> resident = runner.last_cache_resident_fraction();
    j["cache_resident_fraction"] = resident ? nlohmann::ordered_json(*resident) : nlohmann::ordered_json(nullptr);
    std::cout << j.dump() << "\n";
  } else if (t.status == results::TrialStatus::kOk) {
    PrintTrialText(t, session->device->backend_name());
  }
  if (t.status != results::TrialStatus::kOk) {
    std::cerr << "feedtune: trial failed: " << t.error.value_or("unknown error") << "\n";
    return kExitFailure;
  }
  return kExitOk;
}

}  // namespace

}  // namespace feedtune::cli
