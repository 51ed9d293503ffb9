#include "results/store_probe.h"

#include "results/units.h"

namespace feedtune::results {
namespace {

// A number's text in milliseconds, or "?" when the probe did not measure it.
std::string Ms(const nlohmann::json& j, const char* key) {
  return j.contains(key) && j[key].is_number() ? Fixed(j[key].get<double>() * 1e3, 1) + " ms" : "?";
}

std::string MbPerS(const nlohmann::json& j) {
  const char* key = "mb_per_s_per_connection";
  return j.contains(key) && j[key].is_number() ? Fixed(j[key].get<double>(), 1) + " MB/s per connection"
                                               : "MB/s per connection not measured";
}

std::string Knee(const nlohmann::json& j) {
  return j.contains("knee_in_flight") && j["knee_in_flight"].is_number_integer()
             ? std::to_string(j["knee_in_flight"].get<int>())
             : "?";
}

}  // namespace

nlohmann::json StoreProbeJson(const std::string& json) {
  if (json.empty()) return nullptr;
  nlohmann::json j = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  return j.is_object() ? j : nlohmann::json(nullptr);
}

std::optional<std::string> StoreProbeLine(const std::string& json) {
  const nlohmann::json j = StoreProbeJson(json);
  if (j.is_null()) return std::nullopt;
  std::string curve;
  if (j.contains("concurrency") && j["concurrency"].is_array()) {
    for (const nlohmann::json& point : j["concurrency"]) {
      if (!point.is_object() || !point.value("objects_per_s", nlohmann::json()).is_number()) continue;
      curve += (curve.empty() ? "" : ", ") + Fixed(point["objects_per_s"].get<double>(), 0) + " at " +
               std::to_string(point.value("in_flight", 0));
    }
  }
  return j.value("source", std::string("the store")) + ": first byte p50 " + Ms(j, "first_byte_p50_s") + ", p99 " +
         Ms(j, "first_byte_p99_s") + "; " + MbPerS(j) +
         (curve.empty() ? std::string() : "; objects/s " + curve + " in flight, knee at " + Knee(j)) + "; " +
         std::to_string(j.value("retries", int64_t{0})) + " retries";
}

std::optional<std::string> StoreProbeShort(const std::string& json) {
  const nlohmann::json j = StoreProbeJson(json);
  if (j.is_null()) return std::nullopt;
  return "first byte " + Ms(j, "first_byte_p50_s") + ", " + MbPerS(j) + ", knee " + Knee(j) + " in flight";
}

}  // namespace feedtune::results
