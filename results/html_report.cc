// `feedtune report --format html`: one self-contained page. Everything is
// inline (CSS, SVG); there is no script and no external resource, so the file
// can be mailed, attached to a ticket or opened offline and look the same.
//
// Every plotted point carries its figures as data-* attributes (exact,
// shortest round-trip form) so tests and scripts can read the chart back
// without guessing from pixel positions.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "results/background.h"
#include "results/layout_report.h"
#include "results/report.h"
#include "results/node_report.h"
#include "results/timeline_html.h"
#include "results/units.h"

namespace feedtune::results {

namespace internal {

std::string ExactNumber(double value) {
  if (!std::isfinite(value)) return "";
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof(buffer), value);
  return std::string(buffer, result.ptr);
}

std::string HtmlPage(std::string_view title, std::string_view body) {
  // System fonts only: a web font would need the network.
  static constexpr std::string_view kStyle = R"css(
body { font-family: -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif;
       margin: 24px auto; max-width: 1120px; padding: 0 16px; color: #1f2328; background: #fff; }
h1 { font-size: 22px; margin: 0 0 4px; }
h2 { font-size: 17px; margin: 28px 0 8px; border-bottom: 1px solid #d0d7de; padding-bottom: 4px; }
p.meta { color: #59636e; margin: 0 0 12px; font-size: 14px; }
.cards { display: flex; flex-wrap: wrap; gap: 12px; }
.card { border: 1px solid #d0d7de; border-radius: 6px; padding: 10px 14px; min-width: 180px; }
.card .k { font-size: 12px; color: #59636e; text-transform: uppercase; letter-spacing: .04em; }
.card .v { font-size: 20px; font-weight: 600; margin-top: 2px; }
.card .s { font-size: 12px; color: #59636e; margin-top: 2px; }
.charts { display: flex; flex-wrap: wrap; gap: 0 24px; }
.charts > div { flex: 1 1 520px; }
.scroll { overflow-x: auto; }
table { border-collapse: collapse; font-size: 12px; }
th, td { border-bottom: 1px solid #e6e8eb; padding: 3px 6px; text-align: left; vertical-align: top; }
td.note { min-width: 260px; }
table.compare td { white-space: nowrap; }
table.compare td.config { white-space: normal; min-width: 150px; }
table.trials th.n { white-space: normal; max-width: 64px; }
th { background: #f6f8fa; font-weight: 600; }
td.n, th.n { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
tr.best td { background: #e9f7ef; }
tr.named td, td.named { background: #e9f7ef; font-weight: 600; }
tr.knee td { background: #fff8e1; }
tr.failed td { color: #b42318; }
tr.outlier td { background: #fdecea; }
details.class { margin: 6px 0; } details.class summary { cursor: pointer; font-size: 14px; padding: 2px 0; }
.badge { display: inline-block; font-size: 11px; padding: 0 6px; border-radius: 8px; margin-right: 4px;
         color: #fff; background: #59636e; }
.badge.best { background: #1a7f37; } .badge.knee { background: #bf8700; } .badge.baseline { background: #59636e; }
table.kv th { width: 220px; }
pre { background: #f6f8fa; border: 1px solid #d0d7de; border-radius: 6px; padding: 10px; font-size: 12px;
      overflow-x: auto; }
svg { max-width: 100%; height: auto; }
svg text { font-family: inherit; font-size: 12px; fill: #1f2328; }
svg .grid { stroke: #e6e8eb; }
svg .axis { stroke: #59636e; }
svg .series { fill: none; stroke: #0969da; stroke-width: 2; }
svg .point circle { fill: #0969da; }
svg .whisker { stroke: #0969da; stroke-width: 1.5; }
svg .baseline { stroke: #59636e; stroke-dasharray: 6 4; stroke-width: 1.5; }
svg .best-line { stroke: #1a7f37; stroke-dasharray: 2 3; stroke-width: 1.5; }
svg .knee circle { fill: none; stroke: #bf8700; stroke-width: 3; }
svg .knee line { stroke: #bf8700; stroke-dasharray: 3 3; }
svg .failed text { fill: #b42318; font-weight: 700; }
svg.idle .series { stroke: #cf222e; } svg.idle .point circle { fill: #cf222e; }
footer { margin-top: 32px; color: #59636e; font-size: 12px; }
)css";
  std::string page = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\"/>\n";
  page += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"/>\n";
  page += "<title>" + EscapeHtml(title) + "</title>\n<style>" + std::string(kStyle) +
          "</style>\n</head>\n<body>\n";
  page += body;
  page += "</body>\n</html>\n";
  return page;
}

std::string Attr(std::string_view name, std::string_view value) {
  // Appended piece by piece: GCC 12 warns (-Wrestrict, falsely) on "literal" + string here.
  std::string attr(1, ' ');
  attr.append(name).append("=\"").append(EscapeHtml(value)).append(1, '"');
  return attr;
}

std::string Px(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%.1f", value);
  return buffer;
}

// A "nice" step (1, 2 or 5 times a power of ten) that cuts [0, top] into about `count` parts.
double NiceStep(double top, int count) {
  if (!(top > 0)) return 1;
  const double raw = top / count;
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  for (double factor : {1.0, 2.0, 5.0, 10.0}) {
    if (raw <= factor * magnitude) return factor * magnitude;
  }
  return 10 * magnitude;
}

std::string TickLabel(double value, double step) {
  if (step >= 1) {
    // Thousands grouped with a thin space keep 12000 readable on the axis.
    const long long whole = std::llround(value);
    std::string digits = std::to_string(whole < 0 ? -whole : whole);
    for (int i = static_cast<int>(digits.size()) - 3; i > 0; i -= 3) {
      digits.insert(static_cast<size_t>(i), "\u2009");
    }
    return (whole < 0 ? "-" : "") + digits;
  }
  return Fixed(value, step >= 0.1 ? 1 : 2);
}

std::string Card(std::string_view key, std::string_view value, std::string_view sub) {
  return "<div class=\"card\"><div class=\"k\">" + EscapeHtml(key) + "</div><div class=\"v\">" +
         EscapeHtml(value) + "</div><div class=\"s\">" + EscapeHtml(sub) + "</div></div>\n";
}

// The machine table's own spellings.
namespace {

std::string Bytes(int64_t bytes) {
  if (bytes <= 0) return "-";
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024 && unit < 4) {
    value /= 1024;
    ++unit;
  }
  return Fixed(value, unit == 0 ? 0 : 1) + " " + units[unit];
}

std::string Row(std::string_view key, std::string_view value) {
  return "<tr><th>" + EscapeHtml(key) + "</th><td>" + EscapeHtml(value) + "</td></tr>\n";
}

}  // namespace

std::string MachineSection(const Fingerprint& m) {
  std::string html = "<table class=\"kv\">\n";
  html += Row("label", m.label.empty() ? m.hostname : m.label);
  html += Row("hostname", m.hostname);
  html += Row("hash", m.Hash());
  html += Row("CPU", m.cpu_model);
  html += Row("CPUs (usable / logical)",
              std::to_string(m.usable_cpus) + " / " + std::to_string(m.logical_cpus));
  html += Row("cgroup CPU limit", m.cgroup_cpu_limit > 0 ? Fixed(m.cgroup_cpu_limit, 2) + " CPUs" : "none");
  html += Row("NUMA nodes", std::to_string(m.numa_nodes));
  html += Row("memory", Bytes(m.mem_total_bytes));
  html += Row("cgroup memory limit",
              m.cgroup_mem_limit_bytes > 0 ? Bytes(m.cgroup_mem_limit_bytes) : "none");
  html += Row("/dev/shm", Bytes(m.shm_bytes));
  html += Row("open-file limit", std::to_string(m.nofile_limit));
  html += Row("kernel", m.kernel);
  if (m.gpus.empty()) {
    html += Row("GPU", m.gpu_count > 0 ? std::to_string(m.gpu_count) + "x " + m.gpu_name + ", " +
                                             Bytes(m.gpu_mem_bytes) + ", driver " + m.gpu_driver +
                                             (m.pcie_link.empty() ? "" : ", " + m.pcie_link)
                                       : "none");
  }
  for (size_t i = 0; i < m.gpus.size(); ++i) {
    const GpuInfo& g = m.gpus[i];
    html += Row("GPU " + std::to_string(i), g.name + ", " + Bytes(g.mem_bytes) + ", driver " +
                                                g.driver + ", runtime " + g.runtime + ", PCI " +
                                                g.pci_bus_id + (g.link.empty() ? "" : ", " + g.link));
  }
  return html + "</table>\n";
}

}  // namespace internal

namespace {

using internal::Attr;
using internal::Card;
using internal::EscapeHtml;
using internal::ExactNumber;
using internal::MachineSection;
using internal::NiceStep;
using internal::Px;
using internal::TickLabel;

struct ChartPoint {
  const TrialRecord* trial;
  int workers;
  double y;         // plotted value
  double low;       // whisker, NaN when none
  double high;
};

struct ChartSpec {
  std::string css_class;   // "throughput" | "idle"
  std::string title;       // for screen readers
  std::string y_label;
  std::string data_name;   // the data-* attribute holding y ("samples-per-s", "gpu-idle-frac")
  double y_scale = 1;      // y shown = value * y_scale (fractions as percent)
  std::optional<double> y_max;  // fixed top (percent charts), else from the data
  std::vector<ChartPoint> points;
  std::vector<int> failed_workers;
  std::optional<int> knee_workers;
  std::optional<double> baseline;  // horizontal reference line, in value units
  std::optional<double> best;
  std::string empty_text = "no num_workers trial measured";  // shown when there is no point
};

// The chart's frame and scales, shared by the parts drawn on it.
// x: num_workers on a log2(1 + w) scale, so 0, 1, 2, 4 ... 64 are evenly spread
// and the bisection points fall between their neighbours.
struct ChartScale {
  static constexpr double kWidth = 540, kHeight = 320;
  static constexpr double kLeft = 66, kRight = 104, kTop = 22, kBottom = 50;
  static constexpr double plot_w = kWidth - kLeft - kRight;
  static constexpr double plot_h = kHeight - kTop - kBottom;

  std::vector<int> xs;  // the worker counts on the x axis, ascending, each once
  double x_top = 0;     // log2(1 + the largest count)
  double y_scale = 1;   // as ChartSpec's
  double step = 1;      // between y ticks
  double y_top = 1;     // the y axis' top, in shown units

  double X(int workers) const { return kLeft + plot_w * std::log2(1.0 + workers) / (x_top > 0 ? x_top : 1); }
  // Clamped: a whisker past the fixed top of a percent chart stays inside.
  double Y(double value) const { return kTop + plot_h * (1 - std::clamp(value * y_scale / y_top, 0.0, 1.0)); }
};

ChartScale MakeChartScale(const ChartSpec& spec) {
  ChartScale scale;
  scale.y_scale = spec.y_scale;
  for (const ChartPoint& p : spec.points) scale.xs.push_back(p.workers);
  for (int w : spec.failed_workers) scale.xs.push_back(w);
  std::sort(scale.xs.begin(), scale.xs.end());
  scale.xs.erase(std::unique(scale.xs.begin(), scale.xs.end()), scale.xs.end());
  scale.x_top = std::log2(1.0 + (scale.xs.empty() ? 1 : std::max(scale.xs.back(), 1)));

  // The y axis reaches past the highest whisker and reference line, rounded up to a tick.
  double top = 0;
  for (const ChartPoint& p : spec.points) {
    top = std::max(top, (std::isfinite(p.high) ? p.high : p.y) * spec.y_scale);
  }
  if (spec.baseline) top = std::max(top, *spec.baseline * spec.y_scale);
  if (spec.best) top = std::max(top, *spec.best * spec.y_scale);
  scale.step = NiceStep(spec.y_max ? *spec.y_max : top * 1.08, 5);
  scale.y_top = spec.y_max ? *spec.y_max : std::max(scale.step, std::ceil(top * 1.08 / scale.step) * scale.step);
  return scale;
}

// Grid lines with their y tick labels, both axes, the x tick labels and the axis titles.
std::string ChartAxesSvg(const ChartSpec& spec, const ChartScale& s) {
  using S = ChartScale;
  std::string svg;
  for (double v = 0; v <= s.y_top + s.step / 2; v += s.step) {
    const double y = S::kTop + S::plot_h * (1 - v / s.y_top);
    svg += "<line class=\"grid\" x1=\"" + Px(S::kLeft) + "\" x2=\"" + Px(S::kLeft + S::plot_w) + "\" y1=\"" +
           Px(y) + "\" y2=\"" + Px(y) + "\"/>\n";
    svg += "<text x=\"" + Px(S::kLeft - 8) + "\" y=\"" + Px(y + 4) + "\" text-anchor=\"end\">" +
           TickLabel(v, s.step) + "</text>\n";
  }
  svg += "<line class=\"axis\" x1=\"" + Px(S::kLeft) + "\" x2=\"" + Px(S::kLeft) + "\" y1=\"" + Px(S::kTop) +
         "\" y2=\"" + Px(S::kTop + S::plot_h) + "\"/>\n";
  svg += "<line class=\"axis\" x1=\"" + Px(S::kLeft) + "\" x2=\"" + Px(S::kLeft + S::plot_w) + "\" y1=\"" +
         Px(S::kTop + S::plot_h) + "\" y2=\"" + Px(S::kTop + S::plot_h) + "\"/>\n";
  for (int w : s.xs) {
    svg += "<text x=\"" + Px(s.X(w)) + "\" y=\"" + Px(S::kTop + S::plot_h + 18) +
           "\" text-anchor=\"middle\">" + std::to_string(w) + "</text>\n";
  }
  svg += "<text x=\"" + Px(S::kLeft + S::plot_w / 2) + "\" y=\"" + Px(S::kHeight - 8) +
         "\" text-anchor=\"middle\">num_workers</text>\n";
  svg += "<text transform=\"translate(16 " + Px(S::kTop + S::plot_h / 2) +
         ") rotate(-90)\" text-anchor=\"middle\">" + EscapeHtml(spec.y_label) + "</text>\n";
  return svg;
}

// A horizontal reference line (baseline, best) across the plot, labelled in the right margin.
std::string ReferenceLineSvg(const ChartSpec& spec, const ChartScale& s, const char* css, const char* label,
                             double value) {
  using S = ChartScale;
  const double y = s.Y(value);
  std::string svg = "<line class=\"" + std::string(css) + "\"" + Attr("data-" + spec.data_name, ExactNumber(value)) +
                    " x1=\"" + Px(S::kLeft) + "\" x2=\"" + Px(S::kLeft + S::plot_w) + "\" y1=\"" + Px(y) +
                    "\" y2=\"" + Px(y) + "\"/>\n";
  svg += "<text x=\"" + Px(S::kLeft + S::plot_w + 6) + "\" y=\"" + Px(y + 4) + "\">" + label + " " +
         Fixed(value * spec.y_scale, spec.y_scale == 1 ? 0 : 1) + "</text>\n";
  return svg;
}

// One measured point: a group carrying its figures as data-* attributes, a
// tooltip, the confidence whisker when there is one, and the dot.
std::string PointSvg(const ChartSpec& spec, const ChartScale& s, const ChartPoint& p) {
  const double x = s.X(p.workers);
  const TrialRecord& t = *p.trial;
  std::string svg = "<g class=\"point\"" + Attr("data-trial-id", std::to_string(t.id)) +
                    Attr("data-workers", std::to_string(p.workers)) +
                    Attr("data-" + spec.data_name, ExactNumber(p.y));
  if (std::isfinite(p.low) && std::isfinite(p.high)) {
    svg += Attr("data-ci-low", ExactNumber(p.low)) + Attr("data-ci-high", ExactNumber(p.high));
  }
  svg += ">\n<title>" + EscapeHtml("trial " + std::to_string(t.id) + " (" + t.phase + "), " +
                                   std::to_string(p.workers) + " workers: " +
                                   Fixed(p.y * spec.y_scale, spec.y_scale == 1 ? 1 : 1) + " " +
                                   spec.y_label) +
         "</title>\n";
  if (std::isfinite(p.low) && std::isfinite(p.high)) {
    const double y1 = s.Y(p.low), y2 = s.Y(p.high);
    svg += "<line class=\"whisker\" x1=\"" + Px(x) + "\" x2=\"" + Px(x) + "\" y1=\"" + Px(y1) +
           "\" y2=\"" + Px(y2) + "\"/>\n";
    for (double y : {y1, y2}) {
      svg += "<line class=\"whisker\" x1=\"" + Px(x - 5) + "\" x2=\"" + Px(x + 5) + "\" y1=\"" +
             Px(y) + "\" y2=\"" + Px(y) + "\"/>\n";
    }
  }
  svg += "<circle cx=\"" + Px(x) + "\" cy=\"" + Px(s.Y(p.y)) + "\" r=\"4\"/>\n</g>\n";
  return svg;
}

// The knee's ring and drop line, on the point at spec.knee_workers (none when
// that point is not plotted).
std::string KneeSvg(const ChartSpec& spec, const ChartScale& s) {
  using S = ChartScale;
  if (!spec.knee_workers) return "";
  for (const ChartPoint& p : spec.points) {
    if (p.workers != *spec.knee_workers) continue;
    const double x = s.X(p.workers), y = s.Y(p.y);
    std::string svg = "<g class=\"knee\"" + Attr("data-workers", std::to_string(p.workers)) + ">\n";
    svg += "<line x1=\"" + Px(x) + "\" x2=\"" + Px(x) + "\" y1=\"" + Px(y + 9) + "\" y2=\"" +
           Px(S::kTop + S::plot_h) + "\"/>\n";
    svg += "<circle cx=\"" + Px(x) + "\" cy=\"" + Px(y) + "\" r=\"9\"/>\n";
    svg += "<text x=\"" + Px(x) + "\" y=\"" + Px(std::max(S::kTop + 10, y - 14)) +
           "\" text-anchor=\"middle\">knee: " + std::to_string(p.workers) + "</text>\n</g>\n";
    return svg;
  }
  return "";
}

std::string Chart(const ChartSpec& spec) {
  using S = ChartScale;
  const ChartScale scale = MakeChartScale(spec);
  std::string svg = "<svg class=\"chart " + spec.css_class + "\" xmlns=\"http://www.w3.org/2000/svg\"" +
                    Attr("viewBox", "0 0 " + Px(S::kWidth) + " " + Px(S::kHeight)) +
                    Attr("width", Px(S::kWidth)) + Attr("height", Px(S::kHeight)) +
                    " role=\"img\"" + Attr("aria-label", spec.title) + ">\n";
  svg += "<title>" + EscapeHtml(spec.title) + "</title>\n";
  svg += ChartAxesSvg(spec, scale);
  if (spec.baseline) svg += ReferenceLineSvg(spec, scale, "baseline", "baseline", *spec.baseline);
  if (spec.best) svg += ReferenceLineSvg(spec, scale, "best-line", "best", *spec.best);

  // The curve, then whiskers and points on top of it.
  if (spec.points.size() > 1) {
    std::string path;
    for (const ChartPoint& p : spec.points) {
      path += (path.empty() ? "M" : " L") + Px(scale.X(p.workers)) + " " + Px(scale.Y(p.y));
    }
    svg += "<path class=\"series\" d=\"" + path + "\"/>\n";
  }
  for (const ChartPoint& p : spec.points) svg += PointSvg(spec, scale, p);
  svg += KneeSvg(spec, scale);
  for (int w : spec.failed_workers) {
    svg += "<g class=\"failed\"" + Attr("data-workers", std::to_string(w)) + "><text x=\"" +
           Px(scale.X(w)) + "\" y=\"" + Px(S::kTop + S::plot_h - 6) +
           "\" text-anchor=\"middle\">\u2716 failed</text></g>\n";
  }
  if (spec.points.empty()) {
    svg += "<text x=\"" + Px(S::kLeft + S::plot_w / 2) + "\" y=\"" + Px(S::kTop + S::plot_h / 2) +
           "\" text-anchor=\"middle\">" + EscapeHtml(spec.empty_text) + "</text>\n";
  }
  svg += "</svg>\n";
  return svg;
}

// The num_workers curve: each ok num_workers-phase trial, and the 0-worker
// trial the phase started from (same knobs but num_workers 0; the phase's
// first point, as the tuner's own curve has it).
struct Curve {
  std::vector<ChartPoint> points;
  std::vector<int> failed_workers;
};

Curve WorkersCurve(const RunView& view, bool idle) {
  Curve curve;
  const TrialRecord* first = nullptr;
  for (const TrialRecord& t : view.trials) {
    if (t.phase != "num_workers") continue;
    if (first == nullptr) first = &t;
    if (t.status != TrialStatus::kOk) {
      curve.failed_workers.push_back(t.knobs.num_workers);
      continue;
    }
    curve.points.push_back({&t, t.knobs.num_workers, 0, NAN, NAN});
  }
  if (first != nullptr) {
    loader::Knobs start = first->knobs;
    start.num_workers = 0;
    for (const TrialRecord& t : view.trials) {
      if (&t == first) break;
      if (t.status == TrialStatus::kOk && t.knobs == start) {
        curve.points.insert(curve.points.begin(), {&t, 0, 0, NAN, NAN});
        break;
      }
    }
  }
  for (ChartPoint& p : curve.points) {
    const TrialRecord& t = *p.trial;
    p.y = idle ? t.gpu_idle_frac : t.samples_per_s;
    p.low = idle ? NAN : t.ci_low;
    p.high = idle ? NAN : t.ci_high;
  }
  std::stable_sort(curve.points.begin(), curve.points.end(),
                   [](const ChartPoint& a, const ChartPoint& b) { return a.workers < b.workers; });
  return curve;
}



std::string TrialTable(const RunView& view, const TrialRecord* baseline, const TrialRecord* best) {
  const RunRecord& run = view.run;
  std::string html = "<table class=\"trials\">\n<thead><tr>";
  for (const char* h : {"id", "phase", "workers", "pin", "nb", "prefetch", "persist"}) {
    html += std::string("<th") + (std::string_view(h) == "phase" ? "" : " class=\"n\"") + ">" + h +
            "</th>";
  }
  for (const char* h : {"samples/s", "95% CI", "MB/s", "GPU idle %", "wait p50 ms", "wait p99 ms",
                        "CV %"}) {
    html += std::string("<th class=\"n\">") + h + "</th>";
  }
  // As in the text table: binding and threads only for a run that varied them.
  const bool around = VariesAroundLoader(view);
  if (around) html += "<th>binding</th><th class=\"n\">threads</th>";
  html += "<th>status / decision</th></tr></thead>\n<tbody>\n";
  for (const TrialRecord& t : view.trials) {
    const bool ok = t.status == TrialStatus::kOk;
    const bool knee = run.knee_workers && ok && t.phase == "num_workers" &&
                      t.knobs.num_workers == *run.knee_workers;
    std::string css = ok ? "" : "failed";
    if (&t == best) css = "best";
    else if (knee) css = "knee";
    const auto num = [ok](double value, int decimals) {
      return "<td class=\"n\">" + (ok ? Fixed(value, decimals) : std::string("-")) + "</td>";
    };
    const auto yes = [](bool value) { return std::string("<td class=\"n\">") + (value ? "yes" : "no") + "</td>"; };
    html += "<tr" + (css.empty() ? std::string() : Attr("class", css)) +
            Attr("data-trial-id", std::to_string(t.id)) + ">";
    html += "<td class=\"n\">" + std::to_string(t.id) + "</td><td>" + EscapeHtml(t.phase) + "</td>";
    html += "<td class=\"n\">" + std::to_string(t.knobs.num_workers) + "</td>" + yes(t.knobs.pin_memory) +
            yes(t.knobs.non_blocking) + "<td class=\"n\">" + std::to_string(t.knobs.prefetch_factor) +
            "</td>" + yes(t.knobs.persistent_workers);
    html += num(t.samples_per_s, 1);
    html += "<td class=\"n\">" +
            (ok && std::isfinite(t.ci_low) && std::isfinite(t.ci_high)
                 ? Fixed(t.ci_low, 1) + "&#8211;" + Fixed(t.ci_high, 1)
                 : std::string("-")) +
            "</td>";
    html += num(t.mb_per_s, 1) + num(t.gpu_idle_frac * 100, 1) + num(t.wait_p50_us / 1000, 2) +
            num(t.wait_p99_us / 1000, 2) + num(t.cv * 100, 1);
    if (around) {
      html += "<td>" + std::string(loader::CpuBindingName(t.knobs.cpu_binding)) + "</td><td class=\"n\">" +
              (t.knobs.worker_threads > 0 ? std::to_string(t.knobs.worker_threads) : std::string("-")) + "</td>";
    }
    std::string note;
    if (&t == baseline) note += "<span class=\"badge baseline\">baseline</span>";
    if (knee) note += "<span class=\"badge knee\">knee</span>";
    if (&t == best) note += "<span class=\"badge best\">best</span>";
    note += EscapeHtml(TrialStatusName(t.status));
    const std::string reason = ok ? t.decision : (t.error ? *t.error : t.decision);
    if (!reason.empty()) note += (ok ? "; " : ": ") + EscapeHtml(reason);
    html += "<td class=\"note\">" + note + "</td></tr>\n";
  }
  return html + "</tbody>\n</table>\n";
}

std::string Workers(int count) { return std::to_string(count) + (count == 1 ? " worker" : " workers"); }

std::string ConfigText(const loader::Knobs& k) {
  return Workers(k.num_workers) + ", pin " + (k.pin_memory ? "on" : "off") +
         ", non_blocking " + (k.non_blocking ? "on" : "off") + ", prefetch " +
         std::to_string(k.prefetch_factor) + ", persistent " + (k.persistent_workers ? "on" : "off") +
         // Around the loader: said only when a sweep set them (tuner/search/search.h).
         (k.cpu_binding != loader::CpuBinding::kNone ? std::string(", binding ") + loader::CpuBindingName(k.cpu_binding)
                                                     : std::string()) +
         (k.worker_threads > 0 ? ", " + std::to_string(k.worker_threads) + " threads per worker" : std::string());
}

}  // namespace

std::string RenderHtml(const RunView& view) {
  // A `feedtune layout` run: its answer's chart and table (results/layout_report.h).
  if (const auto answer = LayoutAnswer(view.run)) return RenderLayoutHtml(view, *answer);
  const RunRecord& run = view.run;
  const TrialRecord* baseline = BaselineTrial(view);
  const TrialRecord* best = BestTrial(view);
  const std::optional<double> speedup = RunSpeedup(view);
  const std::string machine_name =
      view.machine ? (view.machine->label.empty() ? view.machine->hostname : view.machine->label)
                   : "unknown machine";

  std::string body;
  body += "<h1>" + EscapeHtml(run.workload_name) + " on " + EscapeHtml(machine_name) + "</h1>\n";
  body += "<p class=\"meta\">feedtune run " + std::to_string(run.id) + " &#183; status " +
          EscapeHtml(RunStatusName(run.status)) + " &#183; backend " + EscapeHtml(run.backend) +
          " &#183; workload hash " +
          EscapeHtml(run.workload_hash) + " &#183; started " + EscapeHtml(run.started_at) +
          (run.ended_at.empty() ? "" : ", ended " + EscapeHtml(run.ended_at)) + "</p>\n";
  // The busy mark (docs/measurement.md), where a reader looks first.
  if (IsBusy(run)) {
    body += "<p class=\"meta busy\"><strong>busy</strong>: " + EscapeHtml(BusyText(*run.facts.background)) +
            ": the knee and the best describe the contention with them</p>\n";
  }

  body += "<div class=\"cards\">\n";
  body += Card("baseline", baseline ? Fixed(baseline->samples_per_s, 1) + " samples/s" : "-",
               baseline ? IdleText(baseline->gpu_idle_frac) + ", 0 workers" : "");
  body += Card("knee", run.knee_workers ? Workers(*run.knee_workers) : "-",
               run.knee_samples_per_s ? Fixed(*run.knee_samples_per_s, 1) + " samples/s" +
                                            (run.knee_kneedle_workers
                                                 ? ", Kneedle " + std::to_string(*run.knee_kneedle_workers)
                                                 : "")
                                      : "");
  body += Card("best", best ? Fixed(best->samples_per_s, 1) + " samples/s" : "-",
               best ? ConfigText(best->knobs) + ", " + IdleText(best->gpu_idle_frac) : "");
  std::string speedup_sub = "best over baseline";
  if (run.speedup_ci_low && run.speedup_ci_high) {
    speedup_sub = "95% CI x" + Fixed(*run.speedup_ci_low, 2) + " to x" + Fixed(*run.speedup_ci_high, 2);
  }
  body += Card("speedup", speedup ? "x" + Fixed(*speedup, 2) : "-", speedup_sub);
  const std::string basis = SafeLimitBasis(run);
  if (run.safe_max_workers) {
    body += Card("safe max workers", std::to_string(*run.safe_max_workers),
                 "memory, /dev/shm and fd budgets" + (basis.empty() ? "" : "; per worker: " + basis));
  } else if (!basis.empty()) {
    body += Card("safe max workers", "-", basis);
  }
  body += "</div>\n";

  const Curve throughput = WorkersCurve(view, false);
  ChartSpec samples;
  samples.css_class = "throughput";
  samples.title = "samples/s against num_workers, with 95% intervals";
  samples.y_label = "samples/s";
  samples.data_name = "samples-per-s";
  samples.points = throughput.points;
  samples.failed_workers = throughput.failed_workers;
  samples.knee_workers = run.knee_workers;
  if (baseline) samples.baseline = baseline->samples_per_s;
  if (best) samples.best = best->samples_per_s;
  body += "<div class=\"charts\">\n<div>\n<h2>Throughput against num_workers</h2>\n" + Chart(samples) +
          "</div>\n";

  const Curve idle_curve = WorkersCurve(view, true);
  ChartSpec idle;
  idle.css_class = "idle";
  idle.title = "GPU idle (%) against num_workers";
  idle.y_label = "GPU idle %";
  idle.data_name = "gpu-idle-frac";
  idle.y_scale = 100;
  idle.y_max = 100;
  // A command that did not report GPU idle has no point here (NaN: not measured).
  for (const ChartPoint& p : idle_curve.points) {
    if (std::isfinite(p.y)) idle.points.push_back(p);
  }
  if (idle.points.empty() && !idle_curve.points.empty()) idle.empty_text = "GPU idle not measured";
  idle.failed_workers = idle_curve.failed_workers;
  idle.knee_workers = run.knee_workers;
  if (baseline && std::isfinite(baseline->gpu_idle_frac)) idle.baseline = baseline->gpu_idle_frac;
  if (best && std::isfinite(best->gpu_idle_frac)) idle.best = best->gpu_idle_frac;
  body += "<div>\n<h2>GPU idle against num_workers</h2>\n" + Chart(idle) + "</div>\n</div>\n";

  if (view.verdict) body += VerdictHtml(*view.verdict);  // a self-contained section (results/verdict.h)
  // Training jobs seen on this host with this workload, as the table shows them.
  if (const std::string observed = ObservedText(view); !observed.empty()) {
    body += "<h2>Observed in training jobs</h2>\n<pre>" + EscapeHtml(observed.substr(1)) + "</pre>\n";
  }
  body += TimelineHtml(run.facts.timelines_json);  // with `sweep --trace` (results/timeline_html.h)
  body += "<h2>Trials</h2>\n";
  body += view.trials.empty() ? std::string("<p>no trials recorded</p>\n")
                              : "<div class=\"scroll\">\n" + TrialTable(view, baseline, best) + "</div>\n";
  if (view.machine) body += "<h2>Machine</h2>\n" + MachineSection(*view.machine);
  if (best != nullptr && best->node) {
    body += "<h2>Ranks of the best setting</h2>\n<pre>" + EscapeHtml(NodeFiguresText(*best->node, "")) + "</pre>\n";
    // What the usual formulas pick on this node, and what that measured (as in the text report).
    if (const auto formulas = NodeFormulas(view.trials, view.machine ? view.machine->usable_cpus : 0, best);
        !formulas.empty()) {
      body += "<h2>Formulas on this node</h2>\n<p>num_workers per rank by rule, at the best's other settings; "
              "measured aggregate and gap to the best.</p>\n<pre>" +
              EscapeHtml(NodeFormulasText(formulas, best->samples_per_s, "")) + "</pre>\n";
    }
  }
  body += "<h2>Effective config</h2>\n<pre class=\"config\">" +
          EscapeHtml(run.config_yaml.empty() ? "(not recorded)" : run.config_yaml) + "</pre>\n";
  body += "<footer>feedtune " + EscapeHtml(run.version) + " &#183; run uid " + EscapeHtml(run.uid) +
          "</footer>\n";
  return internal::HtmlPage("feedtune: " + run.workload_name + " on " + machine_name + " (run " +
                                std::to_string(run.id) + ")",
                            body);
}

}  // namespace feedtune::results
