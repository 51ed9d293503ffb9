// TorchCostDataset: a native dataset that pays this box's torch DataLoader
// costs (results/torch_costs.h) as CPU, so that a native sweep names what a
// torch job would (workload.torch_costs auto, docs/measurement.md#torch-costs):
//
// - each sample read in a worker process burns the worker's per-sample and
//   per-byte cost and its share of the per-batch cost (the Python loop,
//   default_collate into shared memory, the pickling onto the queue); read in
//   the consumer (num_workers 0), the main process's own loop costs instead;
// - each worker process, at its start, burns torch's worker start;
// - the consumer's cost per batch it takes from a worker, and of starting and
//   stopping the workers, are the trial runner's to pay
//   (TrialRunner::set_torch_costs): no dataset call sees a batch arrive.
//
// A worker is told from the consumer by its process id: process workers are
// forked (from the fork server), and thread workers, which torch does not
// have, pay the in-process costs. Immutable; safe from any thread or process.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <sys/types.h>

#include "loader/dataset.h"
#include "results/torch_costs.h"
#include "workloads/cpu_work.h"

namespace feedtune::tuner {

class TorchCostDataset final : public loader::Dataset {
 public:
  TorchCostDataset(std::shared_ptr<const loader::Dataset> inner, const results::TorchCosts& costs, int batch_size,
                   const workloads::CpuCalibration& calibration);

  int64_t size() const override { return inner_->size(); }
  int64_t max_sample_bytes() const override { return inner_->max_sample_bytes(); }
  void InitWorker(int worker_id) const override;
  loader::RepeatPreparation BeforeRepeat() const override { return inner_->BeforeRepeat(); }
  std::optional<loader::StoreReads> ReadsFromStore() const override { return inner_->ReadsFromStore(); }
  void SetEpoch(int64_t epoch) const override { inner_->SetEpoch(epoch); }
  int64_t Read(int64_t index, std::span<std::byte> out) const override;
  bool reads_concurrently() const override { return inner_->reads_concurrently(); }
  // The inner dataset's concurrent read, then each sample paid for.
  void ReadMany(std::span<const int64_t> indices, std::span<std::byte> slot, int64_t stride, int concurrency,
                std::span<int64_t> bytes) const override;
  int64_t num_shards() const override { return inner_->num_shards(); }
  int64_t shard_samples(int64_t shard) const override { return inner_->shard_samples(shard); }
  std::unique_ptr<loader::ShardReader> OpenShard(int64_t shard) const override;

  // Burns what one sample of `bytes` costs in this process (a worker's or the consumer's).
  void PaySample(int64_t bytes) const;

 private:
  const std::shared_ptr<const loader::Dataset> inner_;
  const results::TorchCosts costs_;
  const int batch_size_;
  const workloads::CpuCalibration calibration_;
  const pid_t consumer_pid_;  // the process that built it: the consumer (or the fork server's parent)
};

}  // namespace feedtune::tuner
