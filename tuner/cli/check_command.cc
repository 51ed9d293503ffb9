// `feedtune check`: regressions and class outliers in a fleet's results file,
// for cron and CI (exit 1 when there are any). The rules live in results/fleet.h.
#include <cmath>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "results/compare.h"
#include "results/fleet.h"
#include "results/store.h"
#include "tuner/cli/cli_util.h"

namespace feedtune::cli {
namespace {

constexpr const char* kCheckUsage = R"(Usage: feedtune check [--db FILE] [--workload NAME] [--format table|json]

Looks for what went wrong in a fleet's results file (one merged with
`feedtune merge`, or any results file) and exits 1 when it finds any:
  regression  a host whose latest best samples/s fell below its previous run
              of the same workload (name and config hash) beyond both 95%
              intervals (the latest's upper bound under the previous lower one)
  outlier     a host whose latest best is below its hardware class's median
              by more than 5% and beyond the noise (3 or more hosts in the
              class; `feedtune compare` shows the same flag)
A rerun within the noise passes. Exit codes: 0 nothing found, 1 findings (or
the file cannot be read), 2 bad usage.

Examples:
  feedtune check --db fleet.db
  feedtune check --db fleet.db --workload resnet50 --format json)";

nlohmann::json Number(double value) { return std::isfinite(value) ? nlohmann::json(value) : nlohmann::json(nullptr); }

}  // namespace

int RunCheck(const Args& args) {
  po::options_description options("Options");
  std::string db_path, workload, format;
  options.add_options()("help,h", "this help")("db", po::value(&db_path)->default_value(kDefaultDb),
                                               "results file (SQLite)")(
      "workload", po::value(&workload), "only this workload (its name)")(
      "format", po::value(&format)->default_value("table"), "table | json");
  po::positional_options_description positional;
  int code = kExitOk;
  const auto vm = Parse(args, options, positional, kCheckUsage, &code);
  if (!vm) return code;
  if (format != "table" && format != "json") {
    std::cerr << "feedtune: --format must be table or json, got '" << format << "'\n";
    return kExitUsage;
  }
  const std::optional<std::string> only = workload.empty() ? std::nullopt : std::optional<std::string>(workload);
  try {
    const results::Store store = results::Store::OpenReadOnly(db_path);
    const std::vector<results::FleetFinding> findings = results::CheckFleet(store, only);
    const std::vector<results::CompareRow> rows = results::CollectCompareRows({&store}, only);
    if (rows.empty() && only) {
      std::cerr << "feedtune: " << db_path << ": no runs of workload '" << workload
                << "'; the file holds: " << results::DescribeStoredWorkloads(store) << "\n";
      return kExitFailure;
    }
    int regressions = 0;
    for (const auto& f : findings) regressions += f.kind == "regression" ? 1 : 0;
    const int outliers = static_cast<int>(findings.size()) - regressions;
    if (format == "json") {
      nlohmann::ordered_json list = nlohmann::ordered_json::array();
      for (const results::FleetFinding& f : findings) {
        list.push_back({{"kind", f.kind},
                        {"workload", {{"name", f.workload_name}, {"hash", f.workload_hash}}},
                        {"host", {{"name", f.host.name}, {"hostname", f.host.hostname}, {"machine_id", f.host.machine_id}}},
                        {"class", f.machine_hash},
                        {"run", f.run_id},
                        {"best", {{"samples_per_s", Number(f.best_samples_per_s)}, {"ci", {Number(f.ci_low), Number(f.ci_high)}}}},
                        {"reference",
                         {{"run", f.reference_run_id > 0 ? nlohmann::json(f.reference_run_id) : nlohmann::json(nullptr)},
                          {"samples_per_s", Number(f.reference_samples_per_s)},
                          {"ci", {Number(f.reference_ci_low), Number(f.reference_ci_high)}}}},
                        {"drop", Number(f.drop)},
                        {"text", f.text}});
      }
      const nlohmann::ordered_json out = {{"db", db_path},
                                          {"workload", only ? nlohmann::json(*only) : nlohmann::json(nullptr)},
                                          {"hosts_checked", rows.size()},
                                          {"regressions", regressions},
                                          {"outliers", outliers},
                                          {"findings", list}};
      std::cout << out.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    } else {
      std::cout << "feedtune check: " << db_path << ": " << rows.size() << " host/workload pairs, " << regressions
                << (regressions == 1 ? " regression, " : " regressions, ") << outliers
                << (outliers == 1 ? " outlier\n" : " outliers\n");
      for (const results::FleetFinding& f : findings) std::cout << "  " << f.kind << ": " << f.text << "\n";
    }
    return findings.empty() ? kExitOk : kExitFailure;
  } catch (const results::StoreError& e) {
    std::cerr << "feedtune: " << e.what() << "\n";
    return kExitFailure;
  }
}

}  // namespace feedtune::cli
