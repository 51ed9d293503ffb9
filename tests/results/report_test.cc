#include "results/report.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "results/node_report.h"
#include "results/store.h"

namespace feedtune::results {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::set<std::string> Keys(const json& object) {
  std::set<std::string> keys;
  for (const auto& [key, value] : object.items()) keys.insert(key);
  return keys;
}

const std::set<std::string> kConfigKeys = {"batch_size",   "num_workers",     "pin_memory",
                                           "non_blocking", "prefetch_factor", "persistent_workers",
                                           "cpu_binding",  "worker_threads"};

TrialRecord Trial(int64_t id, const std::string& phase, int workers, double samples_per_s,
                  double gpu_idle_frac) {
  TrialRecord t;
  t.id = id;
  t.run_id = 3;
  t.phase = phase;
  t.knobs.num_workers = workers;
  t.samples_per_s = samples_per_s;
  t.ci_low = samples_per_s * 0.97;
  t.ci_high = samples_per_s * 1.02;
  t.mb_per_s = samples_per_s * 0.15;
  t.gpu_idle_frac = gpu_idle_frac;
  t.copy_s = 0.01 * static_cast<double>(id);
  t.wait_p50_us = 950.0;
  t.wait_p99_us = 1400.0;
  t.worker_startup_s = 0.2;
  t.cpu_util = 1.5;
  t.peak_rss_bytes = int64_t{512} << 20;
  t.repeats = 3;
  t.decision = "kept";
  return t;
}

// A finished run shaped like the example of the JSON report (docs/json-report.md).
RunView ExampleView() {
  RunView view;
  view.run.id = 3;
  view.run.machine_id = 1;
  view.run.workload_name = "quickstart";
  view.run.workload_hash = "0123456789abcdef";
  view.run.backend = "host-sim";
  view.run.version = "0.1.0";
  view.run.started_at = "2024-05-01T10:00:00Z";
  view.run.ended_at = "2024-05-01T10:05:00Z";
  view.run.status = results::RunStatus::kDone;
  view.run.knee_workers = 8;
  view.run.knee_samples_per_s = 6311.0;
  view.run.baseline_trial_id = 1;
  view.run.best_trial_id = 4;

  Fingerprint machine;
  machine.hostname = "box-a";
  machine.label = "lab box";
  machine.cpu_model = "Test CPU";
  machine.logical_cpus = 4;
  machine.usable_cpus = 2;
  machine.mem_total_bytes = int64_t{16} << 30;
  machine.shm_bytes = int64_t{8} << 30;
  view.machine = machine;

  view.trials.push_back(Trial(1, "baseline", 0, 812.0, 0.71));
  view.trials[0].decision = "";
  view.trials.push_back(Trial(2, "num_workers", 8, 6311.0, 0.05));
  TrialRecord failed = Trial(3, "num_workers", 16, std::nan(""), 0);
  failed.status = results::TrialStatus::kFailed;
  failed.error = "worker 5 (pid 4242) killed by SIGKILL\nout of memory?";
  view.trials.push_back(failed);
  TrialRecord best = Trial(4, "persistent_workers", 8, 6420.5, 0.03);
  best.knobs = {.batch_size = 64,
                .num_workers = 8,
                .pin_memory = true,
                .non_blocking = true,
                .prefetch_factor = 4,
                .persistent_workers = true};
  view.trials.push_back(best);
  return view;
}

TEST(RenderJsonTest, HasEveryDesignKeyWithValues) {
  const std::string text = RenderJson(ExampleView());
  ASSERT_FALSE(text.empty());
  EXPECT_EQ(text.back(), '\n');
  EXPECT_NE(text.find("\n  \"run_id\": 3"), std::string::npos) << "2-space indent expected";
  const json out = json::parse(text);

  EXPECT_EQ(Keys(out), (std::set<std::string>{"run_id", "status", "workload", "workload_hash",
                                              "backend", "started_at", "ended_at", "machine",
                                              "baseline", "best", "knee", "speedup", "trials",
                                              // additions, never removals
                                              "knee_kneedle", "safe_max_workers", "speedup_ci",
                                              "run_uid", "version", "calibration", "config_yaml",
                                              "safe_max_workers_basis", "verdict", "observed", "busy",
                                              "background", "torch_costs", "end_note", "store_probe", "kind"}));
  EXPECT_EQ(out.at("kind"), "sweep");
  EXPECT_TRUE(out["verdict"].is_null());  // a run without stage trials
  EXPECT_TRUE(out["store_probe"].is_null());  // local data
  EXPECT_TRUE(out["end_note"].is_null());  // a run that ended as its status says
  EXPECT_TRUE(out["torch_costs"].is_null());  // a run that paid none
  EXPECT_TRUE(out["busy"].is_null());        // a run that measured no other processes' CPU
  EXPECT_TRUE(out["background"].is_null());
  EXPECT_EQ(out["observed"], nlohmann::json::array());  // no training job observed on its host
  EXPECT_EQ(out["run_id"], 3);
  EXPECT_EQ(out["status"], "done");
  EXPECT_EQ(out["workload"], "quickstart");
  EXPECT_EQ(out["workload_hash"], "0123456789abcdef");
  EXPECT_EQ(out["backend"], "host-sim");
  EXPECT_EQ(out["started_at"], "2024-05-01T10:00:00Z");
  EXPECT_EQ(out["ended_at"], "2024-05-01T10:05:00Z");

  const json& machine = out["machine"];
  EXPECT_EQ(Keys(machine),
            (std::set<std::string>{"hostname", "label", "hash", "cpu_model", "usable_cpus",
                                   "logical_cpus", "mem_total_bytes", "shm_bytes", "gpu",
                                   "cgroup_cpu_limit", "numa_nodes", "cgroup_mem_limit_bytes",
                                   "nofile_limit", "kernel", "gpus"}));
  EXPECT_EQ(machine["hostname"], "box-a");
  EXPECT_EQ(machine["label"], "lab box");
  EXPECT_EQ(machine["hash"], ExampleView().machine->Hash());
  EXPECT_EQ(machine["usable_cpus"], 2);
  EXPECT_EQ(machine["logical_cpus"], 4);
  EXPECT_EQ(machine["mem_total_bytes"], int64_t{16} << 30);
  EXPECT_EQ(machine["shm_bytes"], int64_t{8} << 30);
  EXPECT_TRUE(machine["gpu"].is_null());

  EXPECT_EQ(Keys(out["baseline"]),
            (std::set<std::string>{"config", "samples_per_s", "gpu_idle_frac"}));
  EXPECT_EQ(Keys(out["baseline"]["config"]), kConfigKeys);
  EXPECT_EQ(out["baseline"]["samples_per_s"], 812.0);
  EXPECT_EQ(out["baseline"]["gpu_idle_frac"], 0.71);
  EXPECT_EQ(out["baseline"]["config"]["num_workers"], 0);

  EXPECT_EQ(Keys(out["best"]), (std::set<std::string>{"config", "samples_per_s", "gpu_idle_frac"}));
  EXPECT_EQ(out["best"]["config"], (json{{"batch_size", 64},
                                         {"num_workers", 8},
                                         {"pin_memory", true},
                                         {"non_blocking", true},
                                         {"prefetch_factor", 4},
                                         {"persistent_workers", true},
                                         {"cpu_binding", "none"},
                                         {"worker_threads", 0}}));
  EXPECT_EQ(out["best"]["samples_per_s"], 6420.5);
  EXPECT_EQ(out["best"]["gpu_idle_frac"], 0.03);

  EXPECT_EQ(out["knee"], (json{{"num_workers", 8}, {"samples_per_s", 6311.0}}));
  ASSERT_TRUE(out["speedup"].is_number());
  EXPECT_DOUBLE_EQ(out["speedup"].get<double>(), 6420.5 / 812.0);

  ASSERT_EQ(out["trials"].size(), 4u);
  for (const json& trial : out["trials"]) {
    EXPECT_EQ(Keys(trial),
              (std::set<std::string>{"id", "phase", "config", "status", "samples_per_s", "ci",
                                     "mb_per_s", "gpu_idle_frac", "copy_s", "wait_p50_us",
                                     "wait_p99_us", "worker_startup_s", "cpu_util",
                                     "peak_rss_bytes", "repeats", "decision", "error",
                                     "time_to_first_batch_s", "epoch_boundary_ms", "cv",
                                     "worker_busy_frac", "pinned_alloc_s", "batches_per_epoch",
                                     "worker_rss_bytes", "worker_rss_start_bytes", "worker_rss_peak_bytes",
                                     "worker_rss_growth_bytes_per_epoch", "worker_rss_epochs",
                                     "worker_rss_samples", "worker_rss_flag", "background_cpu",
                                     "remeasured_windows"}));
    EXPECT_EQ(Keys(trial["config"]), kConfigKeys);
    EXPECT_EQ(trial["ci"].size(), 2u);
  }
  const json& first = out["trials"][0];
  EXPECT_EQ(first["id"], 1);
  EXPECT_EQ(first["phase"], "baseline");
  EXPECT_EQ(first["status"], "ok");
  EXPECT_EQ(first["samples_per_s"], 812.0);
  EXPECT_DOUBLE_EQ(first["ci"][0].get<double>(), 812.0 * 0.97);
  EXPECT_DOUBLE_EQ(first["ci"][1].get<double>(), 812.0 * 1.02);
  EXPECT_DOUBLE_EQ(first["mb_per_s"].get<double>(), 812.0 * 0.15);
  EXPECT_EQ(first["gpu_idle_frac"], 0.71);
  EXPECT_DOUBLE_EQ(first["copy_s"].get<double>(), 0.01);
  EXPECT_EQ(first["wait_p50_us"], 950.0);
  EXPECT_EQ(first["wait_p99_us"], 1400.0);
  EXPECT_EQ(first["worker_startup_s"], 0.2);
  EXPECT_EQ(first["cpu_util"], 1.5);
  EXPECT_EQ(first["peak_rss_bytes"], int64_t{512} << 20);
  EXPECT_EQ(first["repeats"], 3);
  EXPECT_EQ(first["decision"], "");
  EXPECT_TRUE(first["error"].is_null());

  const json& failed = out["trials"][2];
  EXPECT_EQ(failed["status"], "failed");
  EXPECT_EQ(failed["error"], "worker 5 (pid 4242) killed by SIGKILL\nout of memory?");
  EXPECT_TRUE(failed["samples_per_s"].is_null());  // never measured
  EXPECT_EQ(failed["config"]["num_workers"], 16);
}

TEST(RenderJsonTest, SchemaV2FiguresAreAdded) {
  RunView view = ExampleView();
  // The example's figures as the tuner stores them since schema v2.
  for (TrialRecord& t : view.trials) {
    t.time_to_first_batch_s = 0.5;
    t.epoch_boundary_ms = 12.5;
    t.cv = 0.02;
    t.worker_busy_frac = 0.75;
  }
  view.run.knee_kneedle_workers = 8;
  view.run.safe_max_workers = 20;
  view.run.speedup = 7.5;
  view.run.speedup_ci_low = 7.25;
  view.run.speedup_ci_high = 7.75;
  view.run.calibration_json = R"({"fork_us": 900})";
  view.run.uid = "abc:2024:01";
  const json out = json::parse(RenderJson(view));
  EXPECT_EQ(out["knee_kneedle"], (json{{"num_workers", 8}, {"samples_per_s", 6311.0}}));
  EXPECT_EQ(out["safe_max_workers"], 20);
  EXPECT_EQ(out["speedup"], 7.5);  // the tuner's figure wins over the recomputed ratio
  EXPECT_EQ(out["speedup_ci"], json::array({7.25, 7.75}));
  EXPECT_EQ(out["calibration"], (json{{"fork_us", 900}}));
  EXPECT_EQ(out["run_uid"], "abc:2024:01");
  const json& trial = out["trials"][0];
  EXPECT_EQ(trial["time_to_first_batch_s"], 0.5);
  EXPECT_EQ(trial["epoch_boundary_ms"], 12.5);
  EXPECT_EQ(trial["cv"], 0.02);
  EXPECT_EQ(trial["worker_busy_frac"], 0.75);

  view.run.calibration_json = "not json";
  EXPECT_EQ(json::parse(RenderJson(view))["calibration"], "not json");

  const std::string table = RenderTable(view);
  EXPECT_NE(table.find("safe max: 20 workers"), std::string::npos) << table;
  EXPECT_NE(table.find("speedup:  x7.50 over baseline (95% CI x7.25-x7.75)"), std::string::npos)
      << table;
  view.run.knee_kneedle_workers = 4;
  EXPECT_NE(RenderTable(view).find("knee:     8 workers (6311.0 samples/s) [Kneedle: 4 workers]"),
            std::string::npos)
      << RenderTable(view);
}

TEST(RenderJsonTest, V1FiguresReadAsUnknownBecomeNull) {
  RunView view = ExampleView();
  view.trials[0].cv = std::nan("");
  view.trials[0].time_to_first_batch_s = std::nan("");
  const json out = json::parse(RenderJson(view));
  EXPECT_TRUE(out["trials"][0]["cv"].is_null());
  EXPECT_TRUE(out["trials"][0]["time_to_first_batch_s"].is_null());
  EXPECT_TRUE(out["knee_kneedle"].is_null());
  EXPECT_TRUE(out["safe_max_workers"].is_null());
  EXPECT_TRUE(out["speedup_ci"].is_null());
  EXPECT_TRUE(out["calibration"].is_null());
}

// A command trial's figures that nobody measured (NaN) are null in the JSON
// and dashes or "not measured" in the table and the HTML; the safe limit
// says what it rests on, and gives no number when nothing supports one.
TEST(RenderTest, UnmeasuredFiguresAndTheSafeLimitsBasis) {
  RunView view = ExampleView();
  for (TrialRecord& t : view.trials) {
    t.mb_per_s = t.gpu_idle_frac = t.wait_p50_us = t.wait_p99_us = std::nan("");
    t.worker_busy_frac = std::nan("");
  }
  view.trials[1].worker_rss_bytes = 200.0 * (1 << 20);
  view.run.safe_max_workers = 12;
  view.run.facts.safe_limit = SafeLimit{12, "measured worker RSS of trial 2 (200 MiB)", 2, std::nullopt, std::nullopt};
  json out = json::parse(RenderJson(view));
  EXPECT_TRUE(out["best"]["gpu_idle_frac"].is_null());
  EXPECT_TRUE(out["trials"][0]["mb_per_s"].is_null());
  EXPECT_TRUE(out["trials"][0]["worker_busy_frac"].is_null());
  EXPECT_TRUE(out["trials"][0]["worker_rss_bytes"].is_null());
  EXPECT_EQ(out["trials"][1]["worker_rss_bytes"], 200.0 * (1 << 20));
  EXPECT_EQ(out["safe_max_workers"], 12);
  EXPECT_EQ(out["safe_max_workers_basis"], "measured worker RSS of trial 2 (200 MiB)");
  std::string table = RenderTable(view);
  EXPECT_NE(table.find("safe max: 12 workers (memory, /dev/shm and open-file budgets); per worker: measured worker "
                       "RSS of trial 2 (200 MiB)"),
            std::string::npos)
      << table;
  EXPECT_NE(table.find("GPU idle not measured"), std::string::npos) << table;
  EXPECT_EQ(table.find("nan"), std::string::npos) << table;
  EXPECT_EQ(table.find("GPU idle -"), std::string::npos) << table;
  std::string html = RenderHtml(view);
  EXPECT_NE(html.find("GPU idle not measured"), std::string::npos);
  EXPECT_NE(html.find("per worker: measured worker RSS of trial 2 (200 MiB)"), std::string::npos);
  EXPECT_EQ(html.find("nan"), std::string::npos);

  view.run.safe_max_workers.reset();
  view.run.facts.safe_limit = SafeLimit{std::nullopt, "unknown: the command reported no worker memory", {}, {}, {}};
  out = json::parse(RenderJson(view));
  EXPECT_TRUE(out["safe_max_workers"].is_null());
  EXPECT_EQ(out["safe_max_workers_basis"], "unknown: the command reported no worker memory");
  table = RenderTable(view);
  EXPECT_NE(table.find("safe max: unknown: the command reported no worker memory\n"), std::string::npos) << table;
  html = RenderHtml(view);
  EXPECT_NE(html.find("unknown: the command reported no worker memory"), std::string::npos);

  view.run.facts.safe_limit.reset();  // a run from before the basis was kept
  EXPECT_TRUE(json::parse(RenderJson(view))["safe_max_workers_basis"].is_null());
  EXPECT_EQ(RenderTable(view).find("safe max:"), std::string::npos);
}

TEST(RenderJsonTest, RunWithoutResultsHasNulls) {
  RunView view;
  view.run.id = 7;
  view.run.status = results::RunStatus::kRunning;
  const json out = json::parse(RenderJson(view));
  EXPECT_TRUE(out["machine"].is_null());
  EXPECT_TRUE(out["baseline"].is_null());
  EXPECT_TRUE(out["best"].is_null());
  EXPECT_TRUE(out["knee"].is_null());
  EXPECT_TRUE(out["speedup"].is_null());
  EXPECT_TRUE(out["ended_at"].is_null());
  EXPECT_TRUE(out["trials"].is_array());
  EXPECT_TRUE(out["trials"].empty());
}

// A run found left running by a process that ended (Store::Open): the
// report says why it is interrupted, in the text and the JSON.
TEST(RenderJsonTest, AnInterruptedRunSaysHowItEnded) {
  RunView view = ExampleView();
  view.run.status = results::RunStatus::kInterrupted;
  view.run.end_note = "left running by pid 4242 on box-a, which has ended; marked interrupted by pid 4343, the "
                      "next to open the file for writing";
  const json out = json::parse(RenderJson(view));
  EXPECT_EQ(out["status"], "interrupted");
  EXPECT_EQ(out["end_note"], view.run.end_note);
  const std::string text = RenderTable(view);
  EXPECT_NE(text.find("status:   interrupted: left running by pid 4242 on box-a, which has ended; marked "
                      "interrupted by pid 4343, the next to open the file for writing\n"),
            std::string::npos)
      << text;
}

TEST(RenderJsonTest, GpuObjectWhenMachineHasOne) {
  RunView view = ExampleView();
  view.machine->gpu_name = "NVIDIA H200";
  view.machine->gpu_count = 1;
  view.machine->gpu_mem_bytes = int64_t{141} << 30;
  view.machine->gpu_driver = "550.54";
  const json out = json::parse(RenderJson(view));
  EXPECT_EQ(out["machine"]["gpu"], (json{{"name", "NVIDIA H200"},
                                         {"count", 1},
                                         {"mem_bytes", int64_t{141} << 30},
                                         {"driver", "550.54"},
                                         {"runtime", ""},
                                         {"pcie_link", ""}}));
  EXPECT_TRUE(out["machine"]["gpus"].empty());

  view.machine->gpus = {{.name = "NVIDIA H200",
                         .mem_bytes = int64_t{141} << 30,
                         .driver = "550.54",
                         .runtime = "12.4",
                         .pci_bus_id = "0000:3b:00.0",
                         .link = "gen5 x16"}};
  const json detail = json::parse(RenderJson(view));
  ASSERT_EQ(detail["machine"]["gpus"].size(), 1u);
  EXPECT_EQ(detail["machine"]["gpus"][0]["pci_bus_id"], "0000:3b:00.0");
  EXPECT_EQ(detail["machine"]["gpus"][0]["runtime"], "12.4");
  EXPECT_EQ(detail["machine"]["gpus"][0]["link"], "gen5 x16");
}

TEST(RenderJsonTest, BaselineFallsBackToBaselinePhaseWhileRunning) {
  RunView view = ExampleView();
  view.run.status = results::RunStatus::kRunning;
  view.run.baseline_trial_id.reset();
  view.run.best_trial_id.reset();
  const json out = json::parse(RenderJson(view));
  EXPECT_EQ(out["baseline"]["samples_per_s"], 812.0);
  EXPECT_TRUE(out["best"].is_null());
  EXPECT_TRUE(out["speedup"].is_null());
}

std::vector<std::string> SplitLines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

TEST(RenderTableTest, AlignedColumnsMarkersAndSummary) {
  const std::string text = RenderTable(ExampleView());
  const std::vector<std::string> lines = SplitLines(text);

  EXPECT_NE(text.find("run:      3"), std::string::npos) << text;
  EXPECT_NE(text.find("quickstart (hash 0123456789abcdef)"), std::string::npos) << text;
  EXPECT_NE(text.find("status:   done"), std::string::npos) << text;
  EXPECT_NE(text.find("backend:  host-sim"), std::string::npos) << text;
  EXPECT_NE(text.find("build:    feedtune 0.1.0\n"), std::string::npos) << "the build that measured the run: " << text;
  EXPECT_NE(text.find("lab box, Test CPU, 2 of 4 CPUs usable"), std::string::npos) << text;
  EXPECT_NE(text.find("started:  2024-05-01T10:00:00Z"), std::string::npos) << text;

  size_t header_index = lines.size();
  for (size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].find("samples/s") != std::string::npos &&
        lines[i].find("phase") != std::string::npos) {
      header_index = i;
      break;
    }
  }
  ASSERT_LT(header_index + 5, lines.size()) << text;
  const std::string& header = lines[header_index];
  for (const char* column :
       {"id", "phase", "workers", "pin", "nb", "prefetch", "persist", "samples/s", "95% CI", "MB/s",
        "GPU idle %", "wait p50 ms", "wait p99 ms", "status / decision"}) {
    EXPECT_NE(header.find(column), std::string::npos) << column << "\n" << text;
  }
  EXPECT_EQ(lines[header_index + 1].find_first_not_of('-'), std::string::npos);

  // Numbers are right-aligned under their headers: each row's samples/s value
  // ends where the header's "samples/s" ends.
  const size_t samples_end = header.find("samples/s") + std::string("samples/s").size();
  const std::vector<std::string> expected = {"812.0", "6311.0", "-", "6420.5"};
  for (size_t r = 0; r < expected.size(); ++r) {
    const std::string& row = lines[header_index + 2 + r];
    ASSERT_GE(row.size(), samples_end) << row;
    EXPECT_EQ(row.substr(samples_end - expected[r].size(), expected[r].size()), expected[r])
        << row << "\n"
        << text;
    EXPECT_EQ(row[samples_end - expected[r].size() - 1], ' ') << row;
  }
  // The last column starts at the same place on every line.
  const size_t status_start = header.find("status / decision");
  EXPECT_EQ(lines[header_index + 2].substr(status_start, 2), "ok") << text;
  EXPECT_EQ(lines[header_index + 4].substr(status_start, 6), "failed") << text;

  EXPECT_NE(lines[header_index + 2].find("baseline"), std::string::npos);
  EXPECT_NE(lines[header_index + 3].find("knee (8 workers)"), std::string::npos) << text;
  EXPECT_NE(lines[header_index + 4].find("killed by SIGKILL out of memory?"), std::string::npos)
      << text;
  EXPECT_NE(lines[header_index + 5].find("*best*"), std::string::npos) << text;
  EXPECT_NE(lines[header_index + 2].find("71.0"), std::string::npos) << "GPU idle in percent";
  EXPECT_NE(lines[header_index + 2].find("0.95"), std::string::npos) << "wait p50 in ms";

  EXPECT_NE(text.find("knee:     8 workers (6311.0 samples/s)"), std::string::npos) << text;
  EXPECT_NE(text.find("best:     trial 4: batch_size=64 num_workers=8 pin_memory=true "
                      "non_blocking=true prefetch_factor=4 persistent_workers=true"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("speedup:  x7.91"), std::string::npos) << text;
  for (const std::string& line : lines) {
    EXPECT_TRUE(line.empty() || line.back() != ' ') << "trailing blank: [" << line << "]";
  }
  EXPECT_EQ(text.find("store"), std::string::npos) << "local data: no store figures\n" << text;
}

