#include "tuner/measure/kill_cause.h"

#include <utility>

namespace feedtune::tuner {

OomWatch::OomWatch(std::string root) : root_(std::move(root)), before_(results::ReadOomKills(root_)) {}

std::string OomWatch::Explain() const {
  const std::optional<results::OomKills> after = results::ReadOomKills(root_);
  if (!before_ || !after) {
    return "whether the kernel's OOM killer did it is unknown: this process's cgroup has no readable "
           "memory.events (or memory.oom_control) with an oom_kill count";
  }
  const std::string counts = std::to_string(before_->count) + " -> " + std::to_string(after->count);
  if (after->count > before_->count) {
    return "the kernel's OOM killer did it (oom_kill " + counts + " in " + after->file +
           "): the box or its cgroup ran out of memory; lower num_workers, prefetch_factor or batch_size, "
           "and see the memory budget (sweep.budget.memory_fraction)";
  }
  return "not the kernel's OOM killer (oom_kill " + counts + " in " + after->file +
         "): another process sent the SIGKILL";
}

bool NamesSigkill(const std::string& error) { return error.find("SIGKILL") != std::string::npos; }

std::string WithKillCause(const std::string& error, const OomWatch& watch) {
  // A rank's error already carries its own process's answer.
  if (!NamesSigkill(error) || error.find("OOM killer") != std::string::npos) return error;
  return error + "; " + watch.Explain();
}

results::TrialRecord KillNamingMeasurer::MeasurePlanned(const loader::Knobs& knobs, const TrialPlan& plan) {
  const OomWatch watch;
  results::TrialRecord trial = inner_->MeasurePlanned(knobs, plan);
  if (trial.error) trial.error = WithKillCause(*trial.error, watch);
  return trial;
}

}  // namespace feedtune::tuner
