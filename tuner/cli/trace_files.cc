#include "tuner/cli/trace_files.h"

#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

#include "tuner/cli/progress.h"

namespace feedtune::cli {

std::unique_ptr<std::ofstream> OpenTraceFile(const std::string& path, std::string* error) {
  auto out = std::make_unique<std::ofstream>(path, std::ios::out | std::ios::trunc | std::ios::binary);
  if (!*out) {
    *error = "--trace " + path + ": cannot write the trace file (" + std::strerror(errno) +
             "); its folder must exist and be writable";
    return nullptr;
  }
  return out;
}

bool WriteTraceFile(std::ofstream& out, const std::string& path, const loader::TraceCapture& capture,
                    const std::string& workload, const loader::Knobs& knobs, const std::string& device,
                    std::string* error) {
  if (!capture.recorded) {
    *error = "--trace " + path + ": the trial recorded no trace (it failed before its first window ended)";
    return false;
  }
  loader::TraceInfo info;
  info.title = workload + ": " + tuner::KnobsShort(knobs);
  info.seconds = capture.seconds;
  info.num_workers = knobs.num_workers;
  info.device = device;
  info.dropped = capture.dropped;
  info.max_events = capture.max_events;
  info.counters = capture.counters;
  loader::WriteChromeTrace(out, capture.events, info);
  out.flush();
  if (!out) {
    *error = "--trace " + path + ": writing the trace failed (" + std::strerror(errno) + ")";
    return false;
  }
  return true;
}

bool OpenSweepTraceFiles(const std::string& dir, double seconds, SweepTraceFiles* files, std::string* error) {
  if (!(seconds > 0)) {
    *error = "--trace-seconds must be > 0";
    return false;
  }
  files->dir = dir;
  files->seconds = seconds;
  files->baseline = OpenTraceFile(dir + "/baseline.json", error);
  if (files->baseline) files->best = OpenTraceFile(dir + "/best.json", error);
  if (!files->best) {
    *error += " (sweep --trace takes an existing folder)";
    return false;
  }
  return true;
}

namespace {

// An excerpt as the run keeps it: {"knobs", "ms", "rows": [{"name", "spans":
// [[start_us, duration_us], ...]}]}; null when the capture has no step.
nlohmann::json ExcerptJson(const loader::TimelineExcerpt& excerpt, const std::string& knobs) {
  if (excerpt.rows.empty()) return nullptr;
  nlohmann::json rows = nlohmann::json::array();
  for (const loader::TimelineExcerpt::Row& row : excerpt.rows) {
    rows.push_back({{"name", row.name}, {"spans", row.spans}});
  }
  return {{"knobs", knobs}, {"ms", excerpt.ms}, {"rows", rows}};
}

}  // namespace

SweepTimelines TraceBaselineAndBest(SweepTraceFiles& files, tuner::TrialMeasurer& measurer,
                                    const loader::Knobs& baseline, const loader::Knobs& best,
                                    const std::string& workload, const std::string& device,
                                    const std::function<void(const std::string&)>& note) {
  SweepTimelines timelines;
  const auto trace_one = [&](const loader::Knobs& knobs, const std::string& which, std::ofstream& out) {
    const std::string path = files.dir + "/" + which + ".json";
    loader::TraceCapture capture;
    capture.seconds = files.seconds;
    tuner::TrialPlan plan;
    plan.phase = "trace";
    plan.repeats = 1;
    plan.trace = &capture;
    const results::TrialRecord trial = measurer.MeasurePlanned(knobs, plan);
    std::string error;
    if (trial.status != results::TrialStatus::kOk) {
      note("warning: --trace " + path + ": the traced " + which + " trial failed: " + trial.error.value_or("?"));
      return nlohmann::json();
    }
    if (!WriteTraceFile(out, path, capture, workload, knobs, device, &error)) {
      note("warning: " + error);
      return nlohmann::json();
    }
    note("trace of the " + which + " (" + tuner::KnobsShort(knobs) + "): " + path + ", " +
         std::to_string(capture.events.size()) + " spans; open it in https://ui.perfetto.dev");
    return ExcerptJson(loader::MakeTimelineExcerpt(capture.events, knobs.num_workers), tuner::KnobsShort(knobs));
  };
  timelines.baseline = trace_one(baseline, "baseline", *files.baseline);
  timelines.best = trace_one(best, "best", *files.best);
  return timelines;
}

std::string TimelinesJson(const SweepTimelines& timelines) {
  nlohmann::json kept = nlohmann::json::object();
  if (!timelines.baseline.is_null()) kept["baseline"] = timelines.baseline;
  if (!timelines.best.is_null()) kept["best"] = timelines.best;
  return kept.dump();
}

}  // namespace feedtune::cli
