#include "tuner/search/search.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>

#include "results/units.h"
#include "tuner/measure/stats.h"

namespace feedtune::tuner {

using results::TrialStatus;
namespace {

using results::TrialRecord;

using results::Format;  // results/units.h

// Non-persistent workers that see fewer batches than this each per epoch make
// a stepped curve (docs/search.md: the epoch's rounds decide the time).
constexpr int64_t kFewBatchesPerWorker = 4;

std::string Percent(double fraction) { return Format("%+.1f%%", fraction * 100.0); }

double Gain(const TrialRecord& candidate, const TrialRecord& current) {
  return current.samples_per_s > 0 ? candidate.samples_per_s / current.samples_per_s - 1.0 : 0.0;
}

// Why a change that is no gain by IsGain was not kept, with the three cases
// told apart (a user reads "-60.9% within noise" as "noise"): slower beyond
// the noise, a change within the noise, or a gain beyond the noise but under
// the threshold. With one repeat there is no noise estimate, so the threshold
// alone separates them. `what` names the change ("" or " for X together").
std::string NotKept(const TrialRecord& candidate, const TrialRecord& current, double gain_threshold,
                    const std::string& what = "") {
  const double gain = Gain(candidate, current);
  const std::string head = "not kept: " + Percent(gain) + what;
  const std::string threshold = Percent(gain_threshold).substr(1);
  if (candidate.repeats >= 2 && current.repeats >= 2) {
    if (candidate.ci_high < current.ci_low) return head + ": slower beyond the noise";
    if (candidate.ci_low > current.ci_high) {
      return head + ": faster beyond the noise, but under the " + threshold + " threshold";
    }
    return head + ": within the noise";
  }
  if (gain < -gain_threshold) {
    return head + ": slower by more than the " + threshold + " threshold (one repeat, no noise estimate)";
  }
  if (gain > 0) return head + ": a gain under the " + threshold + " threshold (one repeat, no noise estimate)";
  return head + ": slower, within the " + threshold + " threshold (one repeat, no noise estimate)";
}

// "1 worker", "4 workers".
std::string WorkersText(int n) { return std::to_string(n) + (n == 1 ? " worker" : " workers"); }

std::string BoundaryMs(const TrialRecord& t) {
  return std::isfinite(t.epoch_boundary_ms) ? Format("%.1f ms", t.epoch_boundary_ms) : std::string("not measured");
}

// The pin_memory and non_blocking phases' text when sweep.copy_phases is false.
constexpr const char* kNoCopy =
    "not tried: sweep.copy_phases is false (the job trains on the CPU: no batch is copied to a device)";

// How Search::MeasurePairs measures and ends.
struct PairsPlan {
  bool in_windows = false;  // ratios of the windows' rates, without a restart ChargeRestart added (WindowsRate)
  int window_epochs = 0;    // each trial's one window: this many whole epochs (0: a time window)
  // Set: the budget ends the pairs between two pairs (never inside one, and
  // not before the first), and this says that it did: a pair after the first
  // begins only where the budget's time left holds one more as long as the
  // last (a pair of whole epochs is seconds long, and one begun at the
  // budget's edge ran a 60 s budget to 73 s). Unset: Measure's
  // TimeBudgetSpent goes up from wherever it is thrown.
  bool* budget_ended = nullptr;
  const char* over = "the pair's baseline";  // what b's ratio is over, in b's decision
  // Set (> 0), under a time budget: after `repeats` pairs, while this bar is
  // still inside the 95% interval of their median and the budget's time left
  // holds one more pair as long as the last, one more pair, up to
  // kMostPairsPerRepeat x repeats in all. A decision
  // against a bar that the pairs cannot yet place is settled with the time
  // the user granted, not left to three pairs and the rest of it unused.
  double settle_bar = 0;
};

// The cap on PairsPlan::settle_bar's pairs, as a multiple of `repeats`.
constexpr int kMostPairsPerRepeat = 3;

// Where the sequence is, for the estimate of trials left.
enum class SequenceAt {
  kBaseline, kSeedCheck, kPin, kWorkers, kNonBlocking, kPrefetch, kPersistent, kRevisit, kStartMethod, kBinding, kThreads,
  kCombined, kFinal, kDone
};

class Search {
 public:
  Search(const SweepOptions& options, const SearchSetup& setup, TrialMeasurer& measurer, const SearchEvents& events)
      : options_(options), setup_(setup), measurer_(measurer), events_(events) {}

  SearchOutcome Run(loader::Knobs start) {
    current_ = start;
    current_.num_workers = 0;
    current_.pin_memory = false;
    current_.non_blocking = false;
    current_.persistent_workers = false;
    current_.cpu_binding = StartBinding(options_.cpu_binding);

    at_ = SequenceAt::kBaseline;
    const size_t base = Measure("baseline", current_);
    outcome_.baseline = base;
    if (trials()[base].status != TrialStatus::kOk) {
      Decide(base, "the baseline did not run; nothing to compare against");
      AddPhase("baseline", false, trials()[base].decision);
      return Finish();
    }
    Decide(base, "reference");
    current_index_ = base;
    try {
      if (setup_.seed && setup_.check_seed && CheckSeed()) return Finish();
      Sequence();
    } catch (const TimeBudgetSpent&) {
      KeepBestAtBudget();
    }
    return Finish();
  }

 private:
  // Thrown by Measure when sweep.time_budget_s has passed: the sequence ends
  // where it is (Run catches it).
  struct TimeBudgetSpent {};

  // The stored answer checked instead of searched around (SearchSetup::check_seed):
  // the seed's whole setting measured once, then paired with the reference
  // by the final check. True: kept, unless the pairs put it below the
  // reference beyond the noise (the interval's top under x1.00). False: the
  // check failed, and the search starts over from the baseline, unseeded.
  bool CheckSeed() {
    at_ = SequenceAt::kSeedCheck;
    const std::string source = setup_.seed->source;
    const size_t index = Measure("seed_check", setup_.seed->best);
    std::string failed;
    if (trials()[index].status != TrialStatus::kOk) {
      Decide(index, "");
      failed = "the stored setting did not run (" + trials()[index].decision + ")";
    } else {
      Decide(index, "the stored setting of " + source + ", checked against " +
                        (setup_.reference ? "the job's own setting" : "the baseline"));
      current_ = trials()[index].knobs;
      current_index_ = index;
      at_ = SequenceAt::kFinal;
      FinalCheck("seed_check_pairs");
      if (!outcome_.speedup) {
        failed = "no pair of the check was measured";
      } else if (outcome_.speedup_ci_high && *outcome_.speedup_ci_high < 1.0) {
        failed = Format("the stored setting ran x%.2f [%.2f, %.2f] of ", *outcome_.speedup,
                        outcome_.speedup_ci_low.value_or(0), *outcome_.speedup_ci_high) +
                 (setup_.reference ? "the job's own setting" : "the baseline") + ", slower beyond the noise";
      }
    }
    if (failed.empty()) {
      outcome_.best = current_index_;
      AddPhase("seed_check", true, "kept the stored setting of " + source + " (" + loader::KnobsShort(current_) +
                                       ") after one check instead of the search");
      at_ = SequenceAt::kDone;
      return true;
    }
    AddPhase("seed_check", false, failed + "; the search runs from the baseline, unseeded");
    setup_.seed.reset();
    current_index_ = *outcome_.baseline;
    current_ = trials()[current_index_].knobs;
    outcome_.speedup.reset();
    outcome_.speedup_ci_low.reset();
    outcome_.speedup_ci_high.reset();
    return false;
  }

  // Everything after the baseline, up to the final check.
  void Sequence() {
    at_ = SequenceAt::kPin;
    if (setup_.seed) {
      SeedStart();
    } else if (!options_.copy_phases) {
      AddPhase("pin_memory", false, kNoCopy);
    } else {
      // Measured without workers, a regime the later steps leave: a small
      // gain here says nothing about the knee, so it is not revisited.
      TryStep("pin_memory", [](loader::Knobs& k) { k.pin_memory = true; }, IfSmallGain::kForget);
    }
    at_ = SequenceAt::kWorkers;
    Workers();
    at_ = SequenceAt::kNonBlocking;
    if (setup_.seed) {
      ConfirmSeed();
    } else if (!options_.copy_phases) {
      AddPhase("non_blocking", false, kNoCopy);
    } else if (current_.pin_memory) {
      // Measured at the knee: a small gain is revisited with the others (Combined).
      TryStep("non_blocking", [](loader::Knobs& k) { k.non_blocking = true; }, IfSmallGain::kRevisit);
    } else {
      TryStep("non_blocking", [](loader::Knobs& k) { k.pin_memory = k.non_blocking = true; }, IfSmallGain::kRevisit,
              " (with pin_memory: a pageable copy is synchronous anyway)");
    }
    if (current_.num_workers > 0) {
      persistent_first_ = PersistentFirst();
      if (persistent_first_) PersistentPhases();
      at_ = SequenceAt::kPrefetch;
      PrefetchFactors();
      if (!persistent_first_) PersistentPhases();
      at_ = SequenceAt::kStartMethod;
      StartMethodPhase();
      NodePhases();
      at_ = SequenceAt::kCombined;
      Combined();
    } else {
      AddPhase("prefetch_factor", false, "not tried: without workers there is nothing to prefetch");
      AddPhase("persistent_workers", false, "not tried: without workers there is nothing to keep alive");
      if (setup_.python_workload) {
        AddPhase("multiprocessing_context", false, "not tried: without workers no process is started");
      }
      NodePhases();  // the rank's own threads and CPUs still matter without workers
    }
    outcome_.best = current_index_;
    at_ = SequenceAt::kFinal;
    FinalCheck();
    at_ = SequenceAt::kDone;
  }

  double ElapsedS() const {
    if (setup_.elapsed_s) return setup_.elapsed_s();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
  }