// A run on remote data: each trial's reads from the store (schema v23), the
// figures `inspect s3://` gives, under the table and in each trial's JSON.
RunView RemoteView() {
  RunView view = ExampleView();
  StoreFigures store;
  store.requests = 120;
  store.retries_slowdown = 2;
  store.objects = 118;
  store.bytes = 118 * 16384;
  store.first_byte_p50_s = 0.0213;
  store.first_byte_p99_s = 0.0351;
  store.mb_per_s_per_connection = 48.2;
  view.trials[1].store = store;
  store.retries_slowdown = 0;
  store.retries_connection = 1;
  store.first_byte_p99_s = std::nan("");
  view.trials[3].store = store;
  return view;
}

TEST(RenderTableTest, ARemoteRunShowsEachTrialsStoreFiguresUnderTheTable) {
  const std::string text = RenderTable(RemoteView());
  EXPECT_NE(text.find("\nthe store per trial (the workers' reads in the windows, docs/storage.md):\n"
                      "  trial 2: first byte p50 21.3 ms, p99 35.1 ms; 48.2 MB/s per connection; 120 requests, "
                      "2 retries (2 SlowDown)\n"
                      "  trial 4: first byte p50 21.3 ms, p99 ?; 48.2 MB/s per connection; 120 requests, "
                      "1 retry (1 connection lost)\n"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("trial 1: first byte"), std::string::npos) << "a trial without figures has no line\n" << text;
}

TEST(RenderJsonTest, ARemoteTrialHasItsStoreFiguresUnderStore) {
  const json out = json::parse(RenderJson(RemoteView()));
  EXPECT_FALSE(out["trials"][0].contains("store"));
  const json& store = out["trials"][1]["store"];
  EXPECT_EQ(store, json::parse(R"({"requests": 120, "retries": 2, "retries_slowdown": 2, "retries_server_error": 0,
      "retries_connection": 0, "objects": 118, "bytes": 1933312, "first_byte_p50_s": 0.0213,
      "first_byte_p99_s": 0.0351, "mb_per_s_per_connection": 48.2})"));
  EXPECT_TRUE(out["trials"][3]["store"]["first_byte_p99_s"].is_null()) << "not measured";
  EXPECT_EQ(out["trials"][3]["store"]["retries"], 1);
}

// The binding and threads columns appear, in the text table and the HTML,
// only for a run whose trials set them; each trial's row carries its values.
TEST(RenderTableTest, BindingAndThreadsColumnsOnlyWhenVaried) {
  RunView plain = ExampleView();
  EXPECT_FALSE(VariesAroundLoader(plain));
  EXPECT_EQ(RenderTable(plain).find("binding"), std::string::npos);
  EXPECT_EQ(RenderHtml(plain).find("<th>binding</th>"), std::string::npos);

  RunView varied = ExampleView();
  varied.trials[1].knobs.cpu_binding = loader::CpuBinding::kSplit;
  varied.trials[3].knobs.worker_threads = 2;
  ASSERT_TRUE(VariesAroundLoader(varied));
  const std::string text = RenderTable(varied);
  const std::vector<std::string> lines = SplitLines(text);
  size_t header = lines.size();
  for (size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].find("binding") != std::string::npos && lines[i].find("threads") != std::string::npos) header = i;
  }
  ASSERT_LT(header + 5, lines.size()) << text;
  const size_t status = lines[header].find("status / decision");
  EXPECT_LT(lines[header].find("threads"), status) << "before the decision column\n" << text;
  EXPECT_NE(lines[header + 2].find("none"), std::string::npos) << text;   // trial 1: inherited mask, own threads
  EXPECT_NE(lines[header + 3].find("split"), std::string::npos) << text;  // trial 2
  const std::string best = lines[header + 5];                             // trial 4: 2 threads
  EXPECT_EQ(best.substr(0, status).find_last_not_of(' '), best.substr(0, status).rfind('2')) << text;

  const std::string html = RenderHtml(varied);
  EXPECT_NE(html.find("<th>binding</th><th class=\"n\">threads</th><th>status / decision</th>"), std::string::npos);
  EXPECT_NE(html.find("<td>split</td><td class=\"n\">-</td>"), std::string::npos);
  EXPECT_NE(html.find("<td>none</td><td class=\"n\">2</td>"), std::string::npos);
  EXPECT_NE(html.find("2 threads per worker"), std::string::npos) << "the best setting's summary names them";
}

