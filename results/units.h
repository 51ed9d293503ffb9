// Numbers in the words of advice lines and notes, one spelling each, shared by
// the verdict's rules and the stage trials that report what they measured.
#pragma once

#include <string>

namespace feedtune::results {

// Three significant figures at most: "0.42", "12.5", "840"; "?" when not finite.
std::string ThreeFigures(double value);
// The shortest exact-enough form ("%g"): "0.5", "2", "1e-05"; for command arguments.
std::string ShortNumber(double value);
// A byte count in decimal units: "512 bytes", "4.10 KB", "150 MB".
std::string DecimalBytes(double bytes);

}  // namespace feedtune::results
