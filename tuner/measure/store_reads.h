// StoreWindows: a trial's figures of a remote store (results::StoreFigures),
// from what its dataset read in each of its windows (Dataset::ReadsFromStore,
// counted in every worker process: storage/fetch_tally.h). The trial runner
// reads the counts at each window's edges and adds the windows in its
// figures; reads between windows (the warm-up, a re-measured window) are not
// counted. docs/storage.md#remote-data-in-a-sweep.
#pragma once

#include <cstdint>
#include <span>

#include "loader/dataset.h"
#include "results/records.h"

namespace feedtune::tuner {

class StoreWindows {
 public:
  // One window: the counts at its start and at its end.
  void Add(const loader::StoreReads& start, const loader::StoreReads& end);
  // Over the windows added: first byte p50 and p99 from their histogram,
  // MB/s per connection (bytes over the seconds after the first bytes), the
  // requests and retries.
  results::StoreFigures Figures() const;

 private:
  loader::StoreReads sum_;
};

// The p-th percentile (0..100) of a histogram: counts[i] values from low[i]
// up to low[i + 1] (the last bucket: low.back() and up, read as its low),
// within a bucket by equal ratios (log-spaced buckets), from 0 linearly. NaN
// when the counts are all 0.
double HistogramPercentile(std::span<const int64_t> counts, std::span<const double> low, double p);

}  // namespace feedtune::tuner
