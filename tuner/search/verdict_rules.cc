#include "tuner/diagnose.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>

#include "tuner/command_measurer.h"
#include "tuner/stage_dataset.h"
#include "tuner/stats.h"

namespace feedtune::tuner {
namespace {

using results::kNaN;
using results::StageRate;
using results::TrialRecord;
using Clock = std::chrono::steady_clock;

constexpr double kInf = std::numeric_limits<double>::infinity();

// Three significant figures for rates and sizes in advice lines.
std::string Sig(double value) {
  if (!std::isfinite(value)) return "?";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", value >= 100 ? 0 : value >= 10 ? 1 : 2, value);
  return buf;
}

std::string General(double value) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%g", value);
  return buf;
}

std::string Bytes(double bytes) {
  if (bytes >= 1e6) return Sig(bytes / 1e6) + " MB";
  if (bytes >= 1e3) return Sig(bytes / 1e3) + " KB";
  return Sig(bytes) + " bytes";
}

// The time per sample a stage adds, and its rate (1 / that time; +inf when it
// adds none), at the trial's median and at both ends of its interval.
struct Derived {
  double rate = kInf, lo = kInf, hi = kInf;
};

double RateFromTime(double seconds) { return seconds > 0 ? 1.0 / seconds : kInf; }

// Trial rates: the stage's time is the time difference per sample.
Derived Additive(const TrialRecord& trial, const TrialRecord& before) {
  const auto at = [&](double r) {
    return r > 0 ? RateFromTime(1.0 / r - 1.0 / before.samples_per_s) : kNaN;
  };
  return {at(trial.samples_per_s), at(trial.ci_low), at(trial.ci_high)};
}

// Worker seconds per sample: the workers' busy time over the samples.
double WorkerSeconds(const TrialRecord& t) {
  return t.worker_busy_frac * t.knobs.num_workers / t.samples_per_s;
}

// Worker time: the stage's time is the difference in worker seconds per
// sample, shared by the workers; the interval is the trial's, relatively.
Derived WorkerTime(const TrialRecord& trial, const TrialRecord* before) {
  const double seconds = (WorkerSeconds(trial) - (before ? WorkerSeconds(*before) : 0.0)) / trial.knobs.num_workers;
  const double rate = RateFromTime(seconds);
  if (!std::isfinite(rate)) return {};
  return {rate, rate * trial.ci_low / trial.samples_per_s, rate * trial.ci_high / trial.samples_per_s};
}

bool HasWorkerTime(const TrialRecord& t) {
  return t.knobs.num_workers > 0 && std::isfinite(t.worker_busy_frac) && t.samples_per_s > 0;
}

StageRate FromTrial(const std::string& stage, const TrialRecord& t) {
  StageRate s;
  s.stage = stage;
  s.measured = true;
  s.trial_samples_per_s = t.samples_per_s;
  s.trial_ci_low = t.ci_low;
  s.trial_ci_high = t.ci_high;
  return s;
}

void SetRate(StageRate& s, const Derived& d) {
  const auto finite = [](double v) { return std::isfinite(v) ? v : kNaN; };
  s.samples_per_s = finite(d.rate);
  if (!std::isfinite(d.rate)) return;
  s.ci_low = finite(std::min(d.lo, d.hi));
  s.ci_high = finite(std::max(d.lo, d.hi));
  if (!std::isfinite(s.ci_low)) s.ci_low = s.samples_per_s;
}

std::string Advice(const results::Verdict& v, const StageTrials& in) {
  const StageRate* b = v.Find(v.bottleneck);
  if (b == nullptr) return "";
  const double rate = b->samples_per_s;
  const int64_t batch = in.knobs.batch_size;
  if (v.bottleneck == "fetch") {
    const double per_sample = std::isfinite(in.file_bytes_per_sample) ? in.file_bytes_per_sample : in.sample_bytes;
    return "fetch: the storage delivers " + Sig(rate * per_sample / 1e6) + " MB/s (" + Sig(rate) + " samples/s of " +
           Bytes(per_sample) + ", cold): pack small files into shards, move the data to a faster tier (local NVMe, "
           "or RAM when it fits), and see what `feedtune inspect PATH` says about its layout";
  }
  if (v.bottleneck == "prep") {
    // CPU seconds per sample of the whole process tree, beyond what moving
    // free samples costs.
    double cpu = kNaN;
    const auto p = in.trials.find("prep"), t = in.trials.find("transport");
    if (p != in.trials.end() && p->second.samples_per_s > 0) {
      cpu = p->second.cpu_util / p->second.samples_per_s;
      if (t != in.trials.end() && t->second.samples_per_s > 0) cpu -= t->second.cpu_util / t->second.samples_per_s;
    }
    if (!(cpu > 0)) cpu = 1.0 / rate;
    std::string line = "prep: " + Sig(cpu * 1e3) + " ms of CPU per sample";
    if (in.usable_cpus > 0) {
      line += " on " + General(in.usable_cpus) + " usable CPUs: at most " + Sig(in.usable_cpus / cpu) +
              " samples/s on this box";
    }
    return line + "; make the transforms cheaper, move augmentation to the GPU, or cache preprocessed samples";
  }
  if (v.bottleneck == "transport") {
    return "transport: " + Bytes(in.sample_bytes) + " per sample through shared memory at " + Sig(rate) +
           " samples/s (" + Sig(rate * in.sample_bytes / 1e6) +
           " MB/s): send uint8 rather than float32 (a quarter of the bytes), and put more samples in each batch";
  }
  if (v.bottleneck == "copy") {
    const char* kind = in.knobs.pin_memory ? "pinned" : "pageable";
    std::string line = "copy: " + Bytes(in.sample_bytes * static_cast<double>(batch)) + " per batch at " +
                       Sig(rate * in.sample_bytes / 1e9) + " GB/s (" + kind + ", non_blocking=" +
                       (in.knobs.non_blocking ? "true" : "false") + ")";
    const auto copy = in.trials.find("copy"), step = in.trials.find("step");
    if (in.copy_other_pinning && copy != in.trials.end() && step != in.trials.end() &&
        in.copy_other_pinning->status == "ok") {
      const double other = Additive(*in.copy_other_pinning, step->second).rate;
      const double pinned = in.knobs.pin_memory ? rate : other, pageable = in.knobs.pin_memory ? other : rate;
      line += "; measured here: pinned " +
              (std::isfinite(pinned) ? Sig(pinned * in.sample_bytes / 1e9) + " GB/s" : std::string("no cost")) +
              ", pageable " + Sig(pageable * in.sample_bytes / 1e9) + " GB/s";
    }
    if (!in.knobs.pin_memory) {
      return line + ": set pin_memory=True with non_blocking=True, and prefetch_to_device to overlap the copy with "
                    "the step";
    }
    return line + ": the batch is already pinned; overlap the copy with the step (non_blocking=True, "
                  "prefetch_to_device) or send fewer bytes (uint8 over float32)";
  }
  // step
  const std::string step = "the model step, at " + Sig(rate) + " samples/s (" + Sig(batch / rate * 1e3) +
                           " ms per batch)";
  if (std::isfinite(v.input_bound_frac) && v.input_bound_frac >= 0.05) {
    // The step is the slowest stage, yet the loop waits: the stages take turns.
    const std::string share = Sig(v.input_bound_frac * 100) + "% input-bound";
    if (in.knobs.num_workers == 0) {
      return "step: " + step + " is the slowest stage, but without workers the stages take turns (" + share +
             "): load in workers (num_workers > 0) so they overlap the step; then a larger batch or a faster model "
             "is the lever";
    }
    return "step: " + step + " is the slowest stage, but the loop is still " + share +
           ": let the loader run further ahead (prefetch_factor, prefetch_to_device, sync less often); then a "
           "larger batch or a faster model is the lever";
  }
  std::string line = "step: the loader keeps up";
  if (std::isfinite(v.input_bound_frac)) line += " (" + Sig(v.input_bound_frac * 100) + "% input-bound)";
  return line + "; " + step + " is the limit: a larger batch or a faster model is the lever";
}

}  // namespace

