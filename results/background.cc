#include "results/background.h"

#include <algorithm>
#include <cmath>

#include "results/json_form.h"
#include "results/units.h"

namespace feedtune::results {
namespace {

double MedianOf(std::vector<double> values) {
  if (values.empty()) return std::nan("");
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

std::string Cpu(double cpu) { return Fixed(cpu, 2) + " CPU"; }

std::string Windows(int n) { return std::to_string(n) + (n == 1 ? " window" : " windows"); }

// The CPU a window must have left idle for the neighbours to have got what
// they wanted there. Below it the box was saturated and the scheduler shared
// it out: beside a trial at 1.5 CPUs on 2, a neighbour that wants 1 CPU gets
// 0.5. /proc/stat over a window of a second or more reads to a few
// hundredths of a CPU.
constexpr double kIdleCpuLeft = 0.1;

bool LeftCpuIdle(const RepeatRecord& r, double usable_cpus) {
  return usable_cpus > 0 && std::isfinite(r.tree_cpu) && std::isfinite(r.background_cpu) &&
         r.tree_cpu + r.background_cpu < usable_cpus - kIdleCpuLeft;
}

}  // namespace

BackgroundFacts SummarizeBackground(BackgroundFacts facts, const std::vector<TrialRecord>& trials,
                                    double usable_cpus) {
  std::vector<double> counted, demand;
  int remeasured = 0;
  for (const TrialRecord& t : trials) {
    if (t.status != TrialStatus::kOk) continue;
    for (const RepeatRecord& r : t.repeat_rows) {
      if (r.remeasured) {
        ++remeasured;
      } else if (std::isfinite(r.background_cpu)) {
        counted.push_back(r.background_cpu);
        if (LeftCpuIdle(r, usable_cpus)) demand.push_back(r.background_cpu);
      }
    }
  }
  facts.windows = static_cast<int>(counted.size());
  facts.remeasured = remeasured;
  facts.median_cpu = MedianOf(std::move(counted));
  facts.demand_windows = static_cast<int>(demand.size());
  if (std::isfinite(facts.start_cpu)) demand.push_back(facts.start_cpu);
  facts.demand_cpu = MedianOf(std::move(demand));
  facts.busy = facts.windows > 0 && std::isfinite(facts.demand_cpu) && facts.demand_cpu > facts.warn_cpu;
  return facts;
}

double BusyFigure(const BackgroundFacts& facts) {
  return std::isfinite(facts.demand_cpu) ? facts.demand_cpu : facts.median_cpu;
}

bool IsBusy(const RunRecord& run) { return run.facts.background && run.facts.background->busy; }

std::string TopConsumersText(const std::vector<ProcessCpu>& top) {
  if (top.empty()) return "none";
  std::string text;
  for (const ProcessCpu& p : top) {
    if (!text.empty()) text += ", ";
    text += p.name + (p.processes > 1 ? " (" + std::to_string(p.processes) + " processes)"
                                      : " (pid " + std::to_string(p.pid) + ")") +
            " " + Cpu(p.cpu);
  }
  return text;
}

std::string StartWarning(const BackgroundFacts& facts) {
  if (!std::isfinite(facts.start_cpu) || facts.start_cpu <= facts.warn_cpu) return "";
  return "other processes took " + Cpu(facts.start_cpu) + " over " + Fixed(facts.sample_s, 1) +
         " s before the baseline (above sweep.background.warn_cpu " + ShortNumber(facts.warn_cpu) +
         "; from " + facts.source + "); the most: " + TopConsumersText(facts.top) +
         ". The sweep goes on, but its knee and best will describe the contention with them, not this machine "
         "alone; sweep on a quiet box for an answer to keep (docs/measurement.md)";
}

std::string BusyText(const BackgroundFacts& facts) {
  if (!facts.busy) return "";
  const std::string above = ", above sweep.background.warn_cpu " + ShortNumber(facts.warn_cpu);
  if (!std::isfinite(facts.demand_cpu)) {  // a run before schema v18
    return "other processes took " + Cpu(facts.median_cpu) + " (median of " + Windows(facts.windows) + ")" + above;
  }
  const std::string sample = std::isfinite(facts.start_cpu) ? "the sample before the baseline" : "";
  const std::string windows = facts.demand_windows > 0 ? Windows(facts.demand_windows) : "";
  return "other processes wanted " + Cpu(facts.demand_cpu) + " where the box had CPU idle (median of " + sample +
         (!sample.empty() && !windows.empty() ? " and " : "") + windows + ")" + above + "; over all " +
         Windows(facts.windows) + " they got " + Fixed(facts.median_cpu, 2);
}

std::string QuietText(const BackgroundFacts& facts) {
  if (facts.busy || facts.windows == 0) return "";
  std::string text = "other processes took " + Fixed(facts.median_cpu, 2) + " CPU (median of " +
                     Windows(facts.windows) + ")";
  if (!std::isfinite(facts.demand_cpu)) {
    text += "; what they wanted was not measured: no window left CPU idle and no sample came before the baseline";
  }
  if (facts.remeasured > 0) text += "; " + std::to_string(facts.remeasured) + " disturbed windows re-measured";
  return text;
}

std::string TrialBackgroundNote(const TrialRecord& trial, const BackgroundFacts& facts) {
  if (trial.remeasured_windows > 0) {
    std::string took;
    for (const RepeatRecord& r : trial.repeat_rows) {
      if (!r.remeasured) continue;
      took += (took.empty() ? "" : ", ") + Fixed(r.background_cpu, 2);
    }
    std::string note = "; re-measured " + Windows(trial.remeasured_windows) +
                       " that other processes disturbed (" + took + " CPU";
    if (std::isfinite(facts.reference_cpu)) note += " against the quiet " + Fixed(facts.reference_cpu, 2);
    return note + ")";
  }
  if (std::isfinite(trial.background_cpu) && trial.background_cpu > facts.warn_cpu) {
    return "; other processes took " + Cpu(trial.background_cpu) + " during it";
  }
  return "";
}

nlohmann::ordered_json BackgroundJson(const std::optional<BackgroundFacts>& facts) {
  using Json = nlohmann::ordered_json;
  if (!facts) return Json(nullptr);
  Json top = Json::array();
  for (const ProcessCpu& p : facts->top) {
    top.push_back({{"name", p.name}, {"pid", p.pid}, {"processes", p.processes}, {"cpu", JsonNumber<Json>(p.cpu)}});
  }
  return Json{{"source", facts->source},
              {"start_cpu", JsonNumber<Json>(facts->start_cpu)},
              {"sample_s", facts->sample_s},
              {"top", top},
              {"reference_cpu", JsonNumber<Json>(facts->reference_cpu)},
              {"warn_cpu", facts->warn_cpu},
              {"disturbed_cpu", facts->disturbed_cpu},
              {"median_cpu", JsonNumber<Json>(facts->median_cpu)},
              {"windows", facts->windows},
              {"remeasured", facts->remeasured},
              {"demand_cpu", JsonNumber<Json>(facts->demand_cpu)},
              {"demand_windows", facts->demand_windows},
              {"busy", facts->busy}};
}

}  // namespace feedtune::results
