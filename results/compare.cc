#include "results/compare.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <tuple>
#include <utility>

#include "results/report.h"
#include "results/store.h"

namespace feedtune::results {
namespace {

using Json = nlohmann::ordered_json;
using internal::EscapeHtml;
using internal::ExactNumber;
using internal::Fixed;

Json Number(double value) { return std::isfinite(value) ? Json(value) : Json(nullptr); }

std::string RunDate(const RunRecord& run) { return run.ended_at.empty() ? run.started_at : run.ended_at; }

// "x1.64". Built by append: GCC 12 warns (-Wrestrict, falsely) on "x" + std::string.
std::string Times(double factor) {
  std::string text(1, 'x');
  text.append(Fixed(factor, 2));
  return text;
}

std::string MachineName(const Fingerprint& m) { return m.label.empty() ? m.hostname : m.label; }

// The sweep summary's compact form, so the two read alike.
std::string CompactKnobs(const loader::Knobs& k) {
  return "nw=" + std::to_string(k.num_workers) + " pin=" + (k.pin_memory ? "1" : "0") +
         " nb=" + (k.non_blocking ? "1" : "0") + " pf=" + std::to_string(k.prefetch_factor) +
         " pers=" + (k.persistent_workers ? "1" : "0") + " bs=" + std::to_string(k.batch_size);
}

// "2024-05-01T10:05:00Z" -> "2024-05-01 10:05": minutes are enough to tell runs apart.
std::string ShortDate(const std::string& iso) {
  if (iso.size() < 16) return iso.empty() ? "-" : iso;
  std::string text = iso.substr(0, 16);
  text[10] = ' ';
  return text;
}

struct Candidate {
  const Store* store;
  RunRecord run;
  const StoredMachine* machine;
};

// A run that found a best setting beats one that did not; then the newer wins
// (by date, then by id within one file).
bool Better(const Candidate& a, const Candidate& b) {
  const bool a_best = a.run.best_trial_id.has_value();
  const bool b_best = b.run.best_trial_id.has_value();
  if (a_best != b_best) return a_best;
  if (RunDate(a.run) != RunDate(b.run)) return RunDate(a.run) > RunDate(b.run);
  return a.store == b.store && a.run.id > b.run.id;
}

Json ConfigJson(const loader::Knobs& k) {
  return Json{{"batch_size", k.batch_size},           {"num_workers", k.num_workers},
              {"pin_memory", k.pin_memory},           {"non_blocking", k.non_blocking},
              {"prefetch_factor", k.prefetch_factor}, {"persistent_workers", k.persistent_workers}};
}

// Rows grouped by workload, in row order.
std::vector<std::vector<const CompareRow*>> Groups(const std::vector<CompareRow>& rows) {
  std::vector<std::vector<const CompareRow*>> groups;
  for (const CompareRow& row : rows) {
    if (groups.empty() || groups.back().front()->workload_name != row.workload_name ||
        groups.back().front()->workload_hash != row.workload_hash) {
      groups.emplace_back();
    }
    groups.back().push_back(&row);
  }
  return groups;
}

}  // namespace

std::vector<CompareRow> CollectCompareRows(const std::vector<const Store*>& stores,
                                           const std::optional<std::string>& workload) {
  // Machines are kept alive here for the candidates that point at them.
  std::vector<std::vector<StoredMachine>> machines(stores.size());
  std::map<std::tuple<std::string, std::string, std::string>, std::vector<Candidate>> by_key;
  std::set<std::string> seen_uids;
  for (size_t s = 0; s < stores.size(); ++s) {
    machines[s] = stores[s]->LoadMachines();
    std::map<int64_t, const StoredMachine*> machine_by_id;
    for (const StoredMachine& m : machines[s]) machine_by_id[m.id] = &m;
    for (RunRecord& run : stores[s]->LoadRuns()) {
      if (workload && run.workload_name != *workload) continue;
      if (!seen_uids.insert(run.uid).second) continue;  // the same run, merged into two files
      const auto machine = machine_by_id.find(run.machine_id);
      if (machine == machine_by_id.end()) continue;
      auto key = std::make_tuple(run.workload_name, run.workload_hash, machine->second->hash);
      by_key[key].push_back({stores[s], std::move(run), machine->second});
    }
  }

  std::vector<CompareRow> rows;
  for (auto& [key, candidates] : by_key) {
    const Candidate& chosen = *std::min_element(candidates.begin(), candidates.end(), Better);
    RunView view;
    view.run = chosen.run;
    view.machine = chosen.machine->fingerprint;
    view.trials = chosen.store->LoadTrials(chosen.run.id);

    CompareRow row;
    row.workload_name = chosen.run.workload_name;
    row.workload_hash = chosen.run.workload_hash;
    row.machine_hash = chosen.machine->hash;
    row.machine = chosen.machine->fingerprint;
    row.db_path = chosen.store->path();
    row.run_id = chosen.run.id;
    row.run_uid = chosen.run.uid;
    row.status = chosen.run.status;
    row.backend = chosen.run.backend;
    row.date = RunDate(chosen.run);
    row.knee_workers = chosen.run.knee_workers;
    row.runs_seen = static_cast<int>(candidates.size());
    row.best_samples_per_s = NAN;
    row.best_gpu_idle_frac = NAN;
    row.baseline_samples_per_s = NAN;
    if (const TrialRecord* best = BestTrial(view)) {
      row.best_config = best->knobs;
      row.best_samples_per_s = best->samples_per_s;
      row.best_gpu_idle_frac = best->gpu_idle_frac;
    }
    if (const TrialRecord* baseline = BaselineTrial(view)) {
      row.baseline_samples_per_s = baseline->samples_per_s;
    }
    row.speedup = RunSpeedup(view);
    rows.push_back(std::move(row));
  }
  std::sort(rows.begin(), rows.end(), [](const CompareRow& a, const CompareRow& b) {
    if (a.workload_name != b.workload_name) return a.workload_name < b.workload_name;
    if (a.workload_hash != b.workload_hash) return a.workload_hash < b.workload_hash;
    // Fastest first; unknown (NaN) last.
    const double fa = std::isfinite(a.best_samples_per_s) ? a.best_samples_per_s : -1;
    const double fb = std::isfinite(b.best_samples_per_s) ? b.best_samples_per_s : -1;
    if (fa != fb) return fa > fb;
    return MachineName(a.machine) < MachineName(b.machine);
  });
  return rows;
}

std::string RenderCompareTable(const std::vector<CompareRow>& rows) {
  if (rows.empty()) return "no runs to compare\n";
  const std::vector<internal::Column> columns = {
      {"machine", false},        {"machine hash", false}, {"CPUs", true},
      {"GPU", false},            {"knee workers", true},  {"best config", false},
      {"best samples/s", true},  {"speedup", true},       {"GPU idle % at best", true},
      {"backend", false},        {"date (UTC)", false},   {"run", false},
  };
  std::string text;
  for (const auto& group : Groups(rows)) {
    const CompareRow& first = *group.front();
    if (!text.empty()) text += "\n";
    text += "workload " + first.workload_name + " (hash " + first.workload_hash + "): " +
            std::to_string(group.size()) + (group.size() == 1 ? " machine" : " machines") + "\n\n";
    std::vector<std::vector<std::string>> cells;
    for (const CompareRow* row : group) {
      const Fingerprint& m = row->machine;
      std::string gpu = m.gpu_count > 0 ? std::to_string(m.gpu_count) + "x " + m.gpu_name : "none";
      std::string run = std::to_string(row->run_id);
      if (row->status != "done") run += " (" + row->status + ")";
      cells.push_back({MachineName(m), row->machine_hash,
                       std::to_string(m.usable_cpus) + "/" + std::to_string(m.logical_cpus), gpu,
                       row->knee_workers ? std::to_string(*row->knee_workers) : "-",
                       row->best_config ? CompactKnobs(*row->best_config) : "-",
                       Fixed(row->best_samples_per_s, 1),
                       row->speedup ? Times(*row->speedup) : "-",
                       Fixed(row->best_gpu_idle_frac * 100, 1), row->backend, ShortDate(row->date),
                       run});
    }
    text += internal::RenderRows(columns, cells);
  }
  return text;
}

std::string RenderCompareJson(const std::vector<CompareRow>& rows) {
  Json workloads = Json::array();
  for (const auto& group : Groups(rows)) {
    Json machines = Json::array();
    for (const CompareRow* row : group) {
      const Fingerprint& m = row->machine;
      Json gpu = nullptr;
      if (m.gpu_count > 0 || !m.gpu_name.empty()) {
        gpu = Json{{"name", m.gpu_name}, {"count", m.gpu_count}, {"mem_bytes", m.gpu_mem_bytes}};
      }
      Json best = nullptr;
      if (row->best_config) {
        best = Json{{"config", ConfigJson(*row->best_config)},
                    {"samples_per_s", Number(row->best_samples_per_s)},
                    {"gpu_idle_frac", Number(row->best_gpu_idle_frac)}};
      }
      machines.push_back(Json{
          {"label", MachineName(m)},
          {"hostname", m.hostname},
          {"hash", row->machine_hash},
          {"cpu_model", m.cpu_model},
          {"usable_cpus", m.usable_cpus},
          {"logical_cpus", m.logical_cpus},
          {"gpu", gpu},
          {"knee_workers", row->knee_workers ? Json(*row->knee_workers) : Json(nullptr)},
          {"best", best},
          {"baseline_samples_per_s", Number(row->baseline_samples_per_s)},
          {"speedup", row->speedup ? Number(*row->speedup) : Json(nullptr)},
          {"backend", row->backend},
          {"date", row->date},
          {"run", Json{{"db", row->db_path},
                       {"id", row->run_id},
                       {"uid", row->run_uid},
                       {"status", row->status},
                       {"runs_seen", row->runs_seen}}}});
    }
    workloads.push_back(Json{{"name", group.front()->workload_name},
                             {"hash", group.front()->workload_hash},
                             {"machines", machines}});
  }
  return Json{{"workloads", workloads}}.dump(2, ' ', false, Json::error_handler_t::replace) + "\n";
}

std::string RenderCompareHtml(const std::vector<CompareRow>& rows) {
  std::string body = "<h1>feedtune: machines compared</h1>\n";
  body += "<p class=\"meta\">" + std::to_string(rows.size()) +
          " machine/workload pairs; each machine's latest run that found a best setting. Dark bar: "
          "best samples/s; light bar: the baseline (0 workers, no pinning).</p>\n";
  if (rows.empty()) body += "<p>no runs to compare</p>\n";
  for (const auto& group : Groups(rows)) {
    const CompareRow& first = *group.front();
    body += "<h2>" + EscapeHtml(first.workload_name) + " <small>(hash " +
            EscapeHtml(first.workload_hash) + ")</small></h2>\n";
    // Horizontal bars: one per machine, best over its baseline.
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
                    "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"12\" fill=\"#0969da\"/>\n"
                    "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"8\" fill=\"#9ec5fe\"/>\n",
                    kLabel, y, w_of(row->best_samples_per_s), kLabel, y + 14,
                    w_of(row->baseline_samples_per_s));
      svg += "<g class=\"machine\" data-machine-hash=\"" + EscapeHtml(row->machine_hash) +
             "\" data-best-samples-per-s=\"" + ExactNumber(row->best_samples_per_s) +
             "\" data-baseline-samples-per-s=\"" + ExactNumber(row->baseline_samples_per_s) + "\">\n";
      svg += "<text x=\"" + Fixed(kLabel - 8, 0) + "\" y=\"" + Fixed(y + 15, 1) +
             "\" text-anchor=\"end\">" + EscapeHtml(MachineName(row->machine)) + "</text>\n";
      svg += geometry;
      svg += "<text x=\"" + Fixed(kLabel + w_of(row->best_samples_per_s) + 6, 1) + "\" y=\"" +
             Fixed(y + 11, 1) + "\">" + Fixed(row->best_samples_per_s, 1) + " samples/s" +
             (row->speedup ? " (" + Times(*row->speedup) + ")" : "") + "</text>\n</g>\n";
      y += kRowH;
    }
    body += svg + "</svg>\n";

