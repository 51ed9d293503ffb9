// A test-only record of the search's decisions, for checking that a change
// to tuner/search/ that should only move code leaves every decision as it
// was: with FEEDTUNE_SEARCH_RECORD naming a file, each RunSearch a test makes
// appends the test's name, every trial (its plan, knobs, figures, decision)
// and the outcome (phases, knee, best, speedup) to it. Run the tests before
// and after the change and diff the two files. Nothing is written without the
// variable, and nothing here reaches production code.
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <type_traits>

#include "tuner/search/search.h"

namespace feedtune::tuner::search_record {

// The file to append to, or nullptr when no record is asked for.
inline const char* Path() {
  const char* path = std::getenv("FEEDTUNE_SEARCH_RECORD");
  return path != nullptr && *path != '\0' ? path : nullptr;
}

// Exact: %.17g reads back as the same double, so a changed bit shows.
inline std::string Num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

template <typename T>
std::string Opt(const std::optional<T>& v) {
  if (!v) return "none";
  if constexpr (std::is_floating_point_v<T>) {
    return Num(*v);
  } else {
    return std::to_string(*v);
  }
}

inline std::string KnobsText(const loader::Knobs& k) {
  return "batch_size=" + std::to_string(k.batch_size) + " num_workers=" + std::to_string(k.num_workers) +
         " pin_memory=" + std::to_string(k.pin_memory) + " non_blocking=" + std::to_string(k.non_blocking) +
         " prefetch_factor=" + std::to_string(k.prefetch_factor) +
         " persistent_workers=" + std::to_string(k.persistent_workers) +
         " cpu_binding=" + loader::CpuBindingName(k.cpu_binding) +
         " worker_threads=" + std::to_string(k.worker_threads) +
         " multiprocessing_context=" + loader::StartMethodName(k.multiprocessing_context);
}

inline std::string PlanText(const TrialPlan& p) {
  return "plan phase=" + p.phase + " repeats=" + std::to_string(p.repeats) +
         " window_epochs=" + std::to_string(p.window_epochs);
}

inline std::string TestName() {
  const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
  return info == nullptr ? std::string("(outside a test)")
                         : std::string(info->test_suite_name()) + "." + info->name();
}

// Collects what one RunSearch showed through its events, then writes it with the outcome.
class Recorder {
 public:
  Recorder() : path_(Path()) {}
  bool on() const { return path_ != nullptr; }

  // Wraps the events so that each trial's plan and progress are recorded as
  // the search hands them out; the test's own events run as before.
  SearchEvents Wrap(SearchEvents events) {
    if (!on()) return events;
    events.on_start = [this, inner = events.on_start](const TrialPlan& plan, const loader::Knobs& knobs,
                                                       const SearchProgress& progress) {
      lines_ += "  start " + PlanText(plan) + " knobs " + KnobsText(knobs) +
                " done=" + std::to_string(progress.trials_done) + " left=" + std::to_string(progress.trials_left) +
                "\n";
      if (inner) inner(plan, knobs, progress);
    };
    events.on_trial = [this, inner = events.on_trial](results::TrialRecord& t, const SearchProgress& progress) {
      lines_ += "  decided " + t.phase + " done=" + std::to_string(progress.trials_done) +
                " left=" + std::to_string(progress.trials_left) + ": " + t.decision + "\n";
      if (inner) inner(t, progress);
    };
    return events;
  }

  void Write(const SearchOutcome& o) {
    if (!on()) return;
    std::string s = "== " + TestName() + "\n" + lines_;
    for (size_t i = 0; i < o.trials.size(); ++i) {
      const results::TrialRecord& t = o.trials[i];
      s += "  trial " + std::to_string(i) + " phase=" + t.phase + " " + KnobsText(t.knobs) +
           " status=" + results::TrialStatusName(t.status) + " samples_per_s=" + Num(t.samples_per_s) +
           " ci=[" + Num(t.ci_low) + ", " + Num(t.ci_high) + "] repeats=" + std::to_string(t.repeats) +
           " mb_per_s=" + Num(t.mb_per_s) + "\n    decision: " + t.decision + "\n";
    }
    for (const PhaseDecision& p : o.phases) {
      s += "  phase " + p.phase + (p.kept ? " kept: " : " not kept: ") + p.why + "\n";
    }
    s += "  baseline=" + Opt(o.baseline) + " best=" + Opt(o.best) + " fastest=" + Opt(o.fastest) +
         " knee=" + Opt(o.knee_workers) + " knee_samples_per_s=" + Num(o.knee_samples_per_s) +
         " kneedle=" + Opt(o.kneedle_workers) + " speedup=" + Opt(o.speedup) + " [" + Opt(o.speedup_ci_low) +
         ", " + Opt(o.speedup_ci_high) + "]\n";
    Append(s);
  }

  // RunSearch threw (an interruption, a replay mismatch): what ran until then.
  void WriteThrown(const std::string& what) {
    if (!on()) return;
    Append("== " + TestName() + "\n" + lines_ + "  threw: " + what + "\n");
  }

 private:
  void Append(const std::string& s) const {
    if (FILE* f = std::fopen(path_, "a")) {
      std::fwrite(s.data(), 1, s.size(), f);
      std::fclose(f);
    }
  }

  const char* path_;
  std::string lines_;
};

// RunSearch, recorded when FEEDTUNE_SEARCH_RECORD names a file.
inline SearchOutcome RecordedRunSearch(const SweepOptions& options, const SearchSetup& setup,
                                       const loader::Knobs& start, TrialMeasurer& measurer,
                                       const SearchEvents& events) {
  Recorder recorder;
  const SearchEvents wrapped = recorder.Wrap(events);
  try {
    SearchOutcome outcome = RunSearch(options, setup, start, measurer, wrapped);
    recorder.Write(outcome);
    return outcome;
  } catch (const std::exception& e) {
    recorder.WriteThrown(e.what());
    throw;
  } catch (...) {
    recorder.WriteThrown("a non-standard exception");
    throw;
  }
}

}  // namespace feedtune::tuner::search_record
