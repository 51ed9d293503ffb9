#include "loader/sampler.h"

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>

namespace feedtune::loader {
namespace {

uint64_t SplitMix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

// Uniform in [0, bound) without modulo bias: reject the top partial range.
uint64_t Bounded(uint64_t& state, uint64_t bound) {
  const uint64_t limit = UINT64_MAX - UINT64_MAX % bound;
  uint64_t r;
  do {
    r = SplitMix64(state);
  } while (r >= limit);
  return r % bound;
}

}  // namespace

std::vector<int64_t> EpochOrder(int64_t n, bool shuffle, uint64_t seed, int64_t epoch) {
  std::vector<int64_t> order(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) order[static_cast<size_t>(i)] = i;
  if (!shuffle) return order;
  uint64_t state = seed ^ (0xD1B54A32D192ED03ULL * static_cast<uint64_t>(epoch + 1));
  for (int64_t i = n - 1; i > 0; --i) {
    const auto j = static_cast<int64_t>(Bounded(state, static_cast<uint64_t>(i + 1)));
    std::swap(order[static_cast<size_t>(i)], order[static_cast<size_t>(j)]);
  }
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

BatchPlan::BatchPlan(std::vector<int64_t> order, int batch_size, bool drop_last)
    : order_(std::move(order)), batch_size_(batch_size) {
  if (batch_size < 1) throw std::invalid_argument("BatchPlan: batch_size must be >= 1");
  const auto n = static_cast<int64_t>(order_.size());
  num_batches_ = drop_last ? n / batch_size : (n + batch_size - 1) / batch_size;
}

std::span<const int64_t> BatchPlan::batch(int64_t k) const {
  const int64_t begin = k * batch_size_;
  const int64_t end = std::min<int64_t>(begin + batch_size_, static_cast<int64_t>(order_.size()));
  return std::span<const int64_t>(order_).subspan(static_cast<size_t>(begin),
                                                  static_cast<size_t>(end - begin));
}

}  // namespace feedtune::loader
