#include "tuner/search/cold_doubling.h"

#include <algorithm>

#include "tuner/search/search.h"

namespace feedtune::tuner {

ColdCurve ColdDoubling(int max_workers, double gain_threshold, const MeasureColdCount& measure,
                       const std::atomic<bool>& stop) {
  ColdCurve curve;
  for (int workers = 0; workers <= max_workers; workers = workers == 0 ? 1 : workers * 2) {
    if (stop.load()) {
      curve.interrupted = true;
      return curve;
    }
    curve.points.push_back(measure(workers));
    const results::TrialRecord& point = curve.points.back();
    if (point.status != results::TrialStatus::kOk) return curve;  // failed, or over a budget: the doubling ends here
    const size_t index = curve.points.size() - 1;
    if (curve.best && !IsColdGain(point, curve.points[*curve.best], gain_threshold)) {
      if (workers >= 2) break;  // a miss from 1 or more workers
      if (point.samples_per_s > curve.points[*curve.best].samples_per_s) curve.best = index;
      continue;
    }
    curve.best = index;
  }
  return curve;
}

ColdCurve ColdInFlightDoubling(int most, double gain_threshold, const MeasureColdInFlight& measure,
                               const std::atomic<bool>& stop) {
  ColdCurve curve;
  for (int in_flight = 1; in_flight <= std::max(1, most); in_flight *= 2) {
    if (stop.load()) {
      curve.interrupted = true;
      return curve;
    }
    curve.points.push_back(measure(in_flight));
    const results::TrialRecord& point = curve.points.back();
    if (point.status != results::TrialStatus::kOk) return curve;
    if (curve.best && !IsColdGain(point, curve.points[*curve.best], gain_threshold)) break;
    curve.best = curve.points.size() - 1;
  }
  return curve;
}

}  // namespace feedtune::tuner
