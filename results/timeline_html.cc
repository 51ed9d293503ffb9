#include "results/timeline_html.h"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "results/report.h"

namespace feedtune::results {
namespace {

constexpr double kLabelWidth = 90;   // px, row names
constexpr double kPlotWidth = 760;   // px, the excerpt's milliseconds
constexpr double kRowHeight = 16;
constexpr double kAxisHeight = 18;

std::string Num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

// A row's colour by what it shows; workers share one.
const char* Fill(const std::string& row) {
  if (row == "pin") return "#e69f00";
  if (row == "copy") return "#cc79a7";
  if (row == "step") return "#009e73";
  return "#0072b2";
}

// One excerpt as an SVG: rows of spans over `ms` milliseconds.
std::string TimelineSvg(const nlohmann::json& excerpt, const std::string& title) {
  const double ms = excerpt.value("ms", 200.0);
  const auto& rows = excerpt["rows"];
  const double height = kAxisHeight + kRowHeight * static_cast<double>(rows.size()) + 4;
  const double width = kLabelWidth + kPlotWidth + 24;  // room for the last tick label
  const auto x = [&](double us) { return kLabelWidth + std::clamp(us / (ms * 1000), 0.0, 1.0) * kPlotWidth; };
  std::string svg = "<svg class=\"timeline\" role=\"img\" viewBox=\"0 0 " + Num(width) + " " + Num(height) +
                    "\" width=\"" + Num(width) + "\" height=\"" + Num(height) + "\"><title>" +
                    internal::EscapeHtml(title) + "</title>\n";
  // Axis: a tick every 20 ms.
  for (double t = 0; t <= ms + 1e-9; t += 20) {
    const std::string px = Num(x(t * 1000));
    svg += "<line x1=\"" + px + "\" y1=\"" + Num(kAxisHeight - 4) + "\" x2=\"" + px + "\" y2=\"" + Num(height) +
           "\" stroke=\"#ddd\"/><text x=\"" + px + "\" y=\"11\" font-size=\"10\" text-anchor=\"middle\">" +
           Num(t).substr(0, Num(t).size() - 2) + " ms</text>\n";
  }
  double y = kAxisHeight;
  for (const auto& row : rows) {
    const std::string name = row.value("name", "");
    svg += "<text x=\"0\" y=\"" + Num(y + kRowHeight - 4) + "\" font-size=\"11\">" + internal::EscapeHtml(name) +
           "</text>\n";
    svg += "<g fill=\"" + std::string(Fill(name)) + "\" data-row=\"" + internal::EscapeHtml(name) + "\">";
    for (const auto& span : row["spans"]) {
      if (!span.is_array() || span.size() != 2) continue;
      const double x0 = x(span[0].get<double>());
      const double x1 = x(span[0].get<double>() + span[1].get<double>());
      svg += "<rect x=\"" + Num(x0) + "\" y=\"" + Num(y + 2) + "\" width=\"" + Num(std::max(x1 - x0, 0.5)) +
             "\" height=\"" + Num(kRowHeight - 4) + "\"/>";
    }
    svg += "</g>\n";
    y += kRowHeight;
  }
  return svg + "</svg>\n";
}

}  // namespace

std::string TimelineHtml(const std::string& timelines_json) {
  if (timelines_json.empty()) return {};
  const auto timelines = nlohmann::json::parse(timelines_json, nullptr, /*allow_exceptions=*/false);
  if (!timelines.is_object()) return {};
  std::string section = "<h2>Timeline: the baseline above the best</h2>\n";
  section +=
      "<p class=\"meta\">The first milliseconds of each setting's traced window (<code>sweep --trace</code>; the "
      "full traces open in Perfetto, docs/trace.md): one row per worker (its batches), the pin stage, the "
      "host-to-device copy and the model step. Gaps in the step row are the GPU waiting for data.</p>\n";
  bool any = false;
  for (const char* which : {"baseline", "best"}) {
    if (!timelines.contains(which) || !timelines[which].is_object() || !timelines[which].contains("rows")) continue;
    const std::string knobs = timelines[which].value("knobs", "");
    section += "<h3>" + std::string(which) + (knobs.empty() ? "" : ": " + internal::EscapeHtml(knobs)) + "</h3>\n";
    section += "<div class=\"scroll\">\n" + TimelineSvg(timelines[which], std::string(which) + " timeline") +
               "</div>\n";
    any = true;
  }
  return any ? section : std::string();
}

}  // namespace feedtune::results
