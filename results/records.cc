// The one string form of each status (records.h) and its parse; the phases'
// one JSON form and its reader.
#include "results/records.h"

#include <array>
#include <cmath>
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

constexpr NameTable<RunKind, 2> kRunKindNames{{
    {RunKind::kSweep, "sweep"},
    {RunKind::kLayout, "layout"},
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
  throw std::invalid_argument("unknown " + std::string(what) + " '" + std::string(text) +
                              "' (known: " + known + "); was the file written by a newer feedtune?");
}

}  // namespace

std::string TrialStatusName(TrialStatus status) { return NameOf(kTrialStatusNames, status); }
std::string RunStatusName(RunStatus status) { return NameOf(kRunStatusNames, status); }
TrialStatus ParseTrialStatus(std::string_view text) { return Parse(kTrialStatusNames, text, "trial status"); }
RunStatus ParseRunStatus(std::string_view text) { return Parse(kRunStatusNames, text, "run status"); }
std::string RunKindName(RunKind kind) { return NameOf(kRunKindNames, kind); }
RunKind ParseRunKind(std::string_view text) { return Parse(kRunKindNames, text, "run kind"); }

nlohmann::json PhasesArray(const std::vector<PhaseFact>& phases) {
  nlohmann::json list = nlohmann::json::array();
  for (const PhaseFact& p : phases) list.push_back({{"phase", p.phase}, {"kept", p.kept}, {"why", p.why}});
  return list;
}

std::string PhasesToJson(const std::vector<PhaseFact>& phases) { return PhasesArray(phases).dump(); }

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

// Figures that were not measured are NaN on both sides: equal here.
bool BackgroundFacts::operator==(const BackgroundFacts& o) const {
  const auto same = [](double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); };
  return source == o.source && same(start_cpu, o.start_cpu) && sample_s == o.sample_s && top == o.top &&
         same(reference_cpu, o.reference_cpu) && warn_cpu == o.warn_cpu && disturbed_cpu == o.disturbed_cpu &&
         same(median_cpu, o.median_cpu) && windows == o.windows && remeasured == o.remeasured &&
         same(demand_cpu, o.demand_cpu) && demand_windows == o.demand_windows && busy == o.busy;
}

}  // namespace feedtune::results
