// What a rank process runs on, read from /proc: its CPU mask, the masks of its
// fork server and workers, how many processes and threads its tree holds, and
// the shared-memory batch slots it maps. A rank reads these at the end of each
// window, while its workers exist; the tuner reads its own part of the node.
#pragma once

#include <cstdint>
#include <string>
#include <sys/types.h>

namespace feedtune::tuner::node {

struct TreeFacts {
  std::string cpu_mask;          // Cpus_allowed_list of the process itself
  std::string worker_cpu_masks;  // of its descendants: the distinct lists, "; "-separated
  int processes = 0;             // itself and its descendants
  int threads = 0;
  int64_t shm_bytes = 0;         // memfd mappings of the process itself
};

// Facts of process `pid` and every process below it.
TreeFacts ReadTreeFacts(pid_t pid);

// The Cpus_allowed_list of process `pid` ("0-3,8"); empty when it is gone.
std::string CpuListOfProcess(pid_t pid);

// The threads of the calling process (/proc/self/task): the tuner's own part of the node.
int OwnThreads();

// The GPUs CUDA would show this process, counted without starting CUDA
// (/proc/driver/nvidia/gpus, narrowed by CUDA_VISIBLE_DEVICES).
int VisibleGpuCount();

}  // namespace feedtune::tuner::node
