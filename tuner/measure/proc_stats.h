// Resource use of this process and all its descendants (the fork server and the
// worker processes it starts), read from /proc. Cheap enough to call a few
// times per measurement window.
#pragma once

#include <cstdint>

namespace feedtune::tuner {

struct TreeUsage {
  // User + system CPU time of this process and its descendants, live or
  // already reaped (a reaped process's time is in its reaper's cutime/cstime).
  double cpu_s = 0;
  int64_t rss_bytes = 0;  // resident memory of the live processes of the tree
};

TreeUsage ReadTreeUsage();

}  // namespace feedtune::tuner
