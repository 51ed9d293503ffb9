// A `feedtune layout` run in the reports (docs/layout.md#feedtune-layout-path):
// `report` shows its stored answer as the table `layout` prints, and as an
// HTML page with a bar chart of the candidates; `compare` sets the layouts of
// several hosts side by side. Pure functions over the stored answer (the
// run's answer_json: the JSON `feedtune layout --format json` prints) and the
// run's records. The answer is read defensively: a field the storing build
// did not write (an older or newer `feedtune layout`) is shown as "-".
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "results/compare.h"
#include "results/records.h"
#include "results/report.h"

namespace feedtune::results {

// The answer a layout run stored (RunKind::kLayout): its answer_json, when
// that parses as a JSON object with a "candidates" array. nullopt for any
// other run, or an answer that does not parse.
std::optional<nlohmann::ordered_json> LayoutAnswer(const RunRecord& run);

// The answer's cache notes worth a line ("note: CANDIDATE: ..."): not one
// whose cache stayed 0% resident (to the percent), which was cold as said.
std::vector<std::string> CacheNoteLines(const nlohmann::ordered_json& answer);

// `report --run N` of a layout run: the candidates' table (the named one
// starred), why, the notes, the host and date, then the cold doubling per
// candidate (its trials, compact).
std::string RenderLayoutTable(const RunView& view, const nlohmann::ordered_json& answer);
// One self-contained page: cold samples/s per candidate as horizontal bars
// with their 95% whiskers and the warm figure marked, the named one
// highlighted; then the table, the doubling, the machine and the answer.
std::string RenderLayoutHtml(const RunView& view, const nlohmann::ordered_json& answer);

// `compare` of one layout workload (rows of one name and hash, in compare's
// order; rows without an answer show "-"): one row per candidate, one column
// per host (cold samples/s at its workers, starred where the host named it),
// then per host what it named and why.
std::string LayoutSideBySideText(const std::vector<const CompareRow*>& rows);
// {"hosts": [{host, machine_hash, run, named, layout_matters, why}],
//  "candidates": [{"name", "cold": [per host, in "hosts" order: the stored
//  {samples_per_s, ci, num_workers}, or null]}]}
nlohmann::ordered_json LayoutSideBySideJson(const std::vector<const CompareRow*>& rows);
// The same as an HTML table (a column group per host: workers and cold samples/s).
std::string LayoutSideBySideHtml(const std::vector<const CompareRow*>& rows);

}  // namespace feedtune::results
