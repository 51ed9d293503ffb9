// feedtune_probe_knee_bench: where the real torch.utils.data.DataLoader's
// knee lies on this machine, against where the design says it lies (the
// PyTorch probe, workloads/python/feedtune_probe.py, through the command
// workload as `feedtune sweep configs/torch-probe.yaml` runs it):
//
//   cpu-bound   1 ms of CPU per sample: workers only help until they fill the
//               cores. Target: knee / usable CPUs <= 2.
//   wait-bound  10 ms of waiting per sample: workers keep paying far past the
//               core count. Target: knee / usable CPUs >= 4.
//
// The knee as the tuner defines it: the fewest workers within
// sweep.knee_tolerance of the best samples/s, over num_workers 1, 2, 4, ...
// (4x the CPUs for cpu-bound, 8x for wait-bound), each one 1.5 s window in
// one serving probe per profile (torch is imported once per curve).
//
// These are a bench, not ctest assertions (the perf tier): they measure
// torch on this machine rather than feedtune's code, and a ratio of
// CPU-bound throughput needs the CPUs to itself, so they run here, alone
// (`make knee-bench`, and a step of scripts/ci-full). About 30 s on 2 CPUs.
//
// Prints each curve, its knee and the ratio to the usable CPUs with the
// target. Exits 1 when a target is missed, 2 when the probe cannot run.
// The cpu-bound profile is not judged when other processes use more than
// half a CPU at its start (said, exit status unaffected): a busy machine
// hands more CPU to whoever runs more processes, which moves the knee.
//
//   feedtune_probe_knee_bench [--python PATH] [--probe PATH] [--profiles cpu-bound,wait-bound]
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "results/fingerprint.h"
#include "tuner/measure/command_measurer.h"

#ifndef FEEDTUNE_SOURCE_DIR
#define FEEDTUNE_SOURCE_DIR "."
#endif

