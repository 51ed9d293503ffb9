// Thread-mode workers: the same protocol as process mode, inside this process.
// Used for speed studies (no fork, no IPC) and where fork is not wanted.
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "loader/batch_read.h"
#include "loader/data_loader.h"
#include "loader/trace.h"
#include "loader/worker_pool.h"

namespace feedtune::loader {
namespace {

using Clock = std::chrono::steady_clock;

class ThreadWorkerPool final : public WorkerPool {
 public:
  ThreadWorkerPool(const Dataset& dataset, const SlotArena& arena, int num_workers)
      : dataset_(dataset), arena_(arena), queues_(static_cast<size_t>(num_workers)),
        wake_(static_cast<size_t>(num_workers)) {}
  ~ThreadWorkerPool() override { Stop(); }

  void Start() override {
    {
      std::lock_guard lock(mu_);
      stopping_ = false;
      woken_ = false;
      ready_ = 0;
      for (auto& q : queues_) q.clear();
      done_.clear();
    }
    for (int w = 0; w < num_workers(); ++w) threads_.emplace_back([this, w] { Run(w); });
    std::unique_lock lock(mu_);
    done_cv_.wait(lock, [this] { return ready_ == num_workers(); });
  }

  void Wake() override {
    {
      std::lock_guard lock(mu_);
      woken_ = true;
    }
    done_cv_.notify_all();
  }

  void Stop() noexcept override {
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
    }
    for (auto& cv : wake_) cv.notify_all();
    for (auto& t : threads_) t.join();
    threads_.clear();
  }

  bool running() const override { return !threads_.empty(); }
  int num_workers() const override { return static_cast<int>(queues_.size()); }
  std::vector<pid_t> worker_pids() const override { return {}; }

  void Submit(int worker, const BatchTask& task) override {
    {
      std::lock_guard lock(mu_);
      queues_[static_cast<size_t>(worker)].push_back(task);
    }
    wake_[static_cast<size_t>(worker)].notify_one();
  }

  bool WaitDone(BatchDone* done, Clock::time_point deadline) override {
    std::unique_lock lock(mu_);
    if (!done_cv_.wait_until(lock, deadline, [this] { return !done_.empty() || woken_; })) return false;
    if (std::exchange(woken_, false)) return false;
    *done = std::move(done_.front());
    done_.pop_front();
    return true;
  }

 private:
  void Run(int worker) {
    std::string init_error;
    try {
      dataset_.InitWorker(worker);
    } catch (const std::exception& e) {
      init_error = e.what();
    }
    {
      std::lock_guard lock(mu_);
      ++ready_;
    }
    done_cv_.notify_all();

    const int64_t stride = dataset_.max_sample_bytes();
    TraceBuffer* const trace = TraceBuffer::Attach(arena_.trace_region());  // null: tracing off
    const int32_t pid = static_cast<int32_t>(getpid());
    const int32_t tid = trace ? TraceThreadId() : 0;
    const int track = kFirstWorkerTrack + worker;
    WorkerStream stream(dataset_);
    while (true) {
      BatchTask task;
      {
        std::unique_lock lock(mu_);
        auto& q = queues_[static_cast<size_t>(worker)];
        wake_[static_cast<size_t>(worker)].wait(lock, [&] { return stopping_ || !q.empty(); });
        if (stopping_) return;
        task = q.front();
        q.pop_front();
      }
      const auto start = Clock::now();
      BatchDone result{task.batch_index, task.slot, worker, 0, 0, {}, -1};
      const auto slot = arena_.slot(task.slot);
      if (!init_error.empty()) {
        result.error = "worker " + std::to_string(worker) + " failed in dataset set-up: " + init_error;
      }
      if (task.streamed && result.error.empty()) {
        try {
          const WorkerStream::Fill fill = stream.FillBatch(task.share, slot, stride, task.batch_size);
          result.bytes = fill.bytes;
          result.samples = fill.samples;
        } catch (const std::exception& e) {
          result.error = "worker " + std::to_string(worker) + " failed on batch " + std::to_string(task.batch_index) +
                         " of its stream: " + e.what();
        }
      }
      if (!task.indices.empty() && result.error.empty()) {
        try {
          result.bytes = ReadBatchSamples(dataset_, task.indices, slot, stride, task.fetch_concurrency, trace, track,
                                          pid, tid);
        } catch (const std::exception& e) {
          result.error = "worker " + std::to_string(worker) + " failed on batch " +
                         std::to_string(task.batch_index) + " " + e.what();
        }
      }
      const auto end = Clock::now();
      result.busy_s = std::chrono::duration<double>(end - start).count();
      if (trace) trace->Record(track, TraceKind::kBatch, TraceNs(start), TraceNs(end), task.batch_index, pid, tid);
      {
        std::lock_guard lock(mu_);
        done_.push_back(std::move(result));
      }
      done_cv_.notify_one();
    }
  }

  const Dataset& dataset_;
  const SlotArena& arena_;

  std::mutex mu_;
  // Guarded by mu_.
  std::vector<std::deque<BatchTask>> queues_;
  std::deque<BatchDone> done_;
  bool stopping_ = false;
  bool woken_ = false;
  int ready_ = 0;

  std::vector<std::condition_variable> wake_;  // one per worker
  std::condition_variable done_cv_;
  std::vector<std::thread> threads_;  // touched by the owner thread only
};

}  // namespace

std::unique_ptr<WorkerPool> MakeThreadWorkerPool(const Dataset& dataset, const SlotArena& arena, int num_workers) {
  return std::make_unique<ThreadWorkerPool>(dataset, arena, num_workers);
}

}  // namespace feedtune::loader
