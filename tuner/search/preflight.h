// Preflight: what on this node would make a node sweep wrong or crash it,
// said before the first trial, each warning with its fix (docs/node-sweep.md).
// The sweep prints them and stores them with the run ("preflight" in the
// run's JSON). Checks:
//   - the CPU mask is narrower than the CPUs the machine (or its cgroup
//     cpuset) offers: a launcher or library narrowed it, and workers inherit it;
//   - more ranks than usable CPUs: under a split binding ranks share cores;
//   - /dev/shm too small for ranks x the slots of one worker (Docker: 64 MB);
//   - the open-file limit below what ranks x workers need;
//   - more ranks than visible GPUs (unless host-sim was asked for).
// Preflight() is pure; ReadPreflightFacts() reads this process's view.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tuner/search/budget.h"
#include "tuner/config/config.h"

namespace feedtune::tuner::node {

struct PreflightFacts {
  int mask_cpus = 0;          // CPUs in this process's affinity mask
  std::string mask_list;      // the mask as Cpus_allowed_list ("0-3,8")
  int offered_cpus = 0;       // the cgroup's effective cpuset, else the online CPUs
  int64_t shm_bytes = 0;      // size of /dev/shm; 0 = unknown
  int64_t nofile_soft = 0;    // RLIMIT_NOFILE; 0 = unlimited or unknown
  int64_t nofile_hard = 0;
  int gpus = -1;              // visible GPUs (no CUDA started); -1 = unknown
};

PreflightFacts ReadPreflightFacts();

// `ranks`: resolved (ResolveRanks); `batch_bytes`: one slot (0 = unknown:
// the /dev/shm check is skipped).
std::vector<std::string> Preflight(const SweepConfig& config, int ranks, int64_t batch_bytes,
                                   const PreflightFacts& facts);

// Budgets that count all ranks: the budget gate (tuner/search/budget.h) models one
// loader, so each rank gets 1/ranks of the node's memory, /dev/shm and CPUs
// (the open-file limit is per process: each rank has its own). A node trial's
// peak_rss_bytes is its largest rank's, so the per-worker memory the budget
// learns stays one rank's.
void ShareBudget(int ranks, BudgetFacts* facts);

}  // namespace feedtune::tuner::node
