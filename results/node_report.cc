#include "results/node_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "results/json_form.h"
#include "results/units.h"

namespace feedtune::results {
namespace {

using Json = nlohmann::ordered_json;


std::string Pad(std::string text, size_t width) {
  if (text.size() < width) text.append(width - text.size(), ' ');
  return text;
}

}  // namespace

nlohmann::ordered_json NodeFiguresJson(const NodeFigures& node) {
  Json ranks = Json::array();
  for (const RankRecord& r : node.rank_rows) {
    ranks.push_back({{"rank", r.rank},
                     {"pid", r.pid},
                     {"status", TrialStatusName(r.status)},
                     {"error", r.error ? Json(*r.error) : Json(nullptr)},
                     {"samples_per_s", FigureJson(r.samples_per_s)},
                     {"gpu_idle_frac", FigureJson(r.gpu_idle_frac)},
                     {"wait_p50_us", FigureJson(r.wait_p50_us)},
                     {"wait_p99_us", FigureJson(r.wait_p99_us)},
                     {"cpu_mask", r.cpu_mask},
                     {"worker_cpu_masks", r.worker_cpu_masks},
                     {"processes", r.processes},
                     {"threads", r.threads},
                     {"shm_bytes", r.shm_bytes}});
  }
  return Json{{"ranks", node.ranks},
              {"slowest_rank_samples_per_s", FigureJson(node.slowest_rank_samples_per_s)},
              {"rank_spread", FigureJson(node.rank_spread)},
              {"processes", node.processes},
              {"threads", node.threads},
              {"shm_bytes", node.shm_bytes},
              {"per_rank", ranks}};
}

std::string NodeFiguresText(const NodeFigures& node, const std::string& indent) {
  std::string text = indent + std::to_string(node.ranks) + " ranks: slowest rank " +
                     Fixed(node.slowest_rank_samples_per_s, 1) + " samples/s, spread " +
                     Fixed(node.rank_spread * 100, 1) + "%; node: " + std::to_string(node.processes) +
                     " processes, " + std::to_string(node.threads) + " threads, " +
                     Fixed(static_cast<double>(node.shm_bytes) / (1 << 20), 1) + " MiB shared memory\n";
  text += indent + "rank  pid       samples/s  GPU idle %  wait p50 ms  wait p99 ms  CPUs (rank | workers)\n";
  for (const RankRecord& r : node.rank_rows) {
    text += indent + Pad(std::to_string(r.rank), 6) + Pad(std::to_string(r.pid), 10) +
            Pad(Fixed(r.samples_per_s, 1), 11) + Pad(Fixed(r.gpu_idle_frac * 100, 1), 12) +
            Pad(Fixed(r.wait_p50_us / 1000, 2), 13) + Pad(Fixed(r.wait_p99_us / 1000, 2), 13) + r.cpu_mask +
            " | " + (r.worker_cpu_masks.empty() ? std::string("-") : r.worker_cpu_masks) + "\n";
  }
  return text;
}

loader::Knobs FormulaKnobs(const loader::Knobs& best, int workers) {
  loader::Knobs knobs = best;
  knobs.num_workers = workers;
  if (workers == 0) knobs.persistent_workers = false;
  return knobs;
}

namespace {

// Whether trial knobs `t` are the formula's setting `f`: without workers,
// prefetch_factor does nothing, so it may differ.
bool SameSetting(loader::Knobs t, const loader::Knobs& f) {
  if (f.num_workers == 0) t.prefetch_factor = f.prefetch_factor;
  return t == f;
}

// "+20.0%" / "-50.0%" / "0.0%".
std::string SignedPercent(double fraction) {
  const double percent = fraction * 100;
  return (percent > 0 ? "+" : "") + Fixed(percent, 1) + "%";
}

}  // namespace

std::vector<FormulaRow> NodeFormulas(const std::vector<TrialRecord>& trials, int usable_cpus,
                                     const TrialRecord* best) {
  int ranks = 0;
  for (const TrialRecord& t : trials) {
    if (t.node) ranks = std::max(ranks, t.node->ranks);
  }
  if (ranks < 1 || usable_cpus < 1) return {};
  const std::string cpus = std::to_string(usable_cpus), n = std::to_string(ranks);
  std::vector<FormulaRow> rows = {
      {"Lightning", "max(1, " + cpus + " // " + n + " - 1)", std::max(1, usable_cpus / ranks - 1), {}, {}, false},
      {"cpus // ranks", cpus + " // " + n, usable_cpus / ranks, {}, {}, false},
      {"timm", "4", 4, {}, {}, false},
  };
  for (FormulaRow& row : rows) {
    const loader::Knobs formula = best ? FormulaKnobs(best->knobs, row.workers) : loader::Knobs{};
    for (const TrialRecord& t : trials) {
      if (t.status != TrialStatus::kOk || !t.node || t.knobs.num_workers != row.workers) continue;
      const bool at_best = best != nullptr && SameSetting(t.knobs, formula);
      // A trial at the best's other settings wins over any other; among equals, the fastest.
      if (!row.samples_per_s || (at_best && !row.at_best_settings) ||
          (at_best == row.at_best_settings && t.samples_per_s > *row.samples_per_s)) {
        row.samples_per_s = t.samples_per_s;
        row.trial_id = t.id;
        row.at_best_settings = at_best;
      }
    }
  }
  return rows;
}

std::string NodeFormulasText(const std::vector<FormulaRow>& rows, std::optional<double> best,
                             const std::string& indent) {
  std::string text;
  for (const FormulaRow& row : rows) {
    text += indent + Pad(row.name + ":", 15) + Pad(row.rule, 22) + "-> " + Pad(std::to_string(row.workers), 3) +
            " workers per rank: ";
    if (!row.samples_per_s) {
      text += "not measured in this run\n";
      continue;
    }
    text += Fixed(*row.samples_per_s, 1) + " samples/s (trial " + std::to_string(*row.trial_id) +
            (row.at_best_settings ? "" : ", whose other settings differ from the best's") + ")";
    if (best && *best > 0) text += ", " + SignedPercent(*row.samples_per_s / *best - 1) + " against the best";
    text += "\n";
  }
  return text;
}

nlohmann::ordered_json NodeFormulasJson(const std::vector<FormulaRow>& rows, std::optional<double> best,
                                        std::optional<double> knee) {
  Json out = Json::array();
  const auto gap = [](const FormulaRow& row, std::optional<double> to) {
    return row.samples_per_s && to && *to > 0 ? FigureJson(*row.samples_per_s / *to - 1) : Json(nullptr);
  };
  for (const FormulaRow& row : rows) {
    out.push_back({{"formula", row.name},
                   {"rule", row.rule},
                   {"num_workers", row.workers},
                   {"trial", row.trial_id ? Json(*row.trial_id) : Json(nullptr)},
                   {"samples_per_s", row.samples_per_s ? FigureJson(*row.samples_per_s) : Json(nullptr)},
                   {"at_best_settings", row.at_best_settings},
                   {"gap_to_best", gap(row, best)},
                   {"gap_to_knee", gap(row, knee)}});
  }
  return out;
}

namespace {

// The taskset lines are for a trial that was bound (cpu_binding split or
// numa): its ranks' masks are what each rank should get.
bool Bound(const loader::Knobs& knobs) { return knobs.cpu_binding != loader::CpuBinding::kNone; }

}  // namespace

std::string NodeLaunchText(const NodeFigures& node, const loader::Knobs& knobs, const std::string& prefix) {
  std::string text = prefix + "Measured as a node of " + std::to_string(node.ranks) +
                     " ranks, one DataLoader per rank with these settings each. Launch it so:\n";
  // torchrun sets OMP_NUM_THREADS=1 itself when it is unset; the measured value is said outright.
  const std::string threads = knobs.worker_threads > 0 ? "OMP_NUM_THREADS=" + std::to_string(knobs.worker_threads) +
                                                             " MKL_NUM_THREADS=" +
                                                             std::to_string(knobs.worker_threads) + " "
                                                       : std::string();
  text += prefix + "  " + threads + "torchrun --nproc_per_node " + std::to_string(node.ranks) +
          " --redirects 3 your_train.py\n";
  if (Bound(knobs)) {
    // numa: the rank's CPUs are on its GPU's NUMA node, so --localalloc keeps
    // its memory there too; split binds the CPUs alone.
    const bool numa = knobs.cpu_binding == loader::CpuBinding::kNuma;
    text += prefix + "Each rank was bound to its own CPUs (cpu_binding " + loader::CpuBindingName(knobs.cpu_binding) +
            "); bind the same way, e.g.\n";
    for (const RankRecord& r : node.rank_rows) {
      text += prefix + "  rank " + std::to_string(r.rank) + ": " +
              (numa ? "numactl --physcpubind=" + r.cpu_mask + " --localalloc" : "taskset -c " + r.cpu_mask) +
              "  (or os.sched_setaffinity(0, ...) at the rank's start)\n";
    }
  }
  return text;
}

std::string NodeLaunchEnv(const NodeFigures& node, const loader::Knobs& knobs) {
  std::string env = "FEEDTUNE_NPROC_PER_NODE=" + std::to_string(node.ranks) + "\n";
  env += std::string("FEEDTUNE_CPU_BINDING=") + loader::CpuBindingName(knobs.cpu_binding) + "\n";
  if (Bound(knobs)) {
    for (const RankRecord& r : node.rank_rows) {
      env += "FEEDTUNE_RANK" + std::to_string(r.rank) + "_CPUS=" + r.cpu_mask + "\n";
    }
  }
  return env;
}

}  // namespace feedtune::results
