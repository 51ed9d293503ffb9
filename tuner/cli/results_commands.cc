// `feedtune report`, `feedtune export` and `feedtune machine`: reading one
// stored run, and this machine.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <functional>
#include <iostream>
#include <nlohmann/json.hpp>

#include "results/background.h"
#include "results/export.h"
#include "results/fleet.h"
#include "loader/device/gpu_probe.h"
#include "results/fingerprint.h"
#include "results/report.h"
#include "results/store.h"
#include "tuner/cli/cli_util.h"

namespace feedtune::cli {
namespace {

// --run N|latest; nullopt (with *ok true) means latest.
std::optional<int64_t> ParseRunId(const std::string& run_arg, bool* ok) {
  *ok = true;
  if (run_arg == "latest") return std::nullopt;
  try {
    size_t used = 0;
    const int64_t id = std::stoll(run_arg, &used);
    if (used == run_arg.size() && id >= 1) return id;
  } catch (const std::exception&) {
  }
  std::cerr << "feedtune: --run must be a run id (a positive integer) or latest, got '" << run_arg
            << "'\n";
  *ok = false;
  return std::nullopt;
}

// Hands the run `run_arg` names (ParseRunId) in the results file `db_path`,
// loaded, to `use` with the store and the id asked for (nullopt: latest).
// Exits kExitUsage for a bad --run, kExitFailure (said) when the file or the
// run cannot be read.
int WithRunView(const std::string& db_path, const std::string& run_arg,
                const std::function<int(const results::Store&, const results::RunView&, std::optional<int64_t>)>& use) {
  bool run_ok = true;
  const std::optional<int64_t> run_id = ParseRunId(run_arg, &run_ok);
  if (!run_ok) return kExitUsage;
  try {
    const results::Store store = results::Store::OpenReadOnly(db_path);
    return use(store, results::LoadRunView(store, run_id), run_id);
  } catch (const results::StoreError& e) {
    std::cerr << "feedtune: " << e.what() << "\n";
    return kExitFailure;
  }
}

// Writes to stdout, or to `out_path` when given; false (after saying why) when it cannot.
bool WriteOutput(const std::string& text, const std::string& out_path) {
  if (out_path.empty()) {
    std::cout << text;
    std::cout.flush();
    return static_cast<bool>(std::cout);
  }
  errno = 0;
  std::FILE* f = std::fopen(out_path.c_str(), "w");
  bool written = f != nullptr && std::fwrite(text.data(), 1, text.size(), f) == text.size();
  const int error = errno;
  if (f != nullptr && std::fclose(f) != 0) written = false;
  if (!written) {
    std::cerr << "feedtune: cannot write " << out_path << ": " << std::strerror(error != 0 ? error : errno)
              << " (check the folder exists and is writable)\n";
  }
  return written;
}

constexpr const char* kReportUsage = R"(Usage: feedtune report [--db FILE] [--run N|latest] [--format table|json|html] [--out FILE]

Shows a stored run: every trial with its phase, knobs, samples/s with its 95%
interval, GPU idle, data wait and the phase's decision; then the knee, the best
config and the speedup. A `feedtune layout` run shows its answer instead:
a row per candidate layout, the named one starred, and why. The JSON form is
a stable interface for scripts; the HTML form is one self-contained page with
charts (opens offline).

Examples:
  feedtune report
  feedtune report --run 3 --format json --out run3.json
  feedtune report --format html --out report.html)";
}  // namespace

