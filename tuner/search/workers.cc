// num_workers: the doubling, the knee, the refinement.
//
// What it measures: 1, 2, 4, ... workers, doubling. It stops after two
// doublings in a row without a gain over the best so far, or two falls below
// it (by THE RULE, tuner/search/rule.cc, reversed): a single fall is a miss
// that the next doubling confirms or not. 1 worker is never a stop nor a miss
// (it moves the loading out of the main process without parallelism: a dip
// there is the usual shape). Below the usable CPU count any rise of the
// median keeps it going; above it, a rise beyond gain_threshold within the
// noise is no gain and no miss. It also stops at max_workers, at one round
// per epoch (as many workers as batches, when the epoch length is known),
// when a trial is skipped by the budget, or on a failure. Then it bisects
// between the knee and its lower neighbour while the knee gains over it by
// more than gain_threshold and a point between can differ: more than
// kNarrowestBisectedGap apart, or, on a stepped curve (non-persistent workers
// seeing fewer than kFewBatchesPerWorker batches each per epoch), a count
// that changes the epoch's rounds, ceil(batches / workers).
//
// What it keeps: the knee, the fewest workers whose median is within
// knee_tolerance of the best median on the curve; the Kneedle knee (S =
// kKneedleSensitivity) of the same curve is reported beside it. More workers
// than the knee with a higher median are a candidate for the combined trial.
//
// What the time budget changes: the phase starts at the count the
// baseline's figures predict (tuner/search/worker_estimate.h) when that is
// above kLowestBracketedStart, doubles up from it by the same rule, then
// halves down from it to the knee's lower neighbour (HalveDown,
// tuner/search/estimate_start.cc: a count the latency bound puts far below
// the best is settled in one window), and the refinement's first point
// follows the line through that neighbour. Above the usable CPU count the
// first doubling without a gain (or one fall) ends the doubling: each
// doubling there starts twice the workers of the last, and the phases after
// the knee need the time more. A phase the budget cuts short names its knee
// from the curve measured so far, as it would have at its end, and says when
// the curve was still rising there (StillRising). A knee at 0 workers is
// checked in pairs (tuner/search/paired_knee.cc).
//
// A seeded search doubles from the seed's knee instead (tuner/search/seeded_search.cc).
#include <algorithm>
#include <cmath>

#include "results/units.h"
#include "tuner/measure/stats.h"
#include "tuner/search/phases.h"

