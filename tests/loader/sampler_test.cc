// The sampler (loader/sampler.h): the epoch order is a bijection of [0, n)
// (a table up to 2^22 samples, computed on demand above), reproducible in
// (seed, epoch), different across epochs,
// cut into rank shares as torch's DistributedSampler cuts it, and into batches.
#include "loader/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <numeric>
#include <random>
#include <set>
#include <stdexcept>
#include <vector>

#include "tests/common/iota.h"

namespace feedtune::loader {
namespace {

constexpr int64_t kBillion = 1'000'000'000;

using testing_util::Iota;

std::vector<int64_t> Share(const EpochSampler& s) {
  std::vector<int64_t> v;
  for (int64_t j = 0; j < s.size(); ++j) v.push_back(s.at(j));
  return v;
}

TEST(EpochOrder, SequentialWithoutShuffle) {
  EXPECT_EQ(EpochOrder(5, false, 7, 3), (std::vector<int64_t>{0, 1, 2, 3, 4}));
  const EpochPermutation big(kBillion, false, 7, 3);
  for (int64_t i : {int64_t{0}, int64_t{1}, int64_t{123456789}, kBillion - 1}) {
    EXPECT_EQ(big.at(i), i);
    EXPECT_EQ(big.inverse(i), i);
  }
}

TEST(EpochOrder, ShuffleIsAPermutationDeterministicInSeedAndEpoch) {
  const auto a = EpochOrder(1000, true, 42, 0);
  auto sorted = a;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, Iota(1000));
  EXPECT_EQ(a, EpochOrder(1000, true, 42, 0));
  EXPECT_NE(a, EpochOrder(1000, true, 42, 1));
  EXPECT_NE(a, EpochOrder(1000, true, 43, 0));
  EXPECT_NE(a, Iota(1000));
}

TEST(EpochOrder, KnownOrderIsStableAcrossPlatforms) {
  // Pinned so that a change of the shuffle (which would change every stored
  // workload's batch contents) is a deliberate one. Small epochs: the
  // Fisher-Yates table of sampler.cc (SplitMix64 draws); a billion: the
  // Feistel permutation (6 rounds, keys from SplitMix64).
  EXPECT_EQ(EpochOrder(8, true, 1, 0), (std::vector<int64_t>{0, 2, 3, 6, 5, 7, 1, 4}));
  EXPECT_EQ(EpochOrder(8, true, 1, 1), (std::vector<int64_t>{2, 1, 5, 3, 6, 7, 0, 4}));
  const EpochPermutation big(kBillion, true, 1, 0);
  EXPECT_EQ(big.at(0), 581452283);
  EXPECT_EQ(big.at(1), 931690918);
  EXPECT_EQ(big.at(2), 81568005);
  EXPECT_EQ(big.at(3), 811133009);
  EXPECT_EQ(big.at(4), 599048506);
}

// The table holds epochs up to kTableMaxSamples; one sample more is the
// on-demand network. Both are bijections; a table is shared by its copies.
TEST(EpochPermutation, ATableUpToItsBoundTheNetworkAbove) {
  constexpr int64_t bound = EpochPermutation::kTableMaxSamples;
  for (int64_t n : {bound, bound + 1}) {
    const EpochPermutation perm(n, true, 9, 2);
    EXPECT_EQ(perm.tabled(), n == bound) << n;
    std::vector<bool> seen(static_cast<size_t>(n), false);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t v = perm.at(i);
      ASSERT_TRUE(v >= 0 && v < n && !seen[static_cast<size_t>(v)]) << "n " << n << " position " << i;
      seen[static_cast<size_t>(v)] = true;
    }
    const EpochPermutation copy = perm;
    for (int64_t i : {int64_t{0}, n / 2, n - 1}) {
      EXPECT_EQ(copy.at(i), perm.at(i));
      EXPECT_EQ(perm.inverse(perm.at(i)), i);
    }
  }
  EXPECT_FALSE(EpochPermutation(bound, false, 9, 2).tabled());  // no shuffle: the identity, no table
}

TEST(EpochPermutation, BijectionCheckedExhaustivelyAtAMillion) {
  constexpr int64_t n = 1'000'000;
  for (int64_t epoch : {0, 1}) {
    const EpochPermutation perm(n, true, 2026, epoch);
    std::vector<bool> seen(static_cast<size_t>(n), false);
    int64_t fixed_points = 0;
    for (int64_t i = 0; i < n; ++i) {
      const int64_t v = perm.at(i);
      ASSERT_GE(v, 0) << "position " << i;
      ASSERT_LT(v, n) << "position " << i;
      ASSERT_FALSE(seen[static_cast<size_t>(v)]) << "sample " << v << " twice, at position " << i;
      seen[static_cast<size_t>(v)] = true;
      ASSERT_EQ(perm.inverse(v), i);
      fixed_points += v == i;
    }
    // n distinct values in [0, n): every sample exactly once. A random
    // permutation has about one fixed point; a weak mix would have many.
    EXPECT_LT(fixed_points, 10);
  }
}

