#include "results/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string_view>

#include "results/store.h"

namespace feedtune::results {
namespace {

// ordered_json keeps the keys in the order DESIGN.md §6 lists them, which
// makes the output readable; scripts must not depend on the order anyway.
using Json = nlohmann::ordered_json;

// Non-finite figures (NaN is how the store returns a value never measured)
// become null rather than a number a script would trust.
Json Number(double value) { return std::isfinite(value) ? Json(value) : Json(nullptr); }

Json ConfigJson(const loader::Knobs& knobs) {
  return Json{
      {"batch_size", knobs.batch_size},           {"num_workers", knobs.num_workers},
      {"pin_memory", knobs.pin_memory},           {"non_blocking", knobs.non_blocking},
      {"prefetch_factor", knobs.prefetch_factor}, {"persistent_workers", knobs.persistent_workers}};
}

const TrialRecord* FindTrial(const RunView& view, std::optional<int64_t> id) {
  if (!id) return nullptr;
  for (const TrialRecord& trial : view.trials) {
    if (trial.id == *id) return &trial;
  }
  return nullptr;
}

// The run records its baseline when it finishes; a run still in progress (or
// one that died) has not, but its first baseline-phase trial is unambiguous.
const TrialRecord* BaselineTrial(const RunView& view) {
  if (const TrialRecord* trial = FindTrial(view, view.run.baseline_trial_id)) return trial;
  for (const TrialRecord& trial : view.trials) {
    if (trial.phase == "baseline" && trial.status == "ok") return &trial;
  }
  return nullptr;
}

std::optional<double> Speedup(const TrialRecord* baseline, const TrialRecord* best) {
  if (baseline == nullptr || best == nullptr) return std::nullopt;
  if (!(baseline->samples_per_s > 0) || !std::isfinite(best->samples_per_s)) return std::nullopt;
  return best->samples_per_s / baseline->samples_per_s;
}

Json SummaryJson(const TrialRecord* trial) {
  if (trial == nullptr) return nullptr;
  return Json{{"config", ConfigJson(trial->knobs)},
              {"samples_per_s", Number(trial->samples_per_s)},
              {"gpu_idle_frac", Number(trial->gpu_idle_frac)}};
}

Json MachineJson(const std::optional<Fingerprint>& machine) {
  if (!machine) return nullptr;
  const Fingerprint& m = *machine;
  Json gpu = nullptr;
  if (m.gpu_count > 0 || !m.gpu_name.empty()) {
    gpu = Json{{"name", m.gpu_name},
               {"count", m.gpu_count},
               {"mem_bytes", m.gpu_mem_bytes},
               {"driver", m.gpu_driver}};
  }
  return Json{{"hostname", m.hostname},
              {"label", m.label},
              {"hash", m.Hash()},
              {"cpu_model", m.cpu_model},
              {"usable_cpus", m.usable_cpus},
              {"logical_cpus", m.logical_cpus},
              {"mem_total_bytes", m.mem_total_bytes},
              {"shm_bytes", m.shm_bytes},
              {"gpu", gpu}};
}

Json TrialJson(const TrialRecord& t) {
  return Json{{"id", t.id},
              {"phase", t.phase},
              {"config", ConfigJson(t.knobs)},
              {"status", t.status},
              {"samples_per_s", Number(t.samples_per_s)},
              {"ci", Json::array({Number(t.ci_low), Number(t.ci_high)})},
              {"mb_per_s", Number(t.mb_per_s)},
              {"gpu_idle_frac", Number(t.gpu_idle_frac)},
              {"copy_s", Number(t.copy_s)},
              {"wait_p50_us", Number(t.wait_p50_us)},
              {"wait_p99_us", Number(t.wait_p99_us)},
              {"worker_startup_s", Number(t.worker_startup_s)},
              {"cpu_util", Number(t.cpu_util)},
              {"peak_rss_bytes", t.peak_rss_bytes},
              {"repeats", t.repeats},
              {"decision", t.decision},
              {"error", t.error ? Json(*t.error) : Json(nullptr)}};
}

Json OptionalString(const std::string& text) { return text.empty() ? Json(nullptr) : Json(text); }

// --- table ---------------------------------------------------------------

std::string Fixed(double value, int decimals) {
  if (!std::isfinite(value)) return "-";
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), "%.*f", decimals, value);
  return buffer;
}

const char* YesNo(bool value) { return value ? "yes" : "no"; }