  // The time budget ended the sequence: the best setting so far is the one
  // kept so far, or a trial measured since that gains over it by THE RULE. A
  // num_workers phase cut short names its knee from the curve so far
  // (Workers), and its trials are not weighed again here. The final check,
  // once begun, is not cut short (Measure), so the speedup is known or not run.
  //
  // Only trials measured after the kept one: an earlier trial lost to it, or
  // was measured another way (time windows against a later phase's whole
  // epochs, where the restart persistent workers save is paid), and comparing
  // across that would undo a kept step.
  void KeepBestAtBudget() {
    for (size_t i = std::max(current_index_ + 1, budget_from_); i < trials().size(); ++i) {
      const TrialRecord& t = trials()[i];
      if (t.status == TrialStatus::kOk && t.phase != "final_check" && IsGain(t, current(), options_.gain_threshold)) {
        current_index_ = i;
        current_ = t.knobs;
      }
    }
    outcome_.best = current_index_;
    AddPhase("time_budget", false,
             Format("the time budget of %g s ended the search after %d trials (%.1f s); kept the best setting so far",
                    options_.time_budget_s, static_cast<int>(trials().size()), ElapsedS()));
    at_ = SequenceAt::kDone;
  }
  std::vector<TrialRecord>& trials() { return outcome_.trials; }
  const TrialRecord& current() { return trials()[current_index_]; }
  int repeats() const { return std::max(1, options_.repeats); }

  // An estimate of the trials after the current one, for progress output. A
  // seeded search walks neither prefetch_factor nor persistent_workers (its
  // seed phase is one trial); the node phases count when they will run.
  int TrialsLeft() const {
    const bool seeded = setup_.seed.has_value();
    const int prefetch = seeded ? 0 : std::max(0, static_cast<int>(options_.prefetch_factors.size()) - 1);
    // Under a budget persistent_workers is measured in pairs (PersistentInPairs).
    const int persistent = seeded ? 0 : options_.time_budget_s > 0 ? 2 * repeats() : 2;
    const int binding = setup_.ranks > 1 && options_.cpu_binding == BindingChoice::kAuto
                            ? 1 + (setup_.numa_known ? 1 : 0)
                            : 0;
    const int threads = setup_.default_worker_threads > 1 ? 1 : 0;
    const int methods = static_cast<int>(StartMethodCandidates().size());
    const int start_method = methods > 0 ? 1 + methods : 0;
    const int final_check = 2 * repeats();
    // After the doubling: the non_blocking trial, or the seed phase's.
    const int step = seeded || options_.copy_phases ? 1 : 0;
    const int after_workers = step + prefetch + persistent + start_method + binding + threads + final_check;
    switch (at_) {
      case SequenceAt::kBaseline: return setup_.check_seed && seeded ? 1 + 2 * repeats() : step + 4 + after_workers;
      case SequenceAt::kSeedCheck: return 2 * repeats();
      case SequenceAt::kPin: return 4 + after_workers;
      case SequenceAt::kWorkers:
        return (refining_ ? 1 : std::max(0, (options_.time_budget_s > 0 ? 1 : 2) - misses_) + 1) + after_workers;
      case SequenceAt::kNonBlocking: return after_workers - step;
      // PersistentFirst swaps the two phases.
      case SequenceAt::kPrefetch:
        return std::max(0, prefetch - prefetch_done_) + (persistent_first_ ? 0 : persistent) + start_method +
               binding + threads + final_check;
      case SequenceAt::kPersistent:
        return std::max(0, persistent - persistent_done_) + (persistent_first_ ? prefetch : 0) + start_method +
               binding + threads + final_check;
      case SequenceAt::kRevisit:
        return 2 + (persistent_first_ ? prefetch : 0) + start_method + binding + threads + final_check;
      case SequenceAt::kStartMethod: return std::max(0, start_method - start_method_done_) + binding + threads + final_check;
      case SequenceAt::kBinding: return binding + threads + final_check;
      case SequenceAt::kThreads: return threads + final_check;
      case SequenceAt::kCombined: return 2 * repeats();
      case SequenceAt::kFinal: return std::max(0, 2 * repeats() - final_done_);
      case SequenceAt::kDone: return 0;
    }
    return 0;
  }

  SearchProgress Progress() const {
    return {static_cast<int>(outcome_.trials.size()), TrialsLeft()};
  }

  // `budget_may_end`: false for the second trial of a pair (MeasurePairs),
  // which is measured even past the budget so that no pair is left half.
  size_t Measure(const char* phase, const loader::Knobs& knobs, TrialPlan plan = {}, bool budget_may_end = true) {
    if (budget_may_end && options_.time_budget_s > 0 && at_ != SequenceAt::kBaseline &&
        at_ != SequenceAt::kSeedCheck && at_ != SequenceAt::kFinal && ElapsedS() >= options_.time_budget_s) {
      throw TimeBudgetSpent{};
    }
    plan.phase = phase;
    if (events_.on_start) events_.on_start(plan, knobs, {static_cast<int>(outcome_.trials.size()), TrialsLeft()});
    TrialRecord trial = measurer_.MeasurePlanned(knobs, plan);
    trial.phase = phase;
    trial.knobs = knobs;
    trials().push_back(std::move(trial));
    const size_t index = trials().size() - 1;
    if (plan.window_epochs == 0) ChargeRestart(index);
    return index;
  }

  // Under a time budget the sequence may end before persistent_workers, and
  // the job then keeps what it has: workers restarted at every epoch. Time
  // windows rarely cross an epoch's end, so they miss that restart, and with
  // short epochs it outweighs what more workers gain (a job of 3 s epochs:
  // 16 workers, 0.84 s to restart, ran 8% faster than 8 in windows and 11%
  // slower per epoch). So under a budget a trial measured in time windows,
  // with workers that do not persist, is judged by the rate of a whole epoch:
  // its windows' rate with the restart it paid before its first batch (its
  // time to first batch) charged once per epoch. The interval is charged
  // alike. Whole-epoch windows hold their restarts already.
  void ChargeRestart(size_t index) {
    TrialRecord& t = trials()[index];
    const int64_t samples_per_epoch = SamplesPerEpoch();
    if (options_.time_budget_s <= 0 || t.status != TrialStatus::kOk || t.knobs.num_workers == 0 ||
        t.knobs.persistent_workers || !(t.time_to_first_batch_s > 0) || samples_per_epoch <= 0 ||
        !(t.samples_per_s > 0)) {
      return;
    }
    const double epoch_samples = static_cast<double>(samples_per_epoch);
    const double restart_s = t.time_to_first_batch_s;
    double windows = t.samples_per_s;
    if (t.id != 0) {
      // Replayed (a resumed run's stored trial): charged when it was measured.
      windows = UnchargedRate(t.samples_per_s, epoch_samples, restart_s);
      if (!(windows > 0)) return;
    } else {
      const auto per_epoch = [&](double rate) {
        return rate > 0 ? epoch_samples / (epoch_samples / rate + restart_s) : rate;
      };
      t.samples_per_s = per_epoch(windows);
      t.ci_low = per_epoch(t.ci_low);
      t.ci_high = per_epoch(t.ci_high);
      t.mb_per_s *= t.samples_per_s / windows;
    }
    charged_[index] = Format("%.1f samples/s per epoch: %.1f in its windows, its restart (%.0f ms to the first batch) "
                             "charged once per epoch of %lld samples, as a job without persistent workers pays it",
                             t.samples_per_s, windows, restart_s * 1e3,
                             static_cast<long long>(samples_per_epoch));
  }

  // The rate of `epoch_samples` at `charged` samples/s per epoch without its
  // `restart_s`: ChargeRestart undone (0 when nothing is left).
  static double UnchargedRate(double charged, double epoch_samples, double restart_s) {
    const double epoch_s = charged > 0 ? epoch_samples / charged - restart_s : 0.0;
    return epoch_s > 0 ? epoch_samples / epoch_s : 0.0;
  }

  // A trial's rate in its windows: its figure without the restart ChargeRestart charged to it.
  double WindowsRate(size_t index) {
    const TrialRecord& t = trials()[index];
    if (!charged_.count(index)) return t.samples_per_s;
    const double windows =
        UnchargedRate(t.samples_per_s, static_cast<double>(SamplesPerEpoch()), t.time_to_first_batch_s);
    return windows > 0 ? windows : t.samples_per_s;
  }

  // Writes the decision and hands the trial on. Every trial passes here once.
  void Decide(size_t index, std::string decision) {
    TrialRecord& t = trials()[index];
    if (t.status == TrialStatus::kFailed) decision = "failed: " + t.error.value_or("unknown error");
    if (t.status == TrialStatus::kSkipped) decision = "skipped: " + t.error.value_or("over a budget");
    if (const auto it = charged_.find(index); it != charged_.end()) {
      decision += (decision.empty() ? "" : "; ") + it->second;
    }
    t.decision = std::move(decision);
    if (events_.on_trial) events_.on_trial(t, Progress());
  }

  void AddPhase(std::string phase, bool kept, std::string why) {
    outcome_.phases.push_back({std::move(phase), kept, std::move(why)});
  }

  // How a step that gains within the noise or the threshold is remembered:
  // not at all, or for the combined trial (Combined) to measure again.
  enum class IfSmallGain { kForget, kRevisit };

  // Measures one change to the current setting and keeps it when it gains.
  template <typename Change>
  void TryStep(const char* phase, Change change, IfSmallGain small_gain, const std::string& note = "") {
    loader::Knobs knobs = current_;
    change(knobs);
    const size_t index = Measure(phase, knobs);
    const TrialRecord& t = trials()[index];
    if (t.status != TrialStatus::kOk) {
      Decide(index, "");
      AddPhase(phase, false, t.decision);
      return;
    }
    const bool gain = IsGain(t, current(), options_.gain_threshold);
    const std::string figure = Percent(Gain(t, current()));
    if (gain) {
      Decide(index, "kept: " + figure + note);
      current_ = knobs;
      current_index_ = index;
    } else {
      if (small_gain == IfSmallGain::kRevisit && t.samples_per_s > current().samples_per_s) {
        small_gains_.push_back({phase, index});
      }
      Decide(index, NotKept(t, current(), options_.gain_threshold) + note);
    }
    AddPhase(phase, gain, trials()[index].decision);
  }

