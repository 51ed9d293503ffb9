// Progress of a sweep, for people and for scripts.
//
// Progress writes to the FILE* it is given (stderr, so stdout carries only the
// summary or the JSON events that scripts read), in one of three modes:
//   kBar    on a terminal: a bar line redrawn in place ("\r") while a trial
//           runs, and a finished line per trial above it
//   kLines  not a terminal (a log, CI): one plain line per finished trial
//   kQuiet  nothing
// Each finished line gives the phase, the knobs, samples/s with its interval,
// GPU idle, the decision, the time elapsed and an estimate of the time left
// (the mean time of the trials measured so far x the trials the search still
// expects).
//
// The JSON events (`sweep --json`) are one object per line:
//   {"event":"start", ...}  {"event":"trial", ...}  {"event":"done", ...}
//   {"event":"interrupted", ...}
// built by the *EventJson functions and DoneEvent below. One thread uses a Progress.
#pragma once

#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "results/records.h"
#include "tuner/search/search.h"

namespace feedtune::tuner {

using loader::KnobsShort;  // loader/options.h

enum class ProgressMode { kBar, kLines, kQuiet };

// kQuiet when quiet, kBar when `out` is a terminal, else kLines.
ProgressMode DetectProgressMode(std::FILE* out, bool quiet);

class Progress {
 public:
  Progress(std::FILE* out, ProgressMode mode)
      : out_(out), mode_(mode), start_(std::chrono::steady_clock::now()), trial_start_(start_) {}

  void Note(const std::string& line);
  // A trial is about to be measured.
  void Start(const TrialPlan& plan, const loader::Knobs& knobs, const SearchProgress& progress);
  // A trial ended (`replayed`: taken from the store by --resume, not measured).
  void Trial(const results::TrialRecord& trial, const SearchProgress& progress, bool replayed);
  // Clears the bar, if one is drawn.
  void Clear();

  double elapsed_s() const;
  // Seconds left by the estimate; nullopt before the first measured trial.
  std::optional<double> left_s(const SearchProgress& progress) const;

 private:
  std::FILE* const out_;
  const ProgressMode mode_;
  const std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point trial_start_;
  double measured_s_ = 0;  // time spent in measured (not replayed) trials
  int measured_ = 0;
  bool bar_drawn_ = false;
};

// "1:05", "12:30", "1:02:03".
std::string ClockText(double seconds);

// The JSON events, each one line without the newline.
std::string StartEventJson(int64_t run_id, const std::string& workload, const std::string& backend,
                           int max_workers, bool resumed, int stored_trials);
std::string TrialEventJson(const results::TrialRecord& trial, const SearchProgress& progress, double elapsed_s,
                           std::optional<double> left_s, bool replayed);
// The done event as a value: the sweep adds the background and the verdict
// before it prints it (the last line).
nlohmann::json DoneEvent(const SearchOutcome& outcome, const results::RunRecord& run);
std::string InterruptedEventJson(int64_t run_id, int trials_kept);

// The summary printed after a sweep: knee (and Kneedle), best and fastest, the
// speedup with its interval, the largest safe num_workers, each phase's decision.
std::string SummaryText(const SearchOutcome& outcome, const results::RunRecord& run, const std::string& db_path);

}  // namespace feedtune::tuner
