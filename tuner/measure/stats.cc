#include "tuner/measure/stats.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>

namespace feedtune::tuner {
namespace {

constexpr int kBootstrapResamples = 2000;
constexpr double kOutlierZ = 3.5;

}  // namespace

double Median(std::vector<double> values) { return Percentile(std::move(values), 50); }

double MedianOrNaN(std::vector<double> values) {
  return values.empty() ? std::numeric_limits<double>::quiet_NaN() : Median(std::move(values));
}

double Percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const double rank = p / 100.0 * static_cast<double>(values.size() - 1);
  const auto lo = static_cast<size_t>(std::floor(rank));
  const auto hi = static_cast<size_t>(std::ceil(rank));
  return values[lo] + (values[hi] - values[lo]) * (rank - static_cast<double>(lo));
}

Summary Summarize(const std::vector<double>& values) {
  Summary s;
  if (values.empty()) return s;
  const size_t n = values.size();
  s.median = Median(values);
  const double mean = std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(n);
  double var = 0;
  for (double v : values) var += (v - mean) * (v - mean);
  s.cv = n > 1 && mean != 0 ? std::sqrt(var / static_cast<double>(n - 1)) / mean : 0;

  // Percentile bootstrap of the median. With few repeats it spans about the
  // range of the data, which is the honest answer for three windows.
  if (n == 1) {
    s.ci_low = s.ci_high = values[0];
  } else {
    uint64_t state = 0x853C49E6748FEA9BULL;
    std::vector<double> medians(kBootstrapResamples);
    std::vector<double> resample(n);
    for (auto& m : medians) {
      for (auto& r : resample) {
        state = state * 6364136223846793005ULL + 1442695040888963407ULL;
        r = values[static_cast<size_t>((state >> 33) % n)];
      }
      m = Median(resample);
    }
    s.ci_low = Percentile(medians, 2.5);
    s.ci_high = Percentile(medians, 97.5);
  }

  std::vector<double> deviations;
  for (double v : values) deviations.push_back(std::abs(v - s.median));
  const double mad = Median(deviations);
  for (double v : values) s.outliers.push_back(mad > 0 && 0.6745 * std::abs(v - s.median) / mad > kOutlierZ);
  return s;
}

std::optional<size_t> KneedleIndex(const std::vector<double>& x, const std::vector<double>& y, double s) {
  const size_t n = x.size();
  if (n < 3 || y.size() != n) return std::nullopt;
  const auto [y_min, y_max] = std::minmax_element(y.begin(), y.end());
  const double x_span = x.back() - x.front();
  const double y_span = *y_max - *y_min;
  if (x_span <= 0 || y_span <= 0) return std::nullopt;

  std::vector<double> d(n);
  for (size_t i = 0; i < n; ++i) {
    d[i] = (y[i] - *y_min) / y_span - (x[i] - x.front()) / x_span;
  }
  // Mean step of the normalised x: the whole span over n - 1 steps.
  const double threshold_step = s * 1.0 / static_cast<double>(n - 1);

  // Local extrema of d as kneed finds them: argrelextrema with >= (<=) and
  // mode "clip", so an end point compares with itself on its open side.
  std::vector<bool> is_max(n), is_min(n);
  for (size_t i = 0; i < n; ++i) {
    const double left = d[i == 0 ? 0 : i - 1];
    const double right = d[i + 1 == n ? i : i + 1];
    is_max[i] = d[i] >= left && d[i] >= right;
    is_min[i] = d[i] <= left && d[i] <= right;
  }
  std::optional<size_t> candidate;
  double threshold = 0;
  for (size_t i = 0; i + 1 < n; ++i) {
    if (is_max[i]) {
      candidate = i;
      threshold = d[i] - threshold_step;
    }
    if (is_min[i]) threshold = 0;
    if (candidate && d[i + 1] < threshold) return candidate;
  }
  return std::nullopt;
}

}  // namespace feedtune::tuner
