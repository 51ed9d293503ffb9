#include "results/export.h"

#include <cctype>
#include <cmath>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "results/background.h"
#include "results/node_report.h"
#include "results/units.h"


namespace feedtune::results {
namespace {


// The oldest torch that knows each DataLoader argument feedtune sets (both
// arrived with torch 1.7). batch_size, num_workers and pin_memory are older
// than any torch a CUDA job still runs.
struct TorchNeed {
  const char* key;
  int major;
  int minor;
};
constexpr TorchNeed kTorchNeeds[] = {{"prefetch_factor", 1, 7}, {"persistent_workers", 1, 7}};

// The settings as a training job should take them: torch refuses
// prefetch_factor and persistent_workers=True without workers.
struct Settings {
  loader::Knobs knobs;
  bool prefetch_applies;  // false: leave prefetch_factor to torch
  bool persistent_forced_off;
};

// The start method to hand the job: set only when the best trial named one
// that is not the interpreter's default (the run's preflight said which);
// "" = leave it to the interpreter. torch takes it only with workers.
std::string StartMethodToEmit(const RunView& view, const TrialRecord& best) {
  const loader::StartMethod method = best.knobs.multiprocessing_context;
  if (method == loader::StartMethod::kDefault || best.knobs.num_workers == 0) return "";
  const std::string name = loader::StartMethodName(method);
  return name == view.run.python.default_start_method ? "" : name;
}

// The comment beside it: what the interpreter would use otherwise.
std::string StartMethodNote(const RunView& view) {
  const std::string& fallback = view.run.python.default_start_method;
  return fallback.empty() ? std::string("as measured") : "as measured; the interpreter's default there is " + fallback;
}

Settings SettingsOf(const TrialRecord& best) {
  Settings s{best.knobs, best.knobs.num_workers > 0, false};
  if (s.knobs.num_workers == 0 && s.knobs.persistent_workers) {
    s.knobs.persistent_workers = false;
    s.persistent_forced_off = true;
  }
  return s;
}

// Provenance text can come from config names and hostnames; one line each, no
// control characters, so it cannot end a comment early.
std::string CommentSafe(std::string_view text) {
  std::string out;
  for (char c : text) out += (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) ? ' ' : c;
  return out;
}

std::vector<std::string> Provenance(const RunView& view, const TrialRecord& best) {
  const RunRecord& run = view.run;
  std::vector<std::string> lines;
  std::string machine = "unknown machine";
  if (view.machine) {
    // The run's own host; the machine row's label is its class's last one.
    const std::string host = !run.host.name.empty()        ? run.host.name
                             : view.machine->label.empty() ? view.machine->hostname
                                                           : view.machine->label;
    machine = host + " (" + view.machine->Hash() + ")";
  }
  lines.push_back("the best DataLoader settings of feedtune run " + std::to_string(run.id) + " (" +
                  RunStatusName(run.status) + ", " + (run.ended_at.empty() ? run.started_at : run.ended_at) + ")");
  lines.push_back("workload " + run.workload_name + " (hash " + run.workload_hash + ") on " + machine +
                  ", backend " + run.backend);
  std::string figures = "measured " + Fixed(best.samples_per_s, 1) + " samples/s, GPU idle " +
                        (std::isfinite(best.gpu_idle_frac) ? Fixed(best.gpu_idle_frac * 100, 1) + "%"
                                                           : std::string("not measured"));
  if (const auto speedup = RunSpeedup(view)) figures += ", x" + Fixed(*speedup, 2) + " over the baseline";
  lines.push_back(figures);
  if (run.backend == "host-sim") {
    lines.push_back("(host-sim backend: the GPU side was modelled; re-run the sweep on the GPU machine)");
  }
  if (run.facts.torch_costs) {
    lines.push_back("figures of the native core paying this host's torch costs (workload.torch_costs auto): " +
                    TorchCostsLine(*run.facts.torch_costs));
  } else if (IsNativeRun(run.config_yaml, run.backend)) {
    lines.push_back("(figures of the native core alone, no torch costs paid: a torch job may run best with fewer "
                    "workers; `feedtune calibrate`, then sweep again, docs/measurement.md#torch-costs)");
  }
  if (IsBusy(run)) {
    lines.push_back("(busy: " + BusyText(*run.facts.background) +
                    ": these settings describe the contention with them; sweep on a quiet box, docs/measurement.md)");
  }
  for (std::string& line : lines) line = CommentSafe(line);
  return lines;
}

std::string NeedsNote() {
  std::string note;
  for (const TorchNeed& need : kTorchNeeds) {
    if (!note.empty()) note += ", ";
    note += std::string(need.key) + " needs torch >= " + std::to_string(need.major) + "." +
            std::to_string(need.minor);
  }
  return note;
}

const char* PyBool(bool value) { return value ? "True" : "False"; }

// The intra-op threads of the best trial (worker_threads), for the torch format.
std::string ThreadsText(int threads) {
  const std::string n = std::to_string(threads);
  return "# Intra-op threads per worker and rank, as measured (worker_threads): set them in the\n"
         "# launch environment, before torch starts (OMP_NUM_THREADS=" + n + " MKL_NUM_THREADS=" + n +
         "), and in the workers:\n"
         "#   DataLoader(..., worker_init_fn=lambda _: torch.set_num_threads(OMP_NUM_THREADS))\n"
         "OMP_NUM_THREADS = " + n + "\n";
}

// Requests in flight per worker (fetch_concurrency, remote data), for the
// torch format: torch's DataLoader has no such knob, so the line says what a
// Dataset does to hold them.
std::string FetchText(int concurrency) {
  const std::string n = std::to_string(concurrency);
  return "# Requests in flight per worker, as measured (fetch_concurrency): torch's DataLoader has no such\n"
         "# knob. Fetch each batch's samples " + n + " at a time in the worker: a Dataset with __getitems__\n"
         "# (torch >= 2.1) or a batch_sampler whose dataset reads the batch's keys through a thread pool:\n"
         "#   concurrent.futures.ThreadPoolExecutor(FETCH_CONCURRENCY).map(get_object, keys)\n"
         "FETCH_CONCURRENCY = " + n + "\n";
}

std::string Torch(const RunView& view, const TrialRecord& best) {
  const Settings s = SettingsOf(best);
  std::string py = "# feedtune export --format torch\n";
  for (const std::string& line : Provenance(view, best)) py += "# " + line + "\n";
  py += R"(#
# Use in the training job:
#   from feedtune_settings import DATALOADER_KWARGS, NON_BLOCKING
#   loader = torch.utils.data.DataLoader(dataset, **DATALOADER_KWARGS)
#   for x, y in loader:
#       x = x.to(device, non_blocking=NON_BLOCKING)

DATALOADER_KWARGS = {
)";
  py += "    \"batch_size\": " + std::to_string(s.knobs.batch_size) +
        ",  # as measured; another batch size needs another sweep\n";
  py += "    \"num_workers\": " + std::to_string(s.knobs.num_workers) + ",\n";
  py += "    \"pin_memory\": " + std::string(PyBool(s.knobs.pin_memory)) + ",\n";
  if (s.prefetch_applies) {
    py += "    \"prefetch_factor\": " + std::to_string(s.knobs.prefetch_factor) + ",  # torch >= 1.7\n";
  } else {
    py += "    # prefetch_factor: left to torch; it applies only with workers (torch rejects it when "
          "num_workers=0)\n";
  }
  py += "    \"persistent_workers\": " + std::string(PyBool(s.knobs.persistent_workers)) + ",  # torch >= 1.7";
  if (s.persistent_forced_off) py += "; False because torch requires workers for it";
  if (const std::string method = StartMethodToEmit(view, best); !method.empty()) {
    py += "\n    \"multiprocessing_context\": \"" + method + "\",  # " + StartMethodNote(view);
  }
  py += "\n}\n\n";
  py += "# non_blocking is not a DataLoader argument: pass it to the host-to-device copy,\n"
        "#   x = x.to(device, non_blocking=NON_BLOCKING)\n"
        "# It overlaps the copy with compute only from pinned memory (pin_memory=True);\n"
        "# from pageable memory the copy is synchronous anyway.\n";
  py += "NON_BLOCKING = " + std::string(PyBool(s.knobs.non_blocking)) + "\n\n";
  py += "# Settings an older torch lacks are kept, not dropped: DataLoader would reject them\n"
        "# there, so say which one and why before it does.\n"
        "_FEEDTUNE_TORCH_NEEDS = {";
  for (size_t i = 0; i < std::size(kTorchNeeds); ++i) {
    py += std::string(i > 0 ? ", " : "") + "\"" + kTorchNeeds[i].key + "\": (" +
          std::to_string(kTorchNeeds[i].major) + ", " + std::to_string(kTorchNeeds[i].minor) + ")";
  }
  py += R"py(}


def _feedtune_check_torch_version():
    import re
    import warnings
    try:
        import torch
    except ImportError:
        return
    match = re.match(r"(\d+)\.(\d+)", torch.__version__)
    if match is None:
        return
    found = (int(match.group(1)), int(match.group(2)))
    for key, needed in _FEEDTUNE_TORCH_NEEDS.items():
        if key in DATALOADER_KWARGS and found < needed:
            warnings.warn("feedtune: DataLoader argument %s needs torch >= %d.%d, this is torch %s; "
                          "upgrade torch or remove it from DATALOADER_KWARGS" % (key, needed[0], needed[1],
                                                                                torch.__version__))


_feedtune_check_torch_version()
)py";
  if (best.knobs.worker_threads > 0) py += "\n" + ThreadsText(best.knobs.worker_threads);
  if (best.knobs.fetch_concurrency > 1) py += "\n" + FetchText(best.knobs.fetch_concurrency);
  if (best.node) {  // sweep.ranks > 1 (results/node_report.h)
    py += "\n" + NodeLaunchText(*best.node, best.knobs, "# ");
  }
  return py;
}

nlohmann::ordered_json ConfigJson(const Settings& s) {
  nlohmann::ordered_json j = {
      {"batch_size", s.knobs.batch_size},
      {"num_workers", s.knobs.num_workers},
      {"pin_memory", s.knobs.pin_memory},
      {"non_blocking", s.knobs.non_blocking},
      {"prefetch_factor",
       s.prefetch_applies ? nlohmann::ordered_json(s.knobs.prefetch_factor) : nlohmann::ordered_json(nullptr)},
      {"persistent_workers", s.knobs.persistent_workers},
      {"cpu_binding", loader::CpuBindingName(s.knobs.cpu_binding)},
      {"worker_threads", s.knobs.worker_threads}};
  // Remote data only, as the report's best.config has it (results/json_form.h).
  if (s.knobs.fetch_concurrency != 1) j["fetch_concurrency"] = s.knobs.fetch_concurrency;
  return j;
}

// The six DataLoader keyword arguments of a setting as text, in the order
// every export writes them: booleans as `yes` or `no`, prefetch_factor as
// `no_prefetch` where it does not apply (no workers).
std::vector<std::pair<std::string, std::string>> LoaderKnobTexts(const Settings& s, const char* yes, const char* no,
                                                                 const std::string& no_prefetch) {
  const auto flag = [&](bool value) { return std::string(value ? yes : no); };
  return {{"batch_size", std::to_string(s.knobs.batch_size)},
          {"num_workers", std::to_string(s.knobs.num_workers)},
          {"pin_memory", flag(s.knobs.pin_memory)},
          {"non_blocking", flag(s.knobs.non_blocking)},
          {"prefetch_factor", s.prefetch_applies ? std::to_string(s.knobs.prefetch_factor) : no_prefetch},
          {"persistent_workers", flag(s.knobs.persistent_workers)}};
}

// "BATCH_SIZE" for "batch_size".
std::string Upper(std::string text) {
  for (char& c : text) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return text;
}

std::string Yaml(const RunView& view, const TrialRecord& best) {
  const Settings s = SettingsOf(best);
  std::string yaml = "# feedtune export --format yaml\n";
  for (const std::string& line : Provenance(view, best)) yaml += "# " + line + "\n";
  yaml += "# " + NeedsNote() + "; non_blocking goes to x.to(device, non_blocking=...), not to DataLoader\n";
  for (const auto& [key, value] :
       LoaderKnobTexts(s, "true", "false", "null  # only with workers: torch rejects it when num_workers is 0")) {
    yaml += key + ": " + value + "\n";
  }
  // Around the loader (tuner/search/search.h): the ranks' binding, and the intra-op
  // threads per worker (OMP_NUM_THREADS; 0 = as the job's environment has it).
  yaml += std::string("cpu_binding: ") + loader::CpuBindingName(s.knobs.cpu_binding) + "\n";
  yaml += "worker_threads: " + std::to_string(s.knobs.worker_threads) + "\n";
  if (s.knobs.fetch_concurrency > 1) {  // remote data: requests in flight per worker (the fetch_concurrency phase)
    yaml += "fetch_concurrency: " + std::to_string(s.knobs.fetch_concurrency) + "\n";
  }
  if (const std::string method = StartMethodToEmit(view, best); !method.empty()) {
    yaml += "multiprocessing_context: " + method + "  # " + StartMethodNote(view) + "\n";
  }
  return yaml;
}

std::string Env(const RunView& view, const TrialRecord& best) {
  const Settings s = SettingsOf(best);
  std::string env = "# feedtune export --format env (booleans 1/0; an empty value: leave the setting to torch)\n";
  for (const std::string& line : Provenance(view, best)) env += "# " + line + "\n";
  env += "# " + NeedsNote() + "; FEEDTUNE_NON_BLOCKING is for x.to(device, non_blocking=...)\n";
  for (const auto& [key, value] : LoaderKnobTexts(s, "1", "0", "")) {
    env += "FEEDTUNE_" + Upper(key) + "=" + value + "\n";
  }
  if (const std::string method = StartMethodToEmit(view, best); !method.empty()) {
    env += "FEEDTUNE_MULTIPROCESSING_CONTEXT=" + method + "\n";
  }
  if (best.knobs.worker_threads > 0) {  // the worker_threads phase's answer (tuner/search/search.h)
    env += "OMP_NUM_THREADS=" + std::to_string(best.knobs.worker_threads) + "\n";
    env += "MKL_NUM_THREADS=" + std::to_string(best.knobs.worker_threads) + "\n";
  }
  if (best.knobs.fetch_concurrency > 1) {  // remote data: requests in flight per worker
    env += "FEEDTUNE_FETCH_CONCURRENCY=" + std::to_string(best.knobs.fetch_concurrency) + "\n";
  }
  if (best.node) env += NodeLaunchEnv(*best.node, best.knobs);  // sweep.ranks > 1 (results/node_report.h)
  return env;
}

}  // namespace

