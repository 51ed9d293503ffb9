// `feedtune report` and `feedtune machine`: reading stored results and this machine.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <nlohmann/json.hpp>

#include "results/fingerprint.h"
#include "results/report.h"
#include "results/store.h"
#include "tuner/cli/cli_util.h"

namespace feedtune::cli {
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
