// DataLoader: the native equivalent of torch.utils.data.DataLoader (docs/architecture.md).
//
//   DataLoader loader(dataset, options, pinned_alloc);
//   loader.StartEpoch(0);
//   while (auto batch = loader.Next()) { ... batch->data ... }
//
// - num_workers == 0: Next() reads and collates the batch itself, on demand.
// - num_workers == N: batch k goes to worker k % N; at most prefetch_factor x N
//   batches are outstanding, and each batch handed to the caller releases one
//   new task, as torch's _try_put_index does. Batches come back in sampler order
//   through a reorder buffer (torch's in_order=True).
// - Batches live in prefetch_factor x N + 1 shared-memory slots (SlotArena): the
//   +1 is the batch the caller holds.
// - pin_memory: the batch is copied into page-locked memory before it is handed
//   out. With workers this is torch's pin thread: one thread takes finished
//   batches from the workers, copies each into the pinned buffer of its slot,
//   and passes it on, so pinning overlaps the consumer's work. With
//   num_workers == 0 the consumer pins itself, as torch does. The pinned pool
//   (one buffer per slot; two without workers, so a queued copy of the last
//   batch is never overwritten) is allocated once, at construction.
// - persistent_workers == false: workers start at StartEpoch and stop at the
//   end of the epoch; the start cost is measured (stats().worker_startup_s).
// - A streaming dataset (Dataset::num_shards() > 0, torch's IterableDataset):
//   each worker reads its own shards (loader/stream.h); a task asks a worker
//   for its next batch, tasks go to the workers still active in turn, and
//   batches come back in task order. A worker whose share is read answers
//   with no batch and gets no more tasks; the epoch ends when none is left,
//   as torch's _IterableDatasetStopIteration ends it.
//
// One thread owns a DataLoader and calls all of its methods. A batch's memory is
// valid until the next call to Next() or StartEpoch().
//
// Worker processes come from a fork server (loader/fork_server.h) forked before
// the caller's threads exist: pass the one made right after the dataset, or the
// loader makes its own at construction, before its pin thread exists.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include "loader/dataset.h"
#include "loader/device/host_buffer.h"
#include "loader/fork_server.h"
#include "loader/options.h"
#include "loader/sampler.h"
#include "loader/slot_arena.h"
#include "loader/stream.h"
#include "loader/trace.h"
#include "loader/worker_pool.h"

namespace feedtune::loader {

// A batch that could not be loaded: names the batch, and the worker and sample when known.
class LoaderError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct BatchView {
  int64_t epoch = 0;
  int64_t index = 0;                // position in the epoch
  std::span<const int64_t> sample_indices;
  std::span<const std::byte> data;  // sample i at data[i * stride], payload bytes in total
  int64_t stride = 0;
  int64_t payload_bytes = 0;
  bool pinned = false;              // data lies in page-locked memory
};

struct LoaderStats {
  double worker_startup_s = 0;   // summed over worker (re)starts
  int worker_starts = 0;         // how many times the pool started
  double worker_busy_s = 0;      // summed over workers
  double pin_s = 0;              // time the pin stage spent copying
  double time_to_first_batch_s = 0;  // StartEpoch to the first batch, last epoch
  double pinned_pool_alloc_s = 0;  // one-off, at construction
  bool pinned_pool_locked = true;  // false when the pool could not be locked (see pin_warning)
  std::string pin_warning;
  // Streaming: this epoch's workers (of this rank) that got no shard and read
  // nothing (more workers than the rank's shards).
  int idle_stream_workers = 0;
};

// Allocates page-locked host memory; supplied by the device backend.
using PinnedAllocFn = std::function<device::HostBuffer(size_t bytes)>;

class DataLoader {
 public:
  // Allocates the slots (and, with pin_memory, the pinned pool) up front.
  // `fork_server` starts process-mode workers; its dataset must be `dataset`.
  // Throws std::invalid_argument for impossible options and std::system_error
  // when memory is short.
  DataLoader(std::shared_ptr<const Dataset> dataset, const LoaderOptions& options,
             PinnedAllocFn pinned_alloc = nullptr, std::shared_ptr<ForkServer> fork_server = nullptr);
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;
  ~DataLoader();

  // Begins epoch `epoch` (sampler order seeded by (seed, epoch)), starting the
  // workers if they are not running. An unfinished previous epoch is abandoned.
  void StartEpoch(int64_t epoch);

