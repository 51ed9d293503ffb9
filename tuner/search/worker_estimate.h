// The worker count the baseline's own figures predict, where a search under
// a time budget starts its num_workers phase (tuner/search/workers.cc).
//
// The model (docs/search.md#the-estimate), from the baseline (num_workers 0:
// the main process loads, then steps, one sample after another):
//   T = 1 / samples_per_s             its time per sample
//   L = gpu_idle_frac x T             waiting for the data: the loading's wall time per sample
//   S = (1 - gpu_idle_frac) x T       the step's time per sample
//   C = cpu_util x T                  the process tree's CPU time per sample, step included
// A loader keeps the step fed at S per sample, and the CPUs run everything
// at C per sample, so the rate to aim for is R = min(1 / S, usable_cpus / C).
// A worker spends at least L of wall time on each sample (more when workers
// share CPUs), so by Little's law R needs R x L samples in flight:
//   workers = ceil(R x L), within [1, cap]
// A wait-bound dataset (L large, C small) starts high, a CPU-bound one near
// the CPU count (C ~ T: R x L ~ usable_cpus x L / T), a step-bound one low.
// It is a start, not an answer: the search brackets the knee from it, and
// the counts it does not see (the main process's share of every batch, the
// workers' start) are what the bracketing measures.
//
// Tried as tuned alone, cap included (SearchSetup::max_workers, one round
// per epoch, the budgets' most workers), and stated in words with its
// figures. Pure: a resumed run estimates as the first run did.
#pragma once

#include <cstdint>
#include <string>

#include "results/records.h"

namespace feedtune::tuner {

// What the estimate rests on besides the baseline.
struct EstimateLimits {
  double usable_cpus = 0;   // 0 = unknown: the CPUs do not bound the rate
  int max_workers = 64;     // the search's cap (>= 1)
  int64_t batches = 0;      // batches per epoch; 0 = unknown (else no more workers than batches)
  int fitting_workers = 0;  // the most workers the memory, /dev/shm and open-file budgets let run; 0 = no bound
};

struct WorkerEstimate {
  int workers = 0;   // 0: the baseline gives no estimate (no wait measured, or no rate)
  double rate = 0;   // R, samples/s, the rate it aims for
  std::string how;   // the arithmetic in words, for the decisions
};

WorkerEstimate EstimateWorkers(const results::TrialRecord& baseline, const EstimateLimits& limits);

}  // namespace feedtune::tuner