  // Batches per epoch: the setup's (native workloads know their dataset), else
  // what the baseline trial reported (a command may say it); 0 = unknown.
  // Taken from the records, so a resumed run sees the same value.
  int64_t BatchesPerEpoch() {
    if (setup_.batches_per_epoch > 0) return setup_.batches_per_epoch;
    if (outcome_.baseline) return trials()[*outcome_.baseline].batches_per_epoch.value_or(0);
    return 0;
  }

  // The next worker count of the doubling, or 0 when it ends here. With a
  // known epoch of B batches, B workers run it in one round (each worker
  // loads one batch); more cannot shorten it, so the doubling's last point is B.
  int NextDoubling(int workers, int64_t batches) const {
    if (batches > 0 && workers >= batches) return 0;
    int next = workers * 2;
    if (batches > 0 && next > batches) next = static_cast<int>(batches);
    return next <= setup_.max_workers ? next : 0;
  }

  // The doubling, the refinement, and the knee. When the time budget ends
  // either, the knee is taken from the curve measured so far, as the phase
  // would have, and the sequence ends there (KeepBestAtBudget).
  void Workers() {
    std::vector<std::pair<int, size_t>> curve = {{0, current_index_}};
    const int64_t batches = BatchesPerEpoch();
    std::string stop;
    bool budget_spent = false;
    try {
      stop = setup_.seed ? SeededDoubling(curve, batches) : Doubling(curve, batches);
      refining_ = true;
      Refine(curve, batches);
    } catch (const TimeBudgetSpent&) {
      budget_spent = true;
      const int most = std::max_element(curve.begin(), curve.end())->first;
      stop = most > 0 ? "the time budget ended the phase after " + WorkersText(most)
                      : "the time budget ended the phase before any worker count was measured";
    }
    std::sort(curve.begin(), curve.end());
    workers_curve_ = curve;
    size_t knee = Knee(curve);
    std::string paired;
    bool by_pairs = false;
    if (!budget_spent && curve[knee].first == 0) {
      try {
        if (const auto count = PairedKnee(curve, &paired)) {
          knee = *count;
          by_pairs = true;
        }
      } catch (const TimeBudgetSpent&) {
        budget_spent = true;
        paired = "the time budget ended its pairs with the baseline before they were measured";
      }
    }
    current_.num_workers = curve[knee].first;
    current_index_ = curve[knee].second;
    outcome_.knee_workers = curve[knee].first;
    outcome_.knee_samples_per_s = trials()[curve[knee].second].samples_per_s;
    // More workers than the knee that gave a higher median: within the
    // tolerance alone, but a candidate for the combined step.
    size_t top = knee;
    for (size_t i = knee + 1; i < curve.size(); ++i) {
      if (trials()[curve[i].second].samples_per_s > trials()[curve[top].second].samples_per_s) top = i;
    }
    if (top != knee) small_gains_.push_back({"num_workers", curve[top].second});
    KneePhase(curve, knee, by_pairs, batches, paired.empty() ? stop : stop + "; " + paired);
    if (budget_spent) {
      budget_from_ = trials().size();  // the curve's trials were judged by the knee rule
      throw TimeBudgetSpent{};
    }
  }

  // The unseeded doubling (search.h): adds its points to `curve` (which holds
  // the baseline); returns how it ended, for the phase's text.
  std::string Doubling(std::vector<std::pair<int, size_t>>& curve, int64_t batches) {
    size_t best = current_index_;
    std::string stop = "reached max_workers " + std::to_string(setup_.max_workers) +
                       (setup_.max_workers_cap_why.empty() ? "" : " (" + setup_.max_workers_cap_why + ")");
    misses_ = 0;
    bool fall_pending = false;  // a fall beyond the noise that the next doubling must confirm
    for (int workers = std::min(1, setup_.max_workers); workers > 0;) {
      loader::Knobs knobs = current_;
      knobs.num_workers = workers;
      const size_t index = Measure("num_workers", knobs);
      const TrialRecord& t = trials()[index];
      if (t.status == TrialStatus::kSkipped) {
        Decide(index, "");
        stop = "stopped at " + WorkersText(workers) + ": over a budget";
        break;
      }
      if (t.status != TrialStatus::kOk) {
        Decide(index, "");
        stop = "stopped at " + WorkersText(workers) + ": the trial failed";
        break;
      }
      curve.emplace_back(workers, index);
      const int next = NextDoubling(workers, batches);
      const TrialRecord& best_t = trials()[best];
      const double gain = Gain(t, best_t);
      // Below the usable CPU count, more workers can still use more cores: any
      // rise of the median keeps the doubling going (a CPU-bound curve rises
      // to the CPU count, often by less than the threshold per step near it).
      const bool below_cpus = setup_.usable_cpus > 0 && workers < setup_.usable_cpus;
      const double rising = below_cpus ? 0.0 : options_.gain_threshold;
      // Below the best by more than the threshold, beyond the noise.
      const bool falls = IsGain(best_t, t, options_.gain_threshold);
      // Under a time budget, above the CPU count, the first doubling without a
      // gain ends it: each doubling there starts twice the workers of the
      // last (a torch worker is a process, about 0.1 s of the main process's
      // to start and stop on a 2-CPU box), and the budget is better spent on
      // the phases after the knee than on confirming a miss.
      const bool one_miss = options_.time_budget_s > 0 && !below_cpus;
      if (IsGain(t, best_t, options_.gain_threshold)) {
        Decide(index, Percent(gain) + " over the best so far");
        best = index;
        misses_ = 0;
        fall_pending = false;
      } else if (workers == 1) {
        // One worker moves the loading out of the main process without adding
        // parallelism, and adds the IPC: no gain, or a dip, is the usual shape
        // of the curve here, not its knee. No stop and no miss before 2 workers.
        Decide(index, Percent(gain) + (falls ? " below the best" : "") +
                          ": 1 worker adds no parallelism to the main process's loading; go on to 2");
      } else if (falls && fall_pending) {
        Decide(index, Percent(gain) + " below the best: the fall is confirmed, stop doubling");
        stop = "stopped at " + WorkersText(workers) + ": throughput falls";
        break;
      } else if (falls && (misses_ >= 1 || one_miss)) {
        Decide(index, Percent(gain) + " below the best" +
                          (misses_ >= 1 ? ", after a doubling without a gain" : ", beyond the noise, under the time budget") +
                          ": stop doubling");
        stop = "stopped at " + WorkersText(workers) +
               (misses_ >= 1 ? ": two doublings without a gain" : ": throughput falls (under the time budget, no second doubling confirms it)");
        break;
      } else if (falls) {
        // A single fall beyond the noise can be the machine's, not the
        // curve's: it counts as a miss, and the next doubling confirms it.
        ++misses_;
        fall_pending = true;
        Decide(index, Percent(gain) + " below the best, beyond the noise" +
                          (next > 0 ? "; the next doubling confirms it before stopping" : ""));
      } else if (gain > rising) {
        // The median rose but not beyond the noise (or, below the CPU count,
        // not beyond the threshold): not a gain to keep, not a reason to stop.
        Decide(index, Percent(gain) + (below_cpus ? ": rising below the usable CPU count; keep doubling"
                                                  : ": rising, but within noise; keep doubling"));
        misses_ = 0;
        fall_pending = false;
      } else if (++misses_ >= (one_miss ? 1 : 2)) {
        const std::string without = one_miss ? "a doubling without a gain under the time budget"
                                              : "two doublings without a gain";
        Decide(index, Percent(gain) + ": " + without + ", stop doubling");
        stop = "stopped at " + WorkersText(workers) + ": " + without;
        break;
      } else {
        Decide(index, Percent(gain) + ": no gain beyond noise");
        fall_pending = false;
      }
      if (next == 0 && workers < setup_.max_workers) {
        stop = "stopped at " + WorkersText(workers) + ": one round per epoch (" + std::to_string(batches) +
               " batches), more workers cannot shorten it";
      }
      workers = next;
    }
    return stop;
  }

