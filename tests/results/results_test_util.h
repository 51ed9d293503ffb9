// Helpers shared by the results tests: a temporary folder, running a command
// with its output captured, and rows shaped like real sweeps.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "results/records.h"
#include "results/store.h"

namespace feedtune::results::testing {

namespace fs = std::filesystem;

// A fresh folder under the system temp dir, removed with everything in it.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "feedtune_results_test.XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) ADD_FAILURE() << "mkdtemp failed";
    path_ = pattern;
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir() {
    std::error_code error;
    fs::remove_all(path_, error);
  }
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

inline void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

struct CommandResult {
  int code = -1;
  std::string out;
  std::string err;
};

// Runs `command` through /bin/sh with stdout and stderr captured in `dir`.
inline CommandResult RunShell(const std::string& command, const TempDir& dir) {
  const std::string out = dir / "cmd.out";
  const std::string err = dir / "cmd.err";
  const int status = std::system((command + " >" + out + " 2>" + err).c_str());
  CommandResult result;
  result.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  result.out = ReadFile(out);
  result.err = ReadFile(err);
  return result;
}

inline bool PythonHasTorch(const TempDir& dir) {
  return RunShell("/usr/bin/python3 -c 'import torch'", dir).code == 0;
}

inline const std::string& SourceDir() {
  static const std::string dir = FEEDTUNE_SOURCE_DIR;
  return dir;
}

inline Fingerprint Machine(const std::string& hostname, const std::string& label, int usable_cpus) {
  Fingerprint f;
  f.hostname = hostname;
  f.label = label;
  f.cpu_model = "Test CPU " + std::to_string(usable_cpus) + "c";
  f.logical_cpus = usable_cpus * 2;
  f.usable_cpus = usable_cpus;
  f.numa_nodes = 1;
  f.mem_total_bytes = int64_t{64} << 30;
  f.shm_bytes = int64_t{32} << 30;
  f.nofile_limit = 65536;
  f.kernel = "6.1.0-test";
  return f;
}

inline TrialRecord Trial(const std::string& phase, loader::Knobs knobs, double samples_per_s,
                         double gpu_idle_frac, const std::string& decision = "kept") {
  TrialRecord t;
  t.phase = phase;
  t.knobs = knobs;
  t.samples_per_s = samples_per_s;
  t.ci_low = samples_per_s * 0.98;
  t.ci_high = samples_per_s * 1.01;
  t.mb_per_s = samples_per_s * 0.15;
  t.gpu_idle_frac = gpu_idle_frac;
  t.wait_p50_us = 900;
  t.wait_p99_us = 1500;
  t.repeats = 2;
  t.decision = decision;
  t.cv = 0.01;
  t.time_to_first_batch_s = 0.2;
  t.worker_busy_frac = 0.5;
  t.repeat_rows = {{.index = 0, .samples_per_s = samples_per_s * 0.99},
                   {.index = 1, .samples_per_s = samples_per_s * 1.01}};
  return t;
}

// Stores a finished run shaped like a real sweep (baseline, pin_memory, the
// num_workers doubling with a knee at 4, then non_blocking, prefetch_factor,
// persistent_workers), its figures scaled by `scale`. Returns the run as stored.
// `host` empty: the machine's label and hostname stand in (as the store does).
inline RunRecord WriteSweep(Store& store, const Fingerprint& machine, const std::string& workload,
                            double scale, const std::string& started_at = "2024-05-01T10:00:00Z",
                            const HostIdentity& host = {}) {
  RunRecord run;
  run.machine_id = store.UpsertMachine(machine);
  run.host = host;
  run.workload_name = workload;
  run.workload_hash = "hash-of-" + workload;
  run.config_yaml = "name: " + workload + "\nloader: {batch_size: 32}\n";
  run.backend = "host-sim";
  run.version = "0.1.0";
  run.started_at = started_at;
  run.id = store.BeginRun(run);
  const loader::Knobs base{.batch_size = 32, .num_workers = 0, .pin_memory = false,
                           .non_blocking = false, .prefetch_factor = 2, .persistent_workers = false};
  const auto with = [&base](int workers, bool pin, bool nb, int prefetch, bool persistent) {
    loader::Knobs k = base;
    k.num_workers = workers;
    k.pin_memory = pin;
    k.non_blocking = nb;
    k.prefetch_factor = prefetch;
    k.persistent_workers = persistent;
    return k;
  };
  const int64_t baseline = store.AddTrial(run.id, Trial("baseline", base, 800 * scale, 0.70, ""));
  store.AddTrial(run.id, Trial("pin_memory", with(0, true, false, 2, false), 810 * scale, 0.69,
                               "not kept: within noise"));
  store.AddTrial(run.id, Trial("num_workers", with(1, false, false, 2, false), 1500 * scale, 0.45));
  store.AddTrial(run.id, Trial("num_workers", with(2, false, false, 2, false), 2900 * scale, 0.20));
  store.AddTrial(run.id, Trial("num_workers", with(4, false, false, 2, false), 5200 * scale, 0.05));
  store.AddTrial(run.id, Trial("num_workers", with(8, false, false, 2, false), 5300 * scale, 0.04,
                               "no gain beyond noise"));
  TrialRecord failed = Trial("num_workers", with(16, false, false, 2, false), NAN, NAN, "");
  failed.status = results::TrialStatus::kFailed;
  failed.error = "worker 9 (pid 4242) killed by SIGKILL";
  failed.repeat_rows.clear();
  store.AddTrial(run.id, failed);
  const int64_t best =
      store.AddTrial(run.id, Trial("non_blocking", with(4, true, true, 2, false), 5600 * scale, 0.02));
  store.AddTrial(run.id, Trial("prefetch_factor", with(4, true, true, 4, false), 5550 * scale, 0.02,
                               "not kept"));
  store.AddTrial(run.id, Trial("persistent_workers", with(4, true, true, 2, true), 5580 * scale, 0.02,
                               "not kept"));
  run.status = results::RunStatus::kDone;
  run.ended_at = started_at.substr(0, 14) + "05:00Z";  // five minutes later
  run.knee_workers = 4;
  run.knee_samples_per_s = 5200 * scale;
  run.knee_kneedle_workers = 4;
  run.safe_max_workers = 24;
  run.speedup = 7.0;
  run.speedup_ci_low = 6.8;
  run.speedup_ci_high = 7.2;
  run.best_trial_id = best;
  run.baseline_trial_id = baseline;
  store.FinishRun(run);
  return *store.LoadRun(run.id);
}

// Stores a finished run of `workload` on `host` (of hardware class `machine`)
// whose best reached `best` samples/s with the 95% interval [ci_low, ci_high]
// (num_workers 1, 2, 4 with the knee at `knee`; the best adds pin_memory).
inline RunRecord WriteHostRun(Store& store, const Fingerprint& machine, const HostIdentity& host,
                              const std::string& workload, double best, double ci_low, double ci_high,
                              const std::string& started_at, int knee = 4) {
  RunRecord run;
  run.machine_id = store.UpsertMachine(machine);
  run.host = host;
  run.workload_name = workload;
  run.workload_hash = "hash-of-" + workload;
  run.config_yaml = "name: " + workload + "\n";
  run.backend = "host-sim";
  run.version = "0.1.0";
  run.started_at = started_at;
  run.id = store.BeginRun(run);
  loader::Knobs knobs{.batch_size = 32, .num_workers = 0, .pin_memory = false, .non_blocking = false,
                      .prefetch_factor = 2, .persistent_workers = false};
  run.baseline_trial_id = store.AddTrial(run.id, Trial("baseline", knobs, best / 6, 0.7, ""));
  for (int workers = 1; workers <= 2 * knee; workers *= 2) {
    knobs.num_workers = workers;
    const double figure = best * 0.95 * std::min(1.0, static_cast<double>(workers) / knee);
    store.AddTrial(run.id, Trial("num_workers", knobs, figure, 0.1));
  }
  knobs.num_workers = knee;
  knobs.pin_memory = true;
  TrialRecord top = Trial("pin_memory", knobs, best, 0.02);
  top.ci_low = ci_low;
  top.ci_high = ci_high;
  run.best_trial_id = store.AddTrial(run.id, top);
  run.status = results::RunStatus::kDone;
  run.ended_at = started_at.substr(0, 14) + "05:00Z";
  run.knee_workers = knee;
  run.knee_samples_per_s = best * 0.95;
  store.FinishRun(run);
  return *store.LoadRun(run.id);
}

// An answer as `feedtune layout --format json` prints it and stores it as the
// run's config (tuner/cli/layout_command.cc AnswerJson), scripted: five
// candidates, their rates times `scale`. "hdf5, chunk 32, gzip:4" was not
// measured; "lmdb" lacks read_amplification, and "npy" its warm figure,
// convert_seconds and payback_epochs (a build that did not write them): the
// reports show "-" there.
inline nlohmann::json ScriptedLayoutAnswer(const std::string& hostname, double scale, const std::string& named,
                                           const std::string& why) {
  using nlohmann::json;
  const auto rate = [scale](double median, double low, double high, int workers) {
    return json{{"samples_per_s", median * scale}, {"ci", {low * scale, high * scale}}, {"num_workers", workers}};
  };
  json candidates = json::array();
  candidates.push_back({{"name", "as-is: npy"}, {"as_is", true}, {"measured", true}, {"error", nullptr},
                        {"cold", rate(15150, 14732, 15976, 4)}, {"warm", rate(44515, 44100, 45020, 4)},
                        {"bytes_on_disk", 294600000}, {"sample_bytes_on_disk", 29460000},
                        {"read_amplification", 1.0}, {"convert_seconds", 0.0}, {"epoch_seconds_cold", 0.19},
                        {"payback_epochs", nullptr}, {"within_noise_of_fastest", false}});
  candidates.push_back({{"name", "tar, 16 shards, streamed"}, {"as_is", false}, {"measured", true},
                        {"error", nullptr}, {"cold", rate(18530, 17543, 18744, 1)},
                        {"warm", rate(27709, 27500, 27900, 1)}, {"bytes_on_disk", 296900000},
                        {"sample_bytes_on_disk", 29690000}, {"read_amplification", 1.0},
                        {"convert_seconds", 2.1}, {"epoch_seconds_cold", 0.16}, {"payback_epochs", 58.6},
                        {"within_noise_of_fastest", true}});
  candidates.push_back({{"name", "lmdb"}, {"as_is", false}, {"measured", true}, {"error", nullptr},
                        {"cold", rate(754, 695, 806, 0)}, {"warm", rate(51374, 51000, 51600, 0)},
                        {"bytes_on_disk", 300600000}, {"sample_bytes_on_disk", 30060000},
                        {"convert_seconds", 2.8}, {"epoch_seconds_cold", 4.0}, {"payback_epochs", nullptr},
                        {"within_noise_of_fastest", false}});
  candidates.push_back({{"name", "hdf5, chunk 32, gzip:4"}, {"as_is", false}, {"measured", false},
                        {"error", "exit 1: feedtune trial: out of memory"}, {"cold", nullptr}, {"warm", nullptr},
                        {"bytes_on_disk", 0}, {"sample_bytes_on_disk", 0}, {"read_amplification", 32.0},
                        {"convert_seconds", 0.0}, {"epoch_seconds_cold", 0.0}, {"payback_epochs", nullptr},
                        {"within_noise_of_fastest", false}});
  candidates.push_back({{"name", "npy"}, {"as_is", false}, {"measured", true}, {"error", nullptr},
                        {"cold", rate(16000, 15800, 16200, 2)}, {"bytes_on_disk", 294700000},
                        {"sample_bytes_on_disk", 29470000}, {"read_amplification", 1.0},
                        {"epoch_seconds_cold", 0.18}, {"within_noise_of_fastest", false}});
  return json{{"dataset", {{"path", "/data/train.npy"}, {"kind", "npy"}, {"samples", 10000}, {"bytes", 294600000}}},
              {"sample", {{"samples", 1000}, {"bytes", 29460000}}},
              {"machine", {{"hostname", hostname}, {"usable_cpus", 2}, {"mem_total_bytes", int64_t{8} << 30}}},
              {"cpu_us_per_sample", 0},
              {"candidates", candidates},
              {"named", named},
              {"layout_matters", named != "as-is: npy"},
              {"why", why},
              {"cache_notes",
               {{{"candidate", "as-is: npy"},
                 {"note", "cache cold: 29.5 MB in 1 file evicted; 0% stayed resident"},
                 {"resident_fraction", 0.004}},
                {{"candidate", "lmdb"},
                 {"note", "cache cold: 30.1 MB in 2 files evicted; 12% stayed resident"},
                 {"resident_fraction", 0.12}}}}};
}

// Stores `answer` as `feedtune layout` does: workload "layout train.npy", a
// cold trial per worker count of the doubling up to each candidate's best
// (a failed one at 0 workers where it was not measured) and a warm one at
// it; the named candidate's best cold trial as the run's best, the source's
// as its baseline. Returns the run as stored.
inline RunRecord WriteLayoutRun(Store& store, const Fingerprint& machine, const nlohmann::json& answer,
                                const std::string& started_at = "2024-05-01T10:00:00Z") {
  RunRecord run;
  run.machine_id = store.UpsertMachine(machine);
  run.workload_name = "layout train.npy";
  run.workload_hash = "hash-of-layout";
  run.kind = RunKind::kLayout;
  run.answer_json = answer.dump(1);
  run.backend = "host-sim";
  run.version = "0.1.0";
  run.started_at = started_at;
  run.id = store.BeginRun(run);
  loader::Knobs knobs{.batch_size = 32};
  for (const auto& c : answer.at("candidates")) {
    const std::string name = c.at("name");
    if (!c.at("measured").get<bool>()) {
      knobs.num_workers = 0;
      TrialRecord failed = Trial("layout-cold: " + name, knobs, NAN, NAN, "");
      failed.status = TrialStatus::kFailed;
      failed.error = c.at("error").get<std::string>();
      failed.repeat_rows.clear();
      store.AddTrial(run.id, failed);
      continue;
    }
    const auto& cold = c.at("cold");
    const int best = cold.at("num_workers");
    const double median = cold.at("samples_per_s");
    for (int workers = 0; workers <= best; workers = workers == 0 ? 1 : workers * 2) {
      knobs.num_workers = workers;
      TrialRecord t = Trial("layout-cold: " + name, knobs, median * (workers + 1) / (best + 1), NAN, "");
      if (workers == best) {
        t.ci_low = cold.at("ci")[0];
        t.ci_high = cold.at("ci")[1];
      }
      const int64_t id = store.AddTrial(run.id, t);
      if (workers == best && name == answer.at("named")) run.best_trial_id = id;
      if (workers == best && c.at("as_is").get<bool>()) run.baseline_trial_id = id;
    }
    if (c.contains("warm") && c.at("warm").is_object()) {
      store.AddTrial(run.id, Trial("layout-warm: " + name, knobs, c.at("warm").at("samples_per_s"), NAN, ""));
    }
  }
  run.status = RunStatus::kDone;
  run.ended_at = started_at.substr(0, 14) + "05:00Z";
  store.FinishRun(run);
  return *store.LoadRun(run.id);
}

}  // namespace feedtune::results::testing
