// THE RULE for keeping a step, which every phase applies (IsGain): its median
// throughput must exceed the current median by more than gain_threshold AND,
// when both trials have 2 or more repeats, their 95% intervals must not
// overlap (new ci_low > current ci_high). Otherwise the current setting
// stays: a change must pay for itself beyond the noise. The doubling compares
// with the best so far (tuner/search/workers.cc). A change not kept says
// which of three it was (NotKept). The time budget does not change the rule.
//
// Its cold form (IsColdGain), for `feedtune layout`'s cold doubling
// (tuner/search/cold_doubling.h): the same threshold, but the noise test is
// met by either interval alone, the candidate's above the current median or
// the current's below the candidate's median. A cold streamed window that
// meets an epoch's end reads a third as fast, so one interval alone can be
// wide (1790 samples/s, 95% CI 593-4286, against 969 at one worker), and
// the median of three windows already stands against one wild window.
#include "tuner/search/search_state.h"

#include "results/units.h"

namespace feedtune::tuner {

bool IsGain(const results::TrialRecord& candidate, const results::TrialRecord& current, double gain_threshold) {
  if (candidate.status != results::TrialStatus::kOk || current.status != results::TrialStatus::kOk) return false;
  if (candidate.samples_per_s <= current.samples_per_s * (1.0 + gain_threshold)) return false;
  const bool have_intervals = candidate.repeats >= 2 && current.repeats >= 2;
  return !have_intervals || candidate.ci_low > current.ci_high;
}

bool IsColdGain(const results::TrialRecord& candidate, const results::TrialRecord& current, double gain_threshold) {
  if (candidate.status != results::TrialStatus::kOk || current.status != results::TrialStatus::kOk) return false;
  if (candidate.samples_per_s <= current.samples_per_s * (1.0 + gain_threshold)) return false;
  return candidate.ci_low > current.samples_per_s || candidate.samples_per_s > current.ci_high;
}

namespace search_internal {

using results::Format;  // results/units.h

std::string Percent(double fraction) { return Format("%+.1f%%", fraction * 100.0); }

double Gain(const TrialRecord& candidate, const TrialRecord& current) {
  return current.samples_per_s > 0 ? candidate.samples_per_s / current.samples_per_s - 1.0 : 0.0;
}

// The three cases told apart (a user reads "-60.9% within noise" as
// "noise"): slower beyond the noise, a change within the noise, or a gain
// beyond the noise but under the threshold. With one repeat there is no
// noise estimate, so the threshold alone separates them. `what` names the
// change ("" or " for X together").
std::string NotKept(const TrialRecord& candidate, const TrialRecord& current, double gain_threshold,
                    const std::string& what) {
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

}  // namespace search_internal
}  // namespace feedtune::tuner
