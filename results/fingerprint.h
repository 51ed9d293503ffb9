// Reads this machine's fingerprint from /proc, /sys, cgroups, sysconf,
// statvfs(/dev/shm) and getrlimit. The filesystem root is a parameter so tests
// can read captured fixtures. GPU fields are filled by the device layer, not here.
#pragma once

#include <string>

#include "results/records.h"

namespace feedtune::results {

// `root` is prepended to every /proc, /sys and /dev/shm path ("" = the live system).
// Limits that only the live process can report (affinity, rlimits, hostname,
// kernel) are read from the live system when root is empty, and from files
// under root (etc/hostname, proc/sys/kernel/osrelease) otherwise.
Fingerprint ReadFingerprint(const std::string& root = "");

}  // namespace feedtune::results