  // The next batch of the epoch in sampler order, or nullopt when the epoch is
  // over (non-persistent workers are stopped then). Throws LoaderError.
  std::optional<BatchView> Next();

  // Stops the workers now (also done by the destructor).
  void Shutdown() noexcept;

  // Batches of the current epoch (of epoch 0 before StartEpoch). For a
  // streaming dataset it depends on which shards each worker got this epoch.
  int64_t batches_per_epoch() const { return batches_per_epoch_; }
  int64_t batch_bytes() const;  // slot size: batch_size x max_sample_bytes
  const LoaderStats& stats() const { return stats_; }
  const LoaderOptions& options() const { return options_; }
  // The live worker processes' ids (WorkerPool::worker_pids): empty with
  // num_workers == 0, with thread workers, and while the workers are stopped.
  std::vector<pid_t> worker_pids() const;
  // With options.trace: where every stage records its spans (disarmed until
  // the caller arms it); nullptr otherwise. Owned by the loader.
  TraceBuffer* trace() const { return trace_; }

 private:
  struct Ready {
    bool done = false;
    BatchDone result;
  };

  void DispatchUpTo(int64_t limit);
  std::optional<BatchView> NextMapped();
  BatchView Collect(int64_t batch_index);
  BatchDone AwaitTask(int64_t task_index);
  BatchView SlotView(const BatchDone& done, std::span<const int64_t> indices);
  // Streaming datasets.
  StreamShare ShareOf(int64_t epoch, int worker) const;
  // The epoch's batches over all workers; *idle_workers gets those with no shard.
  int64_t StreamEpochBatches(int64_t epoch, int* idle_workers) const;
  int NextActiveWorker();
  void DispatchStreamed(int64_t limit);
  std::optional<BatchView> NextStreamed();
  std::optional<BatchView> ReadStreamInline();
  bool NextDone(BatchDone* done, std::chrono::steady_clock::time_point deadline);
  BatchView PinInline(BatchView view);
  void PinLoop();
  void StartPinThread();
  void StopPinThread() noexcept;
  BatchView ReadInline(int64_t batch_index);
  void ReleaseHeldSlot();
  void StopWorkers() noexcept;

  // Constant after construction.
  const std::shared_ptr<const Dataset> dataset_;
  const LoaderOptions options_;
  const int num_workers_;
  const int64_t max_outstanding_;  // prefetch_factor x num_workers
  const bool streaming_;           // dataset_->num_shards() > 0
  int64_t batches_per_epoch_;
  SlotArena arena_;
  std::vector<device::HostBuffer> pinned_;  // one per slot
  std::shared_ptr<ForkServer> fork_server_;  // process mode only
  std::unique_ptr<WorkerPool> pool_;
  TraceBuffer* trace_ = nullptr;  // in arena_'s trace region
  const int32_t owner_pid_;       // the consumer's ids, for its spans
  const int32_t owner_tid_;

  // The pin stage. pin_queue_ and pin_stop_ are guarded by pin_mu_.
  std::thread pin_thread_;
  std::mutex pin_mu_;
  std::condition_variable pin_cv_;
  std::deque<BatchDone> pin_queue_;
  bool pin_stop_ = false;
  double pin_thread_s_ = 0;  // written by the pin thread, read after join

  // Per-epoch state.
  int64_t epoch_ = -1;
  int64_t batches_returned_ = 0;
  // Streaming: StartEpoch calls so far (StreamShare::pass), the workers whose
  // share is not read yet, the next worker a task goes to, and the
  // consumer's own stream when num_workers == 0.
  int64_t stream_pass_ = 0;
  std::vector<char> worker_active_;
  int next_worker_ = 0;
  std::unique_ptr<WorkerStream> inline_stream_;
  BatchPlan plan_;
  int64_t next_to_dispatch_ = 0;
  int64_t next_to_return_ = 0;
  std::vector<Ready> reorder_;     // indexed by batch_index % slots
  // The sample indices of the batch in each slot, filled at dispatch (slot 0
  // when num_workers == 0): BatchTask::indices and BatchView::sample_indices
  // point here, so they stay valid as long as the slot is held.
  std::vector<std::vector<int64_t>> slot_indices_;
  std::vector<int> free_slots_;
  int held_slot_ = -1;             // slot of the batch the caller holds
  bool worker_init_done_inline_ = false;
  std::chrono::steady_clock::time_point epoch_start_{};

  LoaderStats stats_;
};

}  // namespace feedtune::loader
