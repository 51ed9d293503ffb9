#include "results/fleet.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <tuple>

#include "results/background.h"
#include "results/compare.h"
#include "results/report.h"
#include "results/store.h"
#include "results/units.h"

namespace feedtune::results {
namespace {


constexpr double kOtherGpuModel = 8;

double Log2Ratio(double a, double b) {
  if (a <= 0 && b <= 0) return 0;
  // A missing figure (0) against a known one counts as a doubling, not infinity.
  if (a <= 0 || b <= 0) return 1;
  return std::abs(std::log2(a / b));
}


// Newer first: by date, then by id.
bool Newer(const RunRecord& a, const RunRecord& b) {
  if (RunDate(a) != RunDate(b)) return RunDate(a) > RunDate(b);
  return a.id > b.id;
}

bool SameHost(const HostIdentity& stored, const HostIdentity& here, bool match_name) {
  if (match_name && stored.name != here.name) return false;
  if (!stored.machine_id.empty() && !here.machine_id.empty()) return stored.machine_id == here.machine_id;
  return !stored.hostname.empty() && stored.hostname == here.hostname;
}

// The best trial's figures of a run: (samples/s, ci_low, ci_high), NaN when unknown.
struct BestFigures {
  double samples_per_s = NAN;
  double ci_low = NAN;
  double ci_high = NAN;
};

BestFigures BestOf(const Store& store, const RunRecord& run) {
  RunView view;
  view.run = run;
  view.trials = store.LoadTrials(run.id);
  BestFigures figures;
  if (const TrialRecord* best = BestTrial(view)) {
    figures.samples_per_s = best->samples_per_s;
    // Without an interval (one repeat) the figure is its own bound.
    figures.ci_low = std::isfinite(best->ci_low) ? best->ci_low : best->samples_per_s;
    figures.ci_high = std::isfinite(best->ci_high) ? best->ci_high : best->samples_per_s;
  }
  return figures;
}

}  // namespace

double MachineDistance(const Fingerprint& a, const Fingerprint& b) {
  double distance = 0;
  if (a.gpu_name != b.gpu_name) distance += kOtherGpuModel;
  distance += Log2Ratio(a.gpu_count + 1, b.gpu_count + 1);
  distance += Log2Ratio(a.usable_cpus, b.usable_cpus);
  distance += 0.5 * Log2Ratio(static_cast<double>(a.mem_total_bytes), static_cast<double>(b.mem_total_bytes));
  return distance;
}

const char* RunMatchName(RunMatch match) {
  switch (match) {
    case RunMatch::kHost:
      return "host";
    case RunMatch::kClass:
      return "class";
    case RunMatch::kNeighbour:
      return "neighbour";
  }
  return "?";
}

std::string StoredRunMatch::Describe() const {
  std::string text = DescribeMatch();
  if (!passed_over.empty()) {
    text += "; quiet, taken over " + passed_over;
  } else if (busy) {
    text += "; busy: " + BusyText(*run.facts.background) + ", and no quiet run of this host or class";
  }
  return text;
}

std::string StoredRunMatch::DescribeMatch() const {
  const std::string which = "run " + std::to_string(run.id) + " of " + run.host.name + ", " + RunDate(run);
  switch (match) {
    case RunMatch::kHost:
      return "this host's latest run (" + which + ")";
    case RunMatch::kClass:
      return "the latest run of its class " + machine_hash + " (" + which + ")";
    case RunMatch::kNeighbour: {
      const std::string gpu = machine.gpu_count > 0 ? std::to_string(machine.gpu_count) + "x " + machine.gpu_name
                                                    : std::string("no GPU");
      return "the nearest neighbour's run, class " + machine_hash + ": " + gpu + ", " +
             std::to_string(machine.usable_cpus) + " usable CPUs, " +
             Fixed(static_cast<double>(machine.mem_total_bytes) / (1 << 30), 0) + " GiB, distance " +
             Fixed(distance, 2) + " (" + which + ")";
    }
  }
  return which;
}

namespace {

// What NearestStoredRun reads of a store, read once: `check` asks it for every
// busy run, and reading the machines, the runs and the class outliers again
// for each made it quadratic (2,000 busy hosts: 684 s in CI's fleet-scale
// step, 2026-12-06; 1 s read once).
struct StoredRuns {
  std::map<int64_t, StoredMachine> machines;
  std::vector<RunRecord> runs;  // those with a best setting
  // Per workload, its class outliers (class, host key): computed when first asked.
  std::map<std::string, std::set<std::pair<std::string, std::string>>> outliers;
  const Store* store = nullptr;

  explicit StoredRuns(const Store& s) : store(&s) {
    for (StoredMachine& m : s.LoadMachines()) machines.emplace(m.id, std::move(m));
    for (RunRecord& run : s.LoadRuns()) {
      if (run.best_trial_id.has_value()) runs.push_back(std::move(run));
    }
  }

