// The estimate's arithmetic; its model is in the header.
#include "tuner/search/worker_estimate.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "results/units.h"

namespace feedtune::tuner {

using results::Format;  // results/units.h

WorkerEstimate EstimateWorkers(const results::TrialRecord& baseline, const EstimateLimits& limits) {
  WorkerEstimate estimate;
  const double rate0 = baseline.samples_per_s;
  const double idle = baseline.gpu_idle_frac;
  if (baseline.status != results::TrialStatus::kOk || !(rate0 > 0) || !(idle > 0)) return estimate;
  const double per_sample = 1.0 / rate0;
  const double wait = std::min(1.0, idle) * per_sample;
  const double step = per_sample - wait;
  const double cpu = baseline.cpu_util > 0 ? baseline.cpu_util * per_sample : 0.0;
  constexpr double kNone = std::numeric_limits<double>::infinity();
  const double step_rate = step > 0 ? 1.0 / step : kNone;
  const double cpu_rate = cpu > 0 && limits.usable_cpus > 0 ? limits.usable_cpus / cpu : kNone;
  estimate.rate = std::min(step_rate, cpu_rate);
  if (!std::isfinite(estimate.rate)) {
    // Neither the step nor the CPUs bound it: a count of workers cannot be
    // derived (the cap would be the answer), so the search doubles.
    estimate.rate = 0;
    return estimate;
  }
  const double in_flight = estimate.rate * wait;
  int workers = static_cast<int>(std::min(1e6, std::ceil(in_flight - 1e-9)));
  estimate.how = Format("the baseline waited %.2f ms per sample for its data and stepped %.2f ms", wait * 1e3,
                        step * 1e3);
  const std::string step_text = std::isfinite(step_rate) ? Format("the step's own pace, %.0f samples/s", step_rate)
                                                         : std::string("no step to wait for");
  const std::string cpu_text =
      std::isfinite(cpu_rate)
          ? Format("%g CPUs at %.2f ms of CPU per sample, %.0f samples/s", limits.usable_cpus, cpu * 1e3, cpu_rate)
          : std::string(cpu > 0 ? "the CPU count unknown" : "no CPU time measured");
  estimate.how += Format("; feeding %.0f samples/s (the lower of %s and %s) keeps %.0f x %.2f ms = %.1f samples in "
                         "flight",
                         estimate.rate, step_text.c_str(), cpu_text.c_str(), estimate.rate, wait * 1e3, in_flight);
  // The caps, each said when it binds.
  const auto cap = [&](int most, const std::string& why) {
    if (most > 0 && workers > most) {
      workers = most;
      estimate.how += "; capped at " + std::to_string(most) + ": " + why;
    }
  };
  cap(limits.max_workers, "max_workers");
  if (limits.batches > 0 && limits.batches < std::numeric_limits<int>::max()) {
    cap(static_cast<int>(limits.batches), "one round per epoch of " + std::to_string(limits.batches) + " batches");
  }
  cap(limits.fitting_workers, "the most the memory, /dev/shm and open-file budgets let run");
  estimate.workers = std::max(1, workers);
  return estimate;
}

}  // namespace feedtune::tuner
