// Renders a stored run for people (table, HTML page) and for scripts (JSON,
// docs/json-report.md), and the JSON values of a run's calibration, safe limit
// and seed that the sweep's events reuse. Pure functions of the records; the
// caller loads them from a Store.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "results/records.h"
#include "results/verdict.h"

namespace feedtune::results {

struct RunView {
  RunRecord run;
  std::optional<Fingerprint> machine;
  std::vector<TrialRecord> trials;
  std::optional<Verdict> verdict;  // the stage trials' verdict at the best setting, when measured
  // What training jobs saw on this run's host with its workload (observed.h), oldest first.
  std::vector<ObservedRecord> observed;
};

// Loads a run, its machine and trials. Throws StoreError when the run does not exist.
class Store;
RunView LoadRunView(const Store& store, std::optional<int64_t> run_id);

// What every renderer says about a run, decided in one place so the table,
// the JSON, the HTML, compare and export never disagree.
// The baseline the run recorded, else (a run still in progress, or one that
// died) its first ok baseline-phase trial; nullptr when there is none.
const TrialRecord* BaselineTrial(const RunView& view);
// The best trial the run recorded; nullptr when it recorded none.
const TrialRecord* BestTrial(const RunView& view);
// The speedup the tuner stored, else best over baseline samples/s.
std::optional<double> RunSpeedup(const RunView& view);
// The ok num_workers-phase (or baseline) trial with this many workers that
// measured the most samples/s; nullptr when there is none.
const TrialRecord* TrialAtWorkers(const RunView& view, int num_workers);
// Whether any trial set a knob around the loader (a node sweep's cpu_binding
// phase, a worker_threads phase): only then do the tables show the binding
// and threads columns, so other runs' tables stay as they were.
bool VariesAroundLoader(const RunView& view);

std::string RenderTable(const RunView& view);
std::string RenderJson(const RunView& view);  // pretty-printed, ends with a newline

// The run's "calibration" object as the JSON report prints it: the keys of
// calibration_json with the typed facts (RunFacts) under the keys they had
// there before schemas v14 and v15 ("budget_facts", "max_workers", "seed",
// "safe_limit", "cpu", "preflight", "phases", "timelines"), so scripts read
// the same object; null when it has none.
nlohmann::ordered_json CalibrationJson(const RunRecord& run);
// A safe limit as the reports print it: {"workers", "basis", "trial",
// "worker_rss_bytes", "growth_bytes"}, or null (a run before it was kept).
nlohmann::ordered_json SafeLimitJson(const std::optional<SafeLimit>& safe);
// A --seed-from seed as the reports and the sweep's seed event print it.
nlohmann::ordered_json SeedJson(const SeedFacts& seed);
// What the safe limit rests on ("" without one).
std::string SafeLimitBasis(const RunRecord& run);
// One self-contained HTML page (inline CSS and SVG, no script, no network):
// samples/s and GPU idle against num_workers, the trial table, the machine and
// the effective config.
std::string RenderHtml(const RunView& view);
// The observed runs beside the sweep, for the table (and the HTML page): ""
// when there are none. Each row's "vs best" is against this run's best.
std::string ObservedText(const RunView& view);

// Shared by the renderers of this folder.
namespace internal {
std::string KnobsText(const loader::Knobs& knobs);
// Aligned text columns, numbers right-aligned; no trailing blanks.
struct TableColumn {
  std::string header;
  bool right_aligned;
};
std::string RenderRows(const std::vector<TableColumn>& columns,
                       const std::vector<std::vector<std::string>>& rows);
std::string EscapeHtml(std::string_view text);
// Shortest text that reads back as the same double ("" when not finite).
std::string ExactNumber(double value);
// A complete page around `body`, with the shared inline stylesheet.
std::string HtmlPage(std::string_view title, std::string_view body);
// ` name="value"`, the value escaped.
std::string Attr(std::string_view name, std::string_view value);
// An SVG coordinate: one decimal.
std::string Px(double value);
// A "nice" step (1, 2 or 5 times a power of ten) that cuts [0, top] into about `count` parts.
double NiceStep(double top, int count);
// An axis tick's label at that step (thousands grouped by a thin space).
std::string TickLabel(double value, double step);
// A summary card: a key, its value and a line under it.
std::string Card(std::string_view key, std::string_view value, std::string_view sub);
// The machine's fingerprint as a key-value table.
std::string MachineSection(const Fingerprint& machine);
// "label, CPU model, 2 of 4 CPUs usable[, 1x GPU]": the machine as the reports' header lines name it.
std::string MachineText(const Fingerprint& machine);
}  // namespace internal

}  // namespace feedtune::results
