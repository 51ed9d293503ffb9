// feedtune: finds the PyTorch DataLoader settings that keep the GPU fed.
// Dispatches to the subcommands; installs the SIGINT/SIGTERM handler that lets
// a sweep end its current trial cleanly.
#include <signal.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <string>

#include "loader/device/device.h"
#include "tuner/cli/commands.h"
#include "tuner/cli/version.h"

namespace {

// The one piece of process-wide state: a signal handler can reach nothing else.
std::atomic<bool> g_stop{false};

extern "C" void OnStopSignal(int /*signo*/) { g_stop.store(true); }

void InstallStopHandler() {
  struct sigaction action {};
  action.sa_handler = OnStopSignal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
}

constexpr const char* kUsage = R"(feedtune: find the PyTorch DataLoader settings that keep your GPU fed.

Usage: feedtune <command> [options]     (feedtune <command> --help for details)

Commands:
  sweep CONFIG      run the tuning sequence on this machine and store every trial
                    (baseline -> pin_memory -> num_workers -> non_blocking ->
                     prefetch_factor -> persistent_workers -> multiprocessing_context
                     (Python) -> cpu_binding -> worker_threads; sweep.ranks N:
                     every rank's loader at once)
  trial CONFIG      measure one configuration, no search (--set key=value to vary it)
  diagnose CONFIG   where the time goes at one setting: stage rates, the bottleneck, advice
  validate CONFIG   check a config and print it with every default filled in
  init --script F   a commented config that sweeps your tune.py (feedtune.serve)
  config-keys       every config key: what it takes, its default, its kinds (docs/config.md)
  report            show a stored run as a table, JSON or an HTML page with charts
  compare           machines side by side, per workload (several --db files at once)
  merge OUT IN...   gather the runs of many results files into one
  export            the best settings of a run for a training job (torch, json, yaml, env)
  check             regressions and class outliers in a fleet's results file, and training
                    jobs that do not run as their sweep said (exit 1 when any)
  observe           record what a training job saw (python: feedtune.watch) in a results file
  machine           print this machine's fingerprint
  calibrate         measure this box's torch DataLoader costs, which native sweeps then pay
  gen-data          write a dataset: shards, one file per sample, npy, hdf5 or lmdb
  inspect PATH      what a .npy, HDF5 or LMDB file is, its traps, and a read measurement
  layout PATH       which on-disk layout of a dataset feeds fastest here, cold: a sample
                    written in each, measured over the worker doubling, with payback
  convert SRC DST   write a dataset in another layout (tar, hdf5, npy, lmdb), verified;
                    resumable; feedtune.data.open(DST) reads it in a training job
  fleet slurm|k8s   job files that sweep every node of a cluster and merge the results

Options:
  -h, --help        this help
  --version         the version, the git commit, the compiler and the CUDA backend
                    (the same build string a results file keeps with each run)

Examples:
  feedtune sweep configs/quickstart.yaml
  feedtune report --format json
  feedtune trial configs/quickstart.yaml --set loader.num_workers=4

Exit codes: 0 ok, 1 failure at run time, 2 bad usage or config, 130 interrupted.
)";

}  // namespace

int main(int argc, char** argv) {
  using namespace feedtune::cli;
  if (argc < 2) {
    std::fputs(kUsage, stderr);
    return kExitUsage;
  }
  const std::string command = argv[1];
  const Args args(argv + 2, argv + argc);
  if (command == "-h" || command == "--help" || command == "help") {
    std::fputs(kUsage, stdout);
    return kExitOk;
  }
  if (command == "--version") {
    std::printf("feedtune %s\n", BuildString().c_str());
    if (feedtune::device::CudaCompiledIn()) {
      std::printf("CUDA backend: built in (toolkit %s); host-sim where no GPU is usable\n", kCudaToolkit);
    } else {
      std::printf("CUDA backend: not built (host-sim only)\n");
    }
    return kExitOk;
  }
  InstallStopHandler();
  if (command == "sweep") return RunSweep(args, g_stop);
  if (command == "trial") return RunTrial(args, g_stop);
  if (command == "diagnose") return RunDiagnose(args, g_stop);
  if (command == "validate") return RunValidate(args);
  if (command == "init") return RunInit(args);
  if (command == "config-keys") return RunConfigKeys(args);
  if (command == "report") return RunReport(args);
  if (command == "machine") return RunMachine(args);
  if (command == "calibrate") return RunCalibrate(args);
  if (command == "compare") return RunCompare(args);
  if (command == "merge") return RunMerge(args);
  if (command == "export") return RunExport(args);
  if (command == "check") return RunCheck(args);
  if (command == "observe") return RunObserve(args);
  if (command == "gen-data") return RunGenData(args, g_stop);
  if (command == "inspect") return RunInspect(args);
  if (command == "convert") return RunConvert(args, g_stop);
  if (command == "layout") return RunLayout(args, g_stop);
  if (command == "fleet") return RunFleet(args);
  std::fprintf(stderr, "feedtune: unknown command '%s'; run `feedtune --help` for the list\n", command.c_str());
  return kExitUsage;
}
