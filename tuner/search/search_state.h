// The search's shared state: the inputs, the records, the current setting
// and where the sequence is, and the few ways a phase changes them. A phase
// (tuner/search/phases.h) is a free function taking a SearchState: it
// measures through Measure, says why through Decide (DecideFailed for a
// trial that did not run) and AddPhase, and moves the current setting with
// Keep; what else it found it returns, and the sequence
// (tuner/search/sequence.cc, which runs the phases from its table) hands that
// on to the phases that need it. Internal to tuner/search/: the API is
// tuner/search/search.h.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "results/records.h"
#include "tuner/config/config.h"
#include "tuner/measure/measurer.h"
#include "tuner/search/search.h"

namespace feedtune::tuner::search_internal {

using results::TrialRecord;
using results::TrialStatus;

// Thrown by Measure when sweep.time_budget_s has passed: the sequence ends
// where it is (tuner/search/sequence.cc catches it; tuner/search/time_budget.cc
// keeps the best so far).
struct TimeBudgetSpent {};

// The rows of the phase table (tuner/search/sequence.cc), in its order:
// where the sequence is, for the estimate of trials left and for which
// trials the time budget may stop.
enum class SequenceAt {
  kBaseline, kSeedCheck, kPin, kFetch, kWorkers, kNonBlocking, kPrefetch, kPersistent, kRevisit, kStartMethod, kBinding,
  kThreads, kCombined, kFinal, kDone
};

// A worker count and its trial, a point of the num_workers curve.
using CurvePoint = std::pair<int, size_t>;

// How far the sequence has gone: its row of the phase table, the order of
// the rows, and how far the row has gone. For the estimate of trials left
// (TrialsLeft) and for which trials the time budget may stop (Measure).
// Moved by the sequence (EnterPhase, SetPersistentFirst), counted by
// Measure, and the doubling's own progress given by the doubling.
struct SequenceProgress {
  SequenceAt at = SequenceAt::kBaseline;
  bool persistent_first = false;  // persistent_workers runs before prefetch_factor (PersistentFirst)
  int done = 0;                   // trials measured in this row
  // The doubling's (tuner/search/workers.cc): the count it measures, its
  // doublings without a gain in a row, and whether it has moved on to
  // refining the knee.
  int doubling_workers = 0;
  int misses = 0;
  bool refining = false;
};

class SearchState {
 public:
  SearchState(const SweepOptions& options, const SearchSetup& setup, TrialMeasurer& measurer,
              const SearchEvents& events)
      : options_(options), setup_(setup), measurer_(measurer), events_(events) {}

  // The inputs.
  const SweepOptions& options() const { return options_; }
  const SearchSetup& setup() const { return setup_; }
  int repeats() const { return std::max(1, options_.repeats); }
  bool under_time_budget() const { return options_.time_budget_s > 0; }
  // A failed seed check drops the seed: the search runs unseeded.
  void DropSeed() { setup_.seed.reset(); }

  // The records so far, and the outcome they add up to.
  std::vector<TrialRecord>& trials() { return outcome_.trials; }
  const std::vector<TrialRecord>& trials() const { return outcome_.trials; }
  SearchOutcome& outcome() { return outcome_; }
  const SearchOutcome& outcome() const { return outcome_; }

  // The current setting: the one the phases so far arrived at, and its trial.
  const loader::Knobs& knobs() const { return current_; }
  size_t current_index() const { return current_index_; }
  const TrialRecord& current() const { return outcome_.trials[current_index_]; }
  // A phase kept trial `index`, measured with `knobs`.
  void Keep(size_t index, const loader::Knobs& knobs) {
    current_index_ = index;
    current_ = knobs;
  }
  // The setting changes before a trial of it: the start, and the seed's knobs.
  void SetKnobs(const loader::Knobs& knobs) { current_ = knobs; }