  const std::set<std::pair<std::string, std::string>>& OutliersOf(const std::string& workload) {
    auto found = outliers.find(workload);
    if (found != outliers.end()) return found->second;
    std::set<std::pair<std::string, std::string>>& set = outliers[workload];
    for (const CompareRow& row : CollectCompareRows({store}, workload)) {
      if (row.outlier) set.emplace(row.machine_hash, row.host.Key());
    }
    return set;
  }
};

std::optional<StoredRunMatch> NearestIn(StoredRuns& stored, const std::string& workload, const Fingerprint& machine,
                                        const HostIdentity& host, bool match_name) {
  const std::string hash = machine.Hash();
  // Another host's run stands for this machine only if that host is typical
  // of its class: a class outlier (compare.h) is skipped, unless it is this host.
  const std::set<std::pair<std::string, std::string>>& outliers = stored.OutliersOf(workload);
  std::optional<StoredRunMatch> chosen;
  std::optional<StoredRunMatch> unaware;  // chosen as if no run were busy
  // Ranked by (match, distance) ascending, then newest.
  const auto before = [](const StoredRunMatch& a, const StoredRunMatch& b) {
    if (a.match != b.match) return a.match < b.match;
    if (a.distance != b.distance) return a.distance < b.distance;
    return Newer(a.run, b.run);
  };
  // This host's and its class's runs first, a quiet one before a busy one
  // (docs/measurement.md); then as above.
  const auto ahead = [&before](const StoredRunMatch& a, const StoredRunMatch& b) {
    const bool a_near = a.match != RunMatch::kNeighbour, b_near = b.match != RunMatch::kNeighbour;
    if (a_near != b_near) return a_near;
    if (a_near && a.busy != b.busy) return !a.busy;
    return before(a, b);
  };
  for (const RunRecord& run : stored.runs) {
    if (run.workload_name != workload) continue;
    const auto m = stored.machines.find(run.machine_id);
    if (m == stored.machines.end()) continue;
    StoredRunMatch candidate;
    candidate.machine_hash = m->second.hash;
    candidate.machine = m->second.fingerprint;
    candidate.distance = m->second.hash == hash ? 0 : MachineDistance(machine, m->second.fingerprint);
    candidate.match = SameHost(run.host, host, match_name) ? RunMatch::kHost
                      : m->second.hash == hash            ? RunMatch::kClass
                                                          : RunMatch::kNeighbour;
    if (candidate.match != RunMatch::kHost && outliers.count({m->second.hash, run.host.Key()}) > 0) continue;
    candidate.busy = IsBusy(run);
    candidate.run = run;
    if (!unaware || before(candidate, *unaware)) unaware = candidate;
    if (!chosen || ahead(candidate, *chosen)) chosen = std::move(candidate);
  }
  if (chosen && unaware && unaware->run.uid != chosen->run.uid && unaware->busy) {
    chosen->passed_over = "run " + std::to_string(unaware->run.id) + " of " + unaware->run.host.name + ", " +
                          RunDate(unaware->run) + ", which ran on a busy box (" +
                          BusyText(*unaware->run.facts.background) + ")";
  }
  return chosen;
}

}  // namespace

std::optional<StoredRunMatch> NearestStoredRun(const Store& store, const std::string& workload,
                                               const Fingerprint& machine, const HostIdentity& host,
                                               bool match_name) {
  StoredRuns stored(store);
  return NearestIn(stored, workload, machine, host, match_name);
}

std::string DescribeStoredWorkloads(const Store& store) {
  std::map<std::string, std::pair<int, std::set<std::string>>> by_workload;
  for (const RunRecord& run : store.LoadRuns()) {
    if (!run.best_trial_id) continue;
    auto& entry = by_workload[run.workload_name];
    ++entry.first;
    entry.second.insert(run.host.Key());
  }
  if (by_workload.empty()) return "no run with a best setting";
  std::string text;
  for (const auto& [name, entry] : by_workload) {
    if (!text.empty()) text += ", ";
    text += name + " (" + std::to_string(entry.first) + (entry.first == 1 ? " run" : " runs") + " on " +
            std::to_string(entry.second.size()) + (entry.second.size() == 1 ? " host)" : " hosts)");
  }
  return text;
}

std::vector<BusyRun> BusyRuns(const Store& store, const std::optional<std::string>& workload) {
  StoredRuns stored(store);
  std::vector<BusyRun> busy;
  for (const RunRecord& run : store.LoadRuns()) {
    if ((workload && run.workload_name != *workload) || !IsBusy(run)) continue;
    const auto m = stored.machines.find(run.machine_id);
    if (m == stored.machines.end()) continue;
    BusyRun b;
    b.workload_name = run.workload_name;
    b.host = run.host;
    b.machine_hash = m->second.hash;
    b.run_id = run.id;
    b.date = RunDate(run);
    b.background_cpu = BusyFigure(*run.facts.background);
    const auto stands = NearestIn(stored, run.workload_name, m->second.fingerprint, run.host, false);
    if (stands && !stands->busy && stands->run.uid != run.uid) b.instead = stands->run.id;
    b.text = b.host.name + ": " + b.workload_name + " run " + std::to_string(run.id) + " (" + b.date + "): " +
             BusyText(*run.facts.background) + "; " +
             (b.instead ? "export, loader_kwargs and --seed-from take run " + std::to_string(*b.instead) + " instead"
                        : std::string("no quiet run of this host or class stands in for it: sweep again on a quiet "
                                      "box"));
    busy.push_back(std::move(b));
  }
  return busy;
}

std::vector<FleetFinding> CheckFleet(const Store& store, const std::optional<std::string>& workload) {
  std::vector<FleetFinding> findings;
  std::map<int64_t, std::string> class_of;
  for (const StoredMachine& m : store.LoadMachines()) class_of[m.id] = m.hash;

  // Regressions: per (workload, host), the two newest runs with a best.
  std::map<std::tuple<std::string, std::string, std::string>, std::vector<RunRecord>> by_host;
  for (RunRecord& run : store.LoadRuns()) {
    if (workload && run.workload_name != *workload) continue;
    // A busy run's figures are its neighbours' contention (docs/measurement.md):
    // `check` lists it apart (BusyRuns), and holds quiet runs against each other.
    if (!run.best_trial_id || IsBusy(run)) continue;
    by_host[std::make_tuple(run.workload_name, run.workload_hash, run.host.Key())].push_back(std::move(run));
  }
  for (auto& [key, runs] : by_host) {
    if (runs.size() < 2) continue;
    std::partial_sort(runs.begin(), runs.begin() + 2, runs.end(), Newer);
    const RunRecord& latest = runs[0];
    const RunRecord& previous = runs[1];
    const BestFigures now = BestOf(store, latest);
    const BestFigures then = BestOf(store, previous);
    if (!std::isfinite(now.samples_per_s) || !std::isfinite(then.samples_per_s)) continue;
    if (!(now.ci_high < then.ci_low)) continue;  // within the noise of either run
    FleetFinding f;
    f.kind = "regression";
    f.workload_name = latest.workload_name;
    f.workload_hash = latest.workload_hash;
    f.host = latest.host;
    f.machine_hash = class_of[latest.machine_id];
    f.run_id = latest.id;
    f.best_samples_per_s = now.samples_per_s;
    f.ci_low = now.ci_low;
    f.ci_high = now.ci_high;
    f.reference_run_id = previous.id;
    f.reference_samples_per_s = then.samples_per_s;
    f.reference_ci_low = then.ci_low;
    f.reference_ci_high = then.ci_high;
    f.drop = (then.samples_per_s - now.samples_per_s) / then.samples_per_s;
    f.text = f.host.name + ": " + f.workload_name + " fell " + Fixed(f.drop * 100, 1) + "% (run " +
             std::to_string(previous.id) + " " + Fixed(then.samples_per_s, 1) + " samples/s [" +
             Fixed(then.ci_low, 1) + ", " + Fixed(then.ci_high, 1) + "] -> run " + std::to_string(latest.id) + " " +
             Fixed(now.samples_per_s, 1) + " [" + Fixed(now.ci_low, 1) + ", " + Fixed(now.ci_high, 1) +
             "]), beyond both intervals";
    findings.push_back(std::move(f));
  }

  // Outliers: compare's rows, each host's latest run, against its class.
  const std::vector<CompareRow> rows = CollectCompareRows({&store}, workload);
  for (const ClassSpread& spread : ClassSpreads(rows)) {
    for (const CompareRow* row : spread.rows) {
      if (!row->outlier) continue;
      FleetFinding f;
      f.kind = "outlier";
      f.workload_name = row->workload_name;
      f.workload_hash = row->workload_hash;
      f.host = row->host;
      f.machine_hash = row->machine_hash;
      f.run_id = row->run_id;
      f.best_samples_per_s = row->best_samples_per_s;
      f.ci_low = row->best_ci_low;
      f.ci_high = row->best_ci_high;
      f.reference_samples_per_s = spread.median;
      f.reference_ci_low = spread.median_ci_low;
      f.reference_ci_high = NAN;
      f.drop = row->below_class_median;
      f.text = f.host.name + ": " + f.workload_name + " " + Fixed(f.best_samples_per_s, 1) + " samples/s [" +
               Fixed(f.ci_low, 1) + ", " + Fixed(f.ci_high, 1) + "] is " + Fixed(f.drop * 100, 1) +
               "% below its class " + f.machine_hash + "'s median " + Fixed(spread.median, 1) + " over " +
               std::to_string(spread.measured) + " hosts, beyond the noise (run " + std::to_string(f.run_id) + ")";
      findings.push_back(std::move(f));
    }
  }
  return findings;
}

}  // namespace feedtune::results
