// Interleaved pairs, the measurement the final check, the paired knee and
// persistent_workers under a time budget share (MeasurePairs).
//
// What it measures: `repeats` pairs of one window each, a (the baseline, or
// the setting standing in for it) then b, interleaved, so that a step whose
// speed moves between trials moves both of a pair alike; the ratio of b's
// figure over a's for each pair measured (a failed trial ends them).
//
// What it keeps: nothing; the phase that asked decides from the ratios.
//
// What the time budget changes: with PairsPlan::budget_ended set, the budget
// ends the pairs between two pairs, never inside one; with
// PairsPlan::settle_bar set, more pairs settle a bar still inside the
// median's interval, while the budget holds one more, up to
// kMostPairsPerRepeat x repeats.
#include "results/units.h"
#include "tuner/measure/stats.h"
#include "tuner/search/phases.h"

namespace feedtune::tuner::search_internal {

using results::Format;  // results/units.h

// The cap on PairsPlan::settle_bar's pairs, as a multiple of `repeats` (9
// pairs at the default 3): it keeps time for the worker phases that follow
// where the pairs do find a knee. Uncapped pairs of three windows a trial
// settled 1 worker after 50 s of a 60 s budget, and the budget ended the
// search before persistent_workers (docs/search.md, "A time budget").
constexpr int kMostPairsPerRepeat = 3;

namespace {

// Whether pair number `pair` is one more to settle `how.settle_bar`: every
// pair so far measured, the bar inside their median's interval, time left
// in the budget for one more pair as long as the last (`pair_s`), and the
// cap not passed. A decision against a bar that the pairs cannot yet place
// is settled with the time the user granted, not left to three pairs and
// the rest of it unused.
bool Unsettled(const SearchState& state, const std::vector<double>& ratios, const PairsPlan& how, int pair,
               double pair_s) {
  if (how.settle_bar <= 0 || !state.under_time_budget() || ratios.size() + 1 != static_cast<size_t>(pair) ||
      pair > kMostPairsPerRepeat * state.repeats() || !state.BudgetHolds(pair_s)) {
    return false;
  }
  const Summary s = Summarize(ratios);
  return s.ci_low <= how.settle_bar && how.settle_bar <= s.ci_high;
}

}  // namespace

// a and b must not refer into trials(), which measuring grows.
std::vector<double> MeasurePairs(SearchState& state, const char* phase, const loader::Knobs& a,
                                 const loader::Knobs& b, const std::string& a_name, const std::string& b_name,
                                 const PairsPlan& how) {
  TrialPlan plan;
  plan.repeats = 1;
  plan.window_epochs = how.window_epochs;
  const bool in_windows = how.in_windows;
  const int repeats = state.repeats();
  std::vector<double> ratios;
  double pair_s = 0;  // the last pair's time, for whether the budget holds one more
  for (int pair = 1; pair <= repeats || Unsettled(state, ratios, how, pair, pair_s); ++pair) {
    // A pair past `repeats` begins only where the budget holds it
    // (Unsettled), and then runs whole, as the second trial of every pair does.
    const bool settling = pair > repeats;
    if (how.budget_ended && pair > 1 && !state.BudgetHolds(pair_s)) {
      *how.budget_ended = true;
      break;
    }
    const double pair_start = state.ElapsedS();
    size_t ia = 0;
    try {
      ia = state.Measure(phase, a, plan, /*budget_may_end=*/!settling);
      state.MarkPaired(ia);
    } catch (const TimeBudgetSpent&) {
      if (!how.budget_ended || pair == 1) throw;
      *how.budget_ended = true;
      break;
    }
    if (state.trials()[ia].status != TrialStatus::kOk) {
      state.DecideFailed(ia);
      break;
    }
    state.Decide(ia, "pair " + std::to_string(pair) + ": " + a_name);
    const size_t ib = state.Measure(phase, b, plan, /*budget_may_end=*/how.budget_ended == nullptr && !settling);
    state.MarkPaired(ib);
    if (state.trials()[ib].status != TrialStatus::kOk) {
      state.DecideFailed(ib);
      break;
    }
    const auto rate = [&](size_t i) { return in_windows ? state.WindowsRate(i) : state.trials()[i].samples_per_s; };
    const double ratio = rate(ia) > 0 ? rate(ib) / rate(ia) : 0.0;
    ratios.push_back(ratio);
    state.Decide(ib, "pair " + std::to_string(pair) + ": " + b_name + ", " + Format("x%.2f", ratio) + " over " +
                         how.over + (in_windows ? " in their windows" : ""));
    pair_s = state.ElapsedS() - pair_start;
  }
  return ratios;
}

}  // namespace feedtune::tuner::search_internal
