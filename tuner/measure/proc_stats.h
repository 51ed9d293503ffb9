// Resource use of this process and all its descendants (the fork server and the
// worker processes it starts), read from /proc, and of the other processes on
// the box (the busy CPU beside a trial, its top consumers). Cheap enough to
// call a few times per measurement window.
#pragma once

#include <dirent.h>
#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "results/records.h"

namespace feedtune::tuner {

struct TreeUsage {
  // User + system CPU time of this process and its descendants, live or
  // already reaped (a reaped process's time is in its reaper's cutime/cstime).
  double cpu_s = 0;
  int64_t rss_bytes = 0;  // resident memory of the live processes of the tree
};

// `root` 0: this process. Another root (a node rank's parent, the tuner)
// counts that process and its descendants instead.
TreeUsage ReadTreeUsage(pid_t root = 0);

// Hands each process below `root` (its children, theirs, ...) to `visit`, as
// `read(pid, &value)` read it from /proc (`pid` the /proc entry's name; false:
// skip it). Value has `ppid`, the parent it is walked from; each process's
// files are read once, all of them before the walk.
template <typename Value, typename Read, typename Visit>
void ForEachDescendant(long root, Read read, Visit visit) {
  std::multimap<long, std::pair<long, Value>> by_parent;
  if (DIR* dir = opendir("/proc")) {
    while (dirent* entry = readdir(dir)) {
      if (entry->d_name[0] < '1' || entry->d_name[0] > '9') continue;
      Value value;
      if (read(entry->d_name, &value)) by_parent.emplace(value.ppid, std::make_pair(std::atol(entry->d_name), value));
    }
    closedir(dir);
  }
  std::vector<long> parents = {root};
  while (!parents.empty()) {
    const long parent = parents.back();
    parents.pop_back();
    auto [first, last] = by_parent.equal_range(parent);
    for (auto it = first; it != last; ++it) {
      visit(it->second.second);
      parents.push_back(it->second.first);
    }
  }
}

// One process's private resident memory: /proc/PID/statm's resident less its
// shared pages (mapped files and shared memory, e.g. the loader's batch slots,
// which are counted apart and are not the process's own). One small read, a
// few microseconds; nullopt when the process is gone. `pid` 0 is this process.
std::optional<int64_t> ReadPrivateRss(pid_t pid);

// Other processes' CPU (docs/measurement.md, "A busy box"): the box's busy
// CPU over an interval less the CPU this process tree took in it.
//
// Where the box's busy CPU is read: /proc/stat's first line (user, nice,
// system, irq, softirq and steal: everything but idle and iowait), or, when
// this process runs in a cgroup that has a CPU quota (a container, a Slurm
// job, a Kubernetes pod), that cgroup's usage (v2 cpu.stat usage_usec, v1
// cpuacct.usage): what shares the quota is what competes with the trial.
struct BoxCpuSource {
  std::string path;     // the file read: "/proc/stat", or the cgroup's
  bool cgroup = false;  // a cgroup usage file rather than /proc/stat
};

// The source for this process, found under `root` ("/" on a real box; a
// folder of recorded files in tests).
BoxCpuSource FindBoxCpuSource(const std::string& root = "/");

// Busy CPU seconds since boot from /proc/stat's text (clock ticks of
// `ticks_per_s`); nullopt when the text has no "cpu " line.
std::optional<double> ParseProcStatBusy(std::string_view text, double ticks_per_s);
// CPU seconds from a cgroup's usage file: v2 cpu.stat's usage_usec line, or
// v1 cpuacct.usage's one number of nanoseconds; nullopt when neither.
std::optional<double> ParseCgroupUsage(std::string_view text);
// The source's busy CPU seconds now; nullopt when it cannot be read.
std::optional<double> ReadBoxBusy(const BoxCpuSource& source);

// One reading at one moment: the box's busy CPU seconds, the tree's, and the
// steady clock in seconds.
struct CpuReading {
  double box_busy_s = 0;
  double tree_cpu_s = 0;
  double wall_s = 0;
};

// The CPUs other processes took between two readings: (box busy - tree) /
// wall, never below 0 (the box and the tree are read a moment apart, so a
// quiet box can read a hair below its tree); NaN when no time passed.
double BackgroundCpu(const CpuReading& before, const CpuReading& after);

// One process's CPU seconds so far (its own threads, not its reaped
// children's: those are counted where they ran) and its command name.
struct ProcessTimes {
  int64_t pid = 0;
  int64_t ppid = 0;
  std::string name;
  double cpu_s = 0;
};

// Every process of the box now, from /proc/PID/stat.
std::vector<ProcessTimes> ReadProcessTimes();

// The processes that took the most CPU between two snapshots, `wall_s`
// apart, by name (processes of one name summed), largest first, at most
// `count`, and only those that took 0.01 CPU or more. Processes in `exclude`
// (the sweep's own tree) are left out; a process in `after` alone counts
// from its start.
std::vector<results::ProcessCpu> TopConsumers(const std::vector<ProcessTimes>& before,
                                              const std::vector<ProcessTimes>& after, double wall_s,
                                              const std::vector<int64_t>& exclude, size_t count = 3);

// The pids of this process's tree (it and its descendants) in `processes`.
std::vector<int64_t> TreePids(const std::vector<ProcessTimes>& processes, int64_t root);

// What other processes took over `seconds` (slept, in steps, so `stop`
// ends it early): the box's source, their CPUs, and the top consumers.
struct BackgroundSample {
  BoxCpuSource source;
  double seconds = 0;  // as measured
  double cpu = 0;      // NaN when the source could not be read
  std::vector<results::ProcessCpu> top;
};
// `top`: how many consumers to name.
BackgroundSample SampleBackground(double seconds, const std::atomic<bool>* stop = nullptr, size_t top = 5);

// Reads the box and the tree as one reading (the box around the tree).
class BackgroundMeter {
 public:
  explicit BackgroundMeter(BoxCpuSource source, pid_t tree_root = 0)
      : source_(std::move(source)), tree_root_(tree_root) {}
  // nullopt when the box cannot be read.
  std::optional<CpuReading> Read() const;
  // With the tree's usage it read, for callers that need both.
  std::optional<CpuReading> Read(TreeUsage* usage) const;
  const BoxCpuSource& source() const { return source_; }
  pid_t tree_root() const { return tree_root_; }

 private:
  BoxCpuSource source_;
  pid_t tree_root_;
};

}  // namespace feedtune::tuner
