#include "results/verdict.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "results/json_form.h"
#include "results/report.h"
#include "results/units.h"

namespace feedtune::results {
namespace {

using internal::EscapeHtml;


double NumberOr(const nlohmann::json& j, const char* key) {
  return j.contains(key) && j[key].is_number() ? j[key].get<double>() : kNaN;
}

double At(const nlohmann::json& j, const char* key, size_t index) {
  return j.contains(key) && j[key].is_array() && j[key].size() > index && j[key][index].is_number()
             ? j[key][index].get<double>()
             : kNaN;
}

std::string Text(const nlohmann::json& j, const char* key) {
  return j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : std::string();
}

// "1234", "12.3", "0.123": three significant figures, the way the summary prints rates.
std::string Rate(double value) {
  if (!std::isfinite(value)) return "-";
  const int decimals = value >= 100 ? 0 : value >= 10 ? 1 : 2;
  return Fixed(value, decimals);
}

std::string RateCell(const StageRate& s) {
  if (!s.measured) return "not measured";
  if (!std::isfinite(s.samples_per_s)) return "no measurable cost";
  return Rate(s.samples_per_s) + " [" + Rate(s.ci_low) + ", " + Rate(s.ci_high) + "]";
}

}  // namespace

const std::vector<std::string>& StageNames() {
  static const std::vector<std::string> names = {"step", "copy", "transport", "prep", "fetch"};
  return names;
}

std::string InputBoundBand(double input_bound_frac) {
  if (!std::isfinite(input_bound_frac)) return "";
  if (input_bound_frac < kInputBoundModerate) return "not input-bound";
  if (input_bound_frac < kInputBoundHigh) return "moderately input-bound";
  return "highly input-bound";
}

std::string Verdict::Band() const {
  return InputBoundBand(input_bound_frac);
}

const StageRate* Verdict::Find(const std::string& stage) const {
  for (const StageRate& s : stages) {
    if (s.stage == stage) return &s;
  }
  return nullptr;
}

nlohmann::json VerdictJson(const Verdict& v) {
  nlohmann::json stages = nlohmann::json::array();
  for (const StageRate& s : v.stages) {
    stages.push_back({{"stage", s.stage},
                      {"measured", s.measured},
                      {"samples_per_s", JsonNumber(s.samples_per_s)},
                      {"ci", {JsonNumber(s.ci_low), JsonNumber(s.ci_high)}},
                      {"trial_samples_per_s", JsonNumber(s.trial_samples_per_s)},
                      {"trial_ci", {JsonNumber(s.trial_ci_low), JsonNumber(s.trial_ci_high)}},
                      {"note", s.note}});
  }
  const loader::Knobs& k = v.knobs;
  nlohmann::json j = {{"config", LoaderKnobsJson<nlohmann::json>(k)},
            {"bottleneck", v.bottleneck.empty() ? nlohmann::json(nullptr) : nlohmann::json(v.bottleneck)},
            {"runner_up", v.runner_up.empty() ? nlohmann::json(nullptr) : nlohmann::json(v.runner_up)},
            {"headroom", JsonNumber(v.headroom)},
            {"input_bound_frac", JsonNumber(v.input_bound_frac)},
            {"band", v.Band().empty() ? nlohmann::json(nullptr) : nlohmann::json(v.Band())},
            {"stages", stages},
            {"advice", v.advice},
            {"notes", v.notes}};
  return j;
}

std::string VerdictToJson(const Verdict& v) { return VerdictJson(v).dump(); }

std::optional<Verdict> VerdictFromJson(const std::string& text) {
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("stages") || !j["stages"].is_array()) return std::nullopt;
  Verdict v;
  if (j.contains("config") && j["config"].is_object()) {
    const nlohmann::json& c = j["config"];
    v.knobs.batch_size = c.value("batch_size", v.knobs.batch_size);
    v.knobs.num_workers = c.value("num_workers", v.knobs.num_workers);
    v.knobs.pin_memory = c.value("pin_memory", v.knobs.pin_memory);
    v.knobs.non_blocking = c.value("non_blocking", v.knobs.non_blocking);
    v.knobs.prefetch_factor = c.value("prefetch_factor", v.knobs.prefetch_factor);
    v.knobs.persistent_workers = c.value("persistent_workers", v.knobs.persistent_workers);
  }
  v.bottleneck = Text(j, "bottleneck");
  v.runner_up = Text(j, "runner_up");
  v.headroom = NumberOr(j, "headroom");
  v.input_bound_frac = NumberOr(j, "input_bound_frac");
  v.advice = Text(j, "advice");
  if (j.contains("notes") && j["notes"].is_array()) {
    for (const nlohmann::json& n : j["notes"]) {
      if (n.is_string()) v.notes.push_back(n.get<std::string>());
    }
  }
  for (const nlohmann::json& s : j["stages"]) {
    if (!s.is_object()) return std::nullopt;
    StageRate rate;
    rate.stage = Text(s, "stage");
    rate.measured = s.value("measured", false);
    rate.samples_per_s = NumberOr(s, "samples_per_s");
    rate.ci_low = At(s, "ci", 0);
    rate.ci_high = At(s, "ci", 1);
    rate.trial_samples_per_s = NumberOr(s, "trial_samples_per_s");
    rate.trial_ci_low = At(s, "trial_ci", 0);
    rate.trial_ci_high = At(s, "trial_ci", 1);
    rate.note = Text(s, "note");
    v.stages.push_back(rate);
  }
  return v;
}

