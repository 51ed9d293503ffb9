#include "tuner/search/replay.h"

#include <cmath>
#include <cstdio>

namespace feedtune::tuner {
namespace {

std::string Describe(const std::string& phase, const loader::Knobs& k) {
  char buf[200];
  std::snprintf(buf, sizeof buf, "%s with nw=%d pin=%d nb=%d pf=%d pers=%d bs=%d bind=%s threads=%d fc=%d",
                phase.c_str(), k.num_workers, k.pin_memory ? 1 : 0, k.non_blocking ? 1 : 0, k.prefetch_factor,
                k.persistent_workers ? 1 : 0, k.batch_size, loader::CpuBindingName(k.cpu_binding), k.worker_threads,
                k.fetch_concurrency);
  return buf;
}

}  // namespace

results::TrialRecord ReplayMeasurer::MeasurePlanned(const loader::Knobs& knobs, const TrialPlan& plan) {
  if (next_ >= stored_.size()) {
    last_replayed_ = false;
    return inner_.MeasurePlanned(knobs, plan);
  }
  const results::TrialRecord& t = stored_[next_];
  if (t.phase != plan.phase || !(t.knobs == knobs)) {
    throw ReplayMismatch("stored trial " + std::to_string(next_ + 1) + " (id " + std::to_string(t.id) + ") is " +
                         Describe(t.phase, t.knobs) + ", but the sequence now asks for " +
                         Describe(plan.phase, knobs) +
                         "; the run cannot be resumed (was it made by another version of feedtune?)");
  }
  ++next_;
  last_replayed_ = true;
  if (std::isfinite(t.elapsed_s)) {
    replayed_elapsed_s_ = t.elapsed_s;
    replayed_at_ = std::chrono::steady_clock::now();
  }
  return t;
}

}  // namespace feedtune::tuner
