// The lines a rank process and the tuner exchange over their socketpair (one JSON
// object per line): a trial request (knobs and plan) and the rank's trial
// record with its facts. NaN (not measured) travels as null.
#pragma once

#include <string>

#include "loader/options.h"
#include "results/records.h"
#include "tuner/measure/trial_runner.h"

namespace feedtune::tuner::node {

std::string RequestLine(const loader::Knobs& knobs, const TrialPlan& plan);
// Throws std::runtime_error on a malformed line.
void ParseRequest(const std::string& line, loader::Knobs* knobs, TrialPlan* plan);

// A rank's record: the loader's figures plus `rank` (its RankRecord facts),
// and the trial's warning under "warning" when there is one.
std::string RecordLine(const results::TrialRecord& trial, const results::RankRecord& rank,
                       const std::string& warning = "");
// Throws std::runtime_error on a malformed line.
void ParseRecord(const std::string& line, results::TrialRecord* trial, results::RankRecord* rank);

}  // namespace feedtune::tuner::node
