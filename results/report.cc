#include "results/store_probe.h"
#include "results/report.h"
#include "results/node_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string_view>

#include "results/background.h"
#include "results/json_form.h"
#include "results/layout_report.h"
#include "results/memory_growth.h"
#include "results/observed.h"
#include "results/store.h"
#include "results/units.h"

namespace feedtune::results {
namespace {

// ordered_json keeps the keys in the order docs/json-report.md lists them, which
// makes the output readable; scripts must not depend on the order anyway.
using Json = nlohmann::ordered_json;

// Non-finite figures (NaN is how the store returns a value never measured)
// become null rather than a number a script would trust.


const TrialRecord* FindTrial(const RunView& view, std::optional<int64_t> id) {
  if (!id) return nullptr;
  for (const TrialRecord& trial : view.trials) {
    if (trial.id == *id) return &trial;
  }
  return nullptr;
}

Json SummaryJson(const TrialRecord* trial) {
  if (trial == nullptr) return nullptr;
  return Json{{"config", SettingJson<Json>(trial->knobs)},
              {"samples_per_s", FigureJson(trial->samples_per_s)},
              {"gpu_idle_frac", FigureJson(trial->gpu_idle_frac)}};
}

Json MachineJson(const std::optional<Fingerprint>& machine) {
  if (!machine) return nullptr;
  const Fingerprint& m = *machine;
  Json gpu = nullptr;
  if (m.gpu_count > 0 || !m.gpu_name.empty()) {
    gpu = Json{{"name", m.gpu_name},
               {"count", m.gpu_count},
               {"mem_bytes", m.gpu_mem_bytes},
               {"driver", m.gpu_driver},
               {"runtime", m.gpu_runtime},
               {"pcie_link", m.pcie_link}};
  }
  Json gpus = Json::array();
  for (const GpuInfo& g : m.gpus) {
    gpus.push_back(Json{{"name", g.name},
                        {"mem_bytes", g.mem_bytes},
                        {"driver", g.driver},
                        {"runtime", g.runtime},
                        {"pci_bus_id", g.pci_bus_id},
                        {"link", g.link}});
  }
  return Json{{"hostname", m.hostname},
              {"label", m.label},
              {"hash", m.Hash()},
              {"cpu_model", m.cpu_model},
              {"usable_cpus", m.usable_cpus},
              {"logical_cpus", m.logical_cpus},
              {"cgroup_cpu_limit", m.cgroup_cpu_limit > 0 ? Json(m.cgroup_cpu_limit) : Json(nullptr)},
              {"numa_nodes", m.numa_nodes},
              {"mem_total_bytes", m.mem_total_bytes},
              {"cgroup_mem_limit_bytes",
               m.cgroup_mem_limit_bytes > 0 ? Json(m.cgroup_mem_limit_bytes) : Json(nullptr)},
              {"shm_bytes", m.shm_bytes},
              {"nofile_limit", m.nofile_limit},
              {"kernel", m.kernel},
              {"gpu", gpu},
              {"gpus", gpus}};
}


Json OrNull(const auto& v) { return v ? Json(*v) : Json(nullptr); }

Json BudgetFactsObject(const BudgetFacts& f) {
  return Json{{"mem_available_bytes", f.mem_available_bytes}, {"shm_free_bytes", f.shm_free_bytes},
              {"nofile_limit", f.nofile_limit},               {"fds_open", f.fds_open},
              {"usable_cpus", f.usable_cpus},                 {"batch_bytes", f.batch_bytes},
              {"stream_buffer_bytes", f.stream_buffer_bytes}};
}

}  // namespace

Json SafeLimitJson(const std::optional<SafeLimit>& safe) {
  if (!safe) return nullptr;
  return Json{{"workers", OrNull(safe->workers)},
              {"basis", safe->basis},
              {"trial", OrNull(safe->basis_trial)},
              {"worker_rss_bytes", OrNull(safe->worker_rss_bytes)},
              {"growth_bytes", OrNull(safe->growth_bytes)}};
}

Json SeedJson(const SeedFacts& seed) {
  const loader::Knobs& k = seed.best;
  return Json{{"db", seed.db_path},
              {"run", seed.run_id},
              {"run_uid", seed.run_uid},
              {"run_host", seed.run_host},
              {"run_class", seed.run_class},
              {"match", seed.match},
              {"why", seed.why},
              {"source", seed.source},
              {"knee_workers", seed.knee_workers},
              {"best", LoaderKnobsJson<Json>(k)}};
}

// Its keys sorted as the one object was stored before v14 (a nlohmann::json
// sorts them). Text that does not parse is passed on as a string rather than
// dropped.
Json CalibrationJson(const RunRecord& run) {
  const RunFacts& facts = run.facts;
  nlohmann::json j = nullptr;
  if (!run.calibration_json.empty()) {
    // The stored keys: text read from the results file.
    j = nlohmann::json::parse(run.calibration_json, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) return run.calibration_json;
  }
  if (facts == RunFacts{}) return Json(j);
  if (!j.is_object()) j = nlohmann::json::object();
  if (facts.budget) j["budget_facts"] = nlohmann::json(BudgetFactsObject(*facts.budget));
  if (facts.max_workers) j["max_workers"] = *facts.max_workers;
  if (facts.seed) j["seed"] = nlohmann::json(SeedJson(*facts.seed));
  if (facts.safe_limit) j["safe_limit"] = nlohmann::json(SafeLimitJson(facts.safe_limit));
  if (facts.cpu) {
    // Over the "cpu" object as stored: an older figure in it stays beside the calibration's.
    if (!j.contains("cpu") || !j["cpu"].is_object()) j["cpu"] = nlohmann::json::object();
    const CpuCalibrationFacts& cpu = *facts.cpu;
    const auto number = [](double value) { return JsonNumber<nlohmann::json>(value); };
    j["cpu"].update({{"clock", cpu.clock},
                     {"clock_read_ns", number(cpu.clock_read_ns)},
                     {"work_bytes_per_s", number(cpu.work_bytes_per_s)},
                     {"chunk_bytes", cpu.chunk_bytes},
                     {"chunk_us", number(cpu.chunk_us)},
                     {"clock_overhead", number(cpu.clock_overhead)},
                     {"check_requested_us", number(cpu.check_requested_us)},
                     {"check_spent_us", number(cpu.check_spent_us)},
                     {"calibration_s", number(cpu.calibration_s)}});
  }
  if (!facts.preflight.empty()) j["preflight"] = facts.preflight;
  if (!facts.phases.empty()) j["phases"] = PhasesArray(facts.phases);
  if (!facts.timelines_json.empty()) {
    // The trace excerpts as the results file keeps them (text).
    const auto timelines = nlohmann::json::parse(facts.timelines_json, nullptr, /*allow_exceptions=*/false);
    if (!timelines.is_discarded()) j["timelines"] = timelines;
  }
  return Json(j);
}

namespace {


Json OptionalString(const std::string& text) { return text.empty() ? Json(nullptr) : Json(text); }

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


}  // namespace

namespace internal {

std::string KnobsText(const loader::Knobs& k) {
  const auto flag = [](bool value) { return value ? "true" : "false"; };
  return "batch_size=" + std::to_string(k.batch_size) +
         " num_workers=" + std::to_string(k.num_workers) + " pin_memory=" + flag(k.pin_memory) +
         " non_blocking=" + flag(k.non_blocking) +
         " prefetch_factor=" + std::to_string(k.prefetch_factor) +
         " persistent_workers=" + flag(k.persistent_workers) +
         // Around the loader: said only when a sweep set them (tuner/search/search.h).
         (k.cpu_binding != loader::CpuBinding::kNone ? std::string(" cpu_binding=") + loader::CpuBindingName(k.cpu_binding)
                                                     : std::string()) +
         (k.worker_threads > 0 ? " worker_threads=" + std::to_string(k.worker_threads) : std::string()) +
         (k.fetch_concurrency != 1 ? " fetch_concurrency=" + std::to_string(k.fetch_concurrency) : std::string());
}

std::string RenderRows(const std::vector<TableColumn>& columns,
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
  for (const TableColumn& column : columns) headers.push_back(column.header);
  std::string text = line(headers);
  size_t total = 0;
  for (size_t w : widths) total += w;
  text += std::string(total + 2 * (columns.size() - 1), '-') + "\n";
  for (const auto& row : rows) text += line(row);
  return text;
}

std::string MachineText(const Fingerprint& m) {
  std::string text = (m.label.empty() ? m.hostname : m.label) + ", " + m.cpu_model + ", " +
                     std::to_string(m.usable_cpus) + " of " + std::to_string(m.logical_cpus) + " CPUs usable";
  if (m.gpu_count > 0) text += ", " + std::to_string(m.gpu_count) + "x " + m.gpu_name;
  return text;
}

std::string EscapeHtml(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

}  // namespace internal

bool VariesAroundLoader(const RunView& view) {
  return std::any_of(view.trials.begin(), view.trials.end(), [](const TrialRecord& t) {
    return t.knobs.cpu_binding != loader::CpuBinding::kNone || t.knobs.worker_threads > 0;
  });
}

using internal::TableColumn;
using internal::KnobsText;
using internal::RenderRows;

const TrialRecord* BaselineTrial(const RunView& view) {
  // The run records its baseline when it finishes; a run still in progress (or
  // one that died) has not, but its first baseline-phase trial is unambiguous.
  if (const TrialRecord* trial = FindTrial(view, view.run.baseline_trial_id)) return trial;
  for (const TrialRecord& trial : view.trials) {
    if (trial.phase == "baseline" && trial.status == TrialStatus::kOk) return &trial;
  }
  return nullptr;
}

const TrialRecord* BestTrial(const RunView& view) { return FindTrial(view, view.run.best_trial_id); }

std::optional<double> RunSpeedup(const RunView& view) {
  if (view.run.speedup && std::isfinite(*view.run.speedup)) return view.run.speedup;
  const TrialRecord* baseline = BaselineTrial(view);
  const TrialRecord* best = BestTrial(view);
  if (baseline == nullptr || best == nullptr) return std::nullopt;
  if (!(baseline->samples_per_s > 0) || !std::isfinite(best->samples_per_s)) return std::nullopt;
  return best->samples_per_s / baseline->samples_per_s;
}

const TrialRecord* TrialAtWorkers(const RunView& view, int num_workers) {
  const TrialRecord* found = nullptr;
  for (const TrialRecord& t : view.trials) {
    if (t.status != TrialStatus::kOk || t.knobs.num_workers != num_workers) continue;
    if (t.phase != "num_workers" && t.phase != "baseline") continue;
    if (found == nullptr || t.samples_per_s > found->samples_per_s) found = &t;
  }
  return found;
}

namespace {
// The sweep's compact knob names (as `feedtune sweep` prints a trial); non_blocking only when the job gave it.
std::string ObservedKnobsText(const ObservedRecord& o) {
  const loader::Knobs& k = o.knobs;
  std::string text = "bs=" + std::to_string(k.batch_size) + " nw=" + std::to_string(k.num_workers) +
                     " pin=" + (k.pin_memory ? "1" : "0");
  if (o.non_blocking) text += std::string(" nb=") + (*o.non_blocking ? "1" : "0");
  if (k.num_workers > 0) {
    text += " pf=" + std::to_string(k.prefetch_factor) + " pers=" + (k.persistent_workers ? "1" : "0");
  }
  return text;
}

Json ObservedArray(const std::vector<ObservedRecord>& observed) {
  Json rows = Json::array();
  for (const ObservedRecord& o : observed) rows.push_back(ObservedJson(o));
  return rows;
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
  view.verdict = store.LoadVerdict(run->id);
  view.observed = ObservedForRun(store, *run);
  // The machines row is the hardware class, its label the last sweep's; the
  // run's own host is the one that ran it (docs/fleets.md).
  if (view.machine && !run->host.name.empty()) {
    view.machine->label = run->host.name;
    if (!run->host.hostname.empty()) view.machine->hostname = run->host.hostname;
    view.machine->machine_id = run->host.machine_id;
  }
  view.run = std::move(*run);
  return view;
}

std::string RenderJson(const RunView& view) {
  const RunRecord& run = view.run;
  const TrialRecord* baseline = BaselineTrial(view);
  const TrialRecord* best = BestTrial(view);
  const std::optional<double> speedup = RunSpeedup(view);

  Json knee = nullptr;
  if (run.knee_workers) {
    knee = Json{{"num_workers", *run.knee_workers},
                {"samples_per_s",
                 run.knee_samples_per_s ? FigureJson(*run.knee_samples_per_s) : Json(nullptr)}};
  }
  Json knee_kneedle = nullptr;
  if (run.knee_kneedle_workers) {
    const TrialRecord* at = TrialAtWorkers(view, *run.knee_kneedle_workers);
    knee_kneedle = Json{{"num_workers", *run.knee_kneedle_workers},
                        {"samples_per_s", at != nullptr ? FigureJson(at->samples_per_s) : Json(nullptr)}};
  }
  Json speedup_ci = nullptr;
  if (run.speedup_ci_low && run.speedup_ci_high) {
    speedup_ci = Json::array({FigureJson(*run.speedup_ci_low), FigureJson(*run.speedup_ci_high)});
  }
  const Json calibration = CalibrationJson(run);
  Json trials = Json::array();
  for (const TrialRecord& trial : view.trials) trials.push_back(TrialJson(trial));

  Json out{{"run_id", run.id},
                 {"status", RunStatusName(run.status)},
                 {"workload", run.workload_name},
                 {"workload_hash", run.workload_hash},
                 {"backend", run.backend},
                 {"started_at", OptionalString(run.started_at)},
                 {"ended_at", OptionalString(run.ended_at)},
                 {"machine", MachineJson(view.machine)},
                 {"baseline", SummaryJson(baseline)},
                 {"best", SummaryJson(best)},
                 {"knee", knee},
                 {"speedup", speedup ? FigureJson(*speedup) : Json(nullptr)},
                 {"trials", trials},
                 // Additions after the report's first version; never removed.
                 {"knee_kneedle", knee_kneedle},
                 {"safe_max_workers",
                  run.safe_max_workers ? Json(*run.safe_max_workers) : Json(nullptr)},
                 {"speedup_ci", speedup_ci},
                 {"run_uid", OptionalString(run.uid)},
                 {"version", OptionalString(run.version)},
                 {"calibration", calibration},
                 {"config_yaml", OptionalString(run.config_yaml)},
                 {"safe_max_workers_basis", OptionalString(SafeLimitBasis(run))},
                 {"verdict", view.verdict ? Json(VerdictJson(*view.verdict)) : Json(nullptr)},
                 {"observed", ObservedArray(view.observed)},
                 // Other processes' CPU (docs/measurement.md): null before schema v16.
                 {"busy", run.facts.background ? Json(run.facts.background->busy) : Json(nullptr)},
                 {"background", BackgroundJson(run.facts.background)},
                 // The torch costs the native trials paid (docs/measurement.md#torch-costs): null before v17, or none.
                 {"torch_costs", run.facts.torch_costs ? Json(TorchCostsJson(*run.facts.torch_costs)) : Json(nullptr)},
                 // How the run ended, where that is worth saying (schema v19): null otherwise.
                 {"end_note", OptionalString(run.end_note)},
                 // Remote data: the store's probe before the baseline (docs/storage.md): null otherwise, before v21.
                 {"store_probe", StoreProbeJson(run.facts.store_probe_json)},
                 // "sweep" or "layout" (schema v22; an older file's layout runs are told by their answer).
                 {"kind", RunKindName(run.kind)}};
  // A `feedtune layout` run: its answer as stored (docs/layout.md), beside the keys every run has.
  if (const auto answer = LayoutAnswer(run)) out["layout"] = *answer;
  // A node run (sweep.ranks > 1): the formulas beside what they measured.
  if (const auto formulas = NodeFormulas(view.trials, view.machine ? view.machine->usable_cpus : 0, best);
      !formulas.empty()) {
    const std::optional<double> best_sps = best ? std::optional(best->samples_per_s) : std::nullopt;
    out["node_formulas"] = NodeFormulasJson(formulas, best_sps, run.knee_samples_per_s);
  }
  // Error text from workers and commands is not guaranteed UTF-8; replace bad
  // bytes rather than fail the whole report.
  return out.dump(2, ' ', false, Json::error_handler_t::replace) + "\n";
}

namespace {

// The lines above the table: which run, on what, since when.
std::string RunHeaderText(const RunView& view) {
  const RunRecord& run = view.run;
  std::string text;
  text += "run:      " + std::to_string(run.id) + "\n";
  text += "workload: " + run.workload_name + " (hash " + run.workload_hash + ")\n";
  // How it ended, where that is worth saying (a run found left running by a process that has ended).
  text += "status:   " + RunStatusName(run.status) + (run.end_note.empty() ? "" : ": " + run.end_note) + "\n";
  text += "backend:  " + run.backend + "\n";
  // Which build measured it: the version, commit, compiler and CUDA toolkit.
  if (!run.version.empty()) text += "build:    feedtune " + run.version + "\n";
  if (view.machine) text += "machine:  " + internal::MachineText(*view.machine) + "\n";
  text += "started:  " + run.started_at;
  if (!run.ended_at.empty()) text += ", ended " + run.ended_at;
  text += "\n";
  // What the sweep warned of before its first trial (a busy box, a FUSE mount).
  for (const std::string& warning : run.facts.preflight) text += "warning:  " + warning + "\n";
  if (const auto store = StoreProbeLine(run.facts.store_probe_json)) text += "store:    " + *store + "\n";
  if (run.facts.torch_costs) {
    text += "torch:    the native trials paid this host's torch costs (workload.torch_costs auto): " +
            TorchCostsLine(*run.facts.torch_costs) + "\n";
  } else if (IsNativeRun(run.config_yaml, run.backend)) {
    text += "torch:    no torch costs paid: the native core's own figures (feedtune calibrate)\n";
  }
  // Other processes' CPU (docs/measurement.md): the busy mark, else what the windows measured.
  if (const auto& bg = run.facts.background; bg && bg->busy) {
    text += "busy:     " + BusyText(*bg) + ": the knee and the best describe the contention with them\n";
  } else if (bg && bg->windows > 0) {
    text += "others:   " + QuietText(*bg) + "\n";
  }
  text += "\n";
  return text;
}

// A trial's last cell: its status, its marks (baseline, best, knee), and why
// it failed or what the tuner decided from it.
std::string TrialNote(const RunRecord& run, const TrialRecord& t, const TrialRecord* baseline,
                      const TrialRecord* best) {
  const bool ok = t.status == TrialStatus::kOk;
  std::vector<std::string> marks;
  if (&t == baseline) marks.emplace_back("baseline");
  if (&t == best) marks.emplace_back("*best*");
  if (run.knee_workers && ok && t.phase == "num_workers" &&
      t.knobs.num_workers == *run.knee_workers) {
    marks.push_back("knee (" + std::to_string(*run.knee_workers) +
                    (*run.knee_workers == 1 ? " worker)" : " workers)"));
  }
  std::string note = TrialStatusName(t.status);
  for (const std::string& mark : marks) note += "  " + mark;
  if (!ok) {
    const std::string reason = t.error ? *t.error : t.decision;
    if (!reason.empty()) note += ": " + OneLine(reason);
  } else if (!t.decision.empty()) {
    note += "; " + OneLine(t.decision);
  }
  return note;
}

// One row per trial; figures of a trial that did not finish are "-", not a
// number that looks measured.
std::vector<std::string> TrialRow(const RunRecord& run, const TrialRecord& t, const TrialRecord* baseline,
                                  const TrialRecord* best) {
  const bool ok = t.status == TrialStatus::kOk;
  const auto measured = [ok](double value, int decimals) {
    return ok ? Fixed(value, decimals) : std::string("-");
  };
  const std::string ci = ok && std::isfinite(t.ci_low) && std::isfinite(t.ci_high)
                             ? Fixed(t.ci_low, 1) + "-" + Fixed(t.ci_high, 1)
                             : std::string("-");
  return {std::to_string(t.id), t.phase, std::to_string(t.knobs.num_workers),
          YesNo(t.knobs.pin_memory), YesNo(t.knobs.non_blocking),
          std::to_string(t.knobs.prefetch_factor), YesNo(t.knobs.persistent_workers),
          measured(t.samples_per_s, 1), ci, measured(t.mb_per_s, 1),
          measured(t.gpu_idle_frac * 100, 1), measured(t.wait_p50_us / 1000, 2),
          measured(t.wait_p99_us / 1000, 2), TrialNote(run, t, baseline, best)};
}

// The trials table (view.trials must not be empty).
std::string TrialsTableText(const RunView& view, const TrialRecord* baseline, const TrialRecord* best) {
  std::vector<TableColumn> columns = {
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
  for (const TrialRecord& t : view.trials) rows.push_back(TrialRow(view.run, t, baseline, best));
  // Other processes' CPU per trial, where the windows measured it (schema v16).
  if (std::any_of(view.trials.begin(), view.trials.end(),
                  [](const TrialRecord& t) { return std::isfinite(t.background_cpu); })) {
    const size_t at = columns.size() - 1;
    columns.insert(columns.begin() + static_cast<std::ptrdiff_t>(at), TableColumn{"others CPU", true});
    for (size_t i = 0; i < rows.size(); ++i) {
      const TrialRecord& t = view.trials[i];
      rows[i].insert(rows[i].begin() + static_cast<std::ptrdiff_t>(at),
                     t.status == TrialStatus::kOk ? Fixed(t.background_cpu, 2) : std::string("-"));
    }
  }
  if (VariesAroundLoader(view)) {
    // Before the decision, after the figures: the figure columns keep their places.
    const size_t at = columns.size() - 1;
    columns.insert(columns.begin() + static_cast<std::ptrdiff_t>(at), {{"binding", false}, {"threads", true}});
    for (size_t i = 0; i < rows.size(); ++i) {
      const loader::Knobs& k = view.trials[i].knobs;
      rows[i].insert(rows[i].begin() + static_cast<std::ptrdiff_t>(at), {loader::CpuBindingName(k.cpu_binding),
                                           k.worker_threads > 0 ? std::to_string(k.worker_threads) : "-"});
    }
  }
  return RenderRows(columns, rows);
}

// Remote data: each trial's reads from the store in its windows (schema
// v23), under the table; empty for local data and older runs.
std::string StoreFiguresLines(const std::vector<TrialRecord>& trials) {
  std::string text;
  for (const TrialRecord& t : trials) {
    if (t.store) text += "  trial " + std::to_string(t.id) + ": " + StoreFiguresText(*t.store) + "\n";
  }
  return text.empty() ? text : "\nthe store per trial (the workers' reads in the windows, docs/storage.md):\n" + text;
}

// The "knee:" and "safe max:" lines: how many workers the curve and the
// machine's budgets allow.
std::string KneeAndLimitText(const RunRecord& run) {
  std::string text;
  if (run.knee_workers) {
    text += "knee:     " + std::to_string(*run.knee_workers) +
            (*run.knee_workers == 1 ? " worker" : " workers");
    if (run.knee_samples_per_s) text += " (" + Fixed(*run.knee_samples_per_s, 1) + " samples/s)";
    if (run.knee_kneedle_workers && *run.knee_kneedle_workers != *run.knee_workers) {
      text += " [Kneedle: " + std::to_string(*run.knee_kneedle_workers) + " workers]";
    }
    text += "\n";
  } else {
    text += "knee:     -\n";
  }
  const std::string basis = SafeLimitBasis(run);
  if (run.safe_max_workers) {
    text += "safe max: " + std::to_string(*run.safe_max_workers) +
            " workers (memory, /dev/shm and open-file budgets)" + (basis.empty() ? "" : "; per worker: " + basis) +
            "\n";
  } else if (!basis.empty()) {
    text += "safe max: " + basis + "\n";
  }
  return text;
}

// The lines below the table: the knee and limits, the best and the baseline,
// the speedup, and (when recorded) where the time goes.
std::string SummaryText(const RunView& view, const TrialRecord* baseline, const TrialRecord* best) {
  const RunRecord& run = view.run;
  const std::optional<double> speedup = RunSpeedup(view);
  std::string text = KneeAndLimitText(run);
  if (best != nullptr) {
    text += "best:     trial " + std::to_string(best->id) + ": " + KnobsText(best->knobs) + " (" +
            Fixed(best->samples_per_s, 1) + " samples/s, " + IdleText(best->gpu_idle_frac) + ")\n";
  } else {
    text += "best:     -\n";
  }
  if (best != nullptr && best->node) text += NodeFiguresText(*best->node, "          ");
  // A node run: what the usual formulas pick here, and what that measured.
  if (const auto formulas = NodeFormulas(view.trials, view.machine ? view.machine->usable_cpus : 0, best);
      !formulas.empty()) {
    text += "formulas: num_workers per rank by rule, at the best's other settings; measured aggregate and gap to "
            "the best:\n" +
            NodeFormulasText(formulas, best ? std::optional(best->samples_per_s) : std::nullopt, "          ");
  }
  if (baseline != nullptr) {
    text += "baseline: trial " + std::to_string(baseline->id) + " (" +
            Fixed(baseline->samples_per_s, 1) + " samples/s, " + IdleText(baseline->gpu_idle_frac) + ")\n";
  }
  std::string speedup_text = speedup ? "x" + Fixed(*speedup, 2) + " over baseline" : "-";
  if (speedup && run.speedup_ci_low && run.speedup_ci_high) {
    speedup_text += " (95% CI x" + Fixed(*run.speedup_ci_low, 2) + "-x" +
                    Fixed(*run.speedup_ci_high, 2) + ")";
  }
  text += "speedup:  " + speedup_text + "\n";
  // Trials whose workers grew past the flag (results/memory_growth.h).
  if (const std::string growth = GrowthFlagsText(view.trials, "          "); !growth.empty()) {
    text += "memory:   worker memory grows per epoch (docs/measurement.md):\n" + growth;
  }
  if (view.verdict) text += "\nwhere the time goes (stage trials at the best setting, docs/verdict.md):\n" +
                            VerdictText(*view.verdict, "  ");
  return text;
}

}  // namespace

std::string RenderTable(const RunView& view) {
  // A `feedtune layout` run: its answer's table (results/layout_report.h), not a sweep's trials.
  if (const auto answer = LayoutAnswer(view.run)) return RenderLayoutTable(view, *answer);
  std::string text = RunHeaderText(view);
  if (view.trials.empty()) return text + "no trials recorded\n";
  const TrialRecord* baseline = BaselineTrial(view);
  const TrialRecord* best = BestTrial(view);
  text += TrialsTableText(view, baseline, best);
  text += StoreFiguresLines(view.trials);
  text += "\n";
  text += SummaryText(view, baseline, best);
  text += ObservedText(view);
  return text;
}

std::string ObservedText(const RunView& view) {
  if (view.observed.empty()) return "";
  const TrialRecord* best = BestTrial(view);
  std::vector<std::vector<std::string>> rows;
  for (const ObservedRecord& o : view.observed) {
    std::string versus = "-";
    if (best != nullptr && std::isfinite(best->samples_per_s) && best->samples_per_s > 0) {
      const double change = o.samples_per_s / best->samples_per_s - 1;
      versus = (change >= 0 ? "+" : "") + Fixed(change * 100, 0) + "%";
    }
    rows.push_back({o.ended_at, std::to_string(o.steps), Fixed(o.samples_per_s, 1), versus,
                    Fixed(o.input_bound_frac * 100, 1) + "%", InputBoundBand(o.input_bound_frac),
                    ObservedKnobsText(o), o.finished ? "ended" : "running"});
  }
  return "\nobserved in training jobs on " + view.run.host.name + " with " + view.run.workload_name +
         " (feedtune.watch; `feedtune check` holds them against the sweep):\n" +
         RenderRows({{"last write", false},
                     {"steps", true},
                     {"samples/s", true},
                     {"vs best", true},
                     {"input-bound", true},
                     {"band", false},
                     {"knobs", false},
                     {"job", false}},
                    rows);
}

std::string SafeLimitBasis(const RunRecord& run) {
  return run.facts.safe_limit ? run.facts.safe_limit->basis : std::string();
}

}  // namespace feedtune::results
