#include "tuner/measure/store_reads.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace feedtune::tuner {

void StoreWindows::Add(const loader::StoreReads& start, const loader::StoreReads& end) {
  sum_.requests += end.requests - start.requests;
  sum_.retries_slowdown += end.retries_slowdown - start.retries_slowdown;
  sum_.retries_server_error += end.retries_server_error - start.retries_server_error;
  sum_.retries_connection += end.retries_connection - start.retries_connection;
  sum_.objects += end.objects - start.objects;
  sum_.bytes += end.bytes - start.bytes;
  sum_.transfer_s += end.transfer_s - start.transfer_s;
  sum_.first_byte_low_s = end.first_byte_low_s;
  sum_.first_byte_counts.resize(end.first_byte_counts.size(), 0);
  for (size_t i = 0; i < end.first_byte_counts.size() && i < start.first_byte_counts.size(); ++i) {
    sum_.first_byte_counts[i] += end.first_byte_counts[i] - start.first_byte_counts[i];
  }
}

results::StoreFigures StoreWindows::Figures() const {
  results::StoreFigures f;
  f.requests = sum_.requests;
  f.retries_slowdown = sum_.retries_slowdown;
  f.retries_server_error = sum_.retries_server_error;
  f.retries_connection = sum_.retries_connection;
  f.objects = sum_.objects;
  f.bytes = sum_.bytes;
  f.first_byte_p50_s = HistogramPercentile(sum_.first_byte_counts, sum_.first_byte_low_s, 50);
  f.first_byte_p99_s = HistogramPercentile(sum_.first_byte_counts, sum_.first_byte_low_s, 99);
  if (sum_.transfer_s > 0) f.mb_per_s_per_connection = static_cast<double>(sum_.bytes) / sum_.transfer_s / 1e6;
  return f;
}

double HistogramPercentile(std::span<const int64_t> counts, std::span<const double> low, double p) {
  const int64_t total = std::accumulate(counts.begin(), counts.end(), int64_t{0});
  if (total <= 0 || counts.size() != low.size()) return std::numeric_limits<double>::quiet_NaN();
  // The rank of the value, as a continuous position over the values in order.
  const double rank = std::clamp(p, 0.0, 100.0) / 100 * static_cast<double>(total);
  double below = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    if (counts[i] <= 0) continue;
    const double count = static_cast<double>(counts[i]);
    if (below + count < rank && i + 1 < counts.size()) {
      below += count;
      continue;
    }
    if (i + 1 == counts.size()) return low[i];  // the open bucket: its low
    const double share = std::clamp((rank - below) / count, 0.0, 1.0);
    const double lo = low[i];
    const double hi = low[i + 1];
    return lo > 0 ? lo * std::pow(hi / lo, share) : lo + (hi - lo) * share;
  }
  return low.back();
}

}  // namespace feedtune::tuner