  // Under a time budget the doubling ends on one miss above the CPU count,
  // and a worker count without persistent workers pays its restart per epoch
  // (ChargeRestart): a knee at 0 workers rests on few sequential trials, and
  // where the step's own speed moves between trials (a CPU-trained model on a
  // shared VM), those can put a real gain below the baseline. So before the
  // workers are dropped, the worker count the knee rule picks among the
  // counts measured (the fewest within knee_tolerance of the best of them:
  // two counts that read within the noise of each other leave the CPUs to
  // the step with the fewer; an in-job CNN's doubling read 1 worker -3.4%
  // and 2 workers -3.0% of the baseline, and its truth ran 1 with persistent
  // workers x1.18 of 0 and 2 x1.06) and the baseline run
  // in `repeats` interleaved pairs of one window each, as in the final check;
  // the count is the knee when the pairs' median puts the baseline outside
  // knee_tolerance of it (the knee rule, on drift-free figures). While the
  // bar is still inside their interval, more pairs take the budget's time
  // left (PairsPlan::settle_bar): a knee at 0 workers leaves no worker phase
  // after it, so that time would go unused, and a CPU-trained step moves one
  // pair's ratio by 10-20% (an in-job CNN's read x0.84, x1.03, x1.09, median
  // under the bar, where its truth ran 1 worker x1.09 and 2 with persistent
  // workers x1.19 of 0). Returns its index on `curve`, or nullopt; `why` says what
  // the pairs measured.
  // Unseeded only: a seeded doubling starts at a stored knee.
  std::optional<size_t> PairedKnee(const std::vector<std::pair<int, size_t>>& curve, std::string* why) {
    if (options_.time_budget_s <= 0 || setup_.seed) return std::nullopt;
    std::vector<std::pair<int, const TrialRecord*>> counts;  // the worker counts measured
    std::vector<size_t> on_curve;                             // each one's index on `curve`
    for (size_t i = 0; i < curve.size(); ++i) {
      if (curve[i].first == 0) continue;
      counts.emplace_back(curve[i].first, &trials()[curve[i].second]);
      on_curve.push_back(i);
    }
    const std::optional<size_t> knee = KneeIndex(counts, options_.knee_tolerance);
    if (!knee) return std::nullopt;
    const size_t candidate = on_curve[*knee];
    const std::string count = WorkersText(curve[candidate].first);
    int done = 0;
    // Copies: measuring grows trials(), which may move its records.
    const loader::Knobs baseline = trials()[curve.front().second].knobs;
    const loader::Knobs workers = trials()[curve[candidate].second].knobs;
    // In their windows: whether the workers feed the step faster is the
    // question here; the restart a charged figure holds is persistent_workers'
    // to remove, and the final check weighs the answer per epoch.
    const double bar = 1.0 / (1.0 - options_.knee_tolerance);
    const std::vector<double> ratios = MeasurePairs("num_workers_pairs", baseline, workers, "baseline", count, &done,
                                                    PairsPlan{.in_windows = true, .settle_bar = bar});
    budget_from_ = trials().size();  // single windows, judged here: not weighed again at the budget
    if (ratios.empty()) {
      *why = "no pair of " + count + " with the baseline was measured; the knee stays at 0 workers";
      return std::nullopt;
    }
    const Summary s = Summarize(ratios);
    const bool more_pairs = static_cast<int>(ratios.size()) > repeats();
    const std::string measured = Format("x%.2f [%.2f, %.2f]", s.median, s.ci_low, s.ci_high) +
                                 " over the baseline in their windows, " + std::to_string(ratios.size()) +
                                 " interleaved pairs" +
                                 (more_pairs ? " (" + std::to_string(repeats()) +
                                                   ", then more while their interval held x" + Format("%.3f", bar) +
                                                   " and the budget had time)"
                                             : "");
    if (s.median > bar) {
      *why = "the knee at 0 workers was checked in pairs: " + count + " ran " + measured + ", the baseline outside " +
             Percent(options_.knee_tolerance).substr(1) + " of it (above x" + Format("%.3f", bar) + "): " + count +
             " is the knee";
      return candidate;
    }
    *why = "the knee at 0 workers was checked in pairs: " + count + " ran " + measured + ", not above x" +
           Format("%.3f", bar) + " (the baseline within " + Percent(options_.knee_tolerance).substr(1) +
           " of it): the knee stays at 0 workers";
    return std::nullopt;
  }

  // The num_workers phase's record: the knee (`by_pairs`: PairedKnee's),
  // Kneedle's, and how the doubling ended.
  void KneePhase(const std::vector<std::pair<int, size_t>>& curve, size_t knee, bool by_pairs, int64_t batches,
                 const std::string& stop) {
    std::vector<double> xs, ys;
    for (const auto& [w, i] : curve) {
      xs.push_back(w);
      ys.push_back(trials()[i].samples_per_s);
    }
    if (const auto k = KneedleIndex(xs, ys, 1.0)) outcome_.kneedle_workers = curve[*k].first;

    std::string why = "knee at " + WorkersText(curve[knee].first) +
                      (by_pairs ? std::string(" (by its pairs with the baseline, below)")
                                    : " (fewest within " + Percent(options_.knee_tolerance).substr(1) +
                                          " of the best median, " + Format("%.1f", outcome_.knee_samples_per_s) +
                                          " samples/s)") +
                      "; ";
    if (!outcome_.kneedle_workers) {
      why += "Kneedle finds no knee on this curve; ";
    } else if (*outcome_.kneedle_workers != curve[knee].first) {
      why += "Kneedle (S=1) puts it at " + std::to_string(*outcome_.kneedle_workers) + "; ";
    } else {
      why += "Kneedle (S=1) agrees; ";
    }
    why += stop;
    if (Stepped(batches, curve.back().first)) why += "; " + SteppedNote(batches, curve.back().first);
    AddPhase("num_workers", curve[knee].first > 0, why);
  }

  // Whether non-persistent workers up to `workers` see fewer than a few
  // batches each per epoch, so the epoch's rounds (ceil(batches / workers))
  // make the curve a staircase rather than a smooth rise.
  static bool Stepped(int64_t batches, int workers) {
    return batches > 0 && workers > 0 && batches < kFewBatchesPerWorker * workers;
  }

