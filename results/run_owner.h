// The process that runs a run (RunOwner, schema v19) and whether it has
// ended: what Store::Open uses to mark interrupted a run that a process left
// running when it died without finishing it (SIGKILL, the training job killed
// around its feedtune.autotune controller, a reboot). Linux /proc only; where
// /proc cannot tell, a run is left as it is: a run still running must never be
// marked.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "results/records.h"

namespace feedtune::results {

// This process as a run's owner: the hostname, the kernel's boot id, the pid
// namespace, the pid and its start time. What /proc does not give stays
// empty or 0, and OwnerEnded then never judges the run.
RunOwner ThisProcess();

// The start time of process `pid` (field 22 of /proc/PID/stat: clock ticks
// after boot); nullopt when there is no such process, it has ended (a zombie
// not yet reaped has ended too: it writes nothing more), or its /proc entry
// cannot be read.
std::optional<int64_t> ProcessStartTicks(int64_t pid);

// How `owner`'s process ended, judged from `here` (ThisProcess()): a phrase
// that follows "left running by pid P on HOST" (", which has ended", " before
// the host restarted", ...), or "" when it may still run or this process cannot
// tell: another host (a file on shared storage), another pid namespace of this
// boot (another container with the same hostname), an owner not recorded
// (runs before schema v19).
std::string OwnerEnded(const RunOwner& owner, const RunOwner& here);

}  // namespace feedtune::results
