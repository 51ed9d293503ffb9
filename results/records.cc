// The one string form of each status (records.h) and its parse; the JSON
// forms of the CPU calibration and of the phases read into their facts.
#include "results/records.h"

#include <array>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <utility>

namespace feedtune::results {
namespace {

template <typename Enum, size_t N>
using NameTable = std::array<std::pair<Enum, std::string_view>, N>;

constexpr NameTable<TrialStatus, 3> kTrialStatusNames{{
    {TrialStatus::kOk, "ok"},
    {TrialStatus::kFailed, "failed"},
    {TrialStatus::kSkipped, "skipped"},
}};

constexpr NameTable<RunStatus, 4> kRunStatusNames{{
    {RunStatus::kRunning, "running"},
    {RunStatus::kDone, "done"},
    {RunStatus::kInterrupted, "interrupted"},
    {RunStatus::kFailed, "failed"},
}};

template <typename Enum, size_t N>
std::string NameOf(const NameTable<Enum, N>& table, Enum value) {
  for (const auto& [e, name] : table) {
    if (e == value) return std::string(name);
  }
  return "unknown";  // unreachable: every enumerator has a row
}

template <typename Enum, size_t N>
Enum Parse(const NameTable<Enum, N>& table, std::string_view text, const char* what) {
  std::string known;
  for (const auto& [e, name] : table) {
    if (name == text) return e;
    known += (known.empty() ? "" : ", ") + std::string(name);
  }
  throw std::invalid_argument("unknown " + std::string(what) + " status '" + std::string(text) +
                              "' (known: " + known + "); was the file written by a newer feedtune?");
}

}  // namespace

std::string TrialStatusName(TrialStatus status) { return NameOf(kTrialStatusNames, status); }
std::string RunStatusName(RunStatus status) { return NameOf(kRunStatusNames, status); }
TrialStatus ParseTrialStatus(std::string_view text) { return Parse(kTrialStatusNames, text, "trial"); }
RunStatus ParseRunStatus(std::string_view text) { return Parse(kRunStatusNames, text, "run"); }

std::optional<CpuCalibrationFacts> CpuCalibrationFromJson(const std::string& json) {
  if (json.empty()) return std::nullopt;
  const auto j = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("work_bytes_per_s") || !j["work_bytes_per_s"].is_number()) return std::nullopt;
  const auto number = [&j](const char* key) { return j.contains(key) && j[key].is_number() ? j[key].get<double>() : 0.0; };
  CpuCalibrationFacts cpu;
  cpu.clock = j.contains("clock") && j["clock"].is_string() ? j["clock"].get<std::string>() : "";
  cpu.clock_read_ns = number("clock_read_ns");
  cpu.work_bytes_per_s = number("work_bytes_per_s");
  cpu.chunk_bytes = static_cast<int64_t>(number("chunk_bytes"));
  cpu.chunk_us = number("chunk_us");
  cpu.clock_overhead = number("clock_overhead");
  cpu.check_requested_us = number("check_requested_us");
  cpu.check_spent_us = number("check_spent_us");
  cpu.calibration_s = number("calibration_s");
  return cpu;
}

std::string PhasesToJson(const std::vector<PhaseFact>& phases) {
  nlohmann::json list = nlohmann::json::array();
  for (const PhaseFact& p : phases) list.push_back({{"phase", p.phase}, {"kept", p.kept}, {"why", p.why}});
  return list.dump();
}

std::vector<PhaseFact> PhasesFromJson(const std::string& json) {
  std::vector<PhaseFact> phases;
  const auto j = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (!j.is_array()) return phases;
  for (const auto& p : j) {
    if (!p.is_object()) continue;
    PhaseFact& phase = phases.emplace_back();
    phase.phase = p.value("phase", std::string());
    phase.kept = p.value("kept", false);
    phase.why = p.value("why", std::string());
  }
  return phases;
}

}  // namespace feedtune::results
