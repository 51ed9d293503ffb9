// Progress: one line per finished trial while a sweep runs, and the summary at
// the end. Writes to the FILE* it is given (stderr for progress, so stdout
// carries only the summary that scripts read). One thread uses it.
#pragma once

#include <chrono>
#include <cstdio>
#include <string>

#include "results/records.h"
#include "tuner/search.h"

namespace feedtune::tuner {

// "nw=4 pin=1 nb=0 pf=2 pers=0"
std::string KnobsShort(const loader::Knobs& knobs);

class Progress {
 public:
  Progress(std::FILE* out, bool quiet) : out_(out), quiet_(quiet), start_(std::chrono::steady_clock::now()) {}

  void Note(const std::string& line);
  void Trial(const results::TrialRecord& trial, int number);
  double elapsed_s() const;

 private:
  std::FILE* out_;
  bool quiet_;
  std::chrono::steady_clock::time_point start_;
};

// The summary printed after a sweep: knee, best config, speedup over the baseline.
std::string SummaryText(const SearchOutcome& outcome, int64_t run_id, const std::string& db_path);

}  // namespace feedtune::tuner
