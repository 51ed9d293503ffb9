// Other processes' CPU beside a sweep (docs/measurement.md, "A busy box"):
// what the trials' windows measured adds up to for the run (the busy mark),
// the words the sweep, the decisions and the reports say it in, and which of
// a host's runs stands for it when one ran on a busy box. Pure functions of
// the records.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "results/records.h"

namespace feedtune::results {

// `facts` (the sample before the baseline, the thresholds) with the run's
// figures filled from `trials`: the median of the background over the windows
// in the ok trials' figures (re-measured windows left out), their count, the
// windows re-measured; the neighbours' demand (BackgroundFacts::demand_cpu),
// from the sample and the windows where the box had CPU left idle (the
// window's tree plus the others under `usable_cpus` less a tenth of a CPU:
// only there did the others get what they wanted; in a saturated window they
// got their share); and busy when the demand is above facts.warn_cpu. NaN
// demand when neither was measured: not busy, and QuietText says why. A run
// whose windows measured nothing (a command workload) is not busy.
BackgroundFacts SummarizeBackground(BackgroundFacts facts, const std::vector<TrialRecord>& trials,
                                    double usable_cpus);

// Whether the run was marked busy (false for runs before schema v16).
bool IsBusy(const RunRecord& run);

// "yes (pid 4242) 1.00 CPU, cc1plus (3 processes) 0.85 CPU"; "none" when empty.
std::string TopConsumersText(const std::vector<ProcessCpu>& top);

// The warning before the baseline when facts.start_cpu is above facts.warn_cpu,
// naming the top consumers; empty otherwise.
std::string StartWarning(const BackgroundFacts& facts);

// "other processes wanted 1.01 CPU where the box had CPU idle (median of the
// sample before the baseline and 12 windows), above sweep.background.warn_cpu
// 0.25; over all 57 windows they got 0.26": why a run is busy; empty when it
// is not. A run before schema v18 says its median of windows, what it rested on.
// The figure the busy mark rests on: the demand, or for a run before schema
// v18 the median of its windows (NaN when neither was measured).
double BusyFigure(const BackgroundFacts& facts);
std::string BusyText(const BackgroundFacts& facts);

// A run that is not busy: "other processes took 0.12 CPU (median of 57
// windows)", saying when their demand was not measured and the windows
// re-measured; empty for a busy run or one without windows.
std::string QuietText(const BackgroundFacts& facts);

// What a trial's decision adds (starting "; "), empty when nothing is to say:
// the windows re-measured and what disturbed them, or, in a trial whose
// windows other processes shared above facts.warn_cpu, how much they took.
std::string TrialBackgroundNote(const TrialRecord& trial, const BackgroundFacts& facts);

// The report's "background" object (docs/json-report.md); null when the run
// has no background facts.
nlohmann::ordered_json BackgroundJson(const std::optional<BackgroundFacts>& facts);

}  // namespace feedtune::results
