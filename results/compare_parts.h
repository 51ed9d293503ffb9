// The words and groupings that compare's renderers share (the table,
// results/compare_table.cc; the JSON, results/compare_json.cc; the HTML page,
// results/compare_html.cc): a row's figures in words, a class's title and
// spread, the rows grouped by workload. Internal to results/ (only those
// files include it): the API is results/compare.h. Defined in
// results/compare.cc.
#pragma once

#include <string>
#include <vector>

#include "results/compare.h"

namespace feedtune::results {

// "x1.64".
std::string Times(double factor);
// The sweep summary's compact form, so the two read alike.
std::string CompactKnobs(const loader::Knobs& k);
// "2x NVIDIA H100", or "none".
std::string GpuText(const Fingerprint& m);
// "6/8": usable of logical CPUs.
std::string CpuText(const Fingerprint& m);
// "-12.3%" (below the class median) or "+4.0%"; "outlier" appended when flagged.
std::string VersusMedian(const CompareRow& row);
// "median 5600.0 samples/s (min 5200.0, max 5800.0) over 4 hosts".
std::string SpreadText(const ClassSpread& spread);
// "class HASH: CPU model, 6/8 CPUs, GPU none".
std::string ClassTitle(const ClassSpread& spread);
// The hosts of a workload's classes.
int HostCount(const std::vector<const ClassSpread*>& classes);
// "4" for one loader, "4 per rank" for a node run (its knobs are per rank).
std::string KneeText(const CompareRow& row);
// The rows of one workload's classes, in compare's order.
std::vector<const CompareRow*> RowsOf(const std::vector<const ClassSpread*>& classes);
// A `feedtune layout` workload is shown as its layouts side by side, instead
// of the generic row per host: a layout run's "best config" is the worker
// count of a layout the row does not name, it has no knee and no GPU idle,
// and its best and speedup are the starred cell and the source's row of the
// side-by-side table; what else the generic row says (class, CPUs, run,
// date) is in the host lines under it.
bool IsLayoutWorkload(const std::vector<const ClassSpread*>& classes);

// Rows (or classes: anything with a workload's name and hash) grouped by
// workload, in order.
template <typename Row>
std::vector<std::vector<const Row*>> ByWorkload(const std::vector<Row>& rows) {
  std::vector<std::vector<const Row*>> groups;
  for (const Row& row : rows) {
    if (groups.empty() || groups.back().front()->workload_name != row.workload_name ||
        groups.back().front()->workload_hash != row.workload_hash) {
      groups.emplace_back();
    }
    groups.back().push_back(&row);
  }
  return groups;
}

}  // namespace feedtune::results