// One table row per line: an error from a crashed worker can span lines.
std::string OneLine(std::string_view text) {
  std::string line;
  for (char c : text) {
    if (c == '\n' || c == '\r' || c == '\t' || c == ' ') {
      if (!line.empty() && line.back() != ' ') line += ' ';
    } else {
      line += c;
    }
  }
  while (!line.empty() && line.back() == ' ') line.pop_back();
  return line;
}

std::string KnobsText(const loader::Knobs& k) {
  const auto flag = [](bool value) { return value ? "true" : "false"; };
  return "batch_size=" + std::to_string(k.batch_size) +
         " num_workers=" + std::to_string(k.num_workers) + " pin_memory=" + flag(k.pin_memory) +
         " non_blocking=" + flag(k.non_blocking) +
         " prefetch_factor=" + std::to_string(k.prefetch_factor) +
         " persistent_workers=" + flag(k.persistent_workers);
}

struct Column {
  std::string header;
  bool right_aligned;
};

std::string RenderRows(const std::vector<Column>& columns,
                       const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> widths(columns.size());
  for (size_t c = 0; c < columns.size(); ++c) widths[c] = columns[c].header.size();
  for (const auto& row : rows) {
    for (size_t c = 0; c < columns.size(); ++c) widths[c] = std::max(widths[c], row[c].size());
  }
  const auto line = [&](const std::vector<std::string>& cells) {
    std::string text;
    for (size_t c = 0; c < columns.size(); ++c) {
      const bool last = c + 1 == columns.size();
      const std::string padding(widths[c] - cells[c].size(), ' ');
      if (c > 0) text += "  ";
      if (columns[c].right_aligned) {
        text += padding + cells[c];
      } else {
        text += cells[c];
        if (!last) text += padding;  // no trailing blanks after the last column
      }
    }
    return text + "\n";
  };
  std::vector<std::string> headers;
  for (const Column& column : columns) headers.push_back(column.header);
  std::string text = line(headers);
  size_t total = 0;
  for (size_t w : widths) total += w;
  text += std::string(total + 2 * (columns.size() - 1), '-') + "\n";
  for (const auto& row : rows) text += line(row);
  return text;
}

}  // namespace

RunView LoadRunView(const Store& store, std::optional<int64_t> run_id) {
  std::optional<RunRecord> run = store.LoadRun(run_id);
  if (!run) {
    if (run_id) {
      throw StoreError("no run " + std::to_string(*run_id) + " in " + store.path());
    }
    throw StoreError("no runs in " + store.path() + "; run `feedtune sweep` first");
  }
  RunView view;
  view.machine = store.LoadMachine(run->machine_id);
  view.trials = store.LoadTrials(run->id);
  view.run = std::move(*run);
  return view;
}

std::string RenderJson(const RunView& view) {
  const RunRecord& run = view.run;
  const TrialRecord* baseline = BaselineTrial(view);
  const TrialRecord* best = FindTrial(view, run.best_trial_id);
  const std::optional<double> speedup = Speedup(baseline, best);

  Json knee = nullptr;
  if (run.knee_workers) {
    knee = Json{{"num_workers", *run.knee_workers},
                {"samples_per_s",
                 run.knee_samples_per_s ? Number(*run.knee_samples_per_s) : Json(nullptr)}};
  }
  Json trials = Json::array();
  for (const TrialRecord& trial : view.trials) trials.push_back(TrialJson(trial));

  const Json out{{"run_id", run.id},
                 {"status", run.status},
                 {"workload", run.workload_name},
                 {"workload_hash", run.workload_hash},
                 {"backend", run.backend},
                 {"started_at", OptionalString(run.started_at)},
                 {"ended_at", OptionalString(run.ended_at)},
                 {"machine", MachineJson(view.machine)},
                 {"baseline", SummaryJson(baseline)},
                 {"best", SummaryJson(best)},
                 {"knee", knee},
                 {"speedup", speedup ? Number(*speedup) : Json(nullptr)},
                 {"trials", trials}};
  // Error text from workers and commands is not guaranteed UTF-8; replace bad
  // bytes rather than fail the whole report.
  return out.dump(2, ' ', false, Json::error_handler_t::replace) + "\n";
}

