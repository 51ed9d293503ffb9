#include "tuner/cli/cli_util.h"

#include <ctime>
#include <iostream>

#include "loader/device/gpu_probe.h"
#include "results/fingerprint.h"
#include "tuner/cli/install_paths.h"

namespace feedtune::cli {

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

results::Fingerprint MachineFingerprint(const std::string& label) {
  results::Fingerprint fp = results::ReadFingerprint();
  fp.label = label.empty() ? fp.hostname : label;
  // The GPUs come from the device layer; none without CUDA or without a driver.
  std::string why_none;
  std::vector<results::GpuInfo> gpus;
  for (const device::GpuDescription& g : device::DescribeGpus(&why_none)) {
    gpus.push_back({g.name, g.mem_bytes, g.driver, g.runtime, g.pci_bus_id, g.link});
  }
  results::SetGpus(&fp, gpus);
  return fp;
}

bool OpenWorkloadOrExplain(const tuner::SweepConfig& config, tuner::OpenedWorkload* workload, int* exit_code) {
  try {
    *workload = tuner::OpenWorkload(config);
    return true;
  } catch (const tuner::WorkloadError& e) {
    std::cerr << "feedtune: " << e.what() << "\n";
    *exit_code = kExitUsage;
  } catch (const std::exception& e) {
    std::cerr << "feedtune: cannot open the workload: " << e.what() << "\n";
    *exit_code = kExitFailure;
  }
  return false;
}

std::optional<Session> OpenSession(const std::string& path, const std::vector<std::string>& overrides,
                                   int* exit_code) {
  Session s;
  try {
    s.config = tuner::LoadConfig(ResolveDataPath(path));
    for (const auto& o : overrides) tuner::ApplyOverride(s.config, o);
    ResolveCommandPaths(s.config);
  } catch (const tuner::ConfigError& e) {
    std::cerr << "feedtune: " << e.what() << "\n";
    *exit_code = kExitUsage;
    return std::nullopt;
  }
  if (!OpenWorkloadOrExplain(s.config, &s.workload, exit_code)) return std::nullopt;
  try {
    std::string note;
    s.device = device::CreateDevice(s.config.device, &note);
    if (!note.empty()) std::cerr << "feedtune: " << note << "\n";
  } catch (const device::DeviceError& e) {
    std::cerr << "feedtune: " << e.what() << "\n";
    *exit_code = kExitUsage;
    return std::nullopt;
  }
  return s;
}

}  // namespace feedtune::cli
