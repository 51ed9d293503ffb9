// The feedtune subcommands. Each takes its own arguments (after the subcommand
// name) and returns the process exit code (docs/architecture.md): 0 ok, 1 a failure at
// run time, 2 bad usage or config, 130 interrupted.
#pragma once

#include <atomic>
#include <string>
#include <vector>

namespace feedtune::cli {

enum ExitCode { kExitOk = 0, kExitFailure = 1, kExitUsage = 2, kExitInterrupted = 130 };

using Args = std::vector<std::string>;

// `stop` is raised by SIGINT/SIGTERM.
int RunSweep(const Args& args, const std::atomic<bool>& stop);
int RunTrial(const Args& args, const std::atomic<bool>& stop);
int RunDiagnose(const Args& args, const std::atomic<bool>& stop);
int RunValidate(const Args& args);
int RunInit(const Args& args);
int RunConfigKeys(const Args& args);
int RunReport(const Args& args);
int RunMachine(const Args& args);
int RunCalibrate(const Args& args);
int RunCompare(const Args& args);
int RunMerge(const Args& args);
int RunExport(const Args& args);
int RunCheck(const Args& args);
int RunObserve(const Args& args);
int RunGenData(const Args& args, const std::atomic<bool>& stop);
int RunInspect(const Args& args);
int RunConvert(const Args& args, const std::atomic<bool>& stop);
int RunLayout(const Args& args, const std::atomic<bool>& stop);
int RunFleet(const Args& args);  // args[0]: slurm | k8s

}  // namespace feedtune::cli