TEST(EpochPermutation, BijectionAtSmallAndAwkwardSizes) {
  for (int64_t n : {0, 1, 2, 3, 5, 7, 8, 9, 63, 64, 65, 1000, 1023, 1024, 1025, 4097}) {
    for (uint64_t seed : {0ULL, 1ULL, 0xFFFFFFFFFFFFFFFFULL}) {
      for (int64_t epoch : {0, 1, 5}) {
        const EpochPermutation perm(n, true, seed, epoch);
        auto order = EpochOrder(n, true, seed, epoch);
        for (int64_t i = 0; i < n; ++i) ASSERT_EQ(perm.inverse(order[static_cast<size_t>(i)]), i) << "n " << n;
        std::sort(order.begin(), order.end());
        ASSERT_EQ(order, Iota(n)) << "n " << n << " seed " << seed << " epoch " << epoch;
      }
    }
  }
}

TEST(EpochPermutation, BijectionSampledAtABillion) {
  const EpochPermutation perm(kBillion, true, 7, 3);
  std::mt19937_64 rng(12345);
  std::uniform_int_distribution<int64_t> position(0, kBillion - 1);
  std::vector<int64_t> positions, values;
  for (int k = 0; k < 100'000; ++k) positions.push_back(position(rng));
  for (int64_t last : {int64_t{0}, kBillion - 1}) positions.push_back(last);
  std::sort(positions.begin(), positions.end());
  positions.erase(std::unique(positions.begin(), positions.end()), positions.end());
  for (int64_t i : positions) {
    const int64_t v = perm.at(i);
    ASSERT_GE(v, 0);
    ASSERT_LT(v, kBillion);
    ASSERT_EQ(perm.inverse(v), i) << "position " << i;
    values.push_back(v);
  }
  std::sort(values.begin(), values.end());
  EXPECT_EQ(std::adjacent_find(values.begin(), values.end()), values.end()) << "two positions share a sample";
  // And from the other side: random samples have a position that maps back.
  for (int k = 0; k < 10'000; ++k) {
    const int64_t v = position(rng);
    const int64_t i = perm.inverse(v);
    ASSERT_GE(i, 0);
    ASSERT_LT(i, kBillion);
    ASSERT_EQ(perm.at(i), v);
  }
}

TEST(EpochPermutation, ReproducibleInSeedAndEpochAndDifferentAcrossThem) {
  const EpochPermutation a(kBillion, true, 42, 0);
  const EpochPermutation again(kBillion, true, 42, 0);
  const EpochPermutation next_epoch(kBillion, true, 42, 1);
  const EpochPermutation other_seed(kBillion, true, 43, 0);
  int same_epoch = 0, same_seed = 0;
  for (int64_t i = 0; i < 10'000; ++i) {
    ASSERT_EQ(a.at(i), again.at(i));
    same_epoch += a.at(i) == next_epoch.at(i);
    same_seed += a.at(i) == other_seed.at(i);
  }
  EXPECT_EQ(same_epoch, 0);
  EXPECT_EQ(same_seed, 0);
  // Every epoch of a small dataset gets its own order too.
  std::set<std::vector<int64_t>> orders;
  for (int64_t epoch = 0; epoch < 20; ++epoch) orders.insert(EpochOrder(1000, true, 42, epoch));
  EXPECT_EQ(orders.size(), 20u);
}

TEST(EpochPermutation, LooksUniform) {
  // The first 100k positions of a 1e6 epoch fall evenly into ten value ranges
  // (binomial sd ~95 around 10000), and neighbouring positions are not close
  // in value: the order is a shuffle, not a rotation or a stride.
  constexpr int64_t n = 1'000'000;
  const EpochPermutation perm(n, true, 9, 0);
  std::vector<int> buckets(10, 0);
  int64_t near = 0;
  for (int64_t i = 0; i < 100'000; ++i) {
    ++buckets[static_cast<size_t>(perm.at(i) * 10 / n)];
    near += std::llabs(perm.at(i + 1) - perm.at(i)) < 1000;
  }
  for (int b : buckets) {
    EXPECT_GT(b, 9500);
    EXPECT_LT(b, 10500);
  }
  EXPECT_LT(near, 500);  // expected ~200 (a gap under 1000 has probability ~0.002)
}

TEST(EpochPermutation, HoldsNoIndexList) {
  // O(1) memory above the table bound: the sampler and the plan are a few words.
  static_assert(sizeof(EpochPermutation) <= 128);
  static_assert(sizeof(BatchPlan) <= 256);
  // And they are cheap to make: a billion-sample epoch's first batch is ready
  // at once (the bound is for a loaded, sanitised box; it takes microseconds).
  const auto start = std::chrono::steady_clock::now();
  const BatchPlan plan(EpochSampler(kBillion, true, 1, 0, 2, 8), 256, false);
  const auto first = plan.batch(0);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(first.size(), 256u);
  EXPECT_LT(s, 0.5);
}

TEST(EpochSampler, MatchesDistributedShareOfTheMaterialisedOrder) {
  // The on-demand share and torch's recipe on the whole list agree, padding included.
  for (int64_t n : {1, 2, 3, 7, 10, 100, 1001}) {
    for (int ws : {1, 2, 3, 4, 5, 8}) {
      for (bool shuffle : {false, true}) {
        const auto order = EpochOrder(n, shuffle, 5, 2);
        for (int r = 0; r < ws; ++r) {
          const EpochSampler s(n, shuffle, 5, 2, r, ws);
          ASSERT_EQ(s.size(), (n + ws - 1) / ws);
          ASSERT_EQ(Share(s), DistributedShare(order, r, ws)) << "n " << n << " rank " << r << " of " << ws;
        }
      }
    }
  }
  // torch's cut of a known order (indices += indices[:padding]; indices[rank::world_size]).
  const std::vector<int64_t> order = {7, 3, 9, 0, 1, 8, 2, 6, 5, 4};
  EXPECT_EQ(DistributedShare(order, 0, 3), (std::vector<int64_t>{7, 0, 2, 4}));
  EXPECT_EQ(DistributedShare(order, 2, 3), (std::vector<int64_t>{9, 8, 5, 3}));
}

TEST(EpochSampler, SharesAreDisjointAndCoverTheEpochWithPadding) {
  // 1e6 over 3 ranks: padded to 1000002, so every sample is read once except
  // the permutation's first two, read twice (torch repeats the head).
  constexpr int64_t n = 1'000'000;
  constexpr int ws = 3;
  std::vector<uint8_t> reads(static_cast<size_t>(n), 0);
  for (int r = 0; r < ws; ++r) {
    const EpochSampler s(n, true, 11, 4, r, ws);
    ASSERT_EQ(s.size(), 333'334);
    for (int64_t j = 0; j < s.size(); ++j) ++reads[static_cast<size_t>(s.at(j))];
  }
  const EpochPermutation perm(n, true, 11, 4);
  for (int64_t v = 0; v < n; ++v) {
    const bool head = v == perm.at(0) || v == perm.at(1);
    ASSERT_EQ(reads[static_cast<size_t>(v)], head ? 2 : 1) << "sample " << v;
  }
  // When the world divides the dataset the shares are disjoint and exact.
  std::set<int64_t> seen;
  for (int r = 0; r < 4; ++r) {
    const auto share = Share(EpochSampler(4096, true, 11, 2, r, 4));
    EXPECT_EQ(share.size(), 1024u);
    seen.insert(share.begin(), share.end());
  }
  EXPECT_EQ(seen.size(), 4096u);
  // Padding longer than the data repeats it: 2 samples over 5 ranks.
  for (int r = 0; r < 5; ++r) {
    const EpochSampler s(2, false, 0, 0, r, 5);
    ASSERT_EQ(s.size(), 1);
    EXPECT_EQ(s.at(0), r % 2);
  }
  EXPECT_EQ(EpochSampler(0, true, 0, 0, 1, 2).size(), 0);
  EXPECT_THROW(EpochSampler(10, true, 0, 0, 3, 3), std::invalid_argument);
  EXPECT_THROW(EpochSampler(10, true, 0, 0, -1, 3), std::invalid_argument);
  EXPECT_THROW(EpochSampler(10, true, 0, 0, 0, 0), std::invalid_argument);
  EXPECT_THROW(DistributedShare({1, 2}, 3, 3), std::invalid_argument);
}

TEST(BatchPlan, DropLastDropsTheShortBatch) {
  BatchPlan plan(EpochSampler(10, false, 0, 0), 4, true);
  ASSERT_EQ(plan.num_batches(), 2);
  EXPECT_EQ(plan.batch(0), (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(plan.batch(1), (std::vector<int64_t>{4, 5, 6, 7}));
  EXPECT_THROW(plan.batch(2), std::out_of_range);
}

TEST(BatchPlan, KeepLastKeepsTheShortBatch) {
  BatchPlan plan(EpochSampler(10, false, 0, 0), 4, false);
  ASSERT_EQ(plan.num_batches(), 3);
  EXPECT_EQ(plan.batch_length(2), 2);
  EXPECT_EQ(plan.batch(2), (std::vector<int64_t>{8, 9}));
}

TEST(BatchPlan, BatchesConcatenateToTheRankShare) {
  const EpochSampler sampler(1001, true, 3, 1, 1, 4);  // 251 samples for rank 1
  const BatchPlan plan(sampler, 16, false);
  ASSERT_EQ(plan.num_batches(), 16);  // ceil(251 / 16)
  std::vector<int64_t> all, buffer(16, -1);
  for (int64_t k = 0; k < plan.num_batches(); ++k) {
    const auto got = plan.FillBatch(k, buffer);
    EXPECT_EQ(got.data(), buffer.data());
    all.insert(all.end(), got.begin(), got.end());
  }
  EXPECT_EQ(all, Share(sampler));
  std::vector<int64_t> too_small(3);
  EXPECT_THROW(plan.FillBatch(0, too_small), std::invalid_argument);
  EXPECT_EQ(BatchPlan(sampler, 16, true).num_batches(), 15);
}

}  // namespace
}  // namespace feedtune::loader
