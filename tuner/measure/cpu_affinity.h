// Where a rank and its workers run: this process's CPU affinity, the NUMA
// node of each rank's GPU, and the CPUs each cpu_binding gives a rank, read
// from /proc and /sys without starting CUDA; and binding a rank's threads to
// them. Used by the node sweep's ranks (tuner/measure/node_measurer.h) and a
// command's ranks (tuner/measure/command_ranks.h). Stateless functions, safe
// from any thread; BindTrialCpus changes this process's affinity.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "loader/options.h"
#include "tuner/config/config.h"

namespace feedtune::tuner::node {

// Rank `rank`'s CPUs under cpu_binding split: an equal (within one),
// disjoint share of `cpus` (ascending), the shares covering them all. With
// more ranks than CPUs, ranks share: rank r gets cpus[r % size] alone.
std::vector<int> SplitShare(const std::vector<int>& cpus, int rank, int ranks);

// The CPUs of this process's affinity mask, ascending.
std::vector<int> AffinityCpus();

// "0-3,8" (a Cpus_allowed_list or a NUMA node's cpulist) as CPUs, ascending.
std::vector<int> ParseCpuList(const std::string& list);

// The NUMA node of each rank's GPU, -1 where unknown (always on host-sim),
// read without starting CUDA: rank r's GPU is the r-th index of
// CUDA_VISIBLE_DEVICES (else r) among /proc/driver/nvidia/gpus sorted by PCI
// bus id (nvidia-smi's order), and its node is
// /sys/bus/pci/devices/<bus id>/numa_node.
std::vector<int> GpuNumaNodes(const SweepConfig& config, int ranks);

// Rank `rank`'s CPUs under cpu_binding numa: the CPUs of `cpus` on its GPU's
// NUMA node (/sys/devices/system/node/nodeN/cpulist), split equally and
// disjointly among the ranks whose GPUs are on that node. Empty when the node
// is unknown or has none of `cpus`: the caller falls back to split and says so.
std::vector<int> NumaShare(const std::vector<int>& cpus, int rank, const std::vector<int>& gpu_nodes);

// The CPUs rank `rank` and its workers get for a trial with `binding`: all of
// `usable` (none), SplitShare (split), NumaShare or else SplitShare (numa;
// `note` then says why). Exposed for tests.
std::vector<int> BindingCpus(loader::CpuBinding binding, const std::vector<int>& usable, int rank, int ranks,
                             const std::vector<int>& gpu_nodes, std::string* note);

// Binds every thread of this process (the pin thread and the device's own
// run on its CPUs too) and `fork_server` (when > 0), whose workers for the
// next trial inherit its mask. Throws std::system_error naming `binding`
// when this process or the fork server cannot be bound.
void BindTrialCpus(const std::vector<int>& cpus, pid_t fork_server, loader::CpuBinding binding);

}  // namespace feedtune::tuner::node
