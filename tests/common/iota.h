// 0, 1, ..., n - 1: the order a sampler without shuffle gives, the indices an
// epoch must cover.
#pragma once

#include <cstdint>
#include <numeric>
#include <vector>

namespace feedtune::testing_util {

inline std::vector<int64_t> Iota(int64_t n) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), 0);
  return v;
}

}  // namespace feedtune::testing_util
