// `feedtune compare --format json`: per workload, its machines, its classes
// and, for a layout workload, its layouts side by side (docs/json-report.md).
#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "results/store_probe.h"
#include "results/compare.h"
#include "results/compare_parts.h"
#include "results/json_form.h"
#include "results/layout_report.h"

namespace feedtune::results {
namespace {

using Json = nlohmann::ordered_json;

std::string MachineName(const Fingerprint& m) { return m.label.empty() ? m.hostname : m.label; }

Json OptionalVersion(const std::string& version) { return version.empty() ? Json(nullptr) : Json(version); }

}  // namespace

std::string RenderCompareJson(const std::vector<CompareRow>& rows) {
  const std::vector<ClassSpread> spreads = ClassSpreads(rows);
  Json workloads = Json::array();
  for (const auto& group : ByWorkload(rows)) {
    Json machines = Json::array();
    for (const CompareRow* row : group) {
      const Fingerprint& m = row->machine;
      Json gpu = nullptr;
      if (m.gpu_count > 0 || !m.gpu_name.empty()) {
        gpu = Json{{"name", m.gpu_name}, {"count", m.gpu_count}, {"mem_bytes", m.gpu_mem_bytes}};
      }
      Json best = nullptr;
      if (row->best_config) {
        best = Json{{"config", LoaderKnobsJson<Json>(*row->best_config)},
                    {"samples_per_s", FigureJson(row->best_samples_per_s)},
                    {"ci", Json::array({FigureJson(row->best_ci_low), FigureJson(row->best_ci_high)})},
                    {"gpu_idle_frac", FigureJson(row->best_gpu_idle_frac)}};
        // Remote data (schema v23): the best trial's reads from the store, as the report's trials[] hold them.
        if (row->best_store) best["store"] = StoreFiguresJson(*row->best_store);
      }
      machines.push_back(Json{
          {"label", MachineName(m)},
          {"hostname", m.hostname},
          {"hash", row->machine_hash},
          {"host", Json{{"name", row->host.name},
                        {"hostname", row->host.hostname},
                        {"machine_id", row->host.machine_id.empty() ? Json(nullptr) : Json(row->host.machine_id)}}},
          {"class", row->machine_hash},
          {"outlier", row->outlier},
          {"busy", row->busy},
          {"background_cpu", FigureJson(row->background_cpu)},
          {"store_probe", StoreProbeJson(row->store_probe_json)},
          {"below_class_median", FigureJson(row->below_class_median)},
          {"cpu_model", m.cpu_model},
          {"usable_cpus", m.usable_cpus},
          {"logical_cpus", m.logical_cpus},
          {"gpu", gpu},
          {"ranks", row->ranks},
          // Workers per rank at the knee (the knobs of a node run are per rank).
          {"knee_workers", row->knee_workers ? Json(*row->knee_workers) : Json(nullptr)},
          {"knee_workers_per_rank", row->knee_workers ? Json(*row->knee_workers) : Json(nullptr)},
          {"best", best},
          {"baseline_samples_per_s", FigureJson(row->baseline_samples_per_s)},
          {"speedup", row->speedup ? FigureJson(*row->speedup) : Json(nullptr)},
          {"backend", row->backend},
          {"version", OptionalVersion(row->version)},
          {"date", row->date},
          {"run", Json{{"db", row->db_path},
                       {"id", row->run_id},
                       {"uid", row->run_uid},
                       {"status", RunStatusName(row->status)},
                       {"runs_seen", row->runs_seen}}}});
    }
    Json classes = Json::array();
    for (const ClassSpread& spread : spreads) {
      if (spread.workload_name != group.front()->workload_name ||
          spread.workload_hash != group.front()->workload_hash) {
        continue;
      }
      Json outliers = Json::array();
      for (const CompareRow* row : spread.rows) {
        if (row->outlier) outliers.push_back(row->host.name);
      }
      classes.push_back(Json{{"hash", spread.machine_hash},
                             {"hosts", spread.hosts},
                             {"measured", spread.measured},
                             {"median", FigureJson(spread.median)},
                             {"min", FigureJson(spread.min)},
                             {"max", FigureJson(spread.max)},
                             {"median_ci_low", FigureJson(spread.median_ci_low)},
                             {"outliers", outliers}});
    }
    Json workload{{"name", group.front()->workload_name},
                  {"hash", group.front()->workload_hash},
                  {"machines", machines},
                  {"classes", classes}};
    // A `feedtune layout` workload: its layouts side by side as well; the
    // generic keys stay, so a script reads every workload alike.
    if (std::any_of(group.begin(), group.end(), [](const CompareRow* row) { return row->layout.has_value(); })) {
      workload["layout"] = LayoutSideBySideJson(group);
    }
    workloads.push_back(std::move(workload));
  }
  return Json{{"workloads", workloads}}.dump(2, ' ', false, Json::error_handler_t::replace) + "\n";
}

}  // namespace feedtune::results