std::string VerdictText(const Verdict& v, const std::string& indent) {
  std::vector<std::vector<std::string>> rows;
  for (const StageRate& s : v.stages) {
    std::string mark = s.stage == v.bottleneck ? "<- bottleneck" : s.stage == v.runner_up ? "<- runner-up" : "";
    rows.push_back({s.stage, RateCell(s), s.measured ? Rate(s.trial_samples_per_s) : "-", mark});
  }
  const std::string table = internal::RenderRows({{"stage", false},
                                                  {"samples/s alone [95% interval]", true},
                                                  {"trial samples/s", true},
                                                  {"", false}},
                                                 rows);
  std::string text;
  size_t start = 0;
  while (start < table.size()) {
    const size_t end = table.find('\n', start);
    std::string line = table.substr(start, end - start);
    while (!line.empty() && line.back() == ' ') line.pop_back();
    text += indent + line + "\n";
    start = end + 1;
  }
  if (!v.bottleneck.empty()) {
    std::string line = "bottleneck: " + v.bottleneck;
    const StageRate* runner = v.Find(v.runner_up);
    if (runner != nullptr && std::isfinite(v.headroom)) {
      line += " (fixing " + v.bottleneck + " gains at most " + Fixed(v.headroom, 1) + "x, then " + v.runner_up +
              " limits)";
    }
    text += indent + line + "\n";
  }
  if (std::isfinite(v.input_bound_frac)) {
    text += indent + "input-bound: " + Fixed(v.input_bound_frac * 100, 1) + "% of the step time (" + v.Band() +
            ")\n";
  }
  if (!v.advice.empty()) text += indent + "advice: " + v.advice + "\n";
  for (const std::string& note : v.notes) text += indent + "note: " + note + "\n";
  return text;
}

