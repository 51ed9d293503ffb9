#include "tuner/cli/setting_budget.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <optional>
#include <vector>

#include "results/store.h"
#include "tuner/measure/kill_cause.h"
#include "tuner/measure/node_measurer.h"
#include "tuner/measure/proc_stats.h"
#include "tuner/search/budget.h"
#include "tuner/search/preflight.h"

namespace feedtune::cli {
namespace {

// The trials of the newest run of this machine and workload in `db_path`;
// empty when the file, the machine or such a run is not there. A file that
// cannot be read costs only the measured figure: the estimate stands in.
std::vector<results::TrialRecord> StoredTrials(const std::string& db_path, const std::string& machine_hash,
                                               const std::string& workload_hash, std::string* note) {
  std::error_code error;
  if (db_path.empty() || !std::filesystem::exists(db_path, error)) return {};
  try {
    const results::Store store = results::Store::OpenReadOnly(db_path);
    std::optional<int64_t> machine_id;
    for (const results::StoredMachine& m : store.LoadMachines()) {
      if (m.hash == machine_hash) machine_id = m.id;
    }
    if (!machine_id) return {};
    const std::vector<results::RunRecord> runs = store.LoadRuns();
    for (auto run = runs.rbegin(); run != runs.rend(); ++run) {
      if (run->machine_id == *machine_id && run->workload_hash == workload_hash) return store.LoadTrials(run->id);
    }
  } catch (const results::StoreError& e) {
    *note = std::string("the worker memory measured before could not be read: ") + e.what();
  }
  return {};
}

}  // namespace

bool SettingFitsBudgets(const Session& session, const loader::Knobs& knobs, const std::string& db_path, bool force,
                        const std::string& command, int* exit_code, std::string* refusal) {
  const tuner::SweepConfig& config = session.config;
  const results::Fingerprint machine = MachineFingerprint("");
  const loader::Dataset* dataset = session.workload.dataset.get();
  const int64_t batch_bytes = dataset != nullptr ? knobs.batch_size * dataset->max_sample_bytes() : 0;
  tuner::BudgetFacts facts = tuner::ReadBudgetFacts(machine.cgroup_mem_limit_bytes, machine.usable_cpus, batch_bytes);
  if (dataset != nullptr && dataset->num_shards() > 0) {
    facts.stream_buffer_bytes = config.loader.shuffle_buffer * dataset->max_sample_bytes();
  }
  tuner::node::ShareBudget(tuner::node::ResolveRanks(config), &facts);
  std::string read_note;
  const std::vector<results::TrialRecord> stored =
      StoredTrials(db_path, machine.Hash(), tuner::WorkloadHash(config), &read_note);
  if (!read_note.empty()) std::cerr << "feedtune: note: " << read_note << "\n";
  const bool command_workload = config.workload.kind == workloads::WorkloadKind::kCommand;
  const tuner::SettingCheck check = tuner::CheckSetting(
      facts, config.sweep.budget, command_workload ? tuner::WorkerMemory::kReported : tuner::WorkerMemory::kProcessTree,
      stored, tuner::ReadTreeUsage().rss_bytes, knobs);
  if (!check.not_applied.empty()) std::cerr << "feedtune: note: " << check.not_applied << "\n";
  if (check.prediction.ok) return true;
  if (force) {
    std::cerr << "feedtune: warning: --force: running over a budget: " << check.refusal << "\n";
    return true;
  }
  std::cerr << "feedtune: " << command << " refused: " << check.refusal
            << ". Lower prefetch_factor, num_workers or batch_size (--set loader.num_workers=N), "
               "or pass --force to run it anyway\n";
  *exit_code = kExitUsage;
  if (refusal != nullptr) *refusal = check.refusal;
  return false;
}

int RunSupervised(const std::function<int()>& body, const std::atomic<bool>& stop, const std::string& command) {
  const tuner::OomWatch oom;
  std::fflush(nullptr);  // what is buffered is printed once, not by both processes
  const pid_t pid = fork();
  if (pid < 0) {
    // No supervisor: the measurement itself still runs.
    return body();
  }
  if (pid == 0) {
    const int code = body();
    std::fflush(nullptr);
    _exit(code);
  }
  int status = 0;
  bool passed_on = false;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) {
      std::cerr << "feedtune: " << command << ": lost the measuring process (pid " << pid
                << "): waitpid: " << std::strerror(errno) << "\n";
      return kExitFailure;
    }
    // Ctrl-C reaches both processes; a SIGTERM sent to this one alone is
    // passed on, so the child ends its trial cleanly (exit 130).
    if (stop.load() && !passed_on) {
      kill(pid, SIGTERM);
      passed_on = true;
    }
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  const int signal = WTERMSIG(status);
  const char* abbrev = sigabbrev_np(signal);
  std::string how = "killed by signal " + std::to_string(signal) + (abbrev ? std::string(" (SIG") + abbrev + ")" : "");
  if (signal == SIGKILL) how += "; " + oom.Explain();
  std::cerr << "feedtune: " << command << " failed: the measuring process (pid " << pid << ") was " << how << "\n";
  return kExitFailure;
}

}  // namespace feedtune::cli
