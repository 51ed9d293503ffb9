// Resource use of this process and all its descendants (the fork server and the
// worker processes it starts), read from /proc. Cheap enough to call a few
// times per measurement window.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>

namespace feedtune::tuner {

struct TreeUsage {
  // User + system CPU time of this process and its descendants, live or
  // already reaped (a reaped process's time is in its reaper's cutime/cstime).
  double cpu_s = 0;
  int64_t rss_bytes = 0;  // resident memory of the live processes of the tree
};

TreeUsage ReadTreeUsage();

// One process's private resident memory: /proc/PID/statm's resident less its
// shared pages (mapped files and shared memory, e.g. the loader's batch slots,
// which are counted apart and are not the process's own). One small read, a
// few microseconds; nullopt when the process is gone. `pid` 0 is this process.
std::optional<int64_t> ReadPrivateRss(pid_t pid);

}  // namespace feedtune::tuner
