// The sweep's budgets (tuner/search/budget.h) for the one setting `trial` and
// `diagnose` measure, checked before any loader of it starts; and the
// supervision that names a `trial` killed by the kernel.
#pragma once

#include <atomic>
#include <functional>
#include <string>

#include "loader/options.h"
#include "tuner/cli/cli_util.h"

namespace feedtune::cli {

// Checks `knobs` of the opened session against the memory, /dev/shm and
// open-file budgets. The per-worker memory is the one the newest run of this
// host and workload in `db_path` measured, when the file has one, else an
// estimate it states. Prints a note for a budget it cannot apply. Returns
// true when the setting may run: it fits, or `force` (said on stderr);
// otherwise prints the refusal with the arithmetic and the fix, and sets
// `*exit_code` to kExitUsage, and `*refusal` (when given) to the refusal's
// arithmetic, for a caller that reports it as data (`trial --json`).
bool SettingFitsBudgets(const Session& session, const loader::Knobs& knobs, const std::string& db_path, bool force,
                        const std::string& command, int* exit_code, std::string* refusal = nullptr);

// Runs `body` in a child process and returns its exit code, so that a
// SIGKILL of the measuring process (the kernel's OOM killer picks the
// largest) is said on stderr with its cause, exit 1, instead of a silent
// death. SIGINT/SIGTERM sent to this process are passed on. Call while this
// process has one thread.
int RunSupervised(const std::function<int()>& body, const std::atomic<bool>& stop, const std::string& command);

}  // namespace feedtune::cli
