// The body of a process-mode worker, shared by the process pool (which talks to
// it) and the fork server (which starts it). Internal to loader/.
//
// Protocol: the worker reads TaskHeader + `count` int64 sample indices (none
// for a stream task, whose header carries the share) from its task socket, fills the task's slot, and writes one report (ReportHeader plus
// up to kMaxReportError bytes of error text) to the shared report pipe. A
// report is at most PIPE_BUF bytes, so reports of several workers never
// interleave. The first report (batch_index -1) says the worker is ready.
#pragma once

#include <sys/types.h>

#include <climits>
#include <cstddef>
#include <cstdint>

#include "loader/dataset.h"
#include "loader/slot_arena.h"
#include "loader/stream.h"

namespace feedtune::loader {

struct TaskHeader {
  int64_t batch_index;
  int32_t slot;
  int32_t count;
  int32_t stream_batch;  // > 0: a stream task of this batch size (then count is 0)
  int32_t fetch_concurrency;  // BatchTask::fetch_concurrency
  StreamShare share;     // stream tasks only
};

struct ReportHeader {
  int64_t batch_index;  // -1: the worker is ready (InitWorker done)
  int64_t bytes;
  double busy_s;
  int32_t slot;
  int32_t worker;
  uint32_t error_len;
  int32_t samples;  // stream tasks: samples read (0: the share is read); else -1
};

inline constexpr size_t kMaxReportError = 3000;
static_assert(sizeof(ReportHeader) + kMaxReportError <= PIPE_BUF, "reports must be atomic pipe writes");

// Runs worker `worker` in this (forked) process until its task socket closes,
// then _exits. `parent` is the process whose death must end this worker.
[[noreturn]] void RunWorkerProcess(const Dataset& dataset, const SlotArena& arena, int worker, int task_fd,
                                   int report_fd, pid_t parent);

}  // namespace feedtune::loader
