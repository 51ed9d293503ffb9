// Statistics over the repeats of one trial: median, a 95% interval, the
// coefficient of variation and outliers. Pure functions, deterministic (the
// bootstrap uses a fixed seed), callable from any thread.
#pragma once

#include <vector>

namespace feedtune::tuner {

double Median(std::vector<double> values);
// Linear-interpolated percentile, p in [0, 100]; 0 for an empty input.
double Percentile(std::vector<double> values, double p);

struct Summary {
  double median = 0;
  double ci_low = 0;   // 95% percentile-bootstrap interval of the median
  double ci_high = 0;
  double cv = 0;       // standard deviation / mean
  std::vector<bool> outliers;  // modified z-score (median/MAD) above 3.5
};

Summary Summarize(const std::vector<double>& values);

}  // namespace feedtune::tuner
