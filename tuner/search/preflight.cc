#include "tuner/search/preflight.h"

#include <sched.h>
#include <sys/resource.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "results/units.h"
#include "tuner/measure/rank_facts.h"

namespace feedtune::tuner::node {
namespace {

// The CPUs of a list such as "0-3,8,10-11".
int CountCpuList(const std::string& list) {
  int count = 0;
  std::stringstream in(list);
  for (std::string item; std::getline(in, item, ',');) {
    int lo = 0, hi = 0;
    const int n = std::sscanf(item.c_str(), "%d-%d", &lo, &hi);
    if (n == 2 && hi >= lo) count += hi - lo + 1;
    else if (n == 1) count += 1;
  }
  return count;
}

using results::MiB;

}  // namespace

PreflightFacts ReadPreflightFacts() {
  PreflightFacts f;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) f.mask_cpus = CPU_COUNT(&set);
  f.mask_list = CpuListOfProcess(getpid());
  std::ifstream cpuset("/sys/fs/cgroup/cpuset.cpus.effective");
  std::string list;
  if (std::getline(cpuset, list) && !list.empty()) f.offered_cpus = CountCpuList(list);
  if (f.offered_cpus == 0) f.offered_cpus = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  struct statvfs vfs {};
  if (statvfs("/dev/shm", &vfs) == 0) f.shm_bytes = static_cast<int64_t>(vfs.f_blocks) * vfs.f_frsize;
  struct rlimit limit {};
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0) {
    if (limit.rlim_cur != RLIM_INFINITY) f.nofile_soft = static_cast<int64_t>(limit.rlim_cur);
    if (limit.rlim_max != RLIM_INFINITY) f.nofile_hard = static_cast<int64_t>(limit.rlim_max);
  }
  f.gpus = VisibleGpuCount();
  return f;
}

std::vector<std::string> Preflight(const SweepConfig& config, int ranks, int64_t batch_bytes,
                                   const PreflightFacts& f) {
  std::vector<std::string> out;
  if (f.mask_cpus > 0 && f.offered_cpus > f.mask_cpus) {
    out.push_back("CPU mask: feedtune may use " + std::to_string(f.mask_cpus) + " of the " +
                  std::to_string(f.offered_cpus) + " CPUs this machine offers (Cpus_allowed_list " + f.mask_list +
                  "): a launcher or library (taskset, numactl, an OpenMP or launcher binding) narrowed it, and "
                  "every rank and worker inherits it; unless that is meant, start feedtune with the full mask "
                  "(e.g. taskset -c 0-" + std::to_string(f.offered_cpus - 1) + " feedtune ...)");
  }
  if (ranks > 1 && f.mask_cpus > 0 && ranks > f.mask_cpus) {
    out.push_back("ranks: " + std::to_string(ranks) + " ranks on " + std::to_string(f.mask_cpus) +
                  " usable CPUs: an equal, disjoint split of the CPUs is impossible, so ranks share cores under "
                  "cpu_binding split; use at most " + std::to_string(f.mask_cpus) + " ranks or more CPUs");
  }
  // The least a trial with workers holds per rank: one worker's
  // prefetch_factor slots plus the one the consumer holds.
  const int64_t slots = config.loader.knobs.prefetch_factor + 1;
  const int64_t need = static_cast<int64_t>(ranks) * slots * batch_bytes;
  if (batch_bytes > 0 && f.shm_bytes > 0 && need > f.shm_bytes) {
    out.push_back("/dev/shm: " + MiB(f.shm_bytes) + ", but " + std::to_string(ranks) + " rank(s) x " +
                  std::to_string(slots) + " slots x " + MiB(batch_bytes) + " need " + MiB(need) +
                  " even with one worker each; trials that do not fit are skipped. In Docker (64 MB by "
                  "default) start the container with --shm-size=" + std::to_string(((need * 4) >> 20) + 1) +
                  "m or more");
  }
  const int64_t workers = config.sweep.max_workers > 0 ? config.sweep.max_workers : 64;
  // Per rank: its fork server and loader, and a few descriptors per worker
  // (pipes, the slot arena, the dataset's files).
  const int64_t fds = static_cast<int64_t>(ranks) * (64 + 8 * workers);
  if (f.nofile_soft > 0 && f.nofile_soft < fds) {
    out.push_back("open files: the soft limit is " + std::to_string(f.nofile_soft) + ", and " +
                  std::to_string(ranks) + " rank(s) with up to " + std::to_string(workers) +
                  " workers each may need about " + std::to_string(fds) + "; raise it with ulimit -n " +
                  (f.nofile_hard > 0 ? std::to_string(f.nofile_hard) + " (the hard limit)" : std::to_string(fds)) +
                  ", or lower sweep.max_workers");
  }
  // A command's ranks pick their own device (the probe: its GPU when there is
  // one, else the CPU over gloo); device.backend is feedtune's own device.
  const bool command = config.workload.kind == workloads::WorkloadKind::kCommand;
  if (ranks > 1 && (command || config.device.backend != device::BackendChoice::kHostSim) && f.gpus >= 0 &&
      ranks > f.gpus) {
    std::string what;
    if (f.gpus > 0) {
      what = "ranks beyond " + std::to_string(f.gpus) + " share a GPU; set sweep.ranks to the GPU count";
    } else if (command) {
      what = "each rank of the command runs without one (feedtune_probe.py trains on the CPU over gloo), so "
             "GPU idle is not measured; fine for trying the ranks out, else run on the GPU node";
    } else {
      what = "every rank runs on a host-sim device; set sweep.ranks to the GPU count, or device.backend: "
             "host-sim to mean it";
    }
    out.push_back("GPUs: " + std::to_string(ranks) + " ranks but " + std::to_string(f.gpus) + " GPU(s) visible: " +
                  what);
  }
  return out;
}

void ShareBudget(int ranks, BudgetFacts* facts) {
  if (ranks <= 1) return;
  facts->mem_available_bytes /= ranks;
  facts->shm_free_bytes /= ranks;
  facts->usable_cpus /= ranks;
}

}  // namespace feedtune::tuner::node
