// `feedtune compare --format html`: one self-contained page, per workload its
// outliers, its classes' spreads, a bar per host and each class's host table.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "results/compare.h"
#include "results/compare_parts.h"
#include "results/layout_report.h"
#include "results/report.h"
#include "results/units.h"

namespace feedtune::results {
namespace {

using internal::CountText;
using internal::EscapeHtml;
using internal::ExactNumber;
using internal::ShortDate;

// Above these, a workload's page stops drawing one bar per host and a class's
// host table starts collapsed: at fleet size the classes' spreads and the
// outliers are what a reader looks at first.
constexpr int kHostBarsMax = 32;
constexpr int kOpenClassMax = 16;

std::string Cell(const std::string& text, bool number = false) {
  return std::string(number ? "<td class=\"n\">" : "<td>") + EscapeHtml(text) + "</td>";
}

// One bar per host, best over its baseline.
std::string HostBars(const std::vector<const ClassSpread*>& classes) {
  const std::vector<const CompareRow*> group = RowsOf(classes);
  double top = 0;
  for (const CompareRow* row : group) {
    if (std::isfinite(row->best_samples_per_s)) top = std::max(top, row->best_samples_per_s);
    if (std::isfinite(row->baseline_samples_per_s)) top = std::max(top, row->baseline_samples_per_s);
  }
  // Room on the right for the value label of the longest bar.
  constexpr double kLabel = 200, kBarW = 460, kRowH = 34, kWidth = 900;
  const double height = 16 + kRowH * static_cast<double>(group.size());
  const auto w_of = [&](double v) { return top > 0 && std::isfinite(v) ? kBarW * v / top : 0.0; };
  char head[160];
  std::snprintf(head, sizeof(head),
                "<svg class=\"chart compare\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 %.0f "
                "%.0f\" width=\"%.0f\" height=\"%.0f\">\n",
                kWidth, height, kWidth, height);
  std::string svg = head;
  double y = 8;
  for (const CompareRow* row : group) {
    char geometry[512];
    std::snprintf(geometry, sizeof(geometry),
                  "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"12\" fill=\"%s\"/>\n"
                  "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"8\" fill=\"#9ec5fe\"/>\n",
                  kLabel, y, w_of(row->best_samples_per_s), row->outlier ? "#b42318" : "#0969da", kLabel,
                  y + 14, w_of(row->baseline_samples_per_s));
    svg += "<g class=\"machine\" data-machine-hash=\"" + EscapeHtml(row->machine_hash) +
           "\" data-best-samples-per-s=\"" + ExactNumber(row->best_samples_per_s) +
           "\" data-baseline-samples-per-s=\"" + ExactNumber(row->baseline_samples_per_s) + "\" data-host=\"" +
           EscapeHtml(row->host.name) + "\">\n";
    svg += "<text x=\"" + Fixed(kLabel - 8, 0) + "\" y=\"" + Fixed(y + 15, 1) + "\" text-anchor=\"end\">" +
           EscapeHtml(row->host.name) + "</text>\n";
    svg += geometry;
    svg += "<text x=\"" + Fixed(kLabel + w_of(row->best_samples_per_s) + 6, 1) + "\" y=\"" + Fixed(y + 11, 1) +
           "\">" + Fixed(row->best_samples_per_s, 1) + " samples/s" +
           (row->speedup ? " (" + Times(*row->speedup) + ")" : "") + (row->outlier ? ", outlier" : "") +
           "</text>\n</g>\n";
    y += kRowH;
  }
  return svg + "</svg>\n";
}

// One line per class: its hosts' range (min to max) with the median marked
// and each outlier a red dot; the x axis is shared by the workload's classes.
std::string ClassSpreadChart(const std::vector<const ClassSpread*>& classes) {
  double top = 0;
  for (const ClassSpread* c : classes) {
    if (std::isfinite(c->max)) top = std::max(top, c->max);
  }
  constexpr double kLabel = 260, kBarW = 520, kRowH = 26, kWidth = 900;
  const double height = 12 + kRowH * static_cast<double>(classes.size());
  const auto x_of = [&](double v) { return kLabel + (top > 0 && std::isfinite(v) ? kBarW * v / top : 0.0); };
  std::string svg = "<svg class=\"chart classes\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 " +
                    Fixed(kWidth, 0) + " " + Fixed(height, 0) + "\" width=\"" + Fixed(kWidth, 0) +
                    "\" height=\"" + Fixed(height, 0) + "\">\n";
  double y = 6;
  for (const ClassSpread* c : classes) {
    svg += "<g class=\"class\" data-machine-hash=\"" + EscapeHtml(c->machine_hash) + "\" data-hosts=\"" +
           std::to_string(c->hosts) + "\" data-median=\"" + ExactNumber(c->median) + "\" data-min=\"" +
           ExactNumber(c->min) + "\" data-max=\"" + ExactNumber(c->max) + "\" data-outliers=\"" +
           std::to_string(c->outliers) + "\">\n";
    svg += "<text x=\"" + Fixed(kLabel - 8, 0) + "\" y=\"" + Fixed(y + 13, 1) + "\" text-anchor=\"end\">" +
           EscapeHtml(c->machine_hash + " (" + CountText(c->hosts, "host", "hosts") + ")") + "</text>\n";
    if (c->measured > 0) {
      svg += "<rect x=\"" + Fixed(x_of(c->min), 1) + "\" y=\"" + Fixed(y + 4, 1) + "\" width=\"" +
             Fixed(std::max(1.0, x_of(c->max) - x_of(c->min)), 1) +
             "\" height=\"10\" fill=\"#9ec5fe\"/>\n<rect x=\"" + Fixed(x_of(c->median) - 1, 1) + "\" y=\"" +
             Fixed(y + 1, 1) + "\" width=\"3\" height=\"16\" fill=\"#0969da\"/>\n";
      for (const CompareRow* row : c->rows) {
        if (!row->outlier) continue;
        svg += "<circle cx=\"" + Fixed(x_of(row->best_samples_per_s), 1) + "\" cy=\"" + Fixed(y + 9, 1) +
               "\" r=\"4\" fill=\"#b42318\"><title>" + EscapeHtml(row->host.name) + "</title></circle>\n";
      }
      svg += "<text x=\"" + Fixed(x_of(c->max) + 6, 1) + "\" y=\"" + Fixed(y + 13, 1) + "\">median " +
             Fixed(c->median, 1) + "</text>\n";
    }
    svg += "</g>\n";
    y += kRowH;
  }
  return svg + "</svg>\n";
}

std::string HostTableHead() {
  return "<table class=\"compare\">\n<thead><tr><th>host</th><th>class</th><th class=\"n\">CPUs</th>"
         "<th>GPU</th><th class=\"n\">ranks</th><th class=\"n\">knee workers</th><th>best config</th>"
         "<th class=\"n\">best samples/s</th><th class=\"n\">vs class median</th><th class=\"n\">speedup</th>"
         "<th class=\"n\">GPU idle % at best</th><th>backend</th><th>date (UTC)</th><th>run</th>"
         "</tr></thead>\n<tbody>\n";
}

std::string HostTableRow(const CompareRow& row) {
  const Fingerprint& m = row.machine;
  return "<tr data-machine-hash=\"" + EscapeHtml(row.machine_hash) + "\" data-host=\"" + EscapeHtml(row.host.name) +
         "\"" + (row.outlier ? " class=\"outlier\"" : "") + " data-ranks=\"" + std::to_string(row.ranks) + "\">" +
         Cell(row.host.name) + Cell(row.machine_hash) + Cell(CpuText(m), true) + Cell(GpuText(m)) +
         Cell(CountText(row.ranks, "rank", "ranks"), true) + Cell(KneeText(row), true) + "<td class=\"config\">" +
         EscapeHtml(row.best_config ? CompactKnobs(*row.best_config) : "-") + "</td>" +
         Cell(Fixed(row.best_samples_per_s, 1), true) + Cell(VersusMedian(row), true) +
         Cell(row.speedup ? Times(*row.speedup) : "-", true) + Cell(Fixed(row.best_gpu_idle_frac * 100, 1), true) +
         Cell(row.backend) + Cell(ShortDate(row.date)) +
         // The file's name keeps the row narrow; the full path is its tooltip.
         "<td title=\"" + EscapeHtml(row.db_path) + "\">" +
         EscapeHtml(std::filesystem::path(row.db_path).filename().string() + " #" + std::to_string(row.run_id) +
                    (row.status == RunStatus::kDone ? "" : " (" + RunStatusName(row.status) + ")")) +
         "</td></tr>\n";
}

}  // namespace

std::string RenderCompareHtml(const std::vector<CompareRow>& rows) {
  const std::vector<ClassSpread> spreads = ClassSpreads(rows);
  std::string body = "<h1>feedtune: machines compared</h1>\n";
  body += "<p class=\"meta\">" + CountText(static_cast<int>(rows.size()), "host/workload pair", "host/workload pairs") +
          " in " + CountText(static_cast<int>(spreads.size()), "class", "classes") +
          " (hosts of identical hardware); each host's latest run that found a best setting. An outlier is a host "
          "below its class's median by more than " +
          Fixed(kOutlierThreshold * 100, 0) +
          "% and beyond the noise (its interval wholly below the median host's).</p>\n";
  if (rows.empty()) body += "<p>no runs to compare</p>\n";
  for (const auto& classes : ByWorkload(spreads)) {
    const ClassSpread& first = *classes.front();
    const int hosts = HostCount(classes);
    body += "<h2>" + EscapeHtml(first.workload_name) + " <small>(hash " + EscapeHtml(first.workload_hash) +
            "): " + CountText(hosts, "host", "hosts") + " in " +
            CountText(static_cast<int>(classes.size()), "class", "classes") + "</small></h2>\n";
    if (IsLayoutWorkload(classes)) {  // as in the table
      body += LayoutSideBySideHtml(RowsOf(classes));
      continue;
    }

    // Outliers first: the hosts to look at, furthest below their class first.
    std::vector<const CompareRow*> outliers;
    for (const ClassSpread* c : classes) {
      for (const CompareRow* row : c->rows) {
        if (row->outlier) outliers.push_back(row);
      }
    }
    std::stable_sort(outliers.begin(), outliers.end(), [](const CompareRow* a, const CompareRow* b) {
      return a->below_class_median > b->below_class_median;
    });
    if (outliers.empty()) {
      body += "<p class=\"meta\">No outliers: no host is below its class's median beyond the noise.</p>\n";
    } else {
      body += "<h3>Outliers: " + CountText(static_cast<int>(outliers.size()), "host", "hosts") +
              " below their class's median beyond the noise</h3>\n<table class=\"compare outliers\">\n"
              "<thead><tr><th>host</th><th>class</th><th class=\"n\">best samples/s</th><th class=\"n\">95% "
              "interval</th><th class=\"n\">class median</th><th class=\"n\">below the median</th></tr></thead>\n"
              "<tbody>\n";
      for (const CompareRow* row : outliers) {
        double median = NAN;
        for (const ClassSpread* c : classes) {
          if (c->machine_hash == row->machine_hash) median = c->median;
        }
        body += "<tr class=\"outlier\" data-host=\"" + EscapeHtml(row->host.name) + "\" data-machine-hash=\"" +
                EscapeHtml(row->machine_hash) + "\" data-below-class-median=\"" +
                ExactNumber(row->below_class_median) + "\">" + Cell(row->host.name) + Cell(row->machine_hash) +
                Cell(Fixed(row->best_samples_per_s, 1), true) +
                Cell(Fixed(row->best_ci_low, 1) + " - " + Fixed(row->best_ci_high, 1), true) +
                Cell(Fixed(median, 1), true) + Cell(Fixed(row->below_class_median * 100, 1) + "%", true) +
                "</tr>\n";
      }
      body += "</tbody>\n</table>\n";
    }

    body += "<h3>Classes: the spread of best samples/s over their hosts</h3>\n" + ClassSpreadChart(classes);
    if (hosts <= kHostBarsMax) {
      body += "<h3>Hosts: best samples/s (dark) over the baseline (light, 0 workers, no pinning)</h3>\n" +
              HostBars(classes);
    }
    for (const ClassSpread* c : classes) {
      body += std::string("<details class=\"class\" data-machine-hash=\"") + EscapeHtml(c->machine_hash) + "\"" +
              (c->hosts <= kOpenClassMax ? " open" : "") + "><summary>" + EscapeHtml(ClassTitle(*c)) + ": " +
              EscapeHtml(SpreadText(*c)) +
              (c->outliers > 0 ? ", <strong>" + CountText(c->outliers, "outlier", "outliers") + "</strong>" : "") +
              "</summary>\n<div class=\"scroll\">" + HostTableHead();
      // Outliers first within the class too, then fastest first.
      for (const bool outlier : {true, false}) {
        for (const CompareRow* row : c->rows) {
          if (row->outlier == outlier) body += HostTableRow(*row);
        }
      }
      body += "</tbody>\n</table>\n</div></details>\n";
    }
  }
  return internal::HtmlPage("feedtune: machines compared", body);
}

}  // namespace feedtune::results
