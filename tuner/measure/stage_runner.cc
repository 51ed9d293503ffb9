#include "tuner/measure/stage_runner.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>

#include "results/units.h"
#include "tuner/measure/command_measurer.h"
#include "tuner/measure/stage_dataset.h"
#include "tuner/measure/stats.h"
#include "workloads/format_io.h"
#include "workloads/shard_format.h"

namespace feedtune::tuner {

using results::TrialStatus;

using results::kNaN;
using results::DecimalBytes;
using results::ShortNumber;
using results::ThreeFigures;
using results::TrialRecord;
using Clock = std::chrono::steady_clock;

namespace {

// The files a file-backed workload reads: the shards of a tfrecord or tar
// workload (its path, glob or list, as the dataset resolved them), else the
// files under its path.
std::vector<std::string> WorkloadDataFiles(const SweepConfig& config) {
  const workloads::WorkloadKind kind = config.workload.kind;
  if (kind == workloads::WorkloadKind::kTfRecord || kind == workloads::WorkloadKind::kTar) {
    try {
      return workloads::ResolveShardPaths(config.workload.files, workloads::ShardExtensions(kind));
    } catch (const workloads::DatasetNotFound&) {  // gone since the dataset opened: nothing to warm
      return {};
    }
  }
  return DataFiles(config.workload.files.path);
}

// The step (and copy) trial: no loader, the same windows and statistics as a
// trial. `batch` null: steps only. Without sync_every_steps the loop waits
// every second step, so the host cannot queue seconds of steps ahead.
TrialRecord MeasureDeviceLoop(const SweepConfig& config, device::Device& device, const loader::Knobs& knobs,
                              const device::HostBuffer* batch, size_t batch_bytes, const std::atomic<bool>* stop) {
  TrialRecord trial;
  trial.knobs = knobs;
  const int sync_every = config.device.sync_every_steps > 0 ? config.device.sync_every_steps : 2;
  device.Prepare(std::max<size_t>(batch_bytes, 1));
  int64_t steps = 0;
  const auto one = [&] {
    if (stop != nullptr && stop->load(std::memory_order_relaxed)) throw Interrupted();
    if (batch != nullptr) device.CopyToDevice(batch->data(), batch_bytes, batch->pinned(), knobs.non_blocking);
    device.Step();
    if (++steps % sync_every == 0) device.Synchronize();
  };
  for (int i = 0; i < config.sweep.warmup_batches; ++i) one();
  device.Synchronize();
  std::vector<double> rates, idles;
  for (int r = 0; r < config.sweep.repeats; ++r) {
    device.BeginWindow();
    const auto start = Clock::now();
    const auto end = start + std::chrono::duration_cast<Clock::duration>(
                                 std::chrono::duration<double>(config.sweep.measure_seconds));
    const int64_t first = steps;
    do {
      one();
    } while (Clock::now() < end);
    device.Synchronize();  // the window holds all its steps
    const device::DeviceWindow window = device.EndWindow();
    const double wall = std::chrono::duration<double>(Clock::now() - start).count();
    results::RepeatRecord rep;
    rep.index = r;
    rep.wall_s = wall;
    rep.samples_per_s = static_cast<double>((steps - first) * knobs.batch_size) / wall;
    rep.mb_per_s = batch != nullptr ? static_cast<double>(steps - first) * batch_bytes / wall / 1e6 : 0;
    rep.gpu_idle_frac = window.idle_frac();
    trial.repeat_rows.push_back(rep);
    rates.push_back(rep.samples_per_s);
    idles.push_back(rep.gpu_idle_frac);
    trial.copy_s += window.copy_s;
  }
  const Summary s = Summarize(rates);
  trial.samples_per_s = s.median;
  trial.ci_low = s.ci_low;
  trial.ci_high = s.ci_high;
  trial.cv = s.cv;
  trial.gpu_idle_frac = Median(idles);
  trial.worker_busy_frac = kNaN;
  trial.repeats = config.sweep.repeats;
  trial.status = TrialStatus::kOk;
  return trial;
}

TrialRecord MeasureCopy(const SweepConfig& config, device::Device& device, const loader::Knobs& knobs,
                        size_t batch_bytes, const std::atomic<bool>* stop, std::string* note) {
  device::HostBuffer buffer = knobs.pin_memory ? device.AllocPinned(batch_bytes) : device::AllocPageable(batch_bytes);
  if (knobs.pin_memory && !buffer.pinned()) *note = "the batch could not be pinned (" + device.pin_warning() + ")";
  std::memset(buffer.data(), 1, batch_bytes);  // resident: every page touched before the windows
  return MeasureDeviceLoop(config, device, knobs, &buffer, batch_bytes, stop);
}

// Restores the real reads and the configured cache when the stage trials end, however they end.
class StageReset {
 public:
  explicit StageReset(StageDataset* stages) : stages_(stages) {}
  ~StageReset() {
    if (stages_ == nullptr) return;
    stages_->SetReadMode(StageDataset::ReadMode::kReal);
    stages_->SetCachePolicy(StageDataset::CachePolicy::kAsConfigured);
  }
  StageReset(const StageReset&) = delete;
  StageReset& operator=(const StageReset&) = delete;

