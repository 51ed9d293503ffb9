#include "tuner/search/verdict_rules.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>

#include "results/units.h"

namespace feedtune::tuner {

using results::TrialStatus;
namespace {

using results::kNaN;
using results::DecimalBytes;
using results::ShortNumber;
using results::ThreeFigures;
using results::StageRate;
using results::TrialRecord;

constexpr double kInf = std::numeric_limits<double>::infinity();

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
    return "fetch: the storage delivers " + ThreeFigures(rate * per_sample / 1e6) + " MB/s (" + ThreeFigures(rate) + " samples/s of " +
           DecimalBytes(per_sample) + ", cold): pack small files into shards, move the data to a faster tier (local NVMe, "
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
    std::string line = "prep: " + ThreeFigures(cpu * 1e3) + " ms of CPU per sample";
    if (in.usable_cpus > 0) {
      line += " on " + ShortNumber(in.usable_cpus) + " usable CPUs: at most " + ThreeFigures(in.usable_cpus / cpu) +
              " samples/s on this box";
    }
    return line + "; make the transforms cheaper, move augmentation to the GPU, or cache preprocessed samples";
  }
  if (v.bottleneck == "transport") {
    return "transport: " + DecimalBytes(in.sample_bytes) + " per sample through shared memory at " + ThreeFigures(rate) +
           " samples/s (" + ThreeFigures(rate * in.sample_bytes / 1e6) +
           " MB/s): send uint8 rather than float32 (a quarter of the bytes), and put more samples in each batch";
  }
  if (v.bottleneck == "copy") {
    const char* kind = in.knobs.pin_memory ? "pinned" : "pageable";
    std::string line = "copy: " + DecimalBytes(in.sample_bytes * static_cast<double>(batch)) + " per batch at " +
                       ThreeFigures(rate * in.sample_bytes / 1e9) + " GB/s (" + kind + ", non_blocking=" +
                       (in.knobs.non_blocking ? "true" : "false") + ")";
    const auto copy = in.trials.find("copy"), step = in.trials.find("step");
    if (in.copy_other_pinning && copy != in.trials.end() && step != in.trials.end() &&
        in.copy_other_pinning->status == TrialStatus::kOk) {
      const double other = Additive(*in.copy_other_pinning, step->second).rate;
      const double pinned = in.knobs.pin_memory ? rate : other, pageable = in.knobs.pin_memory ? other : rate;
      line += "; measured here: pinned " +
              (std::isfinite(pinned) ? ThreeFigures(pinned * in.sample_bytes / 1e9) + " GB/s" : std::string("no cost")) +
              ", pageable " + ThreeFigures(pageable * in.sample_bytes / 1e9) + " GB/s";
    }
    if (!in.knobs.pin_memory) {
      return line + ": set pin_memory=True with non_blocking=True, and prefetch_to_device to overlap the copy with "
                    "the step";
    }
    return line + ": the batch is already pinned; overlap the copy with the step (non_blocking=True, "
                  "prefetch_to_device) or send fewer bytes (uint8 over float32)";
  }
  // step
  const std::string step = "the model step, at " + ThreeFigures(rate) + " samples/s (" + ThreeFigures(batch / rate * 1e3) +
                           " ms per batch)";
  if (std::isfinite(v.input_bound_frac) && v.input_bound_frac >= 0.05) {
    // The step is the slowest stage, yet the loop waits: the stages take turns.
    const std::string share = ThreeFigures(v.input_bound_frac * 100) + "% input-bound";
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
  if (std::isfinite(v.input_bound_frac)) line += " (" + ThreeFigures(v.input_bound_frac * 100) + "% input-bound)";
  return line + "; " + step + " is the limit: a larger batch or a faster model is the lever";
}

}  // namespace

results::Verdict ComputeVerdict(const StageTrials& in) {
  results::Verdict v;
  v.knobs = in.knobs;
  const auto trial = [&](const std::string& stage) -> const TrialRecord* {
    const auto it = in.trials.find(stage);
    return it != in.trials.end() && it->second.status == TrialStatus::kOk && it->second.samples_per_s > 0 ? &it->second
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

bool CopyLimits(const StageTrials& trials) { return ComputeVerdict(trials).bottleneck == "copy"; }

}  // namespace feedtune::tuner
