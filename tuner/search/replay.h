// ReplayMeasurer: how `feedtune sweep --resume RUN` continues an interrupted
// run. It stands in front of the real measurer and answers the first N trials
// the search asks for with the N trials stored for the run, in order, then
// measures for real. The search code path is the same as in a fresh run, and
// since its decisions depend only on the records it is given (search.h), the
// resumed run reaches the decisions the uninterrupted one would have.
//
// Each replayed request must match its stored trial (phase and knobs); a
// mismatch means the config or the sequence changed since the run was stored,
// and throws ReplayMismatch rather than mixing two sequences in one run.
// Replayed records keep their store id (non-zero), new ones have id 0.
// The search's clock goes on from the first run's (ElapsedS): a replayed
// trial ends where it ended then (TrialRecord::elapsed_s), so a time budget
// weighs the later trials as it would have, and the replay asks what was
// asked. One thread uses it; `inner` must outlive it.
#pragma once

#include <chrono>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "results/records.h"
#include "tuner/measure/measurer.h"

namespace feedtune::tuner {

class ReplayMismatch : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class ReplayMeasurer final : public TrialMeasurer {
 public:
  ReplayMeasurer(std::vector<results::TrialRecord> stored, TrialMeasurer& inner)
      : stored_(std::move(stored)), inner_(inner) {}

  results::TrialRecord Measure(const loader::Knobs& knobs) override { return MeasurePlanned(knobs, {}); }
  results::TrialRecord MeasurePlanned(const loader::Knobs& knobs, const TrialPlan& plan) override;
  std::string last_warning() const override { return last_replayed_ ? std::string() : inner_.last_warning(); }
  std::optional<double> last_cache_resident_fraction() const override {
    return last_replayed_ ? std::nullopt : inner_.last_cache_resident_fraction();
  }

  // Seconds of the search: since `began`, or after a replayed trial that
  // recorded its clock, that trial's seconds plus the time since it was
  // replayed.
  double ElapsedS(std::chrono::steady_clock::time_point began) const {
    const auto now = std::chrono::steady_clock::now();
    if (!std::isfinite(replayed_elapsed_s_)) return std::chrono::duration<double>(now - began).count();
    return replayed_elapsed_s_ + std::chrono::duration<double>(now - replayed_at_).count();
  }

  size_t stored() const { return stored_.size(); }
  size_t replayed() const { return next_; }
  bool last_replayed() const { return last_replayed_; }

 private:
  const std::vector<results::TrialRecord> stored_;
  TrialMeasurer& inner_;
  size_t next_ = 0;
  bool last_replayed_ = false;
  double replayed_elapsed_s_ = std::nan("");  // the last replayed trial's, when it recorded one
  std::chrono::steady_clock::time_point replayed_at_;
};

}  // namespace feedtune::tuner
