// `feedtune compare`'s table: per workload, its classes and their hosts'
// rows, or a layout workload's layouts side by side.
#include <map>
#include <string>
#include <vector>

#include "results/store_probe.h"
#include "results/compare.h"
#include "results/compare_parts.h"
#include "results/layout_report.h"
#include "results/report.h"
#include "results/units.h"

namespace feedtune::results {
namespace {

using internal::CountText;
using internal::ShortDate;

// When the hosts of a workload were measured by different feedtune builds,
// which build measured which hosts: a difference between them may be the
// build's, not the machines'. Empty when they all agree.
std::string BuildsText(const std::vector<const ClassSpread*>& classes) {
  std::map<std::string, std::vector<std::string>> hosts_of;
  for (const ClassSpread* spread : classes) {
    for (const CompareRow* row : spread->rows) hosts_of[row->version].push_back(row->host.name);
  }
  if (hosts_of.size() < 2) return {};
  std::string text = "\nbuilds differ: measured by\n";
  for (const auto& [version, hosts] : hosts_of) {
    text += "  " + (version.empty() ? std::string("a build that recorded no version") : "feedtune " + version) + ": ";
    for (size_t i = 0; i < hosts.size(); ++i) text += (i ? ", " : "") + hosts[i];
    text += "\n";
  }
  return text;
}

// The hosts whose run was marked busy, and what that means for their row.
std::string BusyRowsText(const std::vector<const ClassSpread*>& classes) {
  std::string text;
  for (const ClassSpread* spread : classes) {
    for (const CompareRow* row : spread->rows) {
      if (!row->busy) continue;
      text += "  " + row->host.name + " (run " + std::to_string(row->run_id) + "): other processes wanted " +
              Fixed(row->background_cpu, 2) + " CPU where the box had CPU idle: its row describes the contention "
              "with them\n";
    }
  }
  return text.empty() ? text : "\nBUSY: measured beside other processes (docs/measurement.md)\n" + text;
}

// Remote data: the store as each host saw it before its baseline
// (results/store_probe.h); empty when no run read remote data.
std::string StoreRowsText(const std::vector<const ClassSpread*>& classes) {
  std::string text;
  for (const ClassSpread* spread : classes) {
    for (const CompareRow* row : spread->rows) {
      if (const auto store = StoreProbeShort(row->store_probe_json)) {
        text += "  " + row->host.name + " (run " + std::to_string(row->run_id) + "): " + *store +
                (row->best_store ? "; its best trial " + StoreRetriesText(*row->best_store) : "") + "\n";
      }
    }
  }
  return text.empty() ? text : "\nthe store from each host (its probe before the baseline; docs/storage.md)\n" + text;
}

}  // namespace

std::string RenderCompareTable(const std::vector<CompareRow>& rows) {
  if (rows.empty()) return "no runs to compare\n";
  const std::vector<internal::TableColumn> columns = {
      {"host", false},          {"class", false},       {"CPUs", true},
      {"GPU", false},           {"ranks", true},        {"knee workers", true}, {"best config", false},
      {"best samples/s", true}, {"vs class median", true}, {"speedup", true},
      {"GPU idle % at best", true}, {"backend", false}, {"date (UTC)", false},
      {"run", false},
  };
  const std::vector<ClassSpread> spreads = ClassSpreads(rows);
  std::string text;
  for (const auto& classes : ByWorkload(spreads)) {
    const ClassSpread& first = *classes.front();
    if (!text.empty()) text += "\n";
    text += "workload " + first.workload_name + " (hash " + first.workload_hash + "): " +
            CountText(HostCount(classes), "host", "hosts") + " in " +
            CountText(static_cast<int>(classes.size()), "class", "classes") + "\n";
    if (IsLayoutWorkload(classes)) {
      text += '\n';  // appended: GCC 12 warns (-Wrestrict, falsely) on "\n" + std::string
      text += LayoutSideBySideText(RowsOf(classes)) + BuildsText(classes) + BusyRowsText(classes) +
              StoreRowsText(classes);
      continue;
    }
    for (const ClassSpread* spread : classes) {
      // Appended piece by piece: GCC 12 warns (-Wrestrict, falsely) on "\n" + std::string.
      text += '\n';
      text += ClassTitle(*spread);
      text += "\n  ";
      text += SpreadText(*spread);
      if (spread->outliers > 0) {
        text += "; " + CountText(spread->outliers, "outlier", "outliers") + " below the median beyond the noise";
      }
      text += "\n\n";
      std::vector<std::vector<std::string>> cells;
      for (const CompareRow* row : spread->rows) {
        const Fingerprint& m = row->machine;
        std::string run = std::to_string(row->run_id);
        if (row->status != RunStatus::kDone) run += " (" + RunStatusName(row->status) + ")";
        if (row->busy) run += " BUSY";
        cells.push_back({row->host.name, row->machine_hash, CpuText(m), GpuText(m),
                         CountText(row->ranks, "rank", "ranks"), KneeText(*row),
                         row->best_config ? CompactKnobs(*row->best_config) : "-",
                         Fixed(row->best_samples_per_s, 1), VersusMedian(*row),
                         row->speedup ? Times(*row->speedup) : "-",
                         Fixed(row->best_gpu_idle_frac * 100, 1), row->backend, ShortDate(row->date),
                         run});
      }
      text += internal::RenderRows(columns, cells);
    }
    text += BuildsText(classes);
    text += BusyRowsText(classes);
    text += StoreRowsText(classes);
  }
  return text;
}

}  // namespace feedtune::results
