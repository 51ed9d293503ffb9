// Verdict: where a setting's time goes, as the differential stage trials of
// tuner/measure/stage_runner.h measured it (docs/verdict.md), as plain data, and its words
// and pictures for the renderers (summary, report table, JSON, HTML).
//
// Stages, in pipeline order: step (the model step alone), copy (host-to-device
// of a resident batch), transport (workers producing samples of the real size
// at no cost), prep (the real workload, files warm), fetch (file-backed: the
// real workload with a cold page cache). A stage's samples_per_s is what that
// stage alone sustains, derived from its trial and the one before it; NaN when
// it was not measured or costs nothing measurable (`limiting` false).
//
// Pure data and pure functions, callable from any thread.
#pragma once

#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "loader/options.h"

namespace feedtune::results {

inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// The TensorBoard input-pipeline analyzer's bands (docs/verdict.md): the share of
// the step time spent waiting for input. Shared by the sweep's verdict and a
// job's observed runs (feedtune.watch, `check`), so both say the same words.
inline constexpr double kInputBoundModerate = 0.05;
inline constexpr double kInputBoundHigh = 0.20;
// "not input-bound" (< 5%), "moderately input-bound" (5-20%), "highly input-bound" (>= 20%); "" when unknown.
std::string InputBoundBand(double input_bound_frac);

struct StageRate {
  std::string stage;       // step | copy | transport | prep | fetch
  bool measured = false;   // false: not measured here; `note` says why
  // The stage trial's own figures (median samples/s and its 95% interval).
  double trial_samples_per_s = kNaN;
  double trial_ci_low = kNaN;
  double trial_ci_high = kNaN;
  // What this stage alone sustains, with its interval; NaN when it added no
  // measurable time to the trial before it (then it limits nothing).
  double samples_per_s = kNaN;
  double ci_low = kNaN;
  double ci_high = kNaN;
  std::string note;        // how it was measured or why not
};

struct Verdict {
  loader::Knobs knobs;              // the setting diagnosed
  std::vector<StageRate> stages;    // in pipeline order
  std::string bottleneck;           // the stage with the lowest rate
  std::string runner_up;            // the next lowest; "" when no other stage has a rate
  double headroom = kNaN;           // runner_up rate / bottleneck rate: the most fixing the bottleneck gains
  // (wait for the batch + copy) / step time of the real workload: 1 - its rate / the step's rate.
  double input_bound_frac = kNaN;
  std::string advice;               // one line: what to do about the bottleneck, with the number behind it
  std::vector<std::string> notes;   // what could not be measured, caches that could not be dropped, ...

  // "not input-bound" (< 5%), "moderately input-bound" (5-20%), "highly input-bound" (>= 20%); "" when unknown.
  std::string Band() const;
  const StageRate* Find(const std::string& stage) const;
};

// The stage names in pipeline order.
const std::vector<std::string>& StageNames();

// The JSON object `diagnose --format json` prints and the store keeps:
// {"config": {...}, "bottleneck", "runner_up", "headroom", "input_bound_frac",
//  "band", "stages": [{"stage", "measured", "samples_per_s", "ci": [lo, hi],
//  "trial_samples_per_s", "trial_ci": [lo, hi], "note"}], "advice", "notes"}.
// NaN is null. VerdictJson is the value (for the report and the sweep's done
// event); VerdictToJson its text, which the store keeps.
nlohmann::json VerdictJson(const Verdict& verdict);
std::string VerdictToJson(const Verdict& verdict);
// Reads VerdictToJson's text back; nullopt when it is not such an object.
std::optional<Verdict> VerdictFromJson(const std::string& json);

// Lines for people: a row per stage with its rate and interval, then the
// bottleneck with the headroom, the input-bound share and the advice.
// Every line starts with `indent`; ends with a newline.
std::string VerdictText(const Verdict& verdict, const std::string& indent = "");

// A self-contained HTML section (<section class="verdict">, inline SVG and
// style, no script): the stage rates as bars, the bottleneck marked, then the
// verdict's words.
std::string VerdictHtml(const Verdict& verdict);

}  // namespace feedtune::results