namespace feedtune::tuner {

std::optional<size_t> KneeIndex(const std::vector<std::pair<int, const results::TrialRecord*>>& curve,
                                double tolerance) {
  double best = -1;
  for (const auto& [w, t] : curve) {
    if (t->status == results::TrialStatus::kOk) best = std::max(best, t->samples_per_s);
  }
  if (best < 0) return std::nullopt;
  std::optional<size_t> knee;
  for (size_t i = 0; i < curve.size(); ++i) {
    const auto& [w, t] = curve[i];
    if (t->status == results::TrialStatus::kOk && t->samples_per_s >= best * (1.0 - tolerance) &&
        (!knee || w < curve[*knee].first)) {
      knee = i;
    }
  }
  return knee;
}

namespace search_internal {

using results::Format;  // results/units.h

// Non-persistent workers that see fewer batches than this each per epoch make
// a stepped curve (docs/search.md: the epoch's rounds decide the time).
constexpr int64_t kFewBatchesPerWorker = 4;
// Kneedle's sensitivity S: 1, the paper's default, for the knee reported beside ours.
constexpr double kKneedleSensitivity = 1.0;
// Under a time budget, an estimate above this many workers starts the phase
// there (WorkersPhase); at or below it, the doubling from 1 reaches it in as
// many trials.
constexpr int kLowestBracketedStart = 2;
// Without stepped rounds, two counts this close have no count between worth
// measuring: the bisection would measure a neighbour of one of them.
constexpr int kNarrowestBisectedGap = 2;

namespace {

// Whether non-persistent workers up to `workers` see fewer than a few
// batches each per epoch, so the epoch's rounds (ceil(batches / workers))
// make the curve a staircase rather than a smooth rise.
bool Stepped(int64_t batches, int workers) {
  return batches > 0 && workers > 0 && batches < kFewBatchesPerWorker * workers;
}

// The fewest workers for each round count, ceil(batches / r), strictly between lo and hi, ascending.
std::vector<int> RoundPoints(int64_t batches, int lo, int hi) {
  std::vector<int> points;
  for (int64_t r = batches; r >= 1; --r) {
    const int64_t w = (batches + r - 1) / r;
    if (w > lo && w < hi && (points.empty() || points.back() != w)) points.push_back(static_cast<int>(w));
  }
  return points;
}

// "the curve is stepped by epoch rounds: 16 batches per epoch, so 9 to 15
// workers take 2 rounds as 8 do; only 1, 2, 3, 4, 6, 8, 16 can differ".
std::string SteppedNote(int64_t batches, int max_workers) {
  const std::vector<int> points = RoundPoints(batches, 0, max_workers + 1);
  std::string list;
  for (int w : points) list += (list.empty() ? "" : ", ") + std::to_string(w);
  std::string note = "the curve is stepped by epoch rounds: " + std::to_string(batches) +
                     " batches per epoch, so only worker counts that change ceil(batches / workers) can differ (" +
                     list + ")";
  // The largest gap among them, as an example.
  for (size_t i = points.size(); i-- > 1;) {
    if (points[i] - points[i - 1] > 1) {
      const int64_t rounds = (batches + points[i - 1] - 1) / points[i - 1];
      note += "; " + std::to_string(points[i - 1] + 1) + " to " + std::to_string(points[i] - 1) + " workers take " +
              std::to_string(rounds) + " rounds as " + std::to_string(points[i - 1]) + " do";
      break;
    }
  }
  return note + "; the knee is a property of this epoch length";
}

// The unseeded doubling: adds its points to `curve` (which holds the
// baseline); returns how it ended, for the phase's text.
// `start`: its first count (1, or the estimate's: WorkersPhase), whose
// decision begins with `start_note` when one is given.
std::string Doubling(SearchState& state, std::vector<CurvePoint>& curve, int64_t batches, int start = 1,
                     const std::string& start_note = "") {
  const SearchSetup& setup = state.setup();
  const double threshold = state.options().gain_threshold;
  size_t best = state.current_index();
  std::string stop = "reached max_workers " + std::to_string(setup.max_workers) +
                     (setup.max_workers_cap_why.empty() ? "" : " (" + setup.max_workers_cap_why + ")");
  int misses = 0;             // doublings without a gain in a row (shown for the estimate: ShowDoubling)
  bool fall_pending = false;  // a fall beyond the noise that the next doubling must confirm
  for (int workers = std::min(start, setup.max_workers); workers > 0;) {
    loader::Knobs knobs = state.knobs();
    knobs.num_workers = workers;
    state.ShowDoubling(workers, misses);
    const size_t index = state.Measure("num_workers", knobs);
    const TrialRecord& t = state.trials()[index];
    const std::string note = workers == start && !start_note.empty() ? start_note + ": " : "";
    if (t.status != TrialStatus::kOk) {
      state.DecideFailed(index);
      stop = "stopped at " + WorkersText(workers) +
             (t.status == TrialStatus::kSkipped ? ": over a budget" + FetchInsteadOfWorkers(state, t)
                                                : ": the trial failed");
      break;
    }
    curve.emplace_back(workers, index);
    const int next = NextDoubling(state, workers, batches);
    const TrialRecord& best_t = state.trials()[best];
    const double gain = Gain(t, best_t);
    const bool below_cpus = BelowCpus(state, workers);
    const double rising = below_cpus ? 0.0 : threshold;
    // Below the best by more than the threshold, beyond the noise.
    const bool falls = IsGain(best_t, t, threshold);
    const bool one_miss = MissesToStop(state, workers) == 1;
    if (IsGain(t, best_t, threshold)) {
      state.Decide(index, note + Percent(gain) + " over the best so far");
      best = index;
      misses = 0;
      state.ShowDoubling(workers, misses);
      fall_pending = false;
    } else if (workers == 1) {
      // One worker moves the loading out of the main process without adding
      // parallelism, and adds the IPC: no gain, or a dip, is the usual shape
      // of the curve here, not its knee. No stop and no miss before 2 workers.
      state.Decide(index, note + Percent(gain) + (falls ? " below the best" : "") +
                              ": 1 worker adds no parallelism to the main process's loading; go on to 2");
    } else if (falls && fall_pending) {
      state.Decide(index, note + Percent(gain) + " below the best: the fall is confirmed, stop doubling");
      stop = "stopped at " + WorkersText(workers) + ": throughput falls";
      break;
    } else if (falls && (misses >= 1 || one_miss)) {
      state.Decide(index, note + Percent(gain) + " below the best" +
                              (misses >= 1 ? ", after a doubling without a gain"
                                           : ", beyond the noise, under the time budget") +
                              ": stop doubling");
      stop = "stopped at " + WorkersText(workers) +
             (misses >= 1 ? ": two doublings without a gain"
                          : ": throughput falls (under the time budget, no second doubling confirms it)");
      break;
    } else if (falls) {
      // A single fall beyond the noise can be the machine's, not the
      // curve's: it counts as a miss, and the next doubling confirms it.
      ++misses;
      state.ShowDoubling(workers, misses);
      fall_pending = true;
      state.Decide(index, note + Percent(gain) + " below the best, beyond the noise" +
                              (next > 0 ? "; the next doubling confirms it before stopping" : ""));
    } else if (gain > rising) {
      // The median rose but not beyond the noise (or, below the CPU count,
      // not beyond the threshold): not a gain to keep, not a reason to stop.
      state.Decide(index, note + Percent(gain) + (below_cpus ? ": rising below the usable CPU count; keep doubling"
                                                      : ": rising, but within noise; keep doubling"));
      misses = 0;
      state.ShowDoubling(workers, misses);
      fall_pending = false;
    } else {
      ++misses;
      state.ShowDoubling(workers, misses);
      if (misses >= MissesToStop(state, workers)) {
        const std::string without = one_miss ? "a doubling without a gain under the time budget"
                                             : "two doublings without a gain";
        state.Decide(index, note + Percent(gain) + ": " + without + ", stop doubling");
        stop = "stopped at " + WorkersText(workers) + ": " + without;
        break;
      }
      state.Decide(index, note + Percent(gain) + ": no gain beyond noise");
      fall_pending = false;
    }
    if (next == 0 && workers < setup.max_workers) {
      stop = "stopped at " + WorkersText(workers) + ": one round per epoch (" + std::to_string(batches) +
             " batches), more workers cannot shorten it";
    }
    workers = next;
  }
  return stop;
}

// When the budget ends the phase while the curve still rose at its top: the
// most workers measured are the best on the curve, beyond the noise over the
// count below them. Says so with the gain and the budget that would go on;
// empty otherwise.
std::string StillRising(const SearchState& state, std::vector<CurvePoint> curve) {
  std::sort(curve.begin(), curve.end());
  if (curve.size() < 2) return "";
  const auto& [top, top_index] = curve.back();
  const auto& [below, below_index] = curve[curve.size() - 2];
  // At the cap more workers are not measured, whatever the budget.
  if (top >= state.setup().max_workers || NextDoubling(state, top, state.BatchesPerEpoch()) == 0) return "";
  const TrialRecord& t = state.trials()[top_index];
  for (const auto& [w, i] : curve) {
    if (state.trials()[i].samples_per_s > t.samples_per_s) return "";
  }
  if (!IsGain(t, state.trials()[below_index], state.options().gain_threshold)) return "";
  const double budget = state.options().time_budget_s;
  return Format("the curve was still rising: %s from %d to %d workers when the budget of %g s ended it; "
                "budget_s=%g would go on",
                Percent(Gain(t, state.trials()[below_index])).c_str(), below, top, budget,
                std::ceil(2 * budget / 10) * 10);
}

// Bisects between the knee and its lower neighbour while the knee gains over
// that neighbour by more than the threshold (so a point between can differ)
// and there is a point between worth measuring: the fewest workers that
// reach the plateau is what users want. Points worth measuring: with a known
// epoch, only those that change the number of rounds (RoundPoints); else any
// count, when the two are more than kNarrowestBisectedGap apart. `linear`
// (a phase started at the estimate, whose curve rises with the workers below
// the knee as a wait-bound one does): the first point is where the line from
// the origin through the lower neighbour reaches knee_tolerance below the
// knee's median (on a stepped curve, the first count worth measuring from
// there), instead of their middle. When that point becomes the knee, the next
// is the count just below it, which on the line falls outside the tolerance
// and so ends the refinement in one trial; after that the points bisect (a
// curve that bends below the line would walk down one count at a time).
// `seeded_knee`: a seeded doubling's start (SeededDoubling).
void Refine(SearchState& state, std::vector<CurvePoint>& curve, int64_t batches, std::optional<int> seeded_knee,
            bool linear = false) {
  int line_point = 0;  // the count the line gave; while it is the knee, the next point is just below it
  while (true) {
    std::sort(curve.begin(), curve.end());
    const size_t k = Knee(state, curve);
    if (k == 0) return;
    // Seeded: a knee at the seed's own was bisected on its machine already.
    if (seeded_knee == curve[k].first) return;
    const auto [lo, lo_index] = curve[k - 1];
    const auto [hi, hi_index] = curve[k];
    if (Gain(state.trials()[hi_index], state.trials()[lo_index]) <= state.options().gain_threshold) return;
    // Where the line from the origin through the lower neighbour reaches
    // knee_tolerance below the knee's median (0: not asked for, or no line).
    const double lo_rate = state.trials()[lo_index].samples_per_s;
    int line = 0;
    if (linear && lo > 0 && lo_rate > 0) {
      const double reach = (1 - state.options().knee_tolerance) * state.trials()[hi_index].samples_per_s;
      line = static_cast<int>(std::ceil(lo * reach / lo_rate - 1e-9));
    }
    int mid = 0;
    std::string how;
    if (Stepped(batches, hi)) {
      const std::vector<int> points = RoundPoints(batches, lo, hi);
      if (points.empty()) return;
      mid = points[(points.size() - 1) / 2];
      if (line_point == hi) {
        mid = points.back();
      } else if (line > 0) {
        const auto at = std::lower_bound(points.begin(), points.end(), line);
        mid = at == points.end() ? points.back() : *at;
      }
    } else {
      if (hi - lo <= kNarrowestBisectedGap) return;
      mid = line_point == hi ? hi - 1 : line > 0 ? std::clamp(line, lo + 1, hi - 1) : (lo + hi) / 2;
    }
    if (line_point == hi) {
      how = " (just below the line's count, " + std::to_string(hi) + ", the knee now)";
    } else if (line > 0) {
      how = " (where the line through " + WorkersText(lo) + " reaches the knee's median)";
    }
    loader::Knobs knobs = state.knobs();
    knobs.num_workers = mid;
    const size_t index = state.Measure("num_workers", knobs);
    if (state.trials()[index].status != TrialStatus::kOk) {
      state.DecideFailed(index);
      return;
    }
    state.Decide(index,
                 "refining the knee between " + std::to_string(lo) + " and " + std::to_string(hi) + " workers" + how);
    line_point = line > 0 ? mid : 0;
    linear = false;
    curve.emplace_back(knobs.num_workers, index);
  }
}

// The num_workers phase's record: the knee (`by_pairs`: PairedKnee's),
// Kneedle's, and how the doubling ended.
void KneePhase(SearchState& state, const std::vector<CurvePoint>& curve, size_t knee, bool by_pairs,
               int64_t batches, const std::string& stop) {
  SearchOutcome& outcome = state.outcome();
  std::vector<double> xs, ys;
  for (const auto& [w, i] : curve) {
    xs.push_back(w);
    ys.push_back(state.trials()[i].samples_per_s);
  }
  if (const auto k = KneedleIndex(xs, ys, kKneedleSensitivity)) outcome.kneedle_workers = curve[*k].first;

  std::string why = "knee at " + WorkersText(curve[knee].first) +
                    (by_pairs ? std::string(" (by its pairs with the baseline, below)")
                              : " (fewest within " + Percent(state.options().knee_tolerance).substr(1) +
                                    " of the best median, " + Format("%.1f", outcome.knee_samples_per_s) +
                                    " samples/s)") +
                    "; ";
  const std::string kneedle = Format("Kneedle (S=%g)", kKneedleSensitivity);
  if (!outcome.kneedle_workers) {
    why += "Kneedle finds no knee on this curve; ";
  } else if (*outcome.kneedle_workers != curve[knee].first) {
    why += kneedle + " puts it at " + std::to_string(*outcome.kneedle_workers) + "; ";
  } else {
    why += kneedle + " agrees; ";
  }
  why += stop;
  if (Stepped(batches, curve.back().first)) why += "; " + SteppedNote(batches, curve.back().first);
  state.AddPhase("num_workers", curve[knee].first > 0, why);
}

}  // namespace

// With a known epoch of B batches, B workers run it in one round (each
// worker loads one batch); more cannot shorten it, so the doubling's last
// point is B.
int NextDoubling(const SearchState& state, int workers, int64_t batches) {
  if (batches > 0 && workers >= batches) return 0;
  int next = workers * 2;
  if (batches > 0 && next > batches) next = static_cast<int>(batches);
  return next <= state.setup().max_workers ? next : 0;
}

size_t Knee(const SearchState& state, const std::vector<CurvePoint>& curve) {
  std::vector<std::pair<int, const TrialRecord*>> points;
  for (const auto& [w, i] : curve) points.emplace_back(w, &state.trials()[i]);
  return *KneeIndex(points, state.options().knee_tolerance);
}

bool BelowCpus(const SearchState& state, int workers) {
  // Below the usable CPU count, more workers can still use more cores: any
  // rise of the median keeps the doubling going (a CPU-bound curve rises
  // to the CPU count, often by less than the threshold per step near it).
  return state.setup().usable_cpus > 0 && workers < state.setup().usable_cpus;
}

int MissesToStop(const SearchState& state, int workers) {
  // Under a time budget, above the CPU count, the first doubling without a
  // gain ends it: each doubling there starts twice the workers of the
  // last (a torch worker is a process, about 0.1 s of the main process's
  // to start and stop on a 2-CPU box), and the budget is better spent on
  // the phases after the knee than on confirming a miss.
  return state.under_time_budget() && !BelowCpus(state, workers) ? 1 : kMissesToStop;
}

// When the time budget ends the doubling or the refinement, the knee is
// taken from the curve measured so far, as the phase would have, and the
// sequence ends after it (WorkersFound::budget_spent, KeepBestAtBudget).
WorkersFound WorkersPhase(SearchState& state, const TrialPlan& seeded_plan) {
  WorkersFound found;
  std::vector<CurvePoint> curve = {{0, state.current_index()}};
  const int64_t batches = state.BatchesPerEpoch();
  std::string stop, start;
  std::optional<int> seeded_knee;
  bool budget_spent = false;
  const WorkerEstimate estimate = state.under_time_budget() && !state.setup().seed ? StartEstimate(state, batches)
                                                                                  : WorkerEstimate{};
  try {
    if (state.setup().seed) {
      int knee = 0;
      stop = SeededDoubling(state, curve, batches, seeded_plan, &knee);
      seeded_knee = knee;
    } else if (estimate.workers > kLowestBracketedStart) {
      start = "started at the estimate of " + WorkersText(estimate.workers) + " (" + estimate.how + "); ";
      stop = Doubling(state, curve, batches, estimate.workers, "the estimate's start");
      stop += "; " + HalveDown(state, curve, EstimatedWaitS(state.current()));
    } else {
      if (estimate.workers > 0) {
        start = "the estimate, " + WorkersText(estimate.workers) + " (" + estimate.how +
                "), is within the doubling's first counts: doubled from 1; ";
      }
      stop = Doubling(state, curve, batches);
    }
    state.ShowRefining();
    Refine(state, curve, batches, seeded_knee,
           /*linear=*/!start.empty() && estimate.workers > kLowestBracketedStart);
  } catch (const TimeBudgetSpent&) {
    budget_spent = true;
    const int most = std::max_element(curve.begin(), curve.end())->first;
    stop = most > 0 ? "the time budget ended the phase after " + WorkersText(most)
                    : "the time budget ended the phase before any worker count was measured";
    found.still_rising = StillRising(state, curve);
    if (!found.still_rising.empty()) stop += "; " + found.still_rising;
  }
  if (estimate.workers > 0) {
    state.outcome().estimate_workers = estimate.workers;
    state.outcome().estimate_how = estimate.how;
  }
  stop = start + stop;
  std::sort(curve.begin(), curve.end());
  found.curve = curve;
  size_t knee = Knee(state, curve);
  std::string paired;
  bool by_pairs = false;
  if (!budget_spent && curve[knee].first == 0) {
    try {
      if (const auto count = PairedKnee(state, curve, &paired, &found.budget_from)) {
        knee = *count;
        by_pairs = true;
      }
    } catch (const TimeBudgetSpent&) {
      budget_spent = true;
      paired = "the time budget ended its pairs with the baseline before they were measured";
    }
  }
  loader::Knobs knobs = state.knobs();
  knobs.num_workers = curve[knee].first;
  state.Keep(curve[knee].second, knobs);
  state.outcome().knee_workers = curve[knee].first;
  state.outcome().knee_samples_per_s = state.trials()[curve[knee].second].samples_per_s;
  // More workers than the knee that gave a higher median: within the
  // tolerance alone, but a candidate for the combined step.
  size_t top = knee;
  for (size_t i = knee + 1; i < curve.size(); ++i) {
    if (state.trials()[curve[i].second].samples_per_s > state.trials()[curve[top].second].samples_per_s) top = i;
  }
  if (top != knee) found.small_gain = SmallGain{SmallGainOf::kNumWorkers, curve[top].second};
  KneePhase(state, curve, knee, by_pairs, batches, paired.empty() ? stop : stop + "; " + paired);
  if (budget_spent) {
    found.budget_from = state.trials().size();  // the curve's trials were judged by the knee rule
    found.budget_spent = true;
  }
  return found;
}

}  // namespace search_internal
}  // namespace feedtune::tuner