results::Verdict ComputeVerdict(const StageTrials& in) {
  results::Verdict v;
  v.knobs = in.knobs;
  const auto trial = [&](const std::string& stage) -> const TrialRecord* {
    const auto it = in.trials.find(stage);
    return it != in.trials.end() && it->second.status == "ok" && it->second.samples_per_s > 0 ? &it->second
                                                                                              : nullptr;
  };
  const TrialRecord* previous = nullptr;  // the last measured trial before this stage
  const TrialRecord* worker_previous = nullptr;  // the last measured worker-side trial
  for (const std::string& stage : results::StageNames()) {
    const TrialRecord* t = trial(stage);
    if (t == nullptr) {
      StageRate s;
      s.stage = stage;
      const auto why = in.not_measured.find(stage);
      const auto failed = in.trials.find(stage);
      s.note = why != in.not_measured.end()           ? why->second
               : failed != in.trials.end() && failed->second.error ? "its trial failed: " + *failed->second.error
                                                                   : "not measured";
      v.notes.push_back(stage + " not measured: " + s.note);
      v.stages.push_back(s);
      continue;
    }
    StageRate s = FromTrial(stage, *t);
    if (stage == "step") {
      SetRate(s, {t->samples_per_s, t->ci_low, t->ci_high});
      s.note = "the model step alone";
    } else if (stage == "copy") {
      SetRate(s, Additive(*t, *previous));
      s.note = "time per sample over the step trial's";
    } else {
      const bool workers = HasWorkerTime(*t) && (worker_previous == nullptr || HasWorkerTime(*worker_previous));
      Derived d = workers ? WorkerTime(*t, worker_previous) : Additive(*t, *previous);
      if (stage == "transport" && workers) {
        // The pin stage and the main loop's slot handling are not worker
        // time: the trial-rate difference catches them; the larger time counts.
        const Derived main = Additive(*t, *previous);
        if (main.rate < d.rate) d = main;
      }
      SetRate(s, d);
      s.note = workers ? "worker time per sample over the workers" : "time per sample over the previous trial's";
      worker_previous = t;
    }
    if (!std::isfinite(s.samples_per_s)) s.note = "no measurable cost: its trial ran as fast as the one before";
    previous = t;
    v.stages.push_back(s);
  }

  // The bottleneck is the lowest rate; the runner-up is the next one.
  std::vector<const StageRate*> ranked;
  for (const StageRate& s : v.stages) {
    if (s.measured && std::isfinite(s.samples_per_s)) ranked.push_back(&s);
  }
  std::stable_sort(ranked.begin(), ranked.end(),
                   [](const StageRate* a, const StageRate* b) { return a->samples_per_s < b->samples_per_s; });
  if (!ranked.empty()) v.bottleneck = ranked[0]->stage;
  if (ranked.size() > 1) {
    v.runner_up = ranked[1]->stage;
    v.headroom = ranked[1]->samples_per_s / ranked[0]->samples_per_s;
  }

  // Input-bound share: the real loop's time per sample beyond the step's,
  // over the real loop's: (wait + copy) / step time.
  const TrialRecord* step = trial("step");
  const TrialRecord* real = in.cold_configured && trial("fetch") ? trial("fetch") : trial("prep");
  if (step != nullptr && real != nullptr) {
    v.input_bound_frac = std::clamp(1.0 - real->samples_per_s / step->samples_per_s, 0.0, 1.0);
  }
  v.advice = Advice(v, in);
  for (const std::string& note : in.notes) v.notes.push_back(note);
  return v;
}