int RunReport(const Args& args) {
  po::options_description options("Options");
  std::string db_path, run_arg, format, out_path;
  options.add_options()("help,h", "this help")("db", po::value(&db_path)->default_value(kDefaultDb),
                                               "results file (SQLite)")(
      "run", po::value(&run_arg)->default_value("latest"), "run id, or latest")(
      "format", po::value(&format)->default_value("table"), "table | json | html")(
      "out", po::value(&out_path), "write to this file instead of stdout");
  po::positional_options_description positional;
  int code = kExitOk;
  const auto vm = Parse(args, options, positional, kReportUsage, &code);
  if (!vm) return code;
  if (format != "table" && format != "json" && format != "html") {
    std::cerr << "feedtune: --format must be table, json or html, got '" << format << "'\n";
    return kExitUsage;
  }
  return WithRunView(db_path, run_arg, [&](const results::Store&, const results::RunView& view, auto) {
    const std::string text = format == "json"   ? results::RenderJson(view)
                             : format == "html" ? results::RenderHtml(view)
                                                : results::RenderTable(view);
    return WriteOutput(text, out_path) ? kExitOk : kExitFailure;
  });
}

namespace {
constexpr const char* kExportUsage = R"usage(Usage: feedtune export [--db FILE] [--run N|latest] [--format torch|json|yaml|env] [--out FILE]
       feedtune export --db FILE --workload NAME --machine this [--label NAME] [--format ...]

Prints the best settings of a run in a form a training job takes as it is:
  torch  Python defining DATALOADER_KWARGS (pass to torch.utils.data.DataLoader)
         and NON_BLOCKING (for x.to(device, non_blocking=NON_BLOCKING))
  json   the keys of the report's best.config
  yaml   the same keys, with where they came from as comments
  env    FEEDTUNE_<KEY>=<value> lines (booleans 1/0)
Settings an older torch lacks are noted, never dropped.

--machine this picks, for the machine it runs on, a run of --workload from a
fleet's results file: this host's latest run (same /etc/machine-id, else same
hostname; with --label, also that label), else the latest run of its hardware
class, else the nearest other class's (GPU model, then GPU count, usable CPUs
and memory). The output's first line says which (the "source" key in JSON);
exit 1, with what the file holds, when no run of the workload has a best.

A run marked busy (other processes took CPU beside its sweep, above
sweep.background.warn_cpu: docs/measurement.md) is passed over for a quiet run
of the same host or class, by --machine this and by the default --run latest;
the first line says which run was taken and which was passed over. --run N
exports run N as it is, busy or not (its header says so).

Examples:
  feedtune export --format torch --out feedtune_settings.py
  feedtune export --run 3 --format env >> job.env
  set -a; eval "$(feedtune export --db fleet.db --workload resnet50 --machine this --format env)"; set +a)usage";
}  // namespace

namespace {

// `export` of the latest run, when that run was marked busy (docs/measurement.md):
// the run that stands for its host instead, chosen as `--machine this` chooses
// (a quiet run of the same host, else of its class), with where it came from;
// nullopt when the latest is quiet or nothing quiet stands in for it.
std::optional<std::pair<int64_t, results::ExportSource>> QuietInsteadOfLatest(const results::Store& store,
                                                                               const results::RunRecord& latest,
                                                                               const std::string& db_path) {
  if (!results::IsBusy(latest)) return std::nullopt;
  const std::optional<results::Fingerprint> machine = store.LoadMachine(latest.machine_id);
  if (!machine) return std::nullopt;
  const auto match = results::NearestStoredRun(store, latest.workload_name, *machine, latest.host);
  if (!match || match->busy || match->run.id == latest.id) return std::nullopt;
  results::ExportSource source;
  source.match = results::RunMatchName(match->match);
  source.for_host = latest.host.name;
  source.why = match->Describe() + " (--run " + std::to_string(latest.id) + " exports the busy run anyway)";
  source.db_path = db_path;
  source.run_host = match->run.host.name;
  source.run_class = match->machine_hash;
  return std::make_pair(match->run.id, source);
}

// `export --machine this`: the run that stands for this machine (results/fleet.h).
int ExportForThisMachine(const std::string& db_path, const std::string& workload, const std::string& label,
                         results::ExportFormat format, const std::string& out_path) {
  try {
    const results::Store store = results::Store::OpenReadOnly(db_path);
    const results::Fingerprint fp = MachineFingerprint(label);
    const results::HostIdentity host = results::HostOf(fp);
    const auto match = results::NearestStoredRun(store, workload, fp, host, /*match_name=*/!label.empty());
    if (!match) {
      std::cerr << "feedtune: " << db_path << ": no run of workload '" << workload
                << "' with a best setting; the file holds: " << results::DescribeStoredWorkloads(store)
                << " (sweep it on a machine of the fleet, then merge)\n";
      return kExitFailure;
    }
    const results::RunView view = results::LoadRunView(store, match->run.id);
    results::ExportSource source;
    source.match = results::RunMatchName(match->match);
    source.for_host = host.name;
    source.why = match->Describe();
    source.db_path = db_path;
    source.run_host = match->run.host.name;
    source.run_class = match->machine_hash;
    return WriteOutput(results::RenderExport(view, format, &source), out_path) ? kExitOk : kExitFailure;
  } catch (const results::StoreError& e) {
    std::cerr << "feedtune: " << e.what() << "\n";
    return kExitFailure;
  } catch (const results::ExportError& e) {
    std::cerr << "feedtune: " << db_path << ": " << e.what() << "\n";
    return kExitFailure;
  }
}

}  // namespace

