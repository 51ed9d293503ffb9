#include "workloads/fault.h"

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <thread>

namespace feedtune::workloads {

FaultInjector::FaultInjector(const FaultOptions& options) : options_(options), owner_pid_(getpid()) {}

void FaultInjector::OnRead(int64_t index) const {
  if (options_.kind == FaultKind::kNone || index != options_.at_sample) return;
  const std::string where = "injected fault at sample " + std::to_string(index);
  if (options_.kind == FaultKind::kThrow) throw std::runtime_error(where);
  if (getpid() == owner_pid_) {
    throw std::runtime_error(where + " (fault kind '" + FaultKindName(options_.kind) +
                             "' is simulated as an exception outside a worker process, so feedtune "
                             "itself does not die; use process-mode workers to see the real thing)");
  }
  switch (options_.kind) {
    case FaultKind::kExit:
      _exit(3);
    case FaultKind::kAbort:
      std::abort();
    case FaultKind::kSegv:
      signal(SIGSEGV, SIG_DFL);  // die by the signal even where a sanitizer handles it
      raise(SIGSEGV);
      _exit(128 + SIGSEGV);  // only if SIGSEGV is blocked or ignored
    case FaultKind::kHang:
      // loader.timeout_s turns this into an error; the loader then kills the worker.
      std::this_thread::sleep_for(std::chrono::hours(1));
      throw std::runtime_error(where + " (hung for an hour)");
    case FaultKind::kNone:
    case FaultKind::kThrow:
      break;
  }
}

}  // namespace feedtune::workloads