// The formulas row: each pick's figure and its signed gap to the best, that
// a fallback trial ran other settings, or that the run did not measure it.
TEST(NodeFormulasText, SignedGapFallbackOrNotMeasured) {
  std::vector<FormulaRow> rows(3);
  rows[0] = {.name = "Lightning", .rule = "max(1, 2 // 2 - 1)", .workers = 1, .trial_id = 3, .samples_per_s = 500,
             .at_best_settings = true};
  rows[1] = {.name = "timm", .rule = "4", .workers = 4, .trial_id = 10, .samples_per_s = 1200,
             .at_best_settings = false};
  rows[2] = {.name = "cpus // ranks", .rule = "16 // 2", .workers = 8, .trial_id = std::nullopt,
             .samples_per_s = std::nullopt, .at_best_settings = false};
  const std::string text = NodeFormulasText(rows, 1000.0, "  ");
  EXPECT_NE(text.find("  Lightning:     max(1, 2 // 2 - 1)    -> 1   workers per rank: 500.0 samples/s (trial 3), "
                      "-50.0% against the best\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("1200.0 samples/s (trial 10, whose other settings differ from the best's), +20.0% against the "
                      "best\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("-> 8   workers per rank: not measured in this run\n"), std::string::npos) << text;
  const json formulas = NodeFormulasJson(rows, 1000.0, 800.0);
  EXPECT_DOUBLE_EQ(formulas[0]["gap_to_best"].get<double>(), -0.5);
  EXPECT_DOUBLE_EQ(formulas[0]["gap_to_knee"].get<double>(), 500.0 / 800.0 - 1);
  EXPECT_TRUE(formulas[0]["at_best_settings"].get<bool>());
  EXPECT_FALSE(formulas[1]["at_best_settings"].get<bool>());
  EXPECT_TRUE(formulas[2]["samples_per_s"].is_null());
}

// A node run's HTML shows the best's ranks and the formulas row, as the text does.
TEST(RenderHtmlTest, NodeRunShowsRanksAndFormulas) {
  RunView view = ExampleView();  // 2 usable CPUs
  for (TrialRecord& t : view.trials) {
    t.node.emplace();
    t.node->ranks = 2;
    RankRecord row;
    row.cpu_mask = "0-1";
    t.node->rank_rows = {row, row};
  }
  const std::string html = RenderHtml(view);
  EXPECT_NE(html.find("<h2>Ranks of the best setting</h2>"), std::string::npos);
  EXPECT_NE(html.find("<h2>Formulas on this node</h2>"), std::string::npos);
  // Lightning on 2 CPUs and 2 ranks: 1 worker per rank, not measured by this run.
  EXPECT_NE(html.find("Lightning:     max(1, 2 // 2 - 1)    -&gt; 1   workers per rank: not measured in this run"),
            std::string::npos)
      << html;
  EXPECT_EQ(RenderHtml(ExampleView()).find("Formulas on this node"), std::string::npos) << "one loader: no row";
}

TEST(RenderTableTest, EmptyRun) {
  RunView view;
  view.run.id = 9;
  view.run.status = results::RunStatus::kRunning;
  const std::string text = RenderTable(view);
  EXPECT_NE(text.find("no trials recorded"), std::string::npos) << text;
}

class LoadRunViewTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "feedtune_report_test.XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override {
    std::error_code error;
    fs::remove_all(dir_, error);
  }
  fs::path dir_;
};

TEST_F(LoadRunViewTest, LoadsRunMachineAndTrials) {
  const std::string path = (dir_ / "feedtune.db").string();
  Store store = Store::Open(path);
  try {
    LoadRunView(store, std::nullopt);
    FAIL() << "expected StoreError";
  } catch (const StoreError& e) {
    EXPECT_EQ(std::string(e.what()), "no runs in " + path + "; run `feedtune sweep` first");
  }

  const RunView example = ExampleView();
  RunRecord run = example.run;
  run.machine_id = store.UpsertMachine(*example.machine);
  run.id = store.BeginRun(run);
  for (const TrialRecord& trial : example.trials) store.AddTrial(run.id, trial);
  store.FinishRun(run);  // the example's trial ids are 1..4, as the store assigns them

  const RunView view = LoadRunView(store, std::nullopt);
  EXPECT_EQ(view.run.id, run.id);
  ASSERT_TRUE(view.machine.has_value());
  EXPECT_EQ(view.machine->label, "lab box");
  ASSERT_EQ(view.trials.size(), 4u);
  const json out = json::parse(RenderJson(view));
  EXPECT_DOUBLE_EQ(out["speedup"].get<double>(), 6420.5 / 812.0);
  EXPECT_EQ(out["best"]["config"]["prefetch_factor"], 4);

  try {
    LoadRunView(store, 42);
    FAIL() << "expected StoreError";
  } catch (const StoreError& e) {
    EXPECT_EQ(std::string(e.what()), "no run 42 in " + path);
  }
}

}  // namespace
}  // namespace feedtune::results
