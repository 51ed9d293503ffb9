#include "tuner/measure/torch_cost_dataset.h"

#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <utility>
#include <vector>

namespace feedtune::tuner {
namespace {

int64_t Nanoseconds(double seconds) { return static_cast<int64_t>(seconds * 1e9); }

// The least CPU time a burn pays at once. A burn reads this thread's CPU
// clock, a system call, at least twice (about 1.3 us each on a 2-CPU VM, as
// is getpid): paid sample by sample, a 64-byte sample's 1.4 us of torch cost
// took about 5 us of CPU, and the model made torch without workers 2-3x
// slower than it is. What a sample owes below this is carried to the next
// sample of the same thread; a burn's clock reads then add about 3%.
constexpr int64_t kMinBurnNs = 100'000;

// Forks so far, counted in each child (pthread_atfork): a thread that sees
// the count change is in a new process and asks getpid() again. getpid() is
// a system call, and per sample it cost as much as the sample's model.
std::atomic<uint64_t> forks{0};

void CountForks() {
  static const bool registered = [] {
    return pthread_atfork(nullptr, nullptr, [] { forks.fetch_add(1, std::memory_order_relaxed); }) == 0;
  }();
  (void)registered;
}

// This process's id, asked once per process and thread.
pid_t CachedPid() {
  thread_local uint64_t seen = ~uint64_t{0};
  thread_local pid_t pid = 0;
  const uint64_t now = forks.load(std::memory_order_relaxed);
  if (now != seen) {
    pid = getpid();
    seen = now;
  }
  return pid;
}

// A shard's samples, each paid for as it is read.
class PayingShardReader final : public loader::ShardReader {
 public:
  PayingShardReader(std::unique_ptr<loader::ShardReader> inner, const TorchCostDataset& owner)
      : inner_(std::move(inner)), owner_(owner) {}
  bool Next(std::vector<std::byte>* sample, int64_t* index) override {
    if (!inner_->Next(sample, index)) return false;
    owner_.PaySample(static_cast<int64_t>(sample->size()));
    return true;
  }

 private:
  const std::unique_ptr<loader::ShardReader> inner_;
  const TorchCostDataset& owner_;
};

}  // namespace

TorchCostDataset::TorchCostDataset(std::shared_ptr<const loader::Dataset> inner, const results::TorchCosts& costs,
                                   int batch_size, const workloads::CpuCalibration& calibration)
    : inner_(std::move(inner)),
      costs_(costs),
      batch_size_(batch_size),
      calibration_(calibration),
      consumer_pid_(getpid()) {
  CountForks();
}

void TorchCostDataset::InitWorker(int worker_id) const {
  inner_->InitWorker(worker_id);
  // The consumer calls it too when there are no workers: torch starts none then.
  if (getpid() != consumer_pid_) workloads::BurnCpu(Nanoseconds(costs_.worker_start_s), {}, calibration_);
}

void TorchCostDataset::PaySample(int64_t bytes) const {
  // Per thread: a worker process (forked with one thread) starts with what
  // the forking thread owed, at most kMinBurnNs.
  thread_local int64_t owed_ns = 0;
  const bool in_worker = CachedPid() != consumer_pid_;
  owed_ns += Nanoseconds(costs_.SampleSeconds(in_worker, bytes, batch_size_));
  if (owed_ns < kMinBurnNs) return;
  workloads::BurnCpu(owed_ns, {}, calibration_);
  owed_ns = 0;
}

int64_t TorchCostDataset::Read(int64_t index, std::span<std::byte> out) const {
  const int64_t bytes = inner_->Read(index, out);
  PaySample(bytes);
  return bytes;
}

void TorchCostDataset::ReadMany(std::span<const int64_t> indices, std::span<std::byte> slot, int64_t stride,
                                int concurrency, std::span<int64_t> bytes) const {
  inner_->ReadMany(indices, slot, stride, concurrency, bytes);
  for (const int64_t n : bytes) PaySample(n);
}

std::unique_ptr<loader::ShardReader> TorchCostDataset::OpenShard(int64_t shard) const {
  return std::make_unique<PayingShardReader>(inner_->OpenShard(shard), *this);
}

}  // namespace feedtune::tuner