std::string VerdictHtml(const Verdict& v) {
  // Bars on one linear axis from 0 to the largest finite rate, capped at 10x
  // the bottleneck's so that it stays visible (a longer bar ends at the edge;
  // its figure says how far it goes); a stage with no measurable cost gets a
  // hatched full-width bar, one not measured none.
  double top = 0;
  for (const StageRate& s : v.stages) {
    if (std::isfinite(s.samples_per_s)) top = std::max(top, std::max(s.samples_per_s, s.ci_high));
  }
  if (const StageRate* b = v.Find(v.bottleneck); b != nullptr && std::isfinite(b->samples_per_s)) {
    top = std::min(top, 10 * b->samples_per_s);
  }
  if (!(top > 0)) top = 1;
  constexpr int kLabelW = 90, kBarW = 520, kRowH = 30, kValueW = 260;
  const int height = static_cast<int>(v.stages.size()) * kRowH + 10;
  const int width = kLabelW + kBarW + kValueW;
  const auto x = [&](double rate) { return kLabelW + kBarW * std::clamp(rate / top, 0.0, 1.0); };
  char buf[512];
  std::string svg = "<svg class=\"stages\" role=\"img\" width=\"" + std::to_string(width) + "\" height=\"" +
                    std::to_string(height) + "\" viewBox=\"0 0 " + std::to_string(width) + " " +
                    std::to_string(height) + "\" aria-label=\"samples/s each stage sustains alone\">\n";
  svg +=
      "<defs><pattern id=\"nocost\" width=\"8\" height=\"8\" patternUnits=\"userSpaceOnUse\" "
      "patternTransform=\"rotate(45)\"><rect width=\"4\" height=\"8\" fill=\"#d0d7de\"/></pattern></defs>\n";
  for (size_t i = 0; i < v.stages.size(); ++i) {
    const StageRate& s = v.stages[i];
    const int y = static_cast<int>(i) * kRowH + 6;
    const bool bottleneck = s.stage == v.bottleneck;
    std::snprintf(buf, sizeof buf, "<g class=\"stage%s\" data-stage=\"%s\">", bottleneck ? " bottleneck" : "",
                  s.stage.c_str());
    svg += buf;
    std::snprintf(buf, sizeof buf, "<text x=\"%d\" y=\"%d\"%s>%s</text>", kLabelW - 8, y + 16,
                  " text-anchor=\"end\"", EscapeHtml(s.stage).c_str());
    svg += buf;
    std::string value;
    if (!s.measured) {
      value = "not measured";
    } else if (!std::isfinite(s.samples_per_s)) {
      std::snprintf(buf, sizeof buf, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"20\" fill=\"url(#nocost)\"/>",
                    kLabelW, y, kBarW);
      svg += buf;
      value = "no measurable cost";
    } else {
      std::snprintf(buf, sizeof buf, "<rect x=\"%d\" y=\"%d\" width=\"%.1f\" height=\"20\" fill=\"%s\"/>", kLabelW,
                    y, x(s.samples_per_s) - kLabelW, bottleneck ? "#cf222e" : "#0969da");
      svg += buf;
      if (std::isfinite(s.ci_low) && std::isfinite(s.ci_high)) {
        std::snprintf(buf, sizeof buf,
                      "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%d\" y2=\"%d\" stroke=\"#1f2328\" stroke-width=\"1.5\"/>",
                      x(s.ci_low), x(s.ci_high), y + 10, y + 10);
        svg += buf;
      }
      value = Rate(s.samples_per_s) + " samples/s";
      if (bottleneck) value += "  (bottleneck)";
    }
    std::snprintf(buf, sizeof buf, "<text x=\"%d\" y=\"%d\"%s>%s</text></g>\n", kLabelW + kBarW + 8, y + 16,
                  bottleneck ? " font-weight=\"700\"" : "", EscapeHtml(value).c_str());
    svg += buf;
  }
  svg += "</svg>\n";

  std::string html = "<section class=\"verdict\">\n<h2>Where the time goes</h2>\n";
  html += "<p class=\"meta\">Differential stage trials at " + EscapeHtml(internal::KnobsText(v.knobs)) +
          ": what each stage sustains alone (the bar), with its 95% interval (the line). See docs/verdict.md.</p>\n";
  html += svg;
  html += "<ul>\n";
  if (!v.bottleneck.empty()) {
    std::string line = "<b>Bottleneck: " + EscapeHtml(v.bottleneck) + "</b>";
    if (std::isfinite(v.headroom) && !v.runner_up.empty()) {
      line += " (fixing it gains at most " + Fixed(v.headroom, 1) + "x, then " + EscapeHtml(v.runner_up) +
              " limits)";
    }
    html += "<li>" + line + "</li>\n";
  }
  if (std::isfinite(v.input_bound_frac)) {
    html += "<li>Input-bound: " + Fixed(v.input_bound_frac * 100, 1) + "% of the step time (" +
            EscapeHtml(v.Band()) + ")</li>\n";
  }
  if (!v.advice.empty()) html += "<li>Advice: " + EscapeHtml(v.advice) + "</li>\n";
  for (const std::string& note : v.notes) html += "<li>Note: " + EscapeHtml(note) + "</li>\n";
  html += "</ul>\n</section>\n";
  return html;
}

}  // namespace feedtune::results
