#include "results/compare.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <tuple>
#include <utility>

#include "results/background.h"
#include "results/json_form.h"
#include "results/layout_report.h"
#include "results/report.h"
#include "results/store.h"
#include "results/units.h"

namespace feedtune::results {

namespace internal {

// Minutes are enough to tell runs apart.
std::string ShortDate(const std::string& iso) {
  if (iso.size() < 16) return iso.empty() ? "-" : iso;
  std::string text = iso.substr(0, 16);
  text[10] = ' ';
  return text;
}

std::string CountText(int n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

}  // namespace internal

namespace {

using Json = nlohmann::ordered_json;
using internal::CountText;
using internal::EscapeHtml;
using internal::ExactNumber;
using internal::ShortDate;



// "x1.64". Built by append: GCC 12 warns (-Wrestrict, falsely) on "x" + std::string.
std::string Times(double factor) {
  std::string text(1, 'x');
  text.append(Fixed(factor, 2));
  return text;
}

std::string MachineName(const Fingerprint& m) { return m.label.empty() ? m.hostname : m.label; }

double Median(std::vector<double> values) {
  if (values.empty()) return NAN;
  std::sort(values.begin(), values.end());
  const size_t mid = values.size() / 2;
  return values.size() % 2 == 1 ? values[mid] : (values[mid - 1] + values[mid]) / 2;
}

// The spread of one class's rows (all of one workload and class).
ClassSpread SpreadOf(const std::vector<const CompareRow*>& rows) {
  ClassSpread spread;
  spread.workload_name = rows.front()->workload_name;
  spread.workload_hash = rows.front()->workload_hash;
  spread.machine_hash = rows.front()->machine_hash;
  spread.hosts = static_cast<int>(rows.size());
  spread.rows = rows;
  std::vector<double> bests, lows;
  for (const CompareRow* row : rows) {
    if (!std::isfinite(row->best_samples_per_s)) continue;
    bests.push_back(row->best_samples_per_s);
    // No interval (one repeat): the figure is its own bound.
    lows.push_back(std::isfinite(row->best_ci_low) ? row->best_ci_low : row->best_samples_per_s);
  }
  spread.measured = static_cast<int>(bests.size());
  spread.median = Median(bests);
  spread.median_ci_low = Median(lows);
  spread.min = bests.empty() ? NAN : *std::min_element(bests.begin(), bests.end());
  spread.max = bests.empty() ? NAN : *std::max_element(bests.begin(), bests.end());
  for (const CompareRow* row : rows) spread.outliers += row->outlier ? 1 : 0;
  return spread;
}

// The sweep summary's compact form, so the two read alike.
std::string CompactKnobs(const loader::Knobs& k) {
  return "nw=" + std::to_string(k.num_workers) + " pin=" + (k.pin_memory ? "1" : "0") +
         " nb=" + (k.non_blocking ? "1" : "0") + " pf=" + std::to_string(k.prefetch_factor) +
         " pers=" + (k.persistent_workers ? "1" : "0") + " bs=" + std::to_string(k.batch_size);
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

}  // namespace

std::vector<CompareRow> CollectCompareRows(const std::vector<const Store*>& stores,
                                           const std::optional<std::string>& workload) {
  // Machines are kept alive here for the candidates that point at them.
  std::vector<std::vector<StoredMachine>> machines(stores.size());
  std::map<std::tuple<std::string, std::string, std::string, std::string>, std::vector<Candidate>> by_key;
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
      auto key = std::make_tuple(run.workload_name, run.workload_hash, machine->second->hash, run.host.Key());
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
    row.host = chosen.run.host;
    row.machine = chosen.machine->fingerprint;
    // The class row keeps the label its last sweep gave; the row names this host.
    row.machine.label = row.host.name;
    if (!row.host.hostname.empty()) row.machine.hostname = row.host.hostname;
    row.machine.machine_id = row.host.machine_id;
    row.db_path = chosen.store->path();
    row.run_id = chosen.run.id;
    row.run_uid = chosen.run.uid;
    row.status = chosen.run.status;
    row.backend = chosen.run.backend;
    row.version = chosen.run.version;
    row.date = RunDate(chosen.run);
    row.knee_workers = chosen.run.knee_workers;
    for (const TrialRecord& t : view.trials) {
      if (t.node) row.ranks = std::max(row.ranks, t.node->ranks);
    }
    row.runs_seen = static_cast<int>(candidates.size());
    row.best_samples_per_s = NAN;
    row.best_gpu_idle_frac = NAN;
    row.baseline_samples_per_s = NAN;
    row.best_ci_low = NAN;
    row.best_ci_high = NAN;
    row.below_class_median = NAN;
    if (const TrialRecord* best = BestTrial(view)) {
      row.best_config = best->knobs;
      row.best_samples_per_s = best->samples_per_s;
      row.best_ci_low = best->ci_low;
      row.best_ci_high = best->ci_high;
      row.best_gpu_idle_frac = best->gpu_idle_frac;
    }
    if (const TrialRecord* baseline = BaselineTrial(view)) {
      row.baseline_samples_per_s = baseline->samples_per_s;
    }
    row.speedup = RunSpeedup(view);
    row.busy = IsBusy(chosen.run);
    row.layout = LayoutAnswer(chosen.run);
    row.background_cpu = chosen.run.facts.background ? BusyFigure(*chosen.run.facts.background) : NAN;
    rows.push_back(std::move(row));
  }
  // The classes' medians first (the map's order keeps each class together),
  // then the outliers against them, then the order a reader wants.
  std::map<std::tuple<std::string, std::string, std::string>, std::vector<CompareRow*>> by_class;
  for (CompareRow& row : rows) {
    by_class[std::make_tuple(row.workload_name, row.workload_hash, row.machine_hash)].push_back(&row);
  }
  std::map<std::tuple<std::string, std::string, std::string>, double> class_median;
  for (auto& [key, members] : by_class) {
    const ClassSpread spread = SpreadOf({members.begin(), members.end()});
    class_median[key] = spread.median;
    for (CompareRow* row : members) {
      row->outlier = IsClassOutlier(*row, spread);
      if (std::isfinite(spread.median) && spread.median > 0 && std::isfinite(row->best_samples_per_s)) {
        row->below_class_median = (spread.median - row->best_samples_per_s) / spread.median;
      }
    }
  }
  // Fastest first; unknown (NaN) last.
  const auto figure = [](double v) { return std::isfinite(v) ? v : -1.0; };
  std::sort(rows.begin(), rows.end(), [&](const CompareRow& a, const CompareRow& b) {
    if (a.workload_name != b.workload_name) return a.workload_name < b.workload_name;
    if (a.workload_hash != b.workload_hash) return a.workload_hash < b.workload_hash;
    if (a.machine_hash != b.machine_hash) {
      const double ma = figure(class_median[std::make_tuple(a.workload_name, a.workload_hash, a.machine_hash)]);
      const double mb = figure(class_median[std::make_tuple(b.workload_name, b.workload_hash, b.machine_hash)]);
      if (ma != mb) return ma > mb;
      return a.machine_hash < b.machine_hash;
    }
    const double fa = figure(a.best_samples_per_s);
    const double fb = figure(b.best_samples_per_s);
    if (fa != fb) return fa > fb;
    return a.host.Key() < b.host.Key();
  });
  return rows;
}

bool IsClassOutlier(const CompareRow& row, const ClassSpread& spread) {
  if (spread.measured < kOutlierMinHosts || !std::isfinite(row.best_samples_per_s)) return false;
  if (!(row.best_samples_per_s < spread.median * (1 - kOutlierThreshold))) return false;
  const double high = std::isfinite(row.best_ci_high) ? row.best_ci_high : row.best_samples_per_s;
  return high < spread.median_ci_low;
}

std::vector<ClassSpread> ClassSpreads(const std::vector<CompareRow>& rows) {
  std::vector<ClassSpread> spreads;
  std::vector<const CompareRow*> members;
  for (size_t i = 0; i <= rows.size(); ++i) {
    const bool same = i < rows.size() && !members.empty() &&
                      rows[i].workload_name == members.front()->workload_name &&
                      rows[i].workload_hash == members.front()->workload_hash &&
                      rows[i].machine_hash == members.front()->machine_hash;
    if (!members.empty() && !same) {
      spreads.push_back(SpreadOf(members));
      members.clear();
    }
    if (i < rows.size()) members.push_back(&rows[i]);
  }
  return spreads;
}

namespace {

std::string GpuText(const Fingerprint& m) {
  return m.gpu_count > 0 ? std::to_string(m.gpu_count) + "x " + m.gpu_name : "none";
}

std::string CpuText(const Fingerprint& m) {
  return std::to_string(m.usable_cpus) + "/" + std::to_string(m.logical_cpus);
}

// "-12.3%" (below the class median) or "+4.0%"; "outlier" appended when flagged.
std::string VersusMedian(const CompareRow& row) {
  if (!std::isfinite(row.below_class_median)) return "-";
  const double change = -row.below_class_median * 100;
  std::string text = (change >= 0 ? "+" : "") + Fixed(change, 1) + "%";
  if (row.outlier) text += " OUTLIER";
  return text;
}

// "median 5600.0 samples/s (min 5200.0, max 5800.0) over 4 hosts".
std::string SpreadText(const ClassSpread& spread) {
  if (spread.measured == 0) return "no host found a best setting";
  return "best samples/s median " + Fixed(spread.median, 1) + " (min " + Fixed(spread.min, 1) + ", max " +
         Fixed(spread.max, 1) + ") over " + std::to_string(spread.measured) +
         (spread.measured == 1 ? " host" : " hosts");
}

std::string ClassTitle(const ClassSpread& spread) {
  const Fingerprint& m = spread.rows.front()->machine;
  return "class " + spread.machine_hash + ": " + m.cpu_model + ", " + CpuText(m) + " CPUs, GPU " + GpuText(m);
}

int HostCount(const std::vector<const ClassSpread*>& classes) {
  int hosts = 0;
  for (const ClassSpread* c : classes) hosts += c->hosts;
  return hosts;
}

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

Json OptionalVersion(const std::string& version) { return version.empty() ? Json(nullptr) : Json(version); }

// "4" for one loader, "4 per rank" for a node run (its knobs are per rank).
std::string KneeText(const CompareRow& row) {
  if (!row.knee_workers) return "-";
  return std::to_string(*row.knee_workers) + (row.ranks > 1 ? " per rank" : "");
}

// The rows of one workload's classes, in compare's order.
std::vector<const CompareRow*> RowsOf(const std::vector<const ClassSpread*>& classes) {
  std::vector<const CompareRow*> rows;
  for (const ClassSpread* spread : classes) rows.insert(rows.end(), spread->rows.begin(), spread->rows.end());
  return rows;
}

// A `feedtune layout` workload is shown as its layouts side by side, instead
// of the generic row per host: a layout run's "best config" is the worker
// count of a layout the row does not name, it has no knee and no GPU idle,
// and its best and speedup are the starred cell and the source's row of the
// side-by-side table; what else the generic row says (class, CPUs, run,
// date) is in the host lines under it.
bool IsLayoutWorkload(const std::vector<const ClassSpread*>& classes) {
  for (const CompareRow* row : RowsOf(classes)) {
    if (row->layout) return true;
  }
  return false;
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
      text += "\n" + LayoutSideBySideText(RowsOf(classes)) + BuildsText(classes) + BusyRowsText(classes);
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
  }
  return text;
}

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

namespace {

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
