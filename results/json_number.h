// A figure in feedtune's JSON: the number, or null where it was not measured
// (NaN, or not finite). One form for every JSON the tool writes (the report,
// compare, the verdict, the sweep's events, the rank wire), as
// docs/json-report.md promises: null means not measured, never 0.
#pragma once

#include <cmath>

#include <nlohmann/json.hpp>

namespace feedtune::results {

// Json is nlohmann::json or nlohmann::ordered_json, whichever the caller builds.
template <typename Json = nlohmann::json>
Json JsonNumber(double value) {
  return std::isfinite(value) ? Json(value) : Json(nullptr);
}

}  // namespace feedtune::results
