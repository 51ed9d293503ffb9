#include "tuner/cli/cli_util.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <ctime>
#include <iostream>

#include "loader/device/gpu_probe.h"
#include "results/fingerprint.h"
#include "results/store.h"
#include "tuner/cli/install_paths.h"

extern char** environ;

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

void AddConfigOptions(po::options_description& options, po::positional_options_description& positional,
                      std::string* config_path, std::vector<std::string>* sets) {
  options.add_options()("help,h", "this help")("config", po::value(config_path)->required(), "the config (YAML)")(
      "set", po::value(sets)->composing(), "override a config key: key.path=value (repeatable)");
  positional.add("config", 1);
}

int UsageError(const std::string& command, const std::string& what) {
  std::cerr << "feedtune " << command << ": " << what << "\n";
  return kExitUsage;
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

bool OpenWorkloadOrExplain(const tuner::SweepConfig& config, tuner::OpenedWorkload* workload, int* exit_code,
                           const results::TorchCosts* torch_costs) {
  try {
    *workload = tuner::OpenWorkload(config, torch_costs);
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

bool PaysTorchCosts(const tuner::SweepConfig& config) {
  return config.workload.kind != workloads::WorkloadKind::kCommand &&
         config.workload.synthetic.torch_costs == workloads::TorchCostsMode::kAuto;
}

std::optional<results::TorchCosts> StoredTorchCosts(const tuner::SweepConfig& config, const std::string& db_path,
                                                    std::string* note) {
  note->clear();
  if (!PaysTorchCosts(config)) return std::nullopt;
  const std::string host = results::HostOf(results::ReadFingerprint()).Key();
  std::optional<results::TorchCosts> costs;
  if (!db_path.empty() && std::filesystem::exists(db_path)) {
    try {
      costs = results::Store::OpenReadOnly(db_path).LoadTorchCosts(host);
    } catch (const results::StoreError&) {
      return std::nullopt;  // no note: the command's own use of the file says what is wrong with it
    }
  }
  if (!costs) {
    *note = "the figures are the native core's: " + db_path + " holds no torch costs for this host (`feedtune " +
            "calibrate --db " + db_path + "` measures them in about 10 s, so that a native sweep names what a " +
            "torch job would run best)";
  }
  return costs;
}

std::optional<Session> OpenSession(const std::string& path, const std::vector<std::string>& overrides,
                                   int* exit_code, const std::string& torch_costs_db) {
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
  std::optional<results::TorchCosts> costs;
  if (!torch_costs_db.empty()) {
    std::string note;
    costs = StoredTorchCosts(s.config, torch_costs_db, &note);
    if (!note.empty()) std::cerr << "feedtune: " << note << "\n";
  }
  if (!OpenWorkloadOrExplain(s.config, &s.workload, exit_code, costs ? &*costs : nullptr)) return std::nullopt;
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

int RunCapturing(const std::vector<std::string>& argv, std::string* out, const std::string& stderr_path) {
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) return -1;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], STDOUT_FILENO);
  if (!stderr_path.empty()) {
    posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  }
  std::vector<char*> c_argv;
  for (const std::string& a : argv) c_argv.push_back(const_cast<char*>(a.c_str()));
  c_argv.push_back(nullptr);
  pid_t pid = 0;
  const int spawn_error = posix_spawnp(&pid, c_argv[0], &actions, nullptr, c_argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(pipe_fds[1]);
  if (spawn_error != 0) {
    close(pipe_fds[0]);
    errno = spawn_error;
    return -1;
  }
  char buf[4096];
  ssize_t n = 0;
  while ((n = read(pipe_fds[0], buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR)) {
    if (n > 0) out->append(buf, static_cast<size_t>(n));
  }
  close(pipe_fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace feedtune::cli