std::optional<ExportFormat> ParseExportFormat(std::string_view name) {
  if (name == "torch") return ExportFormat::kTorch;
  if (name == "json") return ExportFormat::kJson;
  if (name == "yaml") return ExportFormat::kYaml;
  if (name == "env") return ExportFormat::kEnv;
  return std::nullopt;
}

namespace {

// "# feedtune: for host gpu-7: <why>, from fleet.db": the first line, so a
// job's log shows which machine's answer it took.
std::string SourceComment(const ExportSource& source) {
  return "# feedtune: for host " + CommentSafe(source.for_host) + " (" + source.match + " match): " +
         CommentSafe(source.why) + ", from " + CommentSafe(source.db_path) + "\n";
}

}  // namespace

std::string RenderExport(const RunView& view, ExportFormat format, const ExportSource* source) {
  const TrialRecord* best = BestTrial(view);
  if (best == nullptr || !std::isfinite(best->samples_per_s)) {
    throw ExportError("run " + std::to_string(view.run.id) + " (" + RunStatusName(view.run.status) +
                      ") has no best setting to export; let a sweep finish, or pick a finished run "
                      "with --run N (see `feedtune report`)");
  }
  const std::string head = source != nullptr ? SourceComment(*source) : std::string();
  switch (format) {
    case ExportFormat::kTorch:
      return head + Torch(view, *best);
    case ExportFormat::kJson: {
      nlohmann::ordered_json j = ConfigJson(SettingsOf(*best));
      if (const std::string method = StartMethodToEmit(view, *best); !method.empty()) {
        j["multiprocessing_context"] = method;  // only when not the interpreter's default
      }
      if (source != nullptr) {
        j["source"] = {{"match", source->match},      {"for_host", source->for_host},
                       {"why", source->why},          {"db", source->db_path},
                       {"run", view.run.id},          {"run_host", source->run_host},
                       {"run_class", source->run_class}};
      }
      return j.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
    }
    case ExportFormat::kYaml:
      return head + Yaml(view, *best);
    case ExportFormat::kEnv:
      return head + Env(view, *best);
  }
  return {};
}

}  // namespace feedtune::results
