// FaultInjector: makes a dataset fail on purpose when it reads one sample, to
// drill the loader's failure handling (docs/architecture.md) and the tuner's.
//
//   throw  throws std::runtime_error("injected fault at sample N"), anywhere
//   exit   _exit(3)            } only inside a worker process: in the process
//   abort  abort()             } that built the dataset (num_workers 0, or
//   segv   raise(SIGSEGV)      } thread-mode workers) they throw instead, saying
//   hang   sleeps for an hour  } so, so feedtune itself never dies or hangs
//
// "Inside a worker" means a process other than the one that constructed the
// injector (its pid is recorded then); forked workers inherit the object.
// Immutable after construction; OnRead is safe from any thread.
#pragma once

#include <sys/types.h>

#include <cstdint>

#include "workloads/options.h"

namespace feedtune::workloads {

class FaultInjector {
 public:
  explicit FaultInjector(const FaultOptions& options);

  // Acts if `index` is the configured sample; otherwise does nothing.
  void OnRead(int64_t index) const;

 private:
  const FaultOptions options_;
  const pid_t owner_pid_;
};

}  // namespace feedtune::workloads