int RunExport(const Args& args) {
  po::options_description options("Options");
  std::string db_path, run_arg, format, out_path;
  std::string machine, workload, label;
  options.add_options()("help,h", "this help")("db", po::value(&db_path)->default_value(kDefaultDb),
                                               "results file (SQLite)")(
      "run", po::value(&run_arg)->default_value("latest"), "run id, or latest")(
      "format", po::value(&format)->default_value("torch"), "torch | json | yaml | env")(
      "out", po::value(&out_path), "write to this file instead of stdout")(
      "machine", po::value(&machine), "this: the setting for the machine it runs on (with --workload)")(
      "workload", po::value(&workload), "the workload's name (with --machine this)")(
      "label", po::value(&label), "this host's label, as its sweeps were given it (with --machine this)");
  po::positional_options_description positional;
  int code = kExitOk;
  const auto vm = Parse(args, options, positional, kExportUsage, &code);
  if (!vm) return code;
  const std::optional<results::ExportFormat> export_format = results::ParseExportFormat(format);
  if (!export_format) {
    std::cerr << "feedtune: --format must be torch, json, yaml or env, got '" << format << "'\n";
    return kExitUsage;
  }
  if (vm->count("machine") > 0) {
    if (machine != "this") {
      std::cerr << "feedtune: --machine takes 'this' (the machine export runs on), got '" << machine << "'\n";
      return kExitUsage;
    }
    if (workload.empty() || !vm->at("run").defaulted()) {
      std::cerr << "feedtune: --machine this needs --workload NAME, and picks the run itself (no --run)\n";
      return kExitUsage;
    }
    return ExportForThisMachine(db_path, workload, label, *export_format, out_path);
  }
  if (!workload.empty() || !label.empty()) {
    std::cerr << "feedtune: --workload and --label go with --machine this; to export one run, use --run N\n";
    return kExitUsage;
  }
  try {
    return WithRunView(db_path, run_arg, [&](const results::Store& store, const results::RunView& view,
                                             std::optional<int64_t> run_id) {
      if (!run_id) {
        if (const auto quiet = QuietInsteadOfLatest(store, view.run, db_path)) {
          return WriteOutput(results::RenderExport(results::LoadRunView(store, quiet->first), *export_format,
                                                   &quiet->second),
                             out_path)
                     ? kExitOk
                     : kExitFailure;
        }
      }
      return WriteOutput(results::RenderExport(view, *export_format), out_path) ? kExitOk : kExitFailure;
    });
  } catch (const results::ExportError& e) {
    std::cerr << "feedtune: " << db_path << ": " << e.what() << "\n";
    return kExitFailure;
  }
}

