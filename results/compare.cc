// `feedtune compare`'s rows and classes, from the stores (results/compare.h),
// and the words its renderers share (results/compare_parts.h). The renderers
// are results/compare_table.cc, compare_json.cc and compare_html.cc.
#include "results/compare.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <tuple>
#include <utility>

#include "results/background.h"
#include "results/compare_parts.h"
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
      row.best_store = best->store;
    }
    if (const TrialRecord* baseline = BaselineTrial(view)) {
      row.baseline_samples_per_s = baseline->samples_per_s;
    }
    row.speedup = RunSpeedup(view);
    row.busy = IsBusy(chosen.run);
    row.layout = LayoutAnswer(chosen.run);
    row.background_cpu = chosen.run.facts.background ? BusyFigure(*chosen.run.facts.background) : NAN;
    row.store_probe_json = chosen.run.facts.store_probe_json;
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

// The words the renderers share (results/compare_parts.h).

// Built by append: GCC 12 warns (-Wrestrict, falsely) on "x" + std::string.
std::string Times(double factor) {
  std::string text(1, 'x');
  text.append(Fixed(factor, 2));
  return text;
}

std::string CompactKnobs(const loader::Knobs& k) {
  return "nw=" + std::to_string(k.num_workers) + " pin=" + (k.pin_memory ? "1" : "0") +
         " nb=" + (k.non_blocking ? "1" : "0") + " pf=" + std::to_string(k.prefetch_factor) +
         " pers=" + (k.persistent_workers ? "1" : "0") + " bs=" + std::to_string(k.batch_size);
}

std::string GpuText(const Fingerprint& m) {
  return m.gpu_count > 0 ? std::to_string(m.gpu_count) + "x " + m.gpu_name : "none";
}

std::string CpuText(const Fingerprint& m) {
  return std::to_string(m.usable_cpus) + "/" + std::to_string(m.logical_cpus);
}

std::string VersusMedian(const CompareRow& row) {
  if (!std::isfinite(row.below_class_median)) return "-";
  const double change = -row.below_class_median * 100;
  // Built by append: GCC 12 warns (-Wrestrict, falsely) on "+" + std::string.
  std::string text(change >= 0 ? "+" : "");
  text += Fixed(change, 1) + "%";
  if (row.outlier) text += " OUTLIER";
  return text;
}

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

std::string KneeText(const CompareRow& row) {
  if (!row.knee_workers) return "-";
  return std::to_string(*row.knee_workers) + (row.ranks > 1 ? " per rank" : "");
}

std::vector<const CompareRow*> RowsOf(const std::vector<const ClassSpread*>& classes) {
  std::vector<const CompareRow*> rows;
  for (const ClassSpread* spread : classes) rows.insert(rows.end(), spread->rows.begin(), spread->rows.end());
  return rows;
}

bool IsLayoutWorkload(const std::vector<const ClassSpread*>& classes) {
  for (const CompareRow* row : RowsOf(classes)) {
    if (row->layout) return true;
  }
  return false;
}

}  // namespace feedtune::results