  // "the curve is stepped by epoch rounds: 16 batches per epoch, so 9 to 15
  // workers take 2 rounds as 8 do; only 1, 2, 3, 4, 6, 8, 16 can differ".
  std::string SteppedNote(int64_t batches, int max_workers) const {
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

  // The fewest workers for each round count, ceil(batches / r), strictly between lo and hi, ascending.
  static std::vector<int> RoundPoints(int64_t batches, int lo, int hi) {
    std::vector<int> points;
    for (int64_t r = batches; r >= 1; --r) {
      const int64_t w = (batches + r - 1) / r;
      if (w > lo && w < hi && (points.empty() || points.back() != w)) points.push_back(static_cast<int>(w));
    }
    return points;
  }

  size_t Knee(const std::vector<std::pair<int, size_t>>& curve) {
    std::vector<std::pair<int, const TrialRecord*>> points;
    for (const auto& [w, i] : curve) points.emplace_back(w, &trials()[i]);
    return *KneeIndex(points, options_.knee_tolerance);
  }

  // Bisects between the knee and its lower neighbour while the knee gains over
  // that neighbour by more than the threshold (so a point between can differ)
  // and there is a point between worth measuring: the fewest workers that
  // reach the plateau is what users want. Points worth measuring: with a known
  // epoch, only those that change the number of rounds (RoundPoints); else any
  // count, when the two are more than 2 apart.
  void Refine(std::vector<std::pair<int, size_t>>& curve, int64_t batches) {
    while (true) {
      std::sort(curve.begin(), curve.end());
      const size_t k = Knee(curve);
      if (k == 0) return;
      // Seeded: a knee at the seed's own was bisected on its machine already.
      if (seeded_knee_ == curve[k].first) return;
      const auto [lo, lo_index] = curve[k - 1];
      const auto [hi, hi_index] = curve[k];
      if (Gain(trials()[hi_index], trials()[lo_index]) <= options_.gain_threshold) return;
      int mid = 0;
      if (Stepped(batches, hi)) {
        const std::vector<int> points = RoundPoints(batches, lo, hi);
        if (points.empty()) return;
        mid = points[(points.size() - 1) / 2];
      } else {
        if (hi - lo <= 2) return;
        mid = (lo + hi) / 2;
      }
      loader::Knobs knobs = current_;
      knobs.num_workers = mid;
      const size_t index = Measure("num_workers", knobs);
      if (trials()[index].status != TrialStatus::kOk) {
        Decide(index, "");
        return;
      }
      Decide(index, "refining the knee between " + std::to_string(lo) + " and " + std::to_string(hi) + " workers");
      curve.emplace_back(knobs.num_workers, index);
    }
  }

  // Seeded (search.h): the seed's pin_memory, non_blocking and prefetch_factor
  // for the doubling, in place of the pin_memory phase; ConfirmSeed checks
  // them at the knee.
  void SeedStart() {
    const loader::Knobs& best = setup_.seed->best;
    current_.pin_memory = best.pin_memory || best.non_blocking;
    current_.non_blocking = best.non_blocking;
    if (best.prefetch_factor > 0) current_.prefetch_factor = best.prefetch_factor;
    // Its persistent_workers too, when the epochs here are short enough to
    // measure it: then every seeded trial spans whole epochs, where it acts.
    // Judged at the baseline's rate, the only one known yet: the workers'
    // curve is faster, so the check errs towards the unseeded phase.
    std::string persistent = "";
    if (best.persistent_workers) {
      std::string why;
      seeded_plan_.window_epochs = PersistentWindowEpochs(&why);
      if (seeded_plan_.window_epochs > 0) {
        current_.persistent_workers = true;
        persistent_plan_ = seeded_plan_;
        persistent = ", persistent_workers on (windows of " + std::to_string(seeded_plan_.window_epochs) +
                     " whole epochs)";
      }
    }
    AddPhase("pin_memory", false,
             "not a phase: seeded from " + setup_.seed->source + ", the curve is measured with its pin_memory " +
                 (current_.pin_memory ? "on" : "off") + ", non_blocking " + (current_.non_blocking ? "on" : "off") +
                 ", prefetch_factor " + std::to_string(current_.prefetch_factor) + persistent +
                 " (confirmed at the knee)");
  }

  // The seeded doubling (search.h): from the seed's knee k up while each
  // doubling rises by the unseeded rule, then down from k/2 while each halving
  // is within knee_tolerance of the best median. Adds the points to `curve`
  // (which holds the baseline); returns how it ended, for the phase's text.
  std::string SeededDoubling(std::vector<std::pair<int, size_t>>& curve, int64_t batches) {
    // The curve is measured in the seed's final regime, so it starts at the
    // worker count of the seed's best (more than its knee when, e.g., more
    // workers paid once persistent), else at its knee.
    const bool from_best = setup_.seed->best.num_workers > setup_.seed->knee_workers;
    const std::string start_of =
        std::string(from_best ? "the best setting's worker count of " : "the knee of ") + setup_.seed->source;
    int k = std::clamp(from_best ? setup_.seed->best.num_workers : setup_.seed->knee_workers, 1,
                       std::max(1, setup_.max_workers));
    if (batches > 0 && k > batches) k = static_cast<int>(batches);
    seeded_knee_ = k;
    // Measures one count; nullopt (decided) when the trial did not run.
    const auto measure = [&](int workers, std::string* why) -> std::optional<size_t> {
      loader::Knobs knobs = current_;
      knobs.num_workers = workers;
      const size_t index = Measure("num_workers", knobs, seeded_plan_);
      if (trials()[index].status != TrialStatus::kOk) {
        const bool skipped = trials()[index].status == TrialStatus::kSkipped;
        *why = WorkersText(workers) + (skipped ? ": over a budget" : ": the trial failed");
        Decide(index, "");
        return std::nullopt;
      }
      curve.emplace_back(workers, index);
      return index;
    };
    size_t best = curve.front().second;  // the baseline, as in the unseeded doubling
    std::string up;
    if (const auto at_k = measure(k, &up)) {
      const TrialRecord& t = trials()[*at_k];
      Decide(*at_k, Percent(Gain(t, trials()[best])) + " over the baseline: " + start_of +
                        ", where the seeded doubling starts");
      if (IsGain(t, trials()[best], options_.gain_threshold)) best = *at_k;
      int last = k;
      for (int workers = NextDoubling(k, batches); up.empty(); workers = NextDoubling(workers, batches)) {
        if (workers == 0) {
          up = WorkersText(last) + (last >= setup_.max_workers ? ": max_workers" : ": one round per epoch");
          break;
        }
        const auto index = measure(workers, &up);
        if (!index) break;
        const TrialRecord& u = trials()[*index];
        const double gain = Gain(u, trials()[best]);
        const bool below_cpus = setup_.usable_cpus > 0 && workers < setup_.usable_cpus;
        if (IsGain(u, trials()[best], options_.gain_threshold)) {
          Decide(*index, Percent(gain) + " over the best so far; keep doubling");
          best = *index;
        } else if (gain > (below_cpus ? 0.0 : options_.gain_threshold)) {
          Decide(*index, Percent(gain) + (below_cpus ? ": rising below the usable CPU count; keep doubling"
                                                     : ": rising, but within noise; keep doubling"));
        } else {
          Decide(*index, Percent(gain) + ": no gain over the best so far, stop doubling up");
          up = WorkersText(workers) + ": no gain";
        }
        last = workers;
      }
    }
    std::string down;
    for (int workers = k / 2; workers >= 1 && down.empty(); workers /= 2) {
      const auto index = measure(workers, &down);
      if (!index) break;
      double top = 0;
      for (const auto& [w, i] : curve) top = std::max(top, trials()[i].samples_per_s);
      const TrialRecord& t = trials()[*index];
      const std::string figure = Percent(top > 0 ? t.samples_per_s / top - 1.0 : 0.0) + " against the best median";
      if (t.samples_per_s >= top * (1.0 - options_.knee_tolerance)) {
        Decide(*index, figure + ", within the knee tolerance" + (workers > 1 ? "; halve again" : ""));
      } else {
        Decide(*index, figure + ", beyond the knee tolerance: stop halving");
        down = WorkersText(workers) + ": below the knee tolerance";
      }
    }
    if (down.empty()) down = k > 1 ? "1 worker" : "nothing below 1 worker";
    return "seeded at " + WorkersText(k) + ", " + start_of + "; doubled up to " + up +
           "; halved down to " + down;
  }

  // Seeded: the curve was measured with the seed's pin_memory, non_blocking,
  // prefetch_factor and persistent_workers; the knee without them is measured
  // once (in the curve's windows), and they are kept by THE RULE or dropped.
  // No other value is tried.
  void ConfirmSeed() {
    loader::Knobs plain = trials()[*outcome_.baseline].knobs;
    plain.num_workers = current_.num_workers;
    if (current_.num_workers == 0) {
      current_ = plain;  // current_index_ is the baseline's
      AddPhase("seed", false, "not confirmed: the knee is the baseline (0 workers); nothing of the seed is kept");
      return;
    }
    std::string what;
    if (current_.pin_memory != plain.pin_memory) what += ", pin_memory";
    if (current_.non_blocking != plain.non_blocking) what += ", non_blocking";
    if (current_.prefetch_factor != plain.prefetch_factor) {
      what += ", prefetch_factor " + std::to_string(current_.prefetch_factor);
    }
    if (current_.persistent_workers != plain.persistent_workers) what += ", persistent_workers";
    if (what.empty()) {
      AddPhase("seed", false,
               "nothing to confirm: " + setup_.seed->source +
                   " kept none of pin_memory, non_blocking, persistent_workers or another prefetch_factor, so neither "
                   "does this sweep");
      return;
    }
    what = what.substr(2);
    const size_t seeded = current_index_;
    const size_t index = Measure("seed", plain, seeded_plan_);
    const TrialRecord& t = trials()[index];
    if (t.status != TrialStatus::kOk) {
      Decide(index, "");
      AddPhase("seed", true, "kept the seed's " + what + " unconfirmed: the knee without them did not run");
      return;
    }
    const TrialRecord& with = trials()[seeded];
    if (IsGain(with, t, options_.gain_threshold)) {
      Decide(index, "the knee without the seed's " + what + ": they gain " + Percent(Gain(with, t)) + ", kept");
      AddPhase("seed", true, "kept the seed's " + what + ": " + Percent(Gain(with, t)) + " at the knee");
    } else {
      Decide(index, "the seed's " + what + " dropped: " + NotKept(with, t, options_.gain_threshold));
      current_ = plain;
      current_index_ = index;
      AddPhase("seed", false, "dropped the seed's " + what + ": " + NotKept(with, t, options_.gain_threshold));
    }
  }

  void PrefetchFactors() {
    if (setup_.seed) {
      AddPhase("prefetch_factor", false,
               "not walked: seeded, prefetch_factor " + std::to_string(current_.prefetch_factor) +
                   " as the seed phase left it");
      return;
    }
    std::optional<size_t> best;
    std::optional<size_t> top;  // the highest median, gain or not
    loader::Knobs best_knobs;
    const int from = current_.prefetch_factor;
    std::string tried;
    prefetch_done_ = 0;
    for (int pf : options_.prefetch_factors) {
      if (pf == from) continue;
      loader::Knobs knobs = current_;
      knobs.prefetch_factor = pf;
      const size_t index = Measure("prefetch_factor", knobs, PlanAgainstCurrent());
      ++prefetch_done_;
      tried += (tried.empty() ? "" : ", ") + std::to_string(pf);
      const TrialRecord& t = trials()[index];
      if (t.status != TrialStatus::kOk) {
        Decide(index, "");
        continue;
      }
      const bool gain = IsGain(t, current(), options_.gain_threshold);
      Decide(index, (gain ? "gains " : "no gain: ") + Percent(Gain(t, current())) + " over prefetch_factor " +
                        std::to_string(from));
      if (!top || t.samples_per_s > trials()[*top].samples_per_s) top = index;
      if (gain && (!best || t.samples_per_s > trials()[*best].samples_per_s)) {
        best = index;
        best_knobs = knobs;
      }
    }
    if (best) {
      AddPhase("prefetch_factor", true,
               "kept " + std::to_string(best_knobs.prefetch_factor) + ": " +
                   Percent(Gain(trials()[*best], current())) + " over prefetch_factor " + std::to_string(from));
      current_ = best_knobs;
      current_index_ = *best;
    } else if (tried.empty()) {
      AddPhase("prefetch_factor", false, "not tried: sweep.prefetch_factors has no other value");
    } else {
      if (top && trials()[*top].samples_per_s > current().samples_per_s) {
        small_gains_.push_back({"prefetch_factor", *top});
      }
      AddPhase("prefetch_factor", false,
               "kept " + std::to_string(from) + ": none of " + tried + " gains beyond noise and the threshold");
    }
  }

  // Windows of whole epochs for a persistent_workers comparison, >= 2 epochs
  // per setting: `windows` (0: sweep.repeats) of this many epochs each. 0,
  // with the reason in `why`, when an epoch at the current rate is too long.
  int PersistentWindowEpochs(std::string* why, int windows = 0) {
    const int n = windows > 0 ? windows : repeats();
    const int epochs = std::max(1, (2 + n - 1) / n);
    const int64_t samples_per_epoch = SamplesPerEpoch();
    if (samples_per_epoch > 0 && current().samples_per_s > 0) {
      const double epoch_s = static_cast<double>(samples_per_epoch) / current().samples_per_s;
      const double trial_s = epoch_s * (n * epochs + 1);
      const double limit_s = std::max(30.0, 5.0 * repeats() * options_.measure_seconds);
      if (trial_s > limit_s) {
        *why = "not tried: an epoch takes about " + Format("%.0f s", epoch_s) + " here, so measuring " +
               std::to_string(n * epochs) + " epochs per setting would take " + Format("%.0f s", trial_s) +
               " (limit " + Format("%.0f s", limit_s) + "); the setting only saves the worker restart once per epoch";
        return 0;
      }
    }
    return epochs;
  }

  // How a trial compared with the current setting is measured: over whole
  // epochs once the persistent_workers phase kept it (measured so, the
  // current setting pays the refill at each epoch that time windows miss),
  // else in time windows.
  TrialPlan PlanAgainstCurrent() const {
    return persistent_kept_ && current_.persistent_workers ? persistent_plan_ : TrialPlan{};
  }

  // A command may not say its epoch length; the batches it reported do.
  int64_t SamplesPerEpoch() {
    return setup_.samples_per_epoch > 0 ? setup_.samples_per_epoch : BatchesPerEpoch() * current_.batch_size;
  }

  // Under a time budget the sequence may end before its last phases, and the
  // persistent_workers phase, which measures whole epochs, is the costliest.
  // It goes before prefetch_factor when what it saves, the workers' restart
  // at each epoch (the knee's time to its first batch), is at least
  // gain_threshold of an epoch at the knee's rate: then it is the larger gain
  // at stake. Without a budget, or seeded, the order is search.h's.
  bool PersistentFirst() {
    if (options_.time_budget_s <= 0 || setup_.seed) return false;
    const TrialRecord& knee = current();
    const int64_t samples_per_epoch = SamplesPerEpoch();
    if (knee.status != TrialStatus::kOk || knee.samples_per_s <= 0 || knee.time_to_first_batch_s <= 0 ||
        samples_per_epoch <= 0) {
      return false;
    }
    // What persistence gains: the restart over an epoch without it (a
    // charged figure has the restart in it; ChargeRestart).
    double epoch_s = static_cast<double>(samples_per_epoch) / knee.samples_per_s;
    if (charged_.count(current_index_)) epoch_s -= knee.time_to_first_batch_s;
    restart_share_ = knee.time_to_first_batch_s / epoch_s;
    return restart_share_ >= options_.gain_threshold;
  }

  // persistent_workers, then, when it was kept, the worker counts above the knee with it.
  void PersistentPhases() {
    at_ = SequenceAt::kPersistent;
    const auto say_why_first = [this] {
      if (persistent_first_ && !outcome_.phases.empty() && outcome_.phases.back().phase == "persistent_workers") {
        outcome_.phases.back().why += Format(
            "; tried before prefetch_factor, as the time budget may end the search: the workers' restart at each "
            "epoch was %.0f%% of one at the knee",
            100.0 * restart_share_);
      }
    };
    try {
      Persistent();
    } catch (const TimeBudgetSpent&) {  // the budget ended its pairs, which decided (PersistentInPairs)
      say_why_first();
      throw;
    }
    say_why_first();
    if (current_.persistent_workers && setup_.seed && seeded_plan_.window_epochs > 0) {
      AddPhase("num_workers_persistent", false,
               "not walked: seeded, the curve itself was measured with persistent workers over whole epochs");
    } else if (current_.persistent_workers) {
      at_ = SequenceAt::kRevisit;
      WorkersWithPersistent();
    }
  }

  void Persistent() {
    if (setup_.seed && !setup_.seed->best.persistent_workers) {
      AddPhase("persistent_workers", false, "not tried: seeded, and " + setup_.seed->source + " did not keep it");
      return;
    }
    if (setup_.seed && seeded_plan_.window_epochs > 0) {
      // The curve and the seed phase measured it already (search.h).
      AddPhase("persistent_workers", current_.persistent_workers,
               std::string(current_.persistent_workers ? "kept" : "dropped") +
                   " with the seed phase: the seeded curve was measured with persistent workers over whole epochs");
      return;
    }
    TrialPlan plan;
    // Under a time budget two windows per setting, the fewest an interval is
    // drawn from: each is a whole epoch, and the budget is short.
    if (options_.time_budget_s > 0) plan.repeats = std::min(repeats(), 2);
    std::string why;
    plan.window_epochs = PersistentWindowEpochs(&why, plan.repeats);
    if (plan.window_epochs == 0) {
      AddPhase("persistent_workers", false, why);
      return;
    }
    persistent_plan_ = plan;
    persistent_done_ = 0;
    if (options_.time_budget_s > 0) {
      PersistentInPairs(plan.window_epochs);
      return;
    }
    const size_t off = Measure("persistent_workers", current_, plan);
    ++persistent_done_;
    const TrialRecord& t_off = trials()[off];
    if (t_off.status != TrialStatus::kOk) {
      Decide(off, "");
      AddPhase("persistent_workers", false, trials()[off].decision);
      return;
    }
    Decide(off, "reference over whole epochs: epoch boundary " + BoundaryMs(t_off));

    loader::Knobs knobs = current_;
    knobs.persistent_workers = true;
    const size_t on = Measure("persistent_workers", knobs, plan);
    ++persistent_done_;
    const TrialRecord& t_on = trials()[on];
    if (t_on.status != TrialStatus::kOk) {
      Decide(on, "");
      AddPhase("persistent_workers", false, trials()[on].decision);
      return;
    }
    const TrialRecord& ref = trials()[off];
    const bool gain = IsGain(t_on, ref, options_.gain_threshold);
    const std::string boundary = "; epoch boundary " + BoundaryMs(ref) + " without, " + BoundaryMs(t_on) + " with";
    const std::string figure = Percent(Gain(t_on, ref));
    if (gain) {
      Decide(on, "kept: " + figure + boundary);
      current_ = knobs;
      current_index_ = on;
      persistent_kept_ = true;
    } else {
      Decide(on, NotKept(t_on, ref, options_.gain_threshold) + boundary);
      if (t_on.samples_per_s > ref.samples_per_s) {
        small_gains_.push_back({"persistent_workers", on});
        persistent_reference_ = off;
      }
    }
    AddPhase("persistent_workers", gain, trials()[on].decision);
  }

  // Under a time budget persistent_workers off and on run in interleaved
  // pairs, each trial one window of `window_epochs` whole epochs, so that
  // both sides are measured alike and a step whose speed moves within its
  // process moves both sides of a pair. Measured one after the other, the
  // reference was the knee's figure from short time windows with its restart
  // charged (ChargeRestart), against whole epochs with persistent workers; on
  // a CPU-trained CNN an epoch's mean read 8-13% under the windows' median
  // (slow phases of the step that most short windows miss), about what
  // persistent workers save, so they were rarely kept where they gained. It
  // is kept when the pairs' median is above x1.00, not beyond
  // gain_threshold: the setting only removes a cost (the workers' restart at
  // each epoch), a budget leaves no combined phase to take up a small gain,
  // and on the CNN it gained 4% at 1 worker where the next count with it
  // gained 3% more: two steps under the threshold, 6% of regret together.
  // The budget may end the pairs between two pairs, never inside one; the
  // pairs measured decide, and the sequence ends after the phase.
  void PersistentInPairs(int window_epochs) {
    const loader::Knobs off = current_;
    loader::Knobs on = current_;
    on.persistent_workers = true;
    PairsPlan how;
    how.window_epochs = window_epochs;
    bool budget_ended = false;
    how.budget_ended = &budget_ended;
    how.over = "the pair's trial without";
    const size_t first = trials().size();
    const std::vector<double> ratios = MeasurePairs("persistent_workers", off, on, "without persistent_workers",
                                                    "with persistent_workers", &persistent_done_, how);
    budget_from_ = trials().size();  // single epochs, judged here: not weighed again at the budget
    if (ratios.empty()) {  // the first pair's trial failed (a budget ends the pairs only after one)
      AddPhase("persistent_workers", false, trials().back().decision);
      return;
    }
    // The last complete pair: its trials are the phase's figures from here on.
    const size_t on_index = first + 2 * ratios.size() - 1, off_index = on_index - 1;
    const Summary s = Summarize(ratios);
    const bool gain = s.median > 1.0;
    std::string why = Format("x%.2f [%.2f, %.2f]", s.median, s.ci_low, s.ci_high) + " with over without, " +
                      std::to_string(ratios.size()) + " interleaved pair" + (ratios.size() == 1 ? "" : "s") + " of " +
                      std::to_string(window_epochs) + " whole epoch" + (window_epochs == 1 ? "" : "s") + " each" +
                      (gain ? "" : ", not above x1.00") + "; epoch boundary " +
                      BoundaryMs(trials()[off_index]) + " without, " + BoundaryMs(trials()[on_index]) + " with" +
                      (budget_ended ? "; the time budget ended the pairs" : "");
    if (gain) {
      current_ = on;
      current_index_ = on_index;
      persistent_kept_ = true;
    }
    AddPhase("persistent_workers", gain, (gain ? "kept: " : "not kept: ") + why);
    if (budget_ended) throw TimeBudgetSpent{};
  }

  // With persistent_workers kept, the worker restart at each epoch, a cost
  // that grew with the worker count while the curve was measured, is gone, so
  // counts above the knee may now gain. Short epochs above all: restarting 8
  // workers every 16-batch epoch can lose to 6, yet with persistent workers 8
  // take 2 rounds per epoch against 3. The counts measured above the knee are
  // measured again with it, in order, over whole epochs, while each gains.
  void WorkersWithPersistent() {
    const char* phase = "num_workers_persistent";
    const TrialPlan plan = persistent_plan_;
    const int from = current_.num_workers;
    std::string why;
    bool kept = false;
    for (const auto& [workers, curve_index] : workers_curve_) {
      if (workers <= current_.num_workers || trials()[curve_index].status != TrialStatus::kOk) continue;
      loader::Knobs knobs = current_;
      knobs.num_workers = workers;
      const size_t index = Measure(phase, knobs, plan);
      const TrialRecord& t = trials()[index];
      if (t.status != TrialStatus::kOk) {
        Decide(index, "");
        why = t.decision;
        break;
      }
      const std::string over = " over " + WorkersText(current_.num_workers) + " with persistent_workers";
      if (IsGain(t, current(), options_.gain_threshold)) {
        Decide(index, "kept: " + Percent(Gain(t, current())) + over);
        current_ = knobs;
        current_index_ = index;
        kept = true;
        continue;
      }
      Decide(index, NotKept(t, current(), options_.gain_threshold) + over);
      break;
    }
    if (current_.num_workers == from && why.empty()) {
      why = workers_curve_.back().first <= from
                ? "not tried: no worker count above the knee was measured"
                : "kept " + WorkersText(from) + ": no larger count gains with persistent_workers";
    } else if (why.empty()) {
      why = "kept " + WorkersText(current_.num_workers) + " with persistent_workers (the knee without it: " +
            std::to_string(from) + ")";
    }
    AddPhase(phase, kept, why);
  }

  // The two phases around the loader (search.h): where the ranks run, then
  // how many threads each worker's (or rank's) CPU work uses.
  void NodePhases() {
    at_ = SequenceAt::kBinding;
    CpuBindingPhase();
    at_ = SequenceAt::kThreads;
    WorkerThreadsPhase();
  }

  // Measures each candidate change against the current setting and keeps the
  // best that gains by THE RULE (as prefetch_factor does). `name` says a
  // candidate's value in words, `from` the current one.
  template <typename Apply, typename Name>
  void TryValues(const char* phase, const std::vector<int>& values, Apply apply, Name name,
                 const std::string& from) {
    std::optional<size_t> best;
    loader::Knobs best_knobs;
    std::string tried;
    const size_t reference = current_index_;
    for (int value : values) {
      loader::Knobs knobs = current_;
      apply(knobs, value);
      const size_t index = Measure(phase, knobs);
      tried += (tried.empty() ? "" : ", ") + name(value);
      const TrialRecord& t = trials()[index];
      if (t.status != TrialStatus::kOk) {
        Decide(index, "");
        continue;
      }
      const TrialRecord& ref = trials()[reference];
      if (IsGain(t, ref, options_.gain_threshold)) {
        Decide(index, "gains " + Percent(Gain(t, ref)) + " over " + from);
        if (!best || t.samples_per_s > trials()[*best].samples_per_s) {
          best = index;
          best_knobs = knobs;
        }
      } else {
        Decide(index, NotKept(t, ref, options_.gain_threshold, " over " + from));
      }
    }
    if (best) {
      const std::string figure = Percent(Gain(trials()[*best], trials()[reference]));
      AddPhase(phase, true, "kept " + NameOf(phase, best_knobs) + ": " + figure + " over " + from);
      current_ = best_knobs;
      current_index_ = *best;
    } else {
      AddPhase(phase, false, "kept " + from + ": " + tried + " gained nothing beyond the noise and the threshold");
    }
  }

  static std::string NameOf(const char* phase, const loader::Knobs& k) {
    if (std::string(phase) == "cpu_binding") return loader::CpuBindingName(k.cpu_binding);
    if (std::string(phase) == "multiprocessing_context") return loader::StartMethodName(k.multiprocessing_context);
    return ThreadsText(k.worker_threads);
  }
  static std::string ThreadsText(int n) { return std::to_string(n) + (n == 1 ? " thread" : " threads"); }

  // The method StartMethod::kDefault stands for here (kDefault when unknown).
  loader::StartMethod Resolved(loader::StartMethod method) const {
    return method == loader::StartMethod::kDefault ? setup_.default_start_method : method;
  }

  // The methods the multiprocessing_context phase measures besides the
  // current one (search.h); empty when the phase does not run, with the
  // reason in `why`.
  std::vector<loader::StartMethod> StartMethodCandidates(std::string* why = nullptr) const {
    using loader::StartMethod;
    std::string unused;
    std::string& reason = why != nullptr ? *why : unused;
    if (!setup_.python_workload) {
      reason = "not tried: not a Python command workload";
      return {};
    }
    std::vector<StartMethod> methods = options_.start_methods;
    if (methods.empty()) {
      if (setup_.default_start_method == StartMethod::kDefault || setup_.default_start_method == StartMethod::kFork) {
        reason = std::string("not tried: the interpreter's default start method is ") +
                 (setup_.default_start_method == StartMethod::kFork ? "fork" : "unknown") +
                 " (sweep.start_methods auto measures the methods when it is not fork; list them to measure "
                 "them anyway)";
        return {};
      }
      methods = {StartMethod::kFork, StartMethod::kForkserver, StartMethod::kSpawn};
    }
    const StartMethod now = Resolved(current_.multiprocessing_context);
    std::erase_if(methods, [&](StartMethod m) { return m == now; });
    if (methods.empty()) reason = "not tried: sweep.start_methods lists only the current method";
    return methods;
  }

  // "fork: start-up 0.12 s, epoch boundary 35.0 ms": what the start method costs.
  std::string StartCost(const TrialRecord& t) const {
    const std::string startup =
        std::isfinite(t.worker_startup_s) ? Format("%.3f s", t.worker_startup_s) : std::string("not measured");
    const loader::StartMethod method = Resolved(t.knobs.multiprocessing_context);
    std::string name = loader::StartMethodName(method);
    if (t.knobs.multiprocessing_context == loader::StartMethod::kDefault && method != loader::StartMethod::kDefault) {
      name += " (the default)";
    }
    return name + ": worker start-up " + startup + ", epoch boundary " + BoundaryMs(t);
  }

  // multiprocessing_context (search.h): the current method again as the
  // reference, then each other method, all with the same windows.
  void StartMethodPhase() {
    const char* phase = "multiprocessing_context";
    std::string why;
    const std::vector<loader::StartMethod> candidates = StartMethodCandidates(&why);
    if (candidates.empty()) {
      if (setup_.python_workload) AddPhase(phase, false, why);
      return;
    }
    TrialPlan plan;
    std::string epochs_note;
    if (!current_.persistent_workers) plan.window_epochs = PersistentWindowEpochs(&epochs_note);
    start_method_done_ = 0;
    const size_t reference = Measure(phase, current_, plan);
    ++start_method_done_;
    if (trials()[reference].status != TrialStatus::kOk) {
      Decide(reference, "");
      AddPhase(phase, false, trials()[reference].decision);
      return;
    }
    Decide(reference, "reference: " + StartCost(trials()[reference]));
    std::optional<size_t> best;
    std::string costs = StartCost(trials()[reference]);
    for (const loader::StartMethod method : candidates) {
      loader::Knobs knobs = current_;
      knobs.multiprocessing_context = method;
      const size_t index = Measure(phase, knobs, plan);
      ++start_method_done_;
      const TrialRecord& t = trials()[index];
      if (t.status != TrialStatus::kOk) {
        Decide(index, "");
        costs += "; " + std::string(loader::StartMethodName(method)) + ": failed";
        continue;
      }
      costs += "; " + StartCost(t);
      const TrialRecord& ref = trials()[reference];
      if (IsGain(t, ref, options_.gain_threshold)) {
        Decide(index, "gains " + Percent(Gain(t, ref)) + "; " + StartCost(t));
        if (!best || t.samples_per_s > trials()[*best].samples_per_s) best = index;
      } else {
        Decide(index, NotKept(t, ref, options_.gain_threshold) + "; " + StartCost(t));
      }
    }
    if (best) {
      current_ = trials()[*best].knobs;
      current_index_ = *best;
      AddPhase(phase, true, "kept " + NameOf(phase, current_) + ": " +
                                Percent(Gain(trials()[*best], trials()[reference])) + " (" + costs + ")");
    } else {
      AddPhase(phase, false, std::string("kept ") + loader::StartMethodName(Resolved(current_.multiprocessing_context)) +
                                 ": no other method gained beyond the noise and the threshold (" + costs + ")");
    }
  }

  // cpu_binding (node sweeps, sweep.cpu_binding auto): split, and numa where
  // the ranks' GPUs' NUMA nodes are known (elsewhere numa is split).
  void CpuBindingPhase() {
    const char* phase = "cpu_binding";
    if (setup_.ranks < 2) {
      AddPhase(phase, false, "not tried: one rank; the binding matters where ranks share the CPUs (sweep.ranks)");
      return;
    }
    if (options_.cpu_binding != BindingChoice::kAuto) {
      AddPhase(phase, false, std::string("not tried: sweep.cpu_binding is ") +
                                 BindingChoiceName(options_.cpu_binding) + " for every trial (auto searches it)");
      return;
    }
    std::vector<int> values = {static_cast<int>(loader::CpuBinding::kSplit)};
    if (setup_.numa_known) values.push_back(static_cast<int>(loader::CpuBinding::kNuma));
    TryValues(
        phase, values, [](loader::Knobs& k, int v) { k.cpu_binding = static_cast<loader::CpuBinding>(v); },
        [](int v) { return std::string(loader::CpuBindingName(static_cast<loader::CpuBinding>(v))); },
        std::string("cpu_binding ") + loader::CpuBindingName(current_.cpu_binding) +
            (setup_.numa_known ? "" : " (numa not tried: the GPUs' NUMA nodes are unknown, so it would be split)"));
  }

  // worker_threads: fewer intra-op threads per worker (and rank) than the
  // workload's own: 1, and the usable CPUs per worker when that differs.
  void WorkerThreadsPhase() {
    const char* phase = "worker_threads";
    const int from = current_.worker_threads > 0 ? current_.worker_threads : setup_.default_worker_threads;
    if (from <= 1) {
      AddPhase(phase, false,
               from == 1 ? "not tried: each worker runs its CPU work on 1 thread already (workload.cpu_threads 1)"
                         : "not tried: the workload has no intra-op threads to set");
      return;
    }
    // setup_.usable_cpus is one rank's share in a node sweep (preflight.h).
    const int loaders = std::max(1, current_.num_workers);
    const int share = setup_.usable_cpus > 0
                          ? std::max(1, static_cast<int>(std::floor(setup_.usable_cpus / loaders)))
                          : 1;
    std::vector<int> values = {1};
    if (share > 1 && share < from) values.push_back(share);
    TryValues(
        phase, values, [](loader::Knobs& k, int v) { k.worker_threads = v; }, [](int v) { return ThreadsText(v); },
        ThreadsText(from) + " per worker");
  }

  // The changes whose median gained but that were not kept (each within the
  // noise or the threshold alone), tried together once, by the same rule:
  // several small gains can add up to one worth keeping. Only with two or
  // more of them, so no single change gets a second chance.
  void Combined() {
    if (small_gains_.size() < 2) {
      AddPhase("combined", false,
               small_gains_.empty() ? "not tried: no change gained even within the noise"
                                    : "not tried: only " + small_gains_[0].phase + " gained within the noise");
      return;
    }
    loader::Knobs knobs = current_;
    std::string what;
    TrialPlan plan = PlanAgainstCurrent();
    for (const auto& [phase, index] : small_gains_) {
      const loader::Knobs& k = trials()[index].knobs;
      if (phase == "num_workers") {
        knobs.num_workers = k.num_workers;
        what += ", num_workers " + std::to_string(k.num_workers);
      } else if (phase == "non_blocking") {
        knobs.pin_memory = k.pin_memory;
        knobs.non_blocking = k.non_blocking;
        what += ", non_blocking";
      } else if (phase == "prefetch_factor") {
        knobs.prefetch_factor = k.prefetch_factor;
        what += ", prefetch_factor " + std::to_string(k.prefetch_factor);
      } else if (phase == "persistent_workers") {
        knobs.persistent_workers = true;
        what += ", persistent_workers";
      }
    }
    what = what.substr(2);
    // With persistent_workers, over whole epochs against the epoch-window reference.
    size_t reference = current_index_;
    if (knobs.persistent_workers && !current_.persistent_workers && persistent_reference_) {
      plan = persistent_plan_;
      reference = *persistent_reference_;
    }
    const size_t index = Measure("combined", knobs, plan);
    const TrialRecord& t = trials()[index];
    if (t.status != TrialStatus::kOk) {
      Decide(index, "");
      AddPhase("combined", false, trials()[index].decision);
      return;
    }
    const TrialRecord& ref = trials()[reference];
    const bool gain = IsGain(t, ref, options_.gain_threshold);
    const std::string figure = Percent(Gain(t, ref));
    if (gain) {
      Decide(index, "kept: " + figure + " for " + what + " together");
      current_ = knobs;
      current_index_ = index;
    } else {
      Decide(index, NotKept(t, ref, options_.gain_threshold, " for " + what + " together"));
    }
    AddPhase("combined", gain, trials()[index].decision);
  }

  // `repeats` pairs of one window each, a (the baseline, or the setting
  // standing in for it) then b, interleaved: the ratios of b's figure over
  // a's, one per pair measured (a failed trial ends them). Interleaved, a step
  // whose speed moves between trials moves both of a pair alike. `done`
  // counts the trials, for progress. a and b must not refer into trials(),
  // which measuring grows.
  std::vector<double> MeasurePairs(const char* phase, const loader::Knobs& a, const loader::Knobs& b,
                                   const std::string& a_name, const std::string& b_name, int* done,
                                   const PairsPlan& how = {}) {
    TrialPlan plan;
    plan.repeats = 1;
    plan.window_epochs = how.window_epochs;
    const bool in_windows = how.in_windows;
    std::vector<double> ratios;
    double pair_s = 0;  // the last pair's time, for whether the budget holds one more
    for (int pair = 1; pair <= repeats() || Unsettled(ratios, how, pair, pair_s); ++pair) {
      // A pair past `repeats` begins only where the budget holds it
      // (Unsettled), and then runs whole, as the second trial of every pair does.
      const bool settling = pair > repeats();
      if (how.budget_ended && pair > 1 && !BudgetHolds(pair_s)) {
        *how.budget_ended = true;
        break;
      }
      const double pair_start = ElapsedS();
      size_t ia = 0;
      try {
        ia = Measure(phase, a, plan, /*budget_may_end=*/!settling);
      } catch (const TimeBudgetSpent&) {
        if (!how.budget_ended || pair == 1) throw;
        *how.budget_ended = true;
        break;
      }
      ++*done;
      if (trials()[ia].status != TrialStatus::kOk) {
        Decide(ia, "");
        break;
      }
      Decide(ia, "pair " + std::to_string(pair) + ": " + a_name);
      const size_t ib = Measure(phase, b, plan, /*budget_may_end=*/how.budget_ended == nullptr && !settling);
      ++*done;
      if (trials()[ib].status != TrialStatus::kOk) {
        Decide(ib, "");
        break;
      }
      const auto rate = [&](size_t i) { return in_windows ? WindowsRate(i) : trials()[i].samples_per_s; };
      const double ratio = rate(ia) > 0 ? rate(ib) / rate(ia) : 0.0;
      ratios.push_back(ratio);
      Decide(ib, "pair " + std::to_string(pair) + ": " + b_name + ", " + Format("x%.2f", ratio) +
                     " over " + how.over + (in_windows ? " in their windows" : ""));
      pair_s = ElapsedS() - pair_start;
    }
    return ratios;
  }

  // Whether the time budget's time left holds `seconds` more.
  bool BudgetHolds(double seconds) const { return ElapsedS() + seconds <= options_.time_budget_s; }

  // Whether pair number `pair` is one more to settle `how.settle_bar`: every
  // pair so far measured, the bar inside their median's interval, time left
  // in the budget for one more pair as long as the last (`pair_s`), and the
  // cap not passed.
  bool Unsettled(const std::vector<double>& ratios, const PairsPlan& how, int pair, double pair_s) const {
    if (how.settle_bar <= 0 || options_.time_budget_s <= 0 || ratios.size() + 1 != static_cast<size_t>(pair) ||
        pair > kMostPairsPerRepeat * repeats() || !BudgetHolds(pair_s)) {
      return false;
    }
    const Summary s = Summarize(ratios);
    return s.ci_low <= how.settle_bar && how.settle_bar <= s.ci_high;
  }

  // Baseline and best, interleaved A B A B ..., one window each, so drift of
  // the machine during the sweep hits both alike.
  void FinalCheck(const char* phase_name = "final_check") {
    const TrialRecord& base = trials()[*outcome_.baseline];
    const TrialRecord& best = current();
    const loader::Knobs a = setup_.reference.value_or(base.knobs), b = best.knobs;
    const char* reference = setup_.reference ? "the job's own setting" : "the baseline";
    if (a == b) {
      outcome_.speedup = 1.0;
      AddPhase(phase_name, false, std::string("not run: the best setting is ") + reference);
      return;
    }
    final_done_ = 0;
    const std::vector<double> ratios =
        MeasurePairs("final_check", a, b, setup_.reference ? "the job's own setting" : "baseline", "best", &final_done_);
    if (ratios.empty()) {
      AddPhase(phase_name, false, "no pair measured; the speedup is not known");
      return;
    }
    const Summary s = Summarize(ratios);
    outcome_.speedup = s.median;
    outcome_.speedup_ci_low = s.ci_low;
    outcome_.speedup_ci_high = s.ci_high;
    AddPhase(phase_name, s.ci_low > 1.0,
             "speedup " + Format("x%.2f", s.median) + " [" + Format("%.2f", s.ci_low) + ", " +
                 Format("%.2f", s.ci_high) + "] over " + reference + ", " + std::to_string(ratios.size()) +
                 " interleaved pairs" + (s.ci_low > 1.0 ? "" : "; the interval includes no gain"));
  }

  SearchOutcome Finish() {
    for (size_t i = 0; i < trials().size(); ++i) {
      const TrialRecord& t = trials()[i];
      if (t.status == TrialStatus::kOk && t.phase != "final_check" && t.phase != "num_workers_pairs" &&
          (!outcome_.fastest || t.samples_per_s > trials()[*outcome_.fastest].samples_per_s)) {
        outcome_.fastest = i;
      }
    }
    return std::move(outcome_);
  }

  const SweepOptions& options_;
  SearchSetup setup_;  // not const: a failed seed check drops the seed (CheckSeed)
  TrialMeasurer& measurer_;
  const SearchEvents& events_;

  SearchOutcome outcome_;
  const std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
  loader::Knobs current_;
  size_t current_index_ = 0;

  // Changes that gained within the noise or the threshold: (phase, trial index).
  struct SmallGain {
    std::string phase;
    size_t index;
  };
  std::vector<SmallGain> small_gains_;
  std::optional<size_t> persistent_reference_;  // the off trial over whole epochs
  std::map<size_t, std::string> charged_;       // ChargeRestart: trial index -> what was charged
  int start_method_done_ = 0;                   // the multiprocessing_context phase's trials so far
  std::vector<std::pair<int, size_t>> workers_curve_;  // (workers, trial index), ascending, after refinement
  // The persistent_workers phase's windows (whole epochs), for every later
  // trial compared with one of its trials.
  TrialPlan persistent_plan_ = [] {
    TrialPlan plan;
    plan.window_epochs = 1;
    return plan;
  }();
  bool persistent_first_ = false;  // PersistentFirst: before prefetch_factor
  bool persistent_kept_ = false;   // the persistent_workers phase kept it
  double restart_share_ = 0;       // the knee's restart per epoch, as a share of the epoch
  std::optional<int> seeded_knee_;  // where the seeded doubling started
  // The seeded curve's windows: whole epochs when it runs with the seed's persistent_workers.
  TrialPlan seeded_plan_;

  // For the estimate of trials left.
  SequenceAt at_ = SequenceAt::kBaseline;
  int misses_ = 0;
  size_t budget_from_ = 0;  // KeepBestAtBudget weighs the trials from here on (after a curve the knee judged)
  bool refining_ = false;
  int prefetch_done_ = 0;
  int persistent_done_ = 0;
  int final_done_ = 0;
};

}  // namespace

bool IsGain(const TrialRecord& candidate, const TrialRecord& current, double gain_threshold) {
  if (candidate.status != TrialStatus::kOk || current.status != TrialStatus::kOk) return false;
  if (candidate.samples_per_s <= current.samples_per_s * (1.0 + gain_threshold)) return false;
  const bool have_intervals = candidate.repeats >= 2 && current.repeats >= 2;
  return !have_intervals || candidate.ci_low > current.ci_high;
}

std::optional<size_t> KneeIndex(const std::vector<std::pair<int, const TrialRecord*>>& curve, double tolerance) {
  double best = -1;
  for (const auto& [w, t] : curve) {
    if (t->status == TrialStatus::kOk) best = std::max(best, t->samples_per_s);
  }
  if (best < 0) return std::nullopt;
  std::optional<size_t> knee;
  for (size_t i = 0; i < curve.size(); ++i) {
    const auto& [w, t] = curve[i];
    if (t->status == TrialStatus::kOk && t->samples_per_s >= best * (1.0 - tolerance) &&
        (!knee || w < curve[*knee].first)) {
      knee = i;
    }
  }
  return knee;
}

SearchOutcome RunSearch(const SweepOptions& options, const SearchSetup& setup, const loader::Knobs& start,
                        TrialMeasurer& measurer, const SearchEvents& events) {
  return Search(options, setup, measurer, events).Run(start);
}

}  // namespace feedtune::tuner