namespace {

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
  trial.status = "ok";
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
  const std::vector<std::string> files = file_backed ? DataFiles(config.workload.files.path) : std::vector<std::string>{};
  out.cold_configured = file_backed && config.workload.files.cache == workloads::CacheMode::kCold;

  // prep first: its bytes per sample size the other stages' batches.
  say("prep: the real workload" + std::string(file_backed ? ", its files read into the page cache first" : ""));
  if (file_backed) {
    const double resident = WarmFiles(files);
    if (resident < 0.9) {
      out.notes.push_back("only " + Sig(resident * 100) +
                          "% of the data stayed in the page cache after reading it (it does not fit in memory): "
                          "prep includes reads from storage");
    }
  }
  stages->SetCachePolicy(StageDataset::CachePolicy::kKeepWarm);
  out.trials["prep"] = runner.MeasurePlanned(knobs, {"diagnose-prep", 0, 0});
  const TrialRecord& prep = out.trials["prep"];
  out.sample_bytes = prep.status == "ok" && prep.samples_per_s > 0 ? prep.mb_per_s * 1e6 / prep.samples_per_s : kNaN;
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

  say("transport: workers producing free samples of " + Bytes(out.sample_bytes));
  stages->SetReadMode(StageDataset::ReadMode::kTransport, static_cast<int64_t>(std::llround(out.sample_bytes)));
  out.trials["transport"] = runner.MeasurePlanned(knobs, {"diagnose-transport", 0, 0});
  stages->SetReadMode(StageDataset::ReadMode::kReal);

  if (!file_backed) {
    out.not_measured["fetch"] = "a synthetic workload reads no files";
  } else {
    const Eviction probe = EvictFiles(files);
    if (probe.resident_frac() > 0.5) {
      out.not_measured["fetch"] = "the page cache could not be dropped: " + Sig(probe.resident_frac() * 100) +
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
  if (ComputeVerdict(out).bottleneck == "copy") {
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
  if (!RunsProbe(argv)) {
    for (const char* s : {"step", "copy", "transport", "prep"}) {
      out.not_measured[s] = "the command is not feedtune_probe.py, which alone runs stage trials (--stage)";
    }
    return out;
  }
  if (config.workload.command.protocol == workloads::CommandProtocol::kServe && setup.command_measurer != nullptr) {
    // The serving probe runs each stage as a request: its dataset stays built.
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
          std::string("--seconds"), General(config.sweep.measure_seconds), std::string("--warmup-batches"),
          std::to_string(config.sweep.warmup_batches), std::string("--step-us"), General(static_cast<double>(config.device.step_us)),
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