  // Measures one trial (after the time budget: throws TimeBudgetSpent unless
  // `budget_may_end` is false, for the second trial of a pair, or the phase
  // table says the budget may not end the row's trials) and returns its
  // index. Under a budget its figure is charged the restart
  // (tuner/search/time_budget.cc).
  size_t Measure(const char* phase, const loader::Knobs& knobs, TrialPlan plan = {}, bool budget_may_end = true);
  // Writes the decision of a trial that ran (status ok) and hands the trial
  // on. Every trial passes here, or through DecideFailed, once.
  void Decide(size_t index, std::string decision);
  // The decision of a trial that did not run: "failed: ERROR", or "skipped:
  // WHY" for one a budget refused.
  void DecideFailed(size_t index);
  void AddPhase(std::string phase, bool kept, std::string why);

  // The time budget's clock: seconds since the search began.
  double ElapsedS() const;
  // Whether the time budget's time left holds `seconds` more.
  bool BudgetHolds(double seconds) const { return ElapsedS() + seconds <= options_.time_budget_s; }
  // Whether the restart was charged to trial `index`, and its rate in its
  // windows without it (tuner/search/time_budget.cc).
  bool Charged(size_t index) const { return charged_.count(index) > 0; }
  double WindowsRate(size_t index) const;
  // Whether trial `index` was measured as one of a pair (MeasurePairs: one
  // window each, a figure for its pair's ratio rather than one to rank).
  void MarkPaired(size_t index) { paired_.insert(index); }
  bool Paired(size_t index) const { return paired_.count(index) > 0; }

  // The epoch: batches per epoch (the setup's, else the baseline's report; 0
  // = unknown) and samples per epoch. From the records, so a resumed run sees
  // the same values.
  int64_t BatchesPerEpoch() const;
  int64_t SamplesPerEpoch() const;

  SearchProgress Progress() const;

  // Where the sequence is. Only tuner/search/sequence.cc moves it
  // (EnterPhase, SetPersistentFirst); Measure counts the row's trials.
  const SequenceProgress& progress() const { return progress_; }
  void EnterPhase(SequenceAt at) {
    progress_.at = at;
    progress_.done = 0;
  }
  void SetPersistentFirst(bool first) { progress_.persistent_first = first; }
  // The doubling's progress, for the estimate: the count it measures next
  // (or just measured), its misses in a row, and the refinement after it.
  void ShowDoubling(int workers, int misses) {
    progress_.doubling_workers = workers;
    progress_.misses = misses;
  }
  void ShowRefining() { progress_.refining = true; }

 private:
  const SweepOptions& options_;
  SearchSetup setup_;  // not const: a failed seed check drops the seed (DropSeed)
  TrialMeasurer& measurer_;
  const SearchEvents& events_;

  SearchOutcome outcome_;
  const std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
  loader::Knobs current_;
  size_t current_index_ = 0;
  std::map<size_t, std::string> charged_;  // the restart charge: trial index -> what was charged
  std::set<size_t> paired_;                 // the trials measured in pairs (MarkPaired)
  SequenceProgress progress_;
};

// The words the decisions share.
std::string Percent(double fraction);  // "+4.2%"
// candidate's median over current's, less one (0 when current has none).
double Gain(const TrialRecord& candidate, const TrialRecord& current);
// Why a change that is no gain by IsGain was not kept (tuner/search/rule.cc).
std::string NotKept(const TrialRecord& candidate, const TrialRecord& current, double gain_threshold,
                    const std::string& what = "");
std::string WorkersText(int n);  // "1 worker", "4 workers"
std::string BoundaryMs(const TrialRecord& t);  // "35.0 ms", or "not measured"

// The restart charge (tuner/search/time_budget.cc): under a time budget, a
// trial `t` just measured in time windows, with workers that do not persist,
// is judged per epoch of `samples_per_epoch` samples, its restart charged
// once per epoch; returns what was charged, in words, or nullopt.
std::optional<std::string> ChargeRestart(TrialRecord& t, int64_t samples_per_epoch);
// The rate of `epoch_samples` at `charged` samples/s per epoch without its
// `restart_s`: the charge undone (0 when nothing is left).
double UnchargedRate(double charged, double epoch_samples, double restart_s);

}  // namespace feedtune::tuner::search_internal
