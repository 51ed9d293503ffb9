#include "loader/sampler.h"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>

namespace feedtune::loader {

uint64_t Mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

uint64_t SplitMix64(uint64_t& state) { return Mix64(state += 0x9E3779B97F4A7C15ULL); }

namespace {

uint64_t Mask(int bits) { return bits >= 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1; }

// The round function: `bits` (1..63) pseudo-random bits of (half, key). The top
// bits of the mix are taken, as multiply-based mixers diffuse best upward.
uint64_t Round(uint64_t half, uint64_t key, int bits) { return Mix64(half ^ key) >> (64 - bits); }

}  // namespace

namespace {

// GCC and Clang's 128-bit integer, for the high half of a 64x64 product.
__extension__ using Uint128 = unsigned __int128;

// Fisher-Yates from the back: position i takes a uniform draw of [0, i]. The
// draw is the high half of a 64-bit random times (i + 1) (Lemire's multiply
// without the rejection step: its bias is below (i + 1) / 2^64, under 2^-41 here).
//
// A draw does not depend on the table, only on the stream and i, so the draws
// are made kAhead swaps early and the line each will swap with is prefetched:
// above the caches (a 4 MiB table at 2^20 samples) each swap was a miss, and
// the table was a quarter of the tiny epoch's time. Same draws, same order.
std::vector<uint32_t> ShuffledTable(int64_t n, uint64_t state) {
  std::vector<uint32_t> order(static_cast<size_t>(n));
  uint32_t* const o = order.data();
  for (int64_t i = 0; i < n; ++i) o[i] = static_cast<uint32_t>(i);
  const auto draw = [&state](int64_t i) {
    const uint64_t r = SplitMix64(state);
    return static_cast<size_t>((static_cast<Uint128>(r) * static_cast<uint64_t>(i + 1)) >> 64);
  };
  constexpr uint64_t kAhead = 16;  // a power of two
  size_t ahead[kAhead];           // ahead[c % kAhead]: the draw of swap c (position n - 1 - c)
  int64_t next = n - 1;           // the position of the next draw to make
  for (uint64_t c = 0; c < kAhead && next > 0; ++c) {
    ahead[c] = draw(next--);
    __builtin_prefetch(o + ahead[c], 1);
  }
  uint64_t c = 0;
  for (int64_t i = n - 1; i > 0; --i, ++c) {
    size_t& slot = ahead[c & (kAhead - 1)];
    const size_t j = slot;
    if (next > 0) {
      slot = draw(next--);
      __builtin_prefetch(o + slot, 1);
    }
    std::swap(o[i], o[j]);
  }
  return order;
}

}  // namespace

EpochPermutation::EpochPermutation(int64_t n, bool shuffle, uint64_t seed, int64_t epoch)
    : n_(n), shuffle_(shuffle && n > 1) {
  if (n < 0) throw std::invalid_argument("EpochPermutation: n must be >= 0, got " + std::to_string(n));
  if (!shuffle_) return;
  if (n <= kTableMaxSamples) {
    // Its own stream (another constant than the Feistel keys' below), from both seed and epoch.
    const uint64_t state = Mix64(seed) ^ Mix64(static_cast<uint64_t>(epoch) + 0x8CB92BA72F3D8DD7ULL);
    auto table = std::make_shared<Table>();
    table->order = ShuffledTable(n, state);
    table_ = std::move(table);
    return;
  }
  // At least 2 bits so that both halves are non-empty. The domain is < 2n
  // (or 4 for n <= 3), so cycle-walking takes fewer than 2 passes on average.
  bits_ = std::max(2, static_cast<int>(std::bit_width(static_cast<uint64_t>(n - 1))));
  left_bits_ = (bits_ + 1) / 2;
  right_bits_ = bits_ / 2;
  // Keys from one SplitMix64 stream seeded by both seed and epoch, each put
  // through the mixer first so that nearby seeds or epochs give unrelated keys.
  uint64_t state = Mix64(seed) ^ Mix64(static_cast<uint64_t>(epoch) + 0xD1B54A32D192ED03ULL);
  for (auto& key : keys_) key = SplitMix64(state);
}

// Round i splits x into a high part of a bits and a low part of b bits
// ((a, b) = (left, right) on even rounds, (right, left) on odd ones), XORs the
// high part with F(low), and swaps the two parts. Each round is a bijection of
// [0, 2^bits) whatever F is; unequal halves let the domain be any power of two.
uint64_t EpochPermutation::Forward(uint64_t x) const {
  for (int i = 0; i < kRounds; ++i) {
    const int a = (i % 2 == 0) ? left_bits_ : right_bits_;
    const int b = bits_ - a;
    const uint64_t lo = x & Mask(b);
    const uint64_t hi = (x >> b) ^ Round(lo, keys_[static_cast<size_t>(i)], a);
    x = (lo << a) | hi;
  }
  return x;
}

uint64_t EpochPermutation::Backward(uint64_t x) const {
  for (int i = kRounds - 1; i >= 0; --i) {
    const int a = (i % 2 == 0) ? left_bits_ : right_bits_;
    const int b = bits_ - a;
    const uint64_t lo = x >> a;
    const uint64_t hi = (x & Mask(a)) ^ Round(lo, keys_[static_cast<size_t>(i)], a);
    x = (hi << b) | lo;
  }
  return x;
}

// Cycle-walking: apply the network until the value falls in [0, n). It ends,
// because i < n lies on the same cycle, and it stays a bijection of [0, n)
// (Black & Rogaway, "Ciphers with arbitrary finite domains").
int64_t EpochPermutation::OnDemand(int64_t i) const {
  uint64_t y = Forward(static_cast<uint64_t>(i));
  while (y >= static_cast<uint64_t>(n_)) y = Forward(y);
  return static_cast<int64_t>(y);
}

int64_t EpochPermutation::inverse(int64_t v) const {
  if (!shuffle_) return v;
  if (table_) {
    std::call_once(table_->inverse_once, [t = table_.get()] {
      t->inverse.resize(t->order.size());
      for (size_t i = 0; i < t->order.size(); ++i) t->inverse[t->order[i]] = static_cast<uint32_t>(i);
    });
    return table_->inverse[static_cast<size_t>(v)];
  }
  uint64_t x = Backward(static_cast<uint64_t>(v));
  while (x >= static_cast<uint64_t>(n_)) x = Backward(x);
  return static_cast<int64_t>(x);
}

EpochSampler::EpochSampler(int64_t n, bool shuffle, uint64_t seed, int64_t epoch, int rank, int world_size)
    : perm_(n, shuffle, seed, epoch), rank_(rank), world_size_(world_size) {
  if (world_size < 1 || rank < 0 || rank >= world_size) {
    throw std::invalid_argument("EpochSampler: rank " + std::to_string(rank) + " of world_size " +
                                std::to_string(world_size));
  }
  // Position p of the padded order is perm[p % n]: torch's padding repeats the head.
  size_ = n == 0 ? 0 : (n + world_size_ - 1) / world_size_;
}

std::vector<int64_t> EpochOrder(int64_t n, bool shuffle, uint64_t seed, int64_t epoch) {
  const EpochPermutation perm(n, shuffle, seed, epoch);
  std::vector<int64_t> order(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) order[static_cast<size_t>(i)] = perm.at(i);
  return order;
}

std::vector<int64_t> DistributedShare(std::vector<int64_t> order, int rank, int world_size) {
  if (world_size < 1 || rank < 0 || rank >= world_size) {
    throw std::invalid_argument("DistributedShare: rank " + std::to_string(rank) + " of world_size " +
                                std::to_string(world_size));
  }
  if (world_size == 1 || order.empty()) return order;
  const size_t n = order.size();
  const size_t ws = static_cast<size_t>(world_size);
  const size_t total = (n + ws - 1) / ws * ws;
  std::vector<int64_t> share;
  share.reserve(total / ws);
  // Position i of the padded order is order[i % n]: torch's padding repeats the head.
  for (size_t i = static_cast<size_t>(rank); i < total; i += ws) share.push_back(order[i % n]);
  return share;
}

BatchPlan::BatchPlan(EpochSampler sampler, int batch_size, bool drop_last)
    : sampler_(std::move(sampler)), batch_size_(batch_size) {
  if (batch_size < 1) throw std::invalid_argument("BatchPlan: batch_size must be >= 1");
  const int64_t n = sampler_.size();
  num_batches_ = drop_last ? n / batch_size : (n + batch_size - 1) / batch_size;
}

int64_t BatchPlan::batch_length(int64_t k) const {
  if (k < 0 || k >= num_batches_) {
    throw std::out_of_range("BatchPlan: batch " + std::to_string(k) + " of " + std::to_string(num_batches_));
  }
  const int64_t begin = k * batch_size_;
  return std::min<int64_t>(batch_size_, sampler_.size() - begin);
}

std::span<const int64_t> BatchPlan::FillBatch(int64_t k, std::span<int64_t> out) const {
  const int64_t length = batch_length(k);
  if (static_cast<int64_t>(out.size()) < length) {
    throw std::invalid_argument("BatchPlan::FillBatch: " + std::to_string(out.size()) + " places for " +
                                std::to_string(length) + " indices");
  }
  const int64_t begin = k * batch_size_;
  for (int64_t i = 0; i < length; ++i) out[static_cast<size_t>(i)] = sampler_.at(begin + i);
  return out.first(static_cast<size_t>(length));
}

std::vector<int64_t> BatchPlan::batch(int64_t k) const {
  std::vector<int64_t> out(static_cast<size_t>(batch_length(k)));
  FillBatch(k, out);
  return out;
}

}  // namespace feedtune::loader
