// The sampler and batch sampler: which sample indices an epoch visits, in which
// order, and how they are cut into batches (torch's RandomSampler/SequentialSampler,
// DistributedSampler and BatchSampler).
//
// Two ways to shuffle, chosen by the epoch's size, each deterministic in
// (seed, epoch) on every platform (our own arithmetic, no std:: distribution or
// shuffle), each a different order:
// - Up to kTableMaxSamples (2^22) samples, a table: a Fisher-Yates shuffle of
//   [0, n) drawn once per epoch from a SplitMix64 stream, 4 bytes per sample
//   (16 MiB at the bound), a few nanoseconds per index to draw and one load to
//   read. Small samples (64 bytes, a batch of 256) load at tens of millions per
//   second, where the on-demand order's tens of nanoseconds per index were most
//   of the cost (docs/performance.md).
// - Above it, on demand, never stored: an epoch of a billion samples must
//   start in well under a second and hold no gigabyte index list. A keyed
//   Feistel network over the smallest power-of-two domain that holds [0, n),
//   with cycle-walking back into [0, n): a bijection, O(1) memory, tens of
//   nanoseconds per index.
// Both are uniform enough for training; they differ so that each is the
// fastest at its size. An epoch's order depends on n, seed and epoch only.
//
// Who calls what: the DataLoader builds an EpochSampler + BatchPlan per epoch and
// fills each batch's indices into its own per-slot buffer (FillBatch). The
// vector-returning helpers (EpochOrder, DistributedShare, BatchPlan::batch) are
// for tests and small tools; they materialise O(n) and O(batch) respectively.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

namespace feedtune::loader {

// SplitMix64's output function: a strong 64-bit mixer (every input bit flips
// about half the output bits), so a Feistel round built on it needs no tables.
uint64_t Mix64(uint64_t z);
// The next number of a SplitMix64 stream whose state is `state`.
uint64_t SplitMix64(uint64_t& state);

// A permutation of [0, n) keyed by (seed, epoch): the visiting order of one
// epoch. Identity when !shuffle. Copyable (a table is shared, not copied),
// immutable, safe from any thread.
class EpochPermutation {
 public:
  // The largest shuffled epoch held as a table (above: on demand).
  static constexpr int64_t kTableMaxSamples = int64_t{1} << 22;

  EpochPermutation() = default;
  EpochPermutation(int64_t n, bool shuffle, uint64_t seed, int64_t epoch);

  int64_t size() const { return n_; }
  // The sample at position i, for 0 <= i < size().
  int64_t at(int64_t i) const {
    if (table_) return table_->order[static_cast<size_t>(i)];
    return shuffle_ ? OnDemand(i) : i;
  }
  // The position of sample v: at(inverse(v)) == v. For a table, the first
  // call builds the inverse table (for tests and tools, not the hot path).
  int64_t inverse(int64_t v) const;
  // Whether the order is a table (n <= kTableMaxSamples, shuffled).
  bool tabled() const { return table_ != nullptr; }

 private:
  struct Table {
    std::vector<uint32_t> order;
    mutable std::once_flag inverse_once;
    mutable std::vector<uint32_t> inverse;
  };
  static constexpr int kRounds = 6;
  int64_t OnDemand(int64_t i) const;
  uint64_t Forward(uint64_t x) const;   // one pass of the network over [0, 2^bits)
  uint64_t Backward(uint64_t x) const;  // its inverse

  int64_t n_ = 0;
  bool shuffle_ = false;
  int bits_ = 0;           // domain is [0, 2^bits_), the smallest that holds n (>= 2 bits)
  int left_bits_ = 0;      // the Feistel halves: left_bits_ + right_bits_ == bits_
  int right_bits_ = 0;
  std::array<uint64_t, kRounds> keys_{};
  std::shared_ptr<const Table> table_;  // shuffled epochs up to kTableMaxSamples
};

// One rank's view of an epoch, as torch's DistributedSampler (drop_last=False,
// its default) cuts it: every rank sees the same permutation; it is padded with
// its own head to a multiple of world_size (repeated if shorter than the
// padding), and rank r takes positions r, r + world_size, ... So the shares are
// equal in length, and disjoint when world_size divides the dataset.
// world_size 1 is the plain (Random|Sequential)Sampler. O(1) memory.
class EpochSampler {
 public:
  EpochSampler() = default;
  // Throws std::invalid_argument unless 0 <= rank < world_size and n >= 0.
  EpochSampler(int64_t n, bool shuffle, uint64_t seed, int64_t epoch, int rank = 0, int world_size = 1);

  // Samples this rank visits: ceil(n / world_size) (0 when n == 0).
  int64_t size() const { return size_; }
  // The sample at position j of this rank's share, for 0 <= j < size().
  int64_t at(int64_t j) const { return perm_.at((rank_ + j * world_size_) % perm_.size()); }
  const EpochPermutation& permutation() const { return perm_; }

 private:
  EpochPermutation perm_;
  int64_t rank_ = 0;
  int64_t world_size_ = 1;
  int64_t size_ = 0;
};

// The visiting order of one epoch, materialised: EpochPermutation's positions
// 0..n-1. O(n) memory; for tests and small n.
std::vector<int64_t> EpochOrder(int64_t n, bool shuffle, uint64_t seed, int64_t epoch);

// Rank `rank`'s share of a materialised `order`, cut as EpochSampler cuts it.
// world_size 1 returns `order` unchanged. For tests and small n.
std::vector<int64_t> DistributedShare(std::vector<int64_t> order, int rank, int world_size);

// An epoch's sampler order cut into batches of `batch_size`; the last, short
// batch is dropped when `drop_last`. O(1) memory: a batch's indices are
// computed when asked for.
class BatchPlan {
 public:
  BatchPlan() = default;
  BatchPlan(EpochSampler sampler, int batch_size, bool drop_last);

  int64_t num_batches() const { return num_batches_; }
  // How many samples batch k holds (batch_size, or less for a kept last batch).
  int64_t batch_length(int64_t k) const;
  // Writes batch k's sample indices into out[0, batch_length(k)) and returns
  // that span. `out` must hold batch_length(k) (batch_size is always enough).
  std::span<const int64_t> FillBatch(int64_t k, std::span<int64_t> out) const;
  // Batch k's indices in a new vector: for tests and tools, not the hot path.
  std::vector<int64_t> batch(int64_t k) const;
  int batch_size() const { return batch_size_; }

 private:
  EpochSampler sampler_;
  int batch_size_ = 1;
  int64_t num_batches_ = 0;
};

}  // namespace feedtune::loader
