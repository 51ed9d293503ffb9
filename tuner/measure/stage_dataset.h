// StageDataset: the workload's dataset behind a switch that the differential
// stage trials (tuner/measure/stage_runner.h) turn, so that one fork server, started
// before any thread exists (tuner/measure/measurer_factory.h), serves the real trials
// and the stage trials alike.
//
// - Read mode (seen by every worker, forked or not, through one page of
//   shared memory mapped before the fork server forks): kReal reads the real
//   sample; kTransport writes `transport_bytes` zero bytes into the slot and
//   does nothing else: samples of the real size at no cost, so a trial
//   measures only process start, slots, collate and the pin stage.
// - Cache policy (the consumer's BeforeRepeat): kAsConfigured delegates to
//   the dataset (workload.cache); kKeepWarm does nothing; kEvict drops the
//   data files from the page cache before each window (EvictFiles).
//
// Set modes only between trials (no loader running). Read() and
// BeforeRepeat() are safe from any thread or process, as Dataset requires.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "loader/dataset.h"

namespace feedtune::tuner {

// What evicting a set of files from the page cache did.
struct Eviction {
  int64_t bytes = 0;           // of the files
  int64_t resident_bytes = 0;  // still in the page cache afterwards (mincore)
  int failures = 0;            // files that could not be opened, flushed or advised
  double resident_frac() const { return bytes > 0 ? static_cast<double>(resident_bytes) / bytes : 0; }
};

// fdatasync (dirty pages cannot be dropped: a freshly written dataset is all
// dirty) and posix_fadvise(POSIX_FADV_DONTNEED) on each file, then mincore to
// see what stayed (tmpfs and mapped pages stay).
Eviction EvictFiles(const std::vector<std::string>& paths);
// Reads every byte of each file once, so that they are in the page cache.
// Returns the bytes still resident afterwards over the files' bytes.
double WarmFiles(const std::vector<std::string>& paths);
// The regular files under `path` (recursively, sorted), or `path` itself when
// it is a file: what a file-backed workload reads.
std::vector<std::string> DataFiles(const std::string& path);

class StageDataset final : public loader::Dataset {
 public:
  enum class ReadMode : int { kReal = 0, kTransport = 1 };
  enum class CachePolicy : int { kAsConfigured = 0, kKeepWarm = 1, kEvict = 2 };

  // Maps the shared page; throws std::system_error when it cannot.
  explicit StageDataset(std::shared_ptr<const loader::Dataset> inner);
  ~StageDataset() override;
  StageDataset(const StageDataset&) = delete;
  StageDataset& operator=(const StageDataset&) = delete;

  int64_t size() const override { return inner_->size(); }
  int64_t max_sample_bytes() const override { return inner_->max_sample_bytes(); }
  void InitWorker(int worker_id) const override { inner_->InitWorker(worker_id); }
  void SetEpoch(int64_t epoch) const override { inner_->SetEpoch(epoch); }  // per-epoch random crops
  loader::RepeatPreparation BeforeRepeat() const override;
  std::optional<loader::StoreReads> ReadsFromStore() const override { return inner_->ReadsFromStore(); }
  int64_t Read(int64_t index, std::span<std::byte> out) const override;
  bool reads_concurrently() const override { return inner_->reads_concurrently(); }
  // kTransport: each sample's zeros, as Read writes them.
  void ReadMany(std::span<const int64_t> indices, std::span<std::byte> slot, int64_t stride, int concurrency,
                std::span<int64_t> bytes) const override;
  int64_t num_shards() const override { return inner_->num_shards(); }
  int64_t shard_samples(int64_t shard) const override { return inner_->shard_samples(shard); }
  // kTransport: the shard's count of zero samples, none of it read.
  std::unique_ptr<loader::ShardReader> OpenShard(int64_t shard) const override;

  // The workload's own dataset (what tests and inspections look inside).
  const loader::Dataset& inner() const { return *inner_; }

  void SetReadMode(ReadMode mode, int64_t transport_bytes = 0);
  // `files` are what kEvict evicts.
  void SetCachePolicy(CachePolicy policy, std::vector<std::string> files = {});
  // What the last BeforeRepeat under kEvict found.
  Eviction last_eviction() const;

 private:
  struct Shared {
    std::atomic<int> mode;
    std::atomic<int64_t> transport_bytes;
  };

  const std::shared_ptr<const loader::Dataset> inner_;
  Shared* shared_ = nullptr;  // one MAP_SHARED page, inherited by every fork
  // Consumer side only (BeforeRepeat runs in the consumer process).
  CachePolicy policy_ = CachePolicy::kAsConfigured;
  std::vector<std::string> files_;
  mutable Eviction last_eviction_;
};

}  // namespace feedtune::tuner
