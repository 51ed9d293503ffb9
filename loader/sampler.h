// The sampler and batch sampler: which sample indices an epoch visits, in which
// order, and how they are cut into batches (torch's RandomSampler/SequentialSampler
// + BatchSampler). Deterministic in (seed, epoch) on every platform: the shuffle
// is our own Fisher-Yates over SplitMix64, not std::shuffle, whose output the
// standard leaves to the library.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace feedtune::loader {

// The visiting order of one epoch: 0..n-1, shuffled when `shuffle`.
std::vector<int64_t> EpochOrder(int64_t n, bool shuffle, uint64_t seed, int64_t epoch);

// Rank `rank`'s share of an epoch's `order` among `world_size` ranks, as
// torch's DistributedSampler (drop_last=False, its default) cuts it: every rank
// sees the same order; it is padded with its own head to a multiple of
// world_size (repeated if shorter than the padding), and rank r takes positions
// r, r + world_size, ... So the shares are equal in length, and disjoint when
// world_size divides the dataset. world_size 1 returns `order` unchanged.
std::vector<int64_t> DistributedShare(std::vector<int64_t> order, int rank, int world_size);

// An epoch's order cut into batches of `batch_size`; the last, short batch is
// dropped when `drop_last`.
class BatchPlan {
 public:
  BatchPlan() = default;
  BatchPlan(std::vector<int64_t> order, int batch_size, bool drop_last);

  int64_t num_batches() const { return num_batches_; }
  std::span<const int64_t> batch(int64_t k) const;

 private:
  std::vector<int64_t> order_;
  int batch_size_ = 1;
  int64_t num_batches_ = 0;
};

}  // namespace feedtune::loader
