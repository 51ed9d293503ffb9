// WorkerPool: the workers that fill batch slots, behind one interface for both
// worker modes. The DataLoader owns the pool and is its only caller (one thread).
//
// Protocol: the consumer Submit()s a BatchTask to a chosen worker; the worker
// reads the task's samples into the task's slot and reports a BatchDone; the
// consumer collects them with WaitDone(). Worker errors travel as data (the
// BatchDone's error), as in libtorch's data loader, never as a crash of the consumer.
//
// Threads: Start/Stop/Submit come from the owner thread; WaitDone and Wake may
// come from one other thread (the pin stage) while the owner submits.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "loader/dataset.h"
#include "loader/options.h"
#include "loader/slot_arena.h"
#include "loader/stream.h"

namespace feedtune::loader {

struct BatchTask {
  int64_t batch_index = 0;
  int slot = 0;
  std::span<const int64_t> indices;  // valid until the task is done
  // A stream task (a streaming dataset, loader/stream.h) has no indices: the
  // worker reads the next batch_size samples of its share of the stream.
  bool streamed = false;
  int batch_size = 0;  // stream tasks only
  StreamShare share;   // stream tasks only
  int fetch_concurrency = 1;  // Knobs::fetch_concurrency: requests in flight for the batch's samples
};


struct BatchDone {
  int64_t batch_index = 0;
  int slot = 0;
  int worker = 0;
  int64_t bytes = 0;      // bytes written to the slot
  double busy_s = 0;      // time the worker spent on this batch
  std::string error;      // empty when the batch is good
  int64_t samples = -1;   // stream tasks: samples read (0: the worker's share is read); else -1
};

class WorkerPool {
 public:
  virtual ~WorkerPool() = default;

  // Starts the workers; returns once every one has run Dataset::InitWorker.
  // Throws LoaderError when a worker cannot start.
  virtual void Start() = 0;
  // Stops and reaps the workers; outstanding tasks are abandoned. Never throws.
  virtual void Stop() noexcept = 0;
  virtual bool running() const = 0;
  virtual int num_workers() const = 0;
  // The process ids of the live worker processes, for the caller's memory
  // sampling (tuner/measure/worker_memory.h); empty for thread workers, which
  // are this process, and while the pool is stopped. Owner thread only.
  virtual std::vector<pid_t> worker_pids() const = 0;

  virtual void Submit(int worker, const BatchTask& task) = 0;
  // Waits until a task finishes or `deadline`; false on timeout. A worker that
  // died is reported as a BatchDone carrying the error for its oldest task.
  virtual bool WaitDone(BatchDone* done, std::chrono::steady_clock::time_point deadline) = 0;
  // Makes the current (or next) WaitDone return false at once, so a thread
  // blocked in it can be stopped without waiting for its deadline.
  virtual void Wake() = 0;
};

// Workers as threads of this process.
std::unique_ptr<WorkerPool> MakeThreadWorkerPool(const Dataset& dataset, const SlotArena& arena,
                                                 int num_workers);

class ForkServer;

// Workers as processes (torch's default), started by `server` (which holds the
// dataset they read); `server` must outlive the pool.
std::unique_ptr<WorkerPool> MakeProcessWorkerPool(ForkServer& server, const SlotArena& arena, int num_workers);

}  // namespace feedtune::loader
