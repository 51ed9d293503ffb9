// Reads this machine's fingerprint from /proc, /sys, cgroups, sysconf,
// statvfs(/dev/shm) and getrlimit, and the OOM killer's count for this
// process's cgroup. The filesystem root is a parameter so tests can read
// captured fixtures. GPU fields are filled by the device layer, not here.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "results/records.h"

namespace feedtune::results {

// `root` is prepended to every /proc, /sys and /dev/shm path ("" = the live system).
// Limits that only the live process can report (affinity, rlimits, hostname,
// kernel) are read from the live system when root is empty, and from files
// under root (etc/hostname, proc/sys/kernel/osrelease) otherwise.
Fingerprint ReadFingerprint(const std::string& root = "");

// The host identity of a fingerprint: its label (else hostname) and machine-id
// (which ReadFingerprint reads from etc/machine-id, else var/lib/dbus/machine-id).
HostIdentity HostOf(const Fingerprint& fingerprint);

// Fills the GPU fields from what the device layer reports (results never
// queries CUDA itself): `gpus` in full, and the summary fields (name, count,
// memory, driver, runtime, link) from GPU 0. An empty list clears them.
// The machine hash covers name, count and memory, so adding a GPU or swapping
// it for another model makes a new machine.
void SetGpus(Fingerprint* fingerprint, const std::vector<GpuInfo>& gpus);

// How many processes of this process's memory cgroup the kernel's OOM killer
// has killed, and the file that says so: cgroup v2's memory.events (its
// oom_kill counts a kill by any OOM killer, the box's or the cgroup's limit,
// of a process in this cgroup or below), else v1's memory.oom_control.
struct OomKills {
  int64_t count = 0;
  std::string file;
};
// nullopt when no such file is readable (no memory controller, an older
// kernel without the oom_kill field). `root` as for ReadFingerprint.
std::optional<OomKills> ReadOomKills(const std::string& root = "");

}  // namespace feedtune::results
