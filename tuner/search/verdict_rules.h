// ComputeVerdict: where a setting's time goes, from the stage trials measured
// at it (tuner/measure/stage_runner.h has the method and the stages;
// docs/verdict.md the definitions and the rules). Each stage's own rate is
// derived from its trial and the one before it, and the advice text lives
// beside the rule that triggers it.
#pragma once

#include "results/verdict.h"
#include "tuner/measure/stage_trials.h"

namespace feedtune::tuner {

// The verdict from the stage trials; pure (tests feed it constructed trials).
results::Verdict ComputeVerdict(const StageTrials& trials);

// Whether the copy is the bottleneck by these rules: the stage runner then
// measures the copy again with the other pinning, which the advice compares
// (DiagnoseSetup::copy_limits).
bool CopyLimits(const StageTrials& trials);

}  // namespace feedtune::tuner
