// Statistics over the repeats of one trial and over the num_workers curve:
// median, a 95% interval, the coefficient of variation, outliers, and the
// Kneedle knee. Pure functions, deterministic (the bootstrap uses a fixed
// seed), callable from any thread.
#pragma once

#include <optional>
#include <vector>

namespace feedtune::tuner {

double Median(std::vector<double> values);
// The median, or NaN ("not measured") for an empty input.
double MedianOrNaN(std::vector<double> values);
// Linear-interpolated percentile, p in [0, 100]; 0 for an empty input.
double Percentile(std::vector<double> values, double p);

struct Summary {
  double median = 0;
  double ci_low = 0;   // 95% percentile-bootstrap interval of the median
  double ci_high = 0;
  double cv = 0;       // sample standard deviation / mean; 0 with one value
  std::vector<bool> outliers;  // modified z-score 0.6745 |x - median| / MAD above 3.5
};

Summary Summarize(const std::vector<double>& values);

// Kneedle (Satopää et al., 2011) with sensitivity `s` on a concave increasing
// curve, as the reference implementation (the `kneed` package, offline mode)
// computes it: x and y normalised to [0, 1], difference curve d = y - x, and
// at each local maximum i of d a threshold d[i] - s * mean(diff(x)); the first
// local maximum after which d falls below its threshold is the knee.
// `x` must be strictly increasing and as long as `y`. Returns the index of the
// knee, or nullopt when there is none (fewer than 3 points, a flat or falling
// curve, or no drop below a threshold).
std::optional<size_t> KneedleIndex(const std::vector<double>& x, const std::vector<double>& y, double s = 1.0);

}  // namespace feedtune::tuner
