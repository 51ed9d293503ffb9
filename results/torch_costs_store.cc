// The results file's torch_costs table (results/torch_costs.h): one row per
// host, the latest `feedtune calibrate`. Columns follow TorchCostFields.
#include <string>

#include "results/schema.h"
#include "results/sqlite.h"
#include "results/store.h"
#include "results/torch_costs.h"

namespace feedtune::results {
namespace {

// "worker_start_s, in_process_batch_s, ..." in TorchCostFields' order: the
// columns a file of schema `version` has.
std::string CostColumns(int version) {
  std::string list;
  for (const TorchCostField& f : TorchCostFields()) {
    if (f.since <= version) list += std::string(list.empty() ? "" : ", ") + f.name;
  }
  return list;
}

constexpr int kTorchCostsSince = 17;    // the schema version that added the table
constexpr int kNotMeasuredSince = 20;   // ... and its not_measured_json column

}  // namespace

void Store::SetTorchCosts(const std::string& host, const TorchCosts& costs) {
  const std::string sql = "INSERT OR REPLACE INTO torch_costs (host, measured_at, python_version, torch_version, "
                          "start_method, not_measured_json, " + CostColumns(Store::kSchemaVersion) +
                          ") VALUES (?, ?, ?, ?, ?, ?, " + Placeholders(TorchCostFields().size()) + ")";
  Statement insert(db_.get(), path_, "record torch costs", sql.c_str());
  insert.BindAll(host, costs.measured_at, costs.python_version, costs.torch_version, costs.start_method,
                 TorchCostsJson(costs)["not_measured"].dump());
  int index = 7;
  for (const TorchCostField& f : TorchCostFields()) insert.BindAt(index++, costs.*f.member);
  insert.Run();
}

std::optional<TorchCosts> Store::LoadTorchCosts(const std::string& host) const {
  if (schema_version_ < kTorchCostsSince) return std::nullopt;  // an older file opened read-only
  const bool has_not_measured = schema_version_ >= kNotMeasuredSince;
  const std::string sql = std::string("SELECT measured_at, python_version, torch_version, start_method, ") +
                          (has_not_measured ? "not_measured_json, " : "'{}', ") + CostColumns(schema_version_) +
                          " FROM torch_costs WHERE host = ?";
  Statement select(db_.get(), path_, "read torch costs", sql.c_str());
  select.BindAll(host);
  if (!select.Step()) return std::nullopt;
  TorchCosts costs;
  costs.measured_at = select.Text(0);
  costs.python_version = select.Text(1);
  costs.torch_version = select.Text(2);
  costs.start_method = select.Text(3);
  ReadNotMeasured(nlohmann::json::parse(select.Text(4), nullptr, /*allow_exceptions=*/false), &costs);
  int column = 5;
  for (const TorchCostField& f : TorchCostFields()) {
    if (f.since <= schema_version_) {
      costs.*f.member = select.Double(column++);
    } else {
      costs.not_measured[f.name] = kMeasuredBeforeIt;
    }
  }
  return costs;
}

}  // namespace feedtune::results