namespace {
constexpr const char* kMachineUsage = R"(Usage: feedtune machine [--json] [--db FILE] [--no-bandwidth]

Prints this machine's fingerprint: CPU model, logical and usable CPUs (affinity
and cgroup quota), NUMA nodes, memory and cgroup limit, /dev/shm, open-file
limit, kernel, each GPU (name, memory, driver and runtime versions, PCI bus id
and link), and the hash that identifies the machine in results files. With a
CUDA device it also measures the host-to-device bandwidth matrix (pinned vs
pageable, blocking vs non-blocking, 64 KiB to 256 MiB) and the cost of pinning
memory per GiB; --db stores both with the machine.

Examples:
  feedtune machine --json
  feedtune machine --db results/feedtune.db)";
}  // namespace

int RunMachine(const Args& args) {
  po::options_description options("Options");
  std::string db_path;
  options.add_options()("help,h", "this help")("json", "print as one JSON object")(
      "db", po::value(&db_path), "also store the fingerprint (and bandwidth matrix) in this results file")(
      "no-bandwidth", "skip the host-to-device bandwidth measurement on CUDA");
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
                              {"cuda_backend_built", device::CudaCompiledIn()},
                              {"gpu_count", fp.gpu_count}};
  nlohmann::ordered_json gpus = nlohmann::ordered_json::array();
  for (const results::GpuInfo& g : fp.gpus) {
    gpus.push_back({{"name", g.name},
                    {"mem_bytes", g.mem_bytes},
                    {"driver", g.driver},
                    {"runtime", g.runtime},
                    {"pci_bus_id", g.pci_bus_id},
                    {"link", g.link}});
  }
  j["gpus"] = gpus;

  // The bandwidth matrix needs a GPU; without one it is null, with the reason.
  device::BandwidthReport bandwidth;
  std::string no_bandwidth;
  if (vm->count("no-bandwidth")) {
    no_bandwidth = "skipped (--no-bandwidth)";
  } else if (fp.gpu_count == 0) {
    no_bandwidth = device::CudaCompiledIn() ? "no usable CUDA device" : "built without the CUDA backend";
  } else {
    bandwidth = device::MeasureHostToDevice(&no_bandwidth);
  }
  if (bandwidth.points.empty()) {
    j["bandwidth"] = nullptr;
    j["bandwidth_note"] = no_bandwidth;
  } else {
    nlohmann::ordered_json points = nlohmann::ordered_json::array();
    for (const auto& p : bandwidth.points) {
      points.push_back(
          {{"bytes", p.bytes}, {"pinned", p.pinned}, {"non_blocking", p.non_blocking}, {"gb_per_s", p.gb_per_s}});
    }
    j["bandwidth"] = {{"points", points}, {"pin_seconds_per_gib", bandwidth.pin_seconds_per_gib}};
  }

  if (!db_path.empty()) {
    try {
      results::Store store = results::Store::Open(db_path);
      const int64_t machine_id = store.UpsertMachine(fp);
      // What `feedtune calibrate` stored for this host, which native sweeps pay.
      const std::optional<results::TorchCosts> costs = store.LoadTorchCosts(results::HostOf(fp).Key());
      j["torch_costs"] = costs ? results::TorchCostsJson(*costs) : nlohmann::ordered_json();
      if (!costs) j["torch_costs_note"] = "none stored for this host: `feedtune calibrate --db " + db_path + "`";
      if (!bandwidth.points.empty()) {
        std::vector<results::BandwidthRecord> rows;
        for (const auto& p : bandwidth.points) {
          rows.push_back({static_cast<int64_t>(p.bytes), p.pinned, p.non_blocking, p.gb_per_s});
        }
        store.SetBandwidth(machine_id, rows, bandwidth.pin_seconds_per_gib);
      }
    } catch (const results::StoreError& e) {
      std::cerr << "feedtune: " << e.what() << "\n";
      return kExitFailure;
    }
  }
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
