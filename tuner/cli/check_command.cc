// `feedtune check`: regressions and class outliers in a fleet's results file,
// and training jobs whose observed runs do not hold to their sweep, for cron
// and CI (exit 1 when there are any). The rules live in results/fleet.h and
// results/observed.h.
#include <cmath>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "results/compare.h"
#include "results/fleet.h"
#include "results/json_form.h"
#include "results/observed.h"
#include "results/store.h"
#include "tuner/cli/cli_util.h"

namespace feedtune::cli {
namespace {

constexpr const char* kCheckUsage = R"(Usage: feedtune check [--db FILE] [--workload NAME] [--slower-than PCT] [--format table|json]

Looks for what went wrong in a results file (a fleet's, merged with
`feedtune merge`, or any other) and exits 1 when it finds any:
  regression  a host whose latest best samples/s fell below its previous run
              of the same workload (name and config hash) beyond both 95%
              intervals (the latest's upper bound under the previous lower one)
  outlier     a host whose latest best is below its hardware class's median
              by more than 5% and beyond the noise (3 or more hosts in the
              class; `feedtune compare` shows the same flag)
and, for each training job observed on a host (`feedtune observe`, python
feedtune.watch; the latest job per host and config), held against that
host's sweep of the same config (the run the job named, else the latest):
  slower      the job ran more than --slower-than below the swept samples/s
              ("the job ran 23% below the swept figure")
  input-bound the job waited for batches 20% or more of its step time (the
              TensorBoard input-pipeline analyzer's top band: "the job is 31%
              input-bound at the swept setting")
  knobs       the job's DataLoader knobs differ from the swept best (named)
A job that holds gets one line: "holds: ...". A rerun within the noise passes.
Runs marked busy (other processes took more CPU than sweep.background.warn_cpu
beside their sweep, docs/measurement.md) are listed, each with the quiet run
that export, loader_kwargs and --seed-from take for its host instead; a busy
run alone is not a finding (it does not change the exit code), and is not held
against the host's previous run as a regression.
Exit codes: 0 nothing found, 1 findings (or the file cannot be read), 2 bad usage.

Examples:
  feedtune check --db fleet.db
  feedtune check --db fleet.db --workload resnet50 --slower-than 15 --format json)";


}  // namespace

namespace {

using OrderedJson = nlohmann::ordered_json;

OrderedJson FleetFindingJson(const results::FleetFinding& f) {
  return {{"kind", f.kind},
          {"workload", {{"name", f.workload_name}, {"hash", f.workload_hash}}},
          {"host", {{"name", f.host.name}, {"hostname", f.host.hostname}, {"machine_id", f.host.machine_id}}},
          {"class", f.machine_hash},
          {"run", f.run_id},
          {"best", {{"samples_per_s", results::JsonNumber(f.best_samples_per_s)}, {"ci", {results::JsonNumber(f.ci_low), results::JsonNumber(f.ci_high)}}}},
          {"reference",
           {{"run", f.reference_run_id > 0 ? nlohmann::json(f.reference_run_id) : nlohmann::json(nullptr)},
            {"samples_per_s", results::JsonNumber(f.reference_samples_per_s)},
            {"ci", {results::JsonNumber(f.reference_ci_low), results::JsonNumber(f.reference_ci_high)}}}},
          {"drop", results::JsonNumber(f.drop)},
          {"text", f.text}};
}

OrderedJson ObservedCheckJson(const results::ObservedCheck& c) {
  OrderedJson findings = OrderedJson::array();
  for (const results::ObservedFinding& f : c.findings) findings.push_back({{"kind", f.kind}, {"text", f.text}});
  OrderedJson swept = nullptr;
  if (c.sweep_run_id) {
    swept = {{"run", *c.sweep_run_id},
             {"config", results::LoaderKnobsJson<OrderedJson>(c.swept)},
             {"samples_per_s", results::JsonNumber(c.swept_samples_per_s)}};
  }
  return {{"config", c.observed.workload_name},
          {"host", c.observed.host.name},
          {"checked", c.sweep_run_id.has_value()},
          {"holds", c.sweep_run_id.has_value() && c.findings.empty()},
          {"drop", c.sweep_run_id ? results::JsonNumber(c.drop) : nlohmann::json(nullptr)},
          {"swept", swept},
          {"observed", results::ObservedJson(c.observed)},
          {"findings", findings},
          {"text", c.text}};
}

int CountObservedFindings(const std::vector<results::ObservedCheck>& checks) {
  int count = 0;
  for (const results::ObservedCheck& c : checks) count += static_cast<int>(c.findings.size());
  return count;
}

OrderedJson BusyRunsJson(const std::vector<results::BusyRun>& busy) {
  OrderedJson list = OrderedJson::array();
  for (const results::BusyRun& b : busy) {
    list.push_back({{"workload", b.workload_name},
                    {"host", b.host.name},
                    {"class", b.machine_hash},
                    {"run", b.run_id},
                    {"date", b.date},
                    {"background_cpu", results::JsonNumber(b.background_cpu)},
                    {"instead", b.instead ? OrderedJson(*b.instead) : OrderedJson(nullptr)},
                    {"text", b.text}});
  }
  return list;
}

void PrintCheckJson(const std::string& db_path, const std::optional<std::string>& only, size_t pairs,
                    const std::vector<results::FleetFinding>& findings, int regressions,
                    const std::vector<results::ObservedCheck>& observed, const std::vector<results::BusyRun>& busy) {
  OrderedJson list = OrderedJson::array();
  for (const results::FleetFinding& f : findings) list.push_back(FleetFindingJson(f));
  OrderedJson jobs = OrderedJson::array();
  for (const results::ObservedCheck& c : observed) jobs.push_back(ObservedCheckJson(c));
  const OrderedJson out = {{"db", db_path},
                           {"workload", only ? nlohmann::json(*only) : nlohmann::json(nullptr)},
                           {"hosts_checked", pairs},
                           {"regressions", regressions},
                           {"outliers", static_cast<int>(findings.size()) - regressions},
                           {"findings", list},
                           // Issue 22: training jobs held against their sweep.
                           {"observed_findings", CountObservedFindings(observed)},
                           {"observed", jobs},
                           // Runs measured beside other processes (docs/measurement.md).
                           {"busy_runs", BusyRunsJson(busy)}};
  std::cout << out.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
}

void PrintCheckTable(const std::string& db_path, size_t pairs, const std::vector<results::FleetFinding>& findings,
                     int regressions, const std::vector<results::ObservedCheck>& observed,
                     const std::vector<results::BusyRun>& busy) {
  const int outliers = static_cast<int>(findings.size()) - regressions;
  std::cout << "feedtune check: " << db_path << ": " << pairs << " host/workload pairs, " << regressions
            << (regressions == 1 ? " regression, " : " regressions, ") << outliers
            << (outliers == 1 ? " outlier\n" : " outliers\n");
  for (const results::FleetFinding& f : findings) std::cout << "  " << f.kind << ": " << f.text << "\n";
  for (const results::ObservedCheck& c : observed) {
    if (!c.sweep_run_id) {
      std::cout << "  unchecked job: " << c.text << "\n";
    } else if (c.findings.empty()) {
      std::cout << "  holds: " << c.text << "\n";
    } else {
      const std::string who = "host " + c.observed.host.name + ", config " + c.observed.workload_name;
      for (const results::ObservedFinding& f : c.findings) std::cout << "  " << f.kind << ": " << who << ": " << f.text << "\n";
    }
  }
  for (const results::BusyRun& b : busy) std::cout << "  busy: " << b.text << "\n";
}

}  // namespace

int RunCheck(const Args& args) {
  po::options_description options("Options");
  std::string db_path, workload, format;
  double slower_than_pct = results::kDefaultSlowerThan * 100;
  options.add_options()("help,h", "this help")("db", po::value(&db_path)->default_value(kDefaultDb),
                                               "results file (SQLite)")(
      "workload", po::value(&workload), "only this workload (its name)")(
      "slower-than", po::value(&slower_than_pct)->default_value(slower_than_pct),
      "flag a job this many percent below its swept samples/s")(
      "format", po::value(&format)->default_value("table"), "table | json");
  po::positional_options_description positional;
  int code = kExitOk;
  const auto vm = Parse(args, options, positional, kCheckUsage, &code);
  if (!vm) return code;
  if (format != "table" && format != "json") {
    std::cerr << "feedtune: --format must be table or json, got '" << format << "'\n";
    return kExitUsage;
  }
  if (!std::isfinite(slower_than_pct) || slower_than_pct < 0 || slower_than_pct >= 100) {
    std::cerr << "feedtune: --slower-than is a percentage from 0 to 100 (e.g. 10), got " << slower_than_pct << "\n";
    return kExitUsage;
  }
  const std::optional<std::string> only = workload.empty() ? std::nullopt : std::optional<std::string>(workload);
  try {
    const results::Store store = results::Store::OpenReadOnly(db_path);
    const std::vector<results::FleetFinding> findings = results::CheckFleet(store, only);
    const std::vector<results::CompareRow> rows = results::CollectCompareRows({&store}, only);
    const std::vector<results::ObservedCheck> observed = results::CheckObserved(store, only, slower_than_pct / 100);
    const std::vector<results::BusyRun> busy = results::BusyRuns(store, only);
    if (rows.empty() && observed.empty() && only) {
      std::cerr << "feedtune: " << db_path << ": no runs of workload '" << workload
                << "'; the file holds: " << results::DescribeStoredWorkloads(store) << "\n";
      return kExitFailure;
    }
    int regressions = 0;
    for (const auto& f : findings) regressions += f.kind == "regression" ? 1 : 0;
    if (format == "json") {
      PrintCheckJson(db_path, only, rows.size(), findings, regressions, observed, busy);
    } else {
      PrintCheckTable(db_path, rows.size(), findings, regressions, observed, busy);
    }
    return findings.empty() && CountObservedFindings(observed) == 0 ? kExitOk : kExitFailure;
  } catch (const results::StoreError& e) {
    std::cerr << "feedtune: " << e.what() << "\n";
    return kExitFailure;
  }
}

}  // namespace feedtune::cli
