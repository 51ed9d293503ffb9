// The answer of `feedtune layout` from its measurements (docs/layout.md#feedtune-layout-path):
// per candidate, what the whole dataset would take in it (bytes, convert
// time, epoch time) extrapolated from the sample, the epochs after which
// converting pays back, and the layout named, with why. Pure functions.
//
// The rule: the named layout is the fastest cold; among the candidates whose
// cold interval overlaps the fastest's (within its noise), the one with the
// fewest bytes on disk, where that is at least 5% fewer than the fastest's
// (else the fastest). When every candidate is within the noise of the
// fastest, the layout does not matter here (the per-sample CPU cost or the
// loader is the limit) and the source as it is, is named.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace feedtune::layout {

struct Rate {
  double median = 0;  // samples/s
  double ci_low = 0;  // 95% interval of the median, over the repeats
  double ci_high = 0;
  int workers = 0;    // the setting it was measured at
  // Its requests in flight per worker (loader.fetch_concurrency) on a store;
  // 0 where that is not the layout's knob (a local read, a stream, whose
  // requests in flight are its workers).
  int fetch_concurrency = 0;
};

// What a candidate's cold measurement said about the page cache: the
// eviction's words, or why its cold figure is an upper bound.
struct CacheNote {
  std::string note;                          // empty: nothing said
  std::optional<double> resident_fraction;  // the share that stayed cached; none: not counted
};

struct CandidateResult {
  std::string name;
  bool as_is = false;
  Rate cold;
  Rate warm;
  int64_t sample_bytes_on_disk = 0;
  double write_seconds = 0;       // the sample's write
  double read_amplification = 1;
  bool measured = true;           // false: every trial failed (error says why)
  std::string error;
  std::string convert_arguments;  // what writes it: "--layout tar --shard-bytes N" (empty for the source)
  CacheNote cache;
};

struct CandidateAdvice {
  int64_t bytes_on_disk = 0;       // the whole dataset, extrapolated
  double convert_seconds = 0;      // the whole dataset (0 for the source as it is)
  double epoch_seconds_cold = 0;   // the whole dataset at the cold rate
  std::optional<double> payback_epochs;  // nullopt: never (not faster than the source), or the source itself
  bool within_noise_of_fastest = false;
};

struct Advice {
  std::vector<CandidateAdvice> rows;  // as the results
  int named = -1;                     // index into the results; -1 when nothing was measured
  bool layout_matters = true;
  std::string why;
};

// `dataset_samples`, `sample_samples`: the whole dataset and the sample the
// candidates were written from.
Advice Advise(const std::vector<CandidateResult>& results, int64_t dataset_samples, int64_t sample_samples);

}  // namespace feedtune::layout