std::string RenderTable(const RunView& view) {
  const RunRecord& run = view.run;
  const TrialRecord* baseline = BaselineTrial(view);
  const TrialRecord* best = FindTrial(view, run.best_trial_id);
  const std::optional<double> speedup = Speedup(baseline, best);

  std::string text;
  text += "run:      " + std::to_string(run.id) + "\n";
  text += "workload: " + run.workload_name + " (hash " + run.workload_hash + ")\n";
  text += "status:   " + run.status + "\n";
  text += "backend:  " + run.backend + "\n";
  if (view.machine) {
    const Fingerprint& m = *view.machine;
    text += "machine:  " + (m.label.empty() ? m.hostname : m.label) + ", " + m.cpu_model + ", " +
            std::to_string(m.usable_cpus) + " of " + std::to_string(m.logical_cpus) +
            " CPUs usable";
    if (m.gpu_count > 0) text += ", " + std::to_string(m.gpu_count) + "x " + m.gpu_name;
    text += "\n";
  }
  text += "started:  " + run.started_at;
  if (!run.ended_at.empty()) text += ", ended " + run.ended_at;
  text += "\n\n";

  if (view.trials.empty()) return text + "no trials recorded\n";

  const std::vector<Column> columns = {
      {"id", true},
      {"phase", false},
      {"workers", true},
      {"pin", false},
      {"nb", false},
      {"prefetch", true},
      {"persist", false},
      {"samples/s", true},
      {"95% CI (samples/s)", true},
      {"MB/s", true},
      {"GPU idle %", true},
      {"wait p50 ms", true},
      {"wait p99 ms", true},
      {"status / decision", false},
  };
  std::vector<std::vector<std::string>> rows;
  for (const TrialRecord& t : view.trials) {
    const bool ok = t.status == "ok";
    const auto measured = [ok](double value, int decimals) {
      return ok ? Fixed(value, decimals) : std::string("-");
    };
    std::vector<std::string> marks;
    if (&t == baseline) marks.emplace_back("baseline");
    if (&t == best) marks.emplace_back("*best*");
    if (run.knee_workers && ok && t.phase == "num_workers" &&
        t.knobs.num_workers == *run.knee_workers) {
      marks.push_back("knee (" + std::to_string(*run.knee_workers) + " workers)");
    }
    std::string note = t.status;
    for (const std::string& mark : marks) note += "  " + mark;
    if (!ok) {
      const std::string reason = t.error ? *t.error : t.decision;
      if (!reason.empty()) note += ": " + OneLine(reason);
    } else if (!t.decision.empty()) {
      note += "; " + OneLine(t.decision);
    }
    const std::string ci = ok && std::isfinite(t.ci_low) && std::isfinite(t.ci_high)
                               ? Fixed(t.ci_low, 1) + "-" + Fixed(t.ci_high, 1)
                               : std::string("-");
    rows.push_back({std::to_string(t.id), t.phase, std::to_string(t.knobs.num_workers),
                    YesNo(t.knobs.pin_memory), YesNo(t.knobs.non_blocking),
                    std::to_string(t.knobs.prefetch_factor), YesNo(t.knobs.persistent_workers),
                    measured(t.samples_per_s, 1), ci, measured(t.mb_per_s, 1),
                    measured(t.gpu_idle_frac * 100, 1), measured(t.wait_p50_us / 1000, 2),
                    measured(t.wait_p99_us / 1000, 2), note});
  }
  text += RenderRows(columns, rows);

  text += "\n";
  if (run.knee_workers) {
    text += "knee:     " + std::to_string(*run.knee_workers) + " workers";
    if (run.knee_samples_per_s) text += " (" + Fixed(*run.knee_samples_per_s, 1) + " samples/s)";
    text += "\n";
  } else {
    text += "knee:     -\n";
  }
  if (best != nullptr) {
    text += "best:     trial " + std::to_string(best->id) + ": " + KnobsText(best->knobs) + " (" +
            Fixed(best->samples_per_s, 1) + " samples/s, GPU idle " +
            Fixed(best->gpu_idle_frac * 100, 1) + "%)\n";
  } else {
    text += "best:     -\n";
  }
  if (baseline != nullptr) {
    text += "baseline: trial " + std::to_string(baseline->id) + " (" +
            Fixed(baseline->samples_per_s, 1) + " samples/s, GPU idle " +
            Fixed(baseline->gpu_idle_frac * 100, 1) + "%)\n";
  }
  text += "speedup:  " + (speedup ? "x" + Fixed(*speedup, 2) + " over baseline" : "-") + "\n";
  return text;
}

}  // namespace feedtune::results