    body += "<table class=\"compare\">\n<thead><tr><th>machine</th><th>hash</th><th class=\"n\">CPUs</th>"
            "<th>GPU</th><th class=\"n\">knee workers</th><th>best config</th>"
            "<th class=\"n\">best samples/s</th><th class=\"n\">speedup</th>"
            "<th class=\"n\">GPU idle % at best</th><th>backend</th><th>date (UTC)</th><th>run</th>"
            "</tr></thead>\n<tbody>\n";
    for (const CompareRow* row : group) {
      const Fingerprint& m = row->machine;
      const auto cell = [](const std::string& text, bool number = false) {
        return std::string(number ? "<td class=\"n\">" : "<td>") + EscapeHtml(text) + "</td>";
      };
      body += "<tr data-machine-hash=\"" + EscapeHtml(row->machine_hash) + "\">" +
              cell(MachineName(m)) + cell(row->machine_hash) +
              cell(std::to_string(m.usable_cpus) + "/" + std::to_string(m.logical_cpus), true) +
              cell(m.gpu_count > 0 ? std::to_string(m.gpu_count) + "x " + m.gpu_name : "none") +
              cell(row->knee_workers ? std::to_string(*row->knee_workers) : "-", true) +
              "<td class=\"config\">" +
              EscapeHtml(row->best_config ? CompactKnobs(*row->best_config) : "-") + "</td>" +
              cell(Fixed(row->best_samples_per_s, 1), true) +
              cell(row->speedup ? Times(*row->speedup) : "-", true) +
              cell(Fixed(row->best_gpu_idle_frac * 100, 1), true) + cell(row->backend) +
              cell(ShortDate(row->date)) +
              // The file's name keeps the row narrow; the full path is its tooltip.
              "<td title=\"" + EscapeHtml(row->db_path) + "\">" +
              EscapeHtml(std::filesystem::path(row->db_path).filename().string() + " #" +
                         std::to_string(row->run_id) +
                         (row->status == "done" ? "" : " (" + row->status + ")")) +
              "</td></tr>\n";
    }
    body += "</tbody>\n</table>\n";
  }
  return internal::HtmlPage("feedtune: machines compared", body);
}

}  // namespace feedtune::results
