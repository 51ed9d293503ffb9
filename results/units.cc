#include "results/units.h"

#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <vector>

namespace feedtune::results {

std::string Fixed(double value, int decimals) {
  if (!std::isfinite(value)) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, value);
  return buf;
}

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

std::string Duration(double seconds) {
  if (!std::isfinite(seconds)) return "-";
  if (seconds < 120) return Fixed(seconds, 1) + " s";
  if (seconds < 7200) return Fixed(seconds / 60, 1) + " min";
  return Fixed(seconds / 3600, 1) + " h";
}

std::string Format(const char* format, ...) {
  va_list args;
  va_start(args, format);
  va_list again;
  va_copy(again, args);
  const int n = std::vsnprintf(nullptr, 0, format, args);
  va_end(args);
  std::string out;
  if (n > 0) {
    std::vector<char> buf(static_cast<size_t>(n) + 1);
    std::vsnprintf(buf.data(), buf.size(), format, again);
    out.assign(buf.data(), static_cast<size_t>(n));
  }
  va_end(again);
  return out;
}

std::string MiB(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f MiB", static_cast<double>(bytes) / (1 << 20));
  return buf;
}

std::string IdleText(double frac) {
  return std::isfinite(frac) ? "GPU idle " + Fixed(frac * 100, 1) + "%" : std::string("GPU idle not measured");
}

}  // namespace feedtune::results
