#include "results/store_probe.h"

#include <cmath>
#include <limits>
#include <utility>

#include "results/json_form.h"
#include "results/units.h"

namespace feedtune::results {
namespace {

// A figure of the stored JSON: its number, NaN where it is null or missing.
double StoredFigure(const nlohmann::json& j, const char* key) {
  return j.contains(key) && j[key].is_number() ? j[key].get<double>() : std::numeric_limits<double>::quiet_NaN();
}

int64_t StoredCount(const nlohmann::json& j, const char* key) {
  return j.contains(key) && j[key].is_number_integer() ? j[key].get<int64_t>() : 0;
}

// Seconds as milliseconds, or "?" where not measured.
std::string Ms(double seconds) { return std::isfinite(seconds) ? Fixed(seconds * 1e3, 1) + " ms" : "?"; }

std::string MbPerS(double mb_per_s) {
  return std::isfinite(mb_per_s) ? Fixed(mb_per_s, 1) + " MB/s per connection" : "MB/s per connection not measured";
}

std::string Knee(const nlohmann::json& j) {
  return j.contains("knee_in_flight") && j["knee_in_flight"].is_number_integer()
             ? std::to_string(j["knee_in_flight"].get<int>())
             : "?";
}

}  // namespace

std::string StoreRetriesText(const StoreFigures& s) {
  std::string causes;
  for (const auto& [count, cause] : {std::pair{s.retries_slowdown, "SlowDown"},
                                     std::pair{s.retries_server_error, "server error"},
                                     std::pair{s.retries_connection, "connection lost"}}) {
    if (count > 0) causes += (causes.empty() ? "" : ", ") + std::to_string(count) + " " + cause;
  }
  const int64_t retries = s.retries();
  return std::to_string(retries) + (retries == 1 ? " retry" : " retries") + (causes.empty() ? "" : " (" + causes + ")");
}

std::string StoreFiguresText(const StoreFigures& s) {
  return "first byte p50 " + Ms(s.first_byte_p50_s) + ", p99 " + Ms(s.first_byte_p99_s) + "; " +
         MbPerS(s.mb_per_s_per_connection) + "; " + std::to_string(s.requests) +
         (s.requests == 1 ? " request, " : " requests, ") + StoreRetriesText(s);
}

nlohmann::ordered_json StoreFiguresJson(const StoreFigures& s) {
  return {{"requests", s.requests},
          {"retries", s.retries()},
          {"retries_slowdown", s.retries_slowdown},
          {"retries_server_error", s.retries_server_error},
          {"retries_connection", s.retries_connection},
          {"objects", s.objects},
          {"bytes", s.bytes},
          {"first_byte_p50_s", FigureJson(s.first_byte_p50_s)},
          {"first_byte_p99_s", FigureJson(s.first_byte_p99_s)},
          {"mb_per_s_per_connection", FigureJson(s.mb_per_s_per_connection)}};
}

std::optional<StoreFigures> StoreFiguresFromJson(const std::string& json) {
  const nlohmann::json j = StoreProbeJson(json);
  if (j.is_null()) return std::nullopt;
  StoreFigures s;
  s.requests = StoredCount(j, "requests");
  s.retries_slowdown = StoredCount(j, "retries_slowdown");
  s.retries_server_error = StoredCount(j, "retries_server_error");
  s.retries_connection = StoredCount(j, "retries_connection");
  s.objects = StoredCount(j, "objects");
  s.bytes = StoredCount(j, "bytes");
  s.first_byte_p50_s = StoredFigure(j, "first_byte_p50_s");
  s.first_byte_p99_s = StoredFigure(j, "first_byte_p99_s");
  s.mb_per_s_per_connection = StoredFigure(j, "mb_per_s_per_connection");
  return s;
}

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
  return j.value("source", std::string("the store")) + ": first byte p50 " + Ms(StoredFigure(j, "first_byte_p50_s")) +
         ", p99 " + Ms(StoredFigure(j, "first_byte_p99_s")) + "; " +
         MbPerS(StoredFigure(j, "mb_per_s_per_connection")) +
         (curve.empty() ? std::string() : "; objects/s " + curve + " in flight, knee at " + Knee(j)) + "; " +
         std::to_string(j.value("retries", int64_t{0})) + " retries";
}

std::optional<std::string> StoreProbeShort(const std::string& json) {
  const nlohmann::json j = StoreProbeJson(json);
  if (j.is_null()) return std::nullopt;
  return "first byte " + Ms(StoredFigure(j, "first_byte_p50_s")) + ", " +
         MbPerS(StoredFigure(j, "mb_per_s_per_connection")) + ", knee " + Knee(j) + " in flight";
}

}  // namespace feedtune::results
