#include "tuner/measure/torch_cost_dataset.h"

#include <unistd.h>

#include <utility>
#include <vector>

namespace feedtune::tuner {
namespace {

int64_t Nanoseconds(double seconds) { return static_cast<int64_t>(seconds * 1e9); }

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
      consumer_pid_(getpid()) {}

void TorchCostDataset::InitWorker(int worker_id) const {
  inner_->InitWorker(worker_id);
  // The consumer calls it too when there are no workers: torch starts none then.
  if (getpid() != consumer_pid_) workloads::BurnCpu(Nanoseconds(costs_.worker_start_s), {}, calibration_);
}

void TorchCostDataset::PaySample(int64_t bytes) const {
  const bool in_worker = getpid() != consumer_pid_;
  workloads::BurnCpu(Nanoseconds(costs_.SampleSeconds(in_worker, bytes, batch_size_)), {}, calibration_);
}

int64_t TorchCostDataset::Read(int64_t index, std::span<std::byte> out) const {
  const int64_t bytes = inner_->Read(index, out);
  PaySample(bytes);
  return bytes;
}

std::unique_ptr<loader::ShardReader> TorchCostDataset::OpenShard(int64_t shard) const {
  return std::make_unique<PayingShardReader>(inner_->OpenShard(shard), *this);
}

}  // namespace feedtune::tuner
