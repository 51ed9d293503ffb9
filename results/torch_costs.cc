#include "results/torch_costs.h"

#include <stdexcept>

#include "results/units.h"

namespace feedtune::results {
namespace {

constexpr int kFirstTorchCostsVersion = 17;  // the schema version that added the torch_costs table

}  // namespace

double TorchCosts::SampleSeconds(bool in_worker, int64_t bytes, int batch_size) const {
  const double n = static_cast<double>(bytes);
  const double per_batch = (in_worker ? worker_batch_s : in_process_batch_s) / std::max(1, batch_size);
  return per_batch + (in_worker ? worker_sample_s + worker_byte_s * n : in_process_sample_s + in_process_byte_s * n);
}

const std::vector<TorchCostField>& TorchCostFields() {
  static const std::vector<TorchCostField> fields = {
      {"worker_start_s", &TorchCosts::worker_start_s, 17},
      {"in_process_batch_s", &TorchCosts::in_process_batch_s, 17},
      {"in_process_sample_s", &TorchCosts::in_process_sample_s, 17},
      {"in_process_byte_s", &TorchCosts::in_process_byte_s, 17},
      {"worker_batch_s", &TorchCosts::worker_batch_s, 17},
      {"worker_sample_s", &TorchCosts::worker_sample_s, 17},
      {"worker_byte_s", &TorchCosts::worker_byte_s, 17},
      {"main_batch_s", &TorchCosts::main_batch_s, 17},
      {"main_byte_s", &TorchCosts::main_byte_s, 17},
      {"main_worker_start_s", &TorchCosts::main_worker_start_s, 17},
      {"main_worker_stop_s", &TorchCosts::main_worker_stop_s, 17},
      {"main_stop_fixed_s", &TorchCosts::main_stop_fixed_s, 20},
  };
  return fields;
}

TorchCosts TorchCostsFromProbe(const nlohmann::json& costs) {
  if (!costs.is_object()) throw std::runtime_error("the torch probe's \"torch_costs\" is not an object");
  TorchCosts out;
  const auto text = [&costs](const char* key) {
    const auto it = costs.find(key);
    return it != costs.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  out.python_version = text("python_version");
  out.torch_version = text("torch_version");
  out.start_method = text("start_method");
  if (const auto it = costs.find("not_measured"); it != costs.end()) ReadNotMeasured(*it, &out);
  for (const TorchCostField& f : TorchCostFields()) {
    const auto it = costs.find(f.name);
    if (it == costs.end() && f.since > kFirstTorchCostsVersion) {
      out.not_measured[f.name] = kMeasuredBeforeIt;
      continue;
    }
    if (it == costs.end() || !it->is_number() || it->get<double>() < 0) {
      throw std::runtime_error(std::string("the torch probe's answer has no non-negative number \"") + f.name + "\"");
    }
    out.*f.member = it->get<double>();
  }
  return out;
}

void ReadNotMeasured(const nlohmann::json& object, TorchCosts* costs) {
  if (!object.is_object()) return;
  for (const auto& [name, why] : object.items()) costs->not_measured[name] = why.is_string() ? why.get<std::string>() : "";
}

nlohmann::ordered_json TorchCostsJson(const TorchCosts& costs) {
  nlohmann::ordered_json j = {{"measured_at", costs.measured_at},
                              {"python_version", costs.python_version},
                              {"torch_version", costs.torch_version},
                              {"start_method", costs.start_method}};
  for (const TorchCostField& f : TorchCostFields()) j[f.name] = costs.*f.member;
  j["not_measured"] = nlohmann::ordered_json::object();
  for (const auto& [name, why] : costs.not_measured) j["not_measured"][name] = why;
  return j;
}

std::optional<TorchCosts> TorchCostsFromJson(const std::string& json) {
  if (json.empty()) return std::nullopt;
  const nlohmann::json j = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return std::nullopt;
  try {
    TorchCosts costs = TorchCostsFromProbe(j);
    costs.measured_at = j.value("measured_at", "");
    return costs;
  } catch (const std::runtime_error&) {
    return std::nullopt;
  }
}

bool IsNativeRun(const std::string& config_yaml, const std::string& backend) {
  // ToYaml writes the kind as "  kind: NAME" under "workload:"; results does
  // not parse configs (tuner/config is above it).
  return backend != "in-job" && config_yaml.find("\n  kind: command") == std::string::npos;
}

namespace {

std::string NotMeasuredText(const TorchCosts& c) {
  std::string text;
  for (const auto& [name, why] : c.not_measured) text += (text.empty() ? "" : "; ") + name + " (" + why + ")";
  return text.empty() ? "" : "; not measured, so charged 0: " + text;
}

}  // namespace

std::string TorchCostsLine(const TorchCosts& c) {
  const auto us = [](double s) { return ThreeFigures(s * 1e6) + " us"; };
  return "torch " + c.torch_version + " (Python " + c.python_version + ", " + c.start_method + ")" +
         (c.measured_at.empty() ? "" : ", measured " + c.measured_at) + ": a worker starts in " +
         ThreeFigures(c.worker_start_s * 1e3) + " ms; a worker pays " + us(c.worker_batch_s) + " per batch, " +
         us(c.worker_sample_s) + " per sample, " + Format("%.2f", c.worker_byte_s * 1e9) +
         " ns per byte; the main process " + us(c.main_batch_s) + " per batch from a worker, " +
         ThreeFigures(c.main_worker_start_s * 1e3) + " ms to start a worker and waits " +
         ThreeFigures(c.main_stop_fixed_s * 1e3) + " ms + " + ThreeFigures(c.main_worker_stop_s * 1e3) +
         " ms a worker to stop them; without workers " + us(c.in_process_batch_s) + " per batch, " +
         us(c.in_process_sample_s) + " per sample" + NotMeasuredText(c);
}

}  // namespace feedtune::results
