// The HTML report's timeline section: about 200 ms of the baseline above the
// same of the best, as `sweep --trace` kept them (loader/trace.h's
// TimelineExcerpt each, stored as RunFacts::timelines_json).
// One row per worker, the pin stage, the copy and the step: gaps in the step
// row are the GPU waiting. Inline SVG, no script.
#pragma once

#include <string>

namespace feedtune::results {

// The section (heading, two SVG timelines, a legend) from `timelines_json`
// ({"baseline": ..., "best": ...}), or "" when the run kept no timelines (it
// ran without --trace).
std::string TimelineHtml(const std::string& timelines_json);

}  // namespace feedtune::results
