#include "tuner/search/formula_trials.h"

#include <set>
#include <string>

#include "results/node_report.h"

namespace feedtune::tuner::node {

std::vector<size_t> MeasureFormulaSettings(SearchOutcome& outcome, int usable_cpus, int max_workers,
                                           TrialMeasurer& measurer, const SearchEvents& events) {
  std::vector<size_t> added;
  if (!outcome.best) return added;
  const results::TrialRecord& best_trial = outcome.trials[*outcome.best];
  const std::vector<results::FormulaRow> rows = results::NodeFormulas(outcome.trials, usable_cpus, &best_trial);
  // Worker counts to measure, each once even when two formulas agree, in the
  // rows' order; with the formulas that pick it, for the record's decision.
  std::vector<std::pair<int, std::string>> picks;
  std::set<int> seen;
  for (const results::FormulaRow& row : rows) {
    // Measured at the best's other settings already, or beyond what the sweep may run.
    if (row.at_best_settings || row.workers > max_workers) continue;
    if (seen.insert(row.workers).second) {
      picks.push_back({row.workers, row.name + ": " + row.rule});
    } else {
      for (auto& [workers, why] : picks) {
        if (workers == row.workers) why += ", " + row.name + ": " + row.rule;
      }
    }
  }
  const loader::Knobs best = best_trial.knobs;  // a copy: the pushes below move the trials
  for (size_t i = 0; i < picks.size(); ++i) {
    const loader::Knobs knobs = results::FormulaKnobs(best, picks[i].first);
    TrialPlan plan;
    plan.phase = "formulas";
    const int done = static_cast<int>(outcome.trials.size());
    const int left = static_cast<int>(picks.size() - i);
    if (events.on_start) events.on_start(plan, knobs, {done, left});
    results::TrialRecord trial = measurer.MeasurePlanned(knobs, plan);
    trial.phase = plan.phase;
    trial.knobs = knobs;
    if (trial.status == results::TrialStatus::kFailed) {
      trial.decision = "failed: " + trial.error.value_or("unknown error");
    } else if (trial.status == results::TrialStatus::kSkipped) {
      trial.decision = "skipped: " + trial.error.value_or("over a budget");
    } else {
      trial.decision = "measured for the formulas row (" + picks[i].second + "); not a search step";
    }
    outcome.trials.push_back(std::move(trial));
    added.push_back(outcome.trials.size() - 1);
    if (events.on_trial) events.on_trial(outcome.trials.back(), {done + 1, left - 1});
  }
  return added;
}

}  // namespace feedtune::tuner::node