 private:
  StageDataset* stages_;
};

StageTrials RunNativeStages(const DiagnoseSetup& setup, const loader::Knobs& knobs) {
  const SweepConfig& config = *setup.config;
  device::Device& device = *setup.device;
  const auto say = [&](const std::string& line) {
    if (setup.on_stage) setup.on_stage(line);
  };
  StageTrials out;
  out.knobs = knobs;
  out.usable_cpus = setup.usable_cpus;
  StageDataset* stages = setup.workload->stages.get();
  StageReset reset(stages);
  if (stages == nullptr) {
    for (const std::string& s : results::StageNames()) {
      out.not_measured[s] = "a sweep over ranks (sweep.ranks > 1) is not diagnosed yet; diagnose with --set sweep.ranks=1";
    }
    return out;
  }
  TrialRunner runner(config, device, setup.workload->dataset, setup.stop, setup.workload->fork_server);
  const bool file_backed = config.workload.kind != workloads::WorkloadKind::kSynthetic;
  const std::vector<std::string> files = file_backed ? WorkloadDataFiles(config) : std::vector<std::string>{};
  out.cold_configured = file_backed && config.workload.files.cache == workloads::CacheMode::kCold;

  // prep first: its bytes per sample size the other stages' batches.
  say("prep: the real workload" + std::string(file_backed ? ", its files read into the page cache first" : ""));
  if (file_backed) {
    const double resident = WarmFiles(files);
    if (resident < 0.9) {
      out.notes.push_back("only " + ThreeFigures(resident * 100) +
                          "% of the data stayed in the page cache after reading it (it does not fit in memory): "
                          "prep includes reads from storage");
    }
  }
  stages->SetCachePolicy(StageDataset::CachePolicy::kKeepWarm);
  out.trials["prep"] = runner.MeasurePlanned(knobs, {"diagnose-prep", 0, 0});
  const TrialRecord& prep = out.trials["prep"];
  out.sample_bytes =
      prep.status == TrialStatus::kOk && prep.samples_per_s > 0 ? prep.mb_per_s * 1e6 / prep.samples_per_s : kNaN;
  if (!(out.sample_bytes > 0)) out.sample_bytes = static_cast<double>(setup.workload->dataset->max_sample_bytes());
  if (file_backed && setup.workload->dataset->size() > 0) {
    int64_t total = 0;
    for (const std::string& f : files) {
      std::error_code ec;
      const auto size = std::filesystem::file_size(f, ec);
      if (!ec) total += static_cast<int64_t>(size);
    }
    out.file_bytes_per_sample = static_cast<double>(total) / static_cast<double>(setup.workload->dataset->size());
  }
  const size_t batch_bytes =
      static_cast<size_t>(std::llround(out.sample_bytes)) * static_cast<size_t>(std::max<int64_t>(1, knobs.batch_size));

  say("step: batches already on the device, no loader");
  out.trials["step"] = MeasureDeviceLoop(config, device, knobs, nullptr, 0, setup.stop);

  say(std::string("copy: one resident ") + (knobs.pin_memory ? "pinned" : "pageable") + " batch copied each step");
  std::string pin_note;
  out.trials["copy"] = MeasureCopy(config, device, knobs, batch_bytes, setup.stop, &pin_note);
  if (!pin_note.empty()) out.notes.push_back(pin_note);

  say("transport: workers producing free samples of " + DecimalBytes(out.sample_bytes));
  stages->SetReadMode(StageDataset::ReadMode::kTransport, static_cast<int64_t>(std::llround(out.sample_bytes)));
  out.trials["transport"] = runner.MeasurePlanned(knobs, {"diagnose-transport", 0, 0});
  stages->SetReadMode(StageDataset::ReadMode::kReal);

  if (!file_backed) {
    out.not_measured["fetch"] = "a synthetic workload reads no files";
  } else {
    const Eviction probe = EvictFiles(files);
    if (probe.resident_frac() > 0.5) {
      out.not_measured["fetch"] = "the page cache could not be dropped: " + ThreeFigures(probe.resident_frac() * 100) +
                                  "% of the data stayed resident after posix_fadvise(DONTNEED) (tmpfs, or pages "
                                  "mapped by another process)";
    } else {
      say("fetch: the real workload, its files evicted from the page cache before each window");
      stages->SetCachePolicy(StageDataset::CachePolicy::kEvict, files);
      out.trials["fetch"] = runner.MeasurePlanned(knobs, {"diagnose-fetch", 0, 0});
      stages->SetCachePolicy(StageDataset::CachePolicy::kKeepWarm);
      const Eviction last = stages->last_eviction();
      if (last.failures > 0) {
        out.notes.push_back(std::to_string(last.failures) + " files could not be evicted before the fetch trial");
      }
    }
  }

  // When the copy limits, the advice compares pinned with pageable: measure the other.
  if (setup.copy_limits && setup.copy_limits(out)) {
    loader::Knobs other = knobs;
    other.pin_memory = !knobs.pin_memory;
    say(std::string("copy again, ") + (other.pin_memory ? "pinned" : "pageable") + ", to compare");
    std::string ignored;
    out.copy_other_pinning = MeasureCopy(config, device, other, batch_bytes, setup.stop, &ignored);
  }
  return out;
}

// Whether argv runs feedtune_probe.py, the one command that can run stages.
bool RunsProbe(const std::vector<std::string>& argv) {
  return std::any_of(argv.begin(), argv.end(), [](const std::string& a) {
    return a.size() >= 17 && a.compare(a.size() - 17, 17, "feedtune_probe.py") == 0;
  });
}

StageTrials RunCommandStages(const DiagnoseSetup& setup, const loader::Knobs& knobs) {
  const SweepConfig& config = *setup.config;
  StageTrials out;
  out.knobs = knobs;
  out.usable_cpus = setup.usable_cpus;
  out.not_measured["fetch"] = "a command workload's cache is its own: feedtune cannot drop it for the command";
  const std::vector<std::string>& argv = config.workload.command.argv;
  const bool served = config.workload.command.protocol == workloads::CommandProtocol::kServe;
  if (!RunsProbe(argv) && !(served && setup.python_package)) {
    for (const char* s : {"step", "copy", "transport", "prep"}) {
      out.not_measured[s] = served ? "the command is neither feedtune_probe.py nor a script serving with feedtune's "
                                     "Python package (feedtune.serve), which alone run stage trials"
                                   : "the command is not feedtune_probe.py, which alone runs stage trials (--stage); "
                                     "a tune.py calling feedtune.serve runs them with workload.protocol: serve";
    }
    return out;
  }
  if (served && setup.command_measurer != nullptr) {
    // The serving probe (or feedtune.serve in the user's tune.py, whose step
    // stage runs the user's own step) runs each stage as a request: its
    // dataset stays built.
    for (const std::string stage : {"prep", "step", "copy", "transport"}) {
      if (setup.on_stage) setup.on_stage(stage + ": a request with \"stage\": \"" + stage + "\" to the serving probe");
      TrialPlan plan;
      plan.phase = "diagnose-" + stage;
      out.trials[stage] = setup.command_measurer->MeasurePlanned(knobs, plan);
    }
    return out;
  }
  // Each stage is one run per repeat of the probe with --stage and the knobs
  // on its command line (a serving argv has none; later flags win in argparse).
  SweepConfig stage_config = config;
  stage_config.workload.command.protocol = workloads::CommandProtocol::kRun;
  std::vector<std::string> base;
  for (const std::string& a : argv) {
    if (a != "--serve") base.push_back(a);
  }
  const auto flag = [](bool b) { return std::string(b ? "true" : "false"); };
  for (const std::string stage : {"prep", "step", "copy", "transport"}) {
    std::vector<std::string> stage_argv = base;
    for (const std::string& a :
         {std::string("--batch-size"), std::to_string(knobs.batch_size), std::string("--num-workers"),
          std::to_string(knobs.num_workers), std::string("--pin-memory"), flag(knobs.pin_memory),
          std::string("--non-blocking"), flag(knobs.non_blocking), std::string("--prefetch-factor"),
          std::to_string(knobs.prefetch_factor), std::string("--persistent-workers"), flag(knobs.persistent_workers),
          std::string("--seconds"), ShortNumber(config.sweep.measure_seconds), std::string("--warmup-batches"),
          std::to_string(config.sweep.warmup_batches), std::string("--step-us"), ShortNumber(static_cast<double>(config.device.step_us)),
          std::string("--sync-every-steps"), std::to_string(config.device.sync_every_steps), std::string("--stage"),
          std::string(stage)}) {
      stage_argv.push_back(a);
    }
    stage_config.workload.command.argv = stage_argv;
    if (setup.on_stage) setup.on_stage(std::string(stage) + ": feedtune_probe.py --stage " + stage);
    CommandMeasurer measurer(stage_config, setup.stop);
    out.trials[stage] = measurer.MeasurePlanned(knobs, {"diagnose-" + std::string(stage), 0, 0});
  }
  return out;
}

}  // namespace

StageTrials RunStageTrials(const DiagnoseSetup& setup, const loader::Knobs& knobs) {
  if (setup.config->workload.kind == workloads::WorkloadKind::kCommand) return RunCommandStages(setup, knobs);
  return RunNativeStages(setup, knobs);
}

}  // namespace feedtune::tuner
