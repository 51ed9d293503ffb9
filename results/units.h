// Numbers in words, one spelling each, shared by the renderers (report,
// compare, export, the verdict), the search's rules and notes, and the CLI.
#pragma once

#include <cstdint>
#include <string>

namespace feedtune::results {

// A fixed number of decimals: Fixed(12.345, 1) is "12.3"; "-" when not finite
// (a figure not measured), as the reports' tables show it.
std::string Fixed(double value, int decimals);
// Three significant figures at most: "0.42", "12.5", "840"; "?" when not finite.
std::string ThreeFigures(double value);
// The shortest exact-enough form ("%g"): "0.5", "2", "1e-05"; for command arguments.
std::string ShortNumber(double value);
// A byte count in decimal units: "512 bytes", "4.10 KB", "150 MB".
std::string DecimalBytes(double bytes);
// A duration in the unit that reads best: "12.3 s", "4.5 min", "2.1 h"; "-" when not finite.
std::string Duration(double seconds);
// printf into a string, of any length.
std::string Format(const char* format, ...) __attribute__((format(printf, 1, 2)));
// "GPU idle 25.5%", or "GPU idle not measured".
std::string IdleText(double frac);
// Memory and shared-memory sizes, budgets and limits: "372 MiB" (to the nearest MiB).
std::string MiB(int64_t bytes);

}  // namespace feedtune::results
