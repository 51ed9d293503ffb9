#include "results/units.h"

#include <cmath>
#include <cstdio>

namespace feedtune::results {

std::string ThreeFigures(double value) {
  if (!std::isfinite(value)) return "?";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", value >= 100 ? 0 : value >= 10 ? 1 : 2, value);
  return buf;
}

std::string ShortNumber(double value) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%g", value);
  return buf;
}

std::string DecimalBytes(double bytes) {
  if (bytes >= 1e6) return ThreeFigures(bytes / 1e6) + " MB";
  if (bytes >= 1e3) return ThreeFigures(bytes / 1e3) + " KB";
  return ThreeFigures(bytes) + " bytes";
}

std::string MiB(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f MiB", static_cast<double>(bytes) / (1 << 20));
  return buf;
}

}  // namespace feedtune::results
