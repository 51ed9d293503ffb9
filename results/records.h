// The rows of the results store (DESIGN.md §5) as plain structs. The store reads
// and writes them; the tuner fills them; the renderers print them. No behaviour.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "loader/options.h"

namespace feedtune::results {

// What identifies and describes a machine. Hash() is stable across runs on the
// same box: it covers the hardware and limits, not the hostname or the label.
struct Fingerprint {
  std::string hostname;
  std::string label;            // display name (`sweep --label`), else the hostname
  std::string cpu_model;
  int logical_cpus = 0;
  int usable_cpus = 0;          // affinity mask, capped by the cgroup CPU quota
  double cgroup_cpu_limit = 0;  // CPUs allowed by cpu.max / cfs quota; 0 = none
  int numa_nodes = 0;
  int64_t mem_total_bytes = 0;
  int64_t cgroup_mem_limit_bytes = 0;  // 0 = none
  int64_t shm_bytes = 0;               // size of /dev/shm
  int64_t nofile_limit = 0;            // RLIMIT_NOFILE soft limit
  std::string kernel;
  // GPU: empty name and count 0 when there is none.
  std::string gpu_name;
  int gpu_count = 0;
  int64_t gpu_mem_bytes = 0;
  std::string gpu_driver;
  std::string pcie_link;

  std::string Hash() const;  // 16 hex digits
};

struct RepeatRecord {
  int index = 0;
  double samples_per_s = 0;
  double mb_per_s = 0;
  double gpu_idle_frac = 0;
  double wait_p50_us = 0;
  double wait_p99_us = 0;
  double wall_s = 0;
  bool outlier = false;
};

struct TrialRecord {
  int64_t id = 0;
  int64_t run_id = 0;
  std::string phase;        // baseline | pin_memory | num_workers | non_blocking | prefetch_factor | persistent_workers
  loader::Knobs knobs;
  std::string status = "ok";  // ok | failed | skipped
  std::optional<std::string> error;
  double samples_per_s = 0;   // median over repeats
  double ci_low = 0;          // 95% interval of the median's estimate
  double ci_high = 0;
  double mb_per_s = 0;
  double gpu_idle_frac = 0;
  double copy_s = 0;          // device copy time inside the windows, reported apart from steps
  double wait_p50_us = 0;
  double wait_p99_us = 0;
  double worker_startup_s = 0;
  double cpu_util = 0;        // CPU seconds of the process tree per wall second
  int64_t peak_rss_bytes = 0;
  int repeats = 0;
  std::string decision;       // why the phase kept or dropped this setting
  std::vector<RepeatRecord> repeat_rows;
};

struct RunRecord {
  int64_t id = 0;
  int64_t machine_id = 0;
  std::string workload_name;
  std::string workload_hash;
  std::string config_yaml;  // the full effective config
  std::string backend;      // host-sim | cuda
  std::string version;
  std::string started_at;   // ISO 8601 UTC
  std::string ended_at;     // empty while running
  std::string status = "running";  // running | done | interrupted | failed
  std::optional<int> knee_workers;
  std::optional<double> knee_samples_per_s;
  std::optional<int64_t> best_trial_id;
  std::optional<int64_t> baseline_trial_id;
};

}  // namespace feedtune::results
