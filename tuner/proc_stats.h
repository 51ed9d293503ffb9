// Resource use of this process and its children (the worker processes), read
// from /proc. Cheap enough to call a few times per measurement window.
#pragma once

#include <cstdint>

namespace feedtune::tuner {

struct TreeUsage {
  double cpu_s = 0;         // user + system CPU time of this process and its children, live or reapeduser + system CPU time of this process and its live children
  int64_t rss_bytes = 0;    // resident memory of the same processes
};

TreeUsage ReadTreeUsage();

}  // namespace feedtune::tuner
