// Command workloads with ranks (sweep.ranks: N > 1, workload.kind: command,
// workload.protocol: run): each repeat of a trial starts N processes of the
// command at once, as `torchrun --nproc_per_node N` would, and the trial is
// the node's aggregate, as a native node trial's (rank_aggregate.h).
//
// Rank r gets the environment torch.distributed's env:// init reads (RANK,
// LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR=127.0.0.1 and a
// MASTER_PORT free at that moment), the {rank} and {world_size} placeholders
// in its argv (workloads/command_args.h), and, with sweep.cpu_binding split,
// its SplitShare of the CPUs as its affinity from the start: the spawning
// thread takes the share just around posix_spawn, so the child has it before
// exec and every thread and worker it makes inherits it.
//
// feedtune starts the ranks itself rather than through torchrun: it needs
// each rank's own stdout line, exit status and stderr, and Debian's torch 1.13
// torchrun fails under Python 3.11 unless given --redirects/--tee.
//
// A rank that exits non-zero, is killed, prints no valid result line, or
// does not finish within workload.timeout_s fails the trial naming the rank,
// its pid, the cause and its stderr tail; the other ranks are killed at once
// (each rank is its own process group, its DataLoader workers go with it), so
// no rank is left waiting in a collective for the process group's timeout.
//
// Threading: one thread calls MeasureCommandRanks at a time.
#pragma once

#include <atomic>
#include <string>
#include <vector>

#include "results/records.h"
#include "tuner/config/config.h"
#include "workloads/command_args.h"

namespace feedtune::tuner::node {

// RANK=r, LOCAL_RANK=r, WORLD_SIZE=n, LOCAL_WORLD_SIZE=n (one node),
// MASTER_ADDR=127.0.0.1, MASTER_PORT=port.
std::vector<std::string> RankEnvironment(int rank, int ranks, int master_port);

// A TCP port on 127.0.0.1 that nothing listens on now (the kernel's pick;
// another process may take it before the ranks bind it, as with torchrun).
// Throws std::system_error when no socket can be made.
int FreeLocalPort();

// One trial of `knobs`: `repeats` runs of `ranks` rank processes each, of
// workload.argv with the placeholders of `context` and rank r's, with
// `base_env` (the run protocol's FEEDTUNE_* variables) and rank r's. The
// trial's samples/s is, per repeat, all ranks' samples over the longest
// rank's window ("seconds" in its result line, else its wall time), median
// over repeats; its node figures hold one row per rank. Throws Interrupted
// when `stop` is raised (every rank is killed first). `warning` (may be
// null) gets what the binding could not do (numa without a known node).
results::TrialRecord MeasureCommandRanks(const SweepConfig& config, const workloads::CommandContext& context,
                                         const std::vector<std::string>& base_env, int repeats, int ranks,
                                         const std::atomic<bool>* stop, std::string* warning);

}  // namespace feedtune::tuner::node
