// The --trace option of `feedtune trial` and `feedtune sweep`: where the trace
// files go, checked before any trial runs, how a captured trial is written
// (loader/trace.h has the recorder and the Chrome trace writer), and the
// sweep's two excerpts as its run keeps them for the HTML report.
#pragma once

#include <fstream>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "loader/options.h"
#include "loader/trace.h"
#include "tuner/measure/trial_runner.h"

namespace feedtune::cli {

// Opens `path` for writing now, so that a missing or read-only folder is an
// error before the trial (the caller exits 2 with `*error`, which names the path).
std::unique_ptr<std::ofstream> OpenTraceFile(const std::string& path, std::string* error);

// Writes `capture` (a trial's trace) to `out` as Chrome trace JSON; false with
// `*error` when the trial recorded nothing or the file could not be written.
bool WriteTraceFile(std::ofstream& out, const std::string& path, const loader::TraceCapture& capture,
                    const std::string& workload, const loader::Knobs& knobs, const std::string& device,
                    std::string* error);

// `sweep --trace DIR`: the two files, DIR/baseline.json and DIR/best.json,
// opened before the sweep starts (so a missing or read-only DIR is an error
// at once, naming the path).
struct SweepTraceFiles {
  std::string dir;
  double seconds = 1.0;
  std::unique_ptr<std::ofstream> baseline, best;
};
bool OpenSweepTraceFiles(const std::string& dir, double seconds, SweepTraceFiles* files, std::string* error);

// After the sweep: measures the baseline and the best setting once more (one
// window each, not stored as trials: their figures are the search's), traced,
// and writes both files. Returns the two excerpts for the report
// (loader::MakeTimelineExcerpt, with the setting's short knobs), null where a
// trace failed; `note` gets a line per file. Throws tuner::Interrupted.
struct SweepTimelines {
  nlohmann::json baseline, best;
};
// The excerpts as the run keeps them (RunFacts::timelines_json, where the
// HTML report finds them: results/timeline_html.h): {"baseline": ..., "best": ...}.
std::string TimelinesJson(const SweepTimelines& timelines);
SweepTimelines TraceBaselineAndBest(SweepTraceFiles& files, tuner::TrialMeasurer& measurer,
                                    const loader::Knobs& baseline, const loader::Knobs& best,
                                    const std::string& workload, const std::string& device,
                                    const std::function<void(const std::string&)>& note);

// The help text of the --trace options, shared by trial and sweep.
inline constexpr const char* kTraceSecondsHelp =
    "with --trace: record the first S seconds of the first measurement window (the file's size cap)";

}  // namespace feedtune::cli