namespace {

using feedtune::tuner::CommandMeasurer;
using feedtune::tuner::SweepConfig;

struct Profile {
  std::string name;
  std::vector<std::string> dataset_args;
  int max_workers_per_cpu;  // the curve's end: 1, 2, 4, ... up to this x the CPUs
  bool knee_at_most;        // true: knee / cpus <= target; false: >= target
  double target;
};

const std::vector<Profile>& Profiles() {
  static const std::vector<Profile> profiles = {
      {"cpu-bound",
       {"--samples", "8192", "--sample-bytes", "4096", "--cpu-us-per-sample", "1000", "--io-us-per-sample", "0",
        "--jitter", "0"},
       4,
       true,
       2.0},
      {"wait-bound",
       {"--samples", "8192", "--sample-bytes", "4096", "--cpu-us-per-sample", "0", "--io-us-per-sample", "10000",
        "--jitter", "0"},
       8,
       false,
       4.0},
  };
  return profiles;
}

// How many CPUs' worth of time the machine spent busy over `seconds` (all
// processes, from /proc/stat).
double BusyCpus(double seconds) {
  const auto sample = [] {
    std::ifstream stat("/proc/stat");
    std::string cpu;
    long long user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
    stat >> cpu >> user >> nice >> system >> idle >> iowait >> irq >> softirq >> steal;
    return std::pair<long long, long long>(user + nice + system + irq + softirq + steal, idle + iowait);
  };
  const auto [busy0, idle0] = sample();
  usleep(static_cast<useconds_t>(seconds * 1e6));
  const auto [busy1, idle1] = sample();
  const double total = static_cast<double>((busy1 - busy0) + (idle1 - idle0));
  return total > 0 ? static_cast<double>(busy1 - busy0) / total * static_cast<double>(sysconf(_SC_NPROCESSORS_ONLN))
                   : 0;
}

// One serving probe measures every point of the curve (they differ only in
// num_workers). Returns the knee, or -1 when a trial failed (said).
int MeasureKnee(const Profile& p, const std::string& python, const std::string& probe, int cpus) {
  SweepConfig config;
  config.workload.kind = feedtune::workloads::WorkloadKind::kCommand;
  config.workload.command.protocol = feedtune::workloads::CommandProtocol::kServe;
  config.workload.command.argv = {python, probe, "--serve", "--device", "cpu"};
  config.workload.command.argv.insert(config.workload.command.argv.end(), p.dataset_args.begin(),
                                      p.dataset_args.end());
  config.workload.command.timeout_s = 120;
  config.loader.knobs.batch_size = 16;
  config.device.step_us = 0;  // the loader alone is measured
  config.sweep.repeats = 1;
  config.sweep.warmup_batches = 4;
  config.sweep.measure_seconds = 1.5;
  CommandMeasurer measurer(config, nullptr);
  std::vector<std::pair<int, double>> curve;
  for (int w = 1; w <= p.max_workers_per_cpu * cpus; w *= 2) {
    feedtune::loader::Knobs knobs = config.loader.knobs;
    knobs.num_workers = w;
    const feedtune::results::TrialRecord t = measurer.Measure(knobs);
    if (t.status != feedtune::results::TrialStatus::kOk) {
      std::printf("%-10s  %d workers: the trial failed: %s\n", p.name.c_str(), w, t.error.value_or("").c_str());
      return -1;
    }
    curve.emplace_back(w, t.samples_per_s);
    std::printf("%-10s  %2d workers  %8.1f samples/s\n", p.name.c_str(), w, t.samples_per_s);
    std::fflush(stdout);
  }
  double best = 0;
  for (const auto& [w, rate] : curve) best = std::max(best, rate);
  for (const auto& [w, rate] : curve) {
    if (rate >= best * (1 - config.sweep.knee_tolerance)) return w;
  }
  return curve.back().first;
}

int Usage(const char* why) {
  std::fprintf(stderr,
               "feedtune_probe_knee_bench: %s\n"
               "usage: feedtune_probe_knee_bench [--python PATH] [--probe PATH] [--profiles cpu-bound,wait-bound]\n",
               why);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string python = access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3" : "python3";
  std::string probe = FEEDTUNE_SOURCE_DIR "/workloads/python/feedtune_probe.py";
  std::string wanted = "cpu-bound,wait-bound";
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (i + 1 >= argc) return Usage(("missing a value after " + arg).c_str());
    if (arg == "--python") {
      python = argv[++i];
    } else if (arg == "--probe") {
      probe = argv[++i];
    } else if (arg == "--profiles") {
      wanted = argv[++i];
    } else {
      return Usage(("unknown option " + arg).c_str());
    }
  }
  const std::string check = python + " -c 'import torch.utils.data' 2>/dev/null";
  if (std::system(check.c_str()) != 0) {
    return Usage((python + " cannot import torch: install python3-torch (scripts/setup-deps does)").c_str());
  }
  const int cpus = static_cast<int>(feedtune::results::ReadFingerprint().usable_cpus);
  if (cpus < 1) return Usage("cannot read the usable CPUs");

  int missed = 0, ran = 0;
  for (const Profile& p : Profiles()) {
    if (("," + wanted + ",").find("," + p.name + ",") == std::string::npos) continue;
    ++ran;
    const double busy = BusyCpus(1.0);
    const bool judged = !p.knee_at_most || busy <= 0.5;
    const int knee = MeasureKnee(p, python, probe, cpus);
    if (knee < 0) return 2;
    const double ratio = static_cast<double>(knee) / cpus;
    const bool met = p.knee_at_most ? ratio <= p.target : ratio >= p.target;
    std::printf("%-10s  knee %d workers on %d usable CPUs: ratio %.2f (target %s %.0f): %s\n", p.name.c_str(), knee,
                cpus, ratio, p.knee_at_most ? "<=" : ">=", p.target,
                !judged ? "not judged: other processes used CPUs at the start" : met ? "met" : "MISSED");
    if (!judged) std::printf("%-10s  %.2f CPUs busy before it started; run it on a quiet machine\n", p.name.c_str(), busy);
    if (judged && !met) ++missed;
  }
  if (ran == 0) return Usage(("no profile named in --profiles " + wanted).c_str());
  return missed > 0 ? 1 : 0;
}
