// Budget: predicts what a trial will take (memory, shared memory, file
// descriptors, CPUs) before it runs, so the sweep skips a setting that would
// crash the box instead of trying it (docs/architecture.md: more workers cost memory,
// /dev/shm and fds, and these crash real jobs).
//
// The model, for n workers, prefetch_factor pf and a batch of B bytes:
//   slots        = pf x n + 1 (n > 0), else 1        (docs/architecture.md)
//   memory       = n x worker_rss + slots x B + (pin_memory ? slots x B : 0)
//   /dev/shm     = n > 0 ? slots x B : 0              (torch moves worker batches there)
//   descriptors  = open now + kFdsPerTrial + n x kFdsPerWorker
//   CPUs         = n against the usable CPUs (affinity mask, cgroup cpu.max):
//                  a note, never a skip (waiting workers need no CPU)
// worker_rss is learnt from the trials already run, and is never below a
// streaming dataset's shuffle buffer (workers x buffer x sample size). Native workloads
// (WorkerMemory::kProcessTree): the largest
// (tree peak RSS - baseline RSS - the trial's slots and pinned pool) / n seen;
// before any trial with workers, the baseline's whole RSS (a forked worker may
// come to own every page it inherits). Command workloads
// (WorkerMemory::kReported): the tree feedtune sees is not the workers' (the
// run protocol's rusage gives the largest single process), so the largest
// worker RSS a command measured (TrialRecord::worker_rss_bytes) is used; until
// one is reported, the prediction falls back on the tree figure above to gate
// trials, but the safe limit has no number (SafeLimitFor).
// The safe limit (SafeMaxWorkers, SafeLimitFor) adds the workers' growth: G
// x E, where G is the largest growth per epoch of all a trial's workers
// together seen (TrialRecord::worker_rss_growth_bytes_per_epoch x n, from
// trials with workers whose growth was measured), and E the epochs ahead:
// sweep.budget.job_epochs with persistent workers, 1 without (a worker then
// lives one epoch, and its memory goes with it). G is per epoch for all the
// workers, not per worker, because what grows is per sample read (a leak, a
// cache): n workers share an epoch's samples, so more workers grow each less
// and all together alike. Trials are not gated on growth: one runs a few
// seconds, not a job's epochs.
// B is the configured slot size when known, else learnt from a trial's MB/s
// over samples/s. A trial fits when memory <= memory_fraction x available and
// /dev/shm <= shm_fraction x free space and descriptors <= RLIMIT_NOFILE.
//
// Predict() is pure given the facts and the trials observed, so a resumed run
// that reuses its stored facts predicts as the first run did. One thread uses
// a Budget.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "loader/options.h"
#include "results/records.h"
#include "tuner/config/config.h"
#include "tuner/measure/measurer.h"

namespace feedtune::tuner {

// The machine's limits, read once when the sweep starts (a run's fact, stored
// with it so --resume predicts as the first run did: results/records.h).
using BudgetFacts = results::BudgetFacts;

// Reads the live facts. `cgroup_mem_limit_bytes` and `usable_cpus` come from the
// machine fingerprint (0 = none/unknown); `batch_bytes` may be 0.
BudgetFacts ReadBudgetFacts(int64_t cgroup_mem_limit_bytes, double usable_cpus, int64_t batch_bytes);


// Where the per-worker memory comes from.
enum class WorkerMemory {
  kProcessTree,  // native workloads: from the process tree's peak RSS
  kReported,     // command workloads: the worker RSS the command measured
};

// The most workers the budgets allow, and what that rests on (results/records.h).
using SafeLimit = results::SafeLimit;

struct Prediction {
  bool ok = true;
  std::string reason;  // why not, naming the budget and the figures; empty when ok
  std::string note;    // a remark that is no reason to skip (CPU oversubscription)
  int64_t mem_bytes = 0;
  int64_t shm_bytes = 0;
  int64_t fds = 0;
};

class Budget {
 public:
  static constexpr int64_t kFdsPerWorker = 4;  // torch: a task queue, a pipe pair and a shm handle per worker
  static constexpr int64_t kFdsPerTrial = 16;  // the result queue, the pin thread, the device

  Budget(const BudgetFacts& facts, const BudgetOptions& options, WorkerMemory source = WorkerMemory::kProcessTree)
      : facts_(facts), options_(options), source_(source) {}

  // Learns worker memory and batch size from a finished trial (any status).
  // The trial's id names the basis of the safe limit, so observe it stored.
  void Observe(const results::TrialRecord& trial);

  Prediction Predict(const loader::Knobs& knobs) const;

  // The most workers (up to `limit`) that fit with the other knobs of `knobs`;
  // 0 when even one does not.
  int SafeMaxWorkers(const loader::Knobs& knobs, int limit) const;
  // SafeMaxWorkers with its basis; no number when no trial measured worker
  // memory (kReported: no command reported it; kProcessTree: no trial ran).
  SafeLimit SafeLimitFor(const loader::Knobs& knobs, int limit) const;

  // Before any trial (`trial`, `diagnose`): `bytes` is taken for each worker
  // until a trial measures worker memory (a stated estimate; see CheckSetting).
  void AssumeWorkerRss(int64_t bytes);

  const BudgetFacts& facts() const { return facts_; }
  int64_t worker_rss_bytes() const;
  // The slot size: the facts' when known, else learnt from a trial; 0 = unknown.
  int64_t batch_bytes() const { return facts_.batch_bytes > 0 ? facts_.batch_bytes : batch_bytes_learnt_; }
  // G x E above for these knobs: what the workers grow by over a job; 0 when
  // no trial measured growth (or none grew).
  int64_t GrowthBytes(const loader::Knobs& knobs) const;

 private:
  // Predict, with `growth_bytes` of worker growth on top of the memory.
  Prediction PredictWith(const loader::Knobs& knobs, int64_t growth_bytes) const;

  const BudgetFacts facts_;
  const BudgetOptions options_;
  const WorkerMemory source_;

  int64_t batch_bytes_learnt_ = 0;
  std::optional<int64_t> baseline_rss_;  // peak RSS of the first trial without workers
  int64_t baseline_trial_ = 0;
  std::optional<int64_t> worker_rss_;    // largest per-worker RSS derived from the tree
  int64_t worker_rss_trial_ = 0;
  std::optional<int64_t> reported_rss_;  // kReported: largest worker RSS a command measured
  int64_t reported_rss_trial_ = 0;
  std::optional<double> growth_per_epoch_;  // G: all the workers' growth per epoch, the largest seen
  int64_t growth_trial_ = 0;
};

// The sweep's budgets applied to one setting before any loader of it starts:
// `trial` and `diagnose` measure a setting the user chose, which no doubling
// has approached, so nothing else stops one that would take the box's memory
// or /dev/shm (docs/search.md#budgets).
struct SettingCheck {
  Prediction prediction;
  // Why it does not fit, with the slots' arithmetic and where the per-worker
  // memory comes from; empty when it fits.
  std::string refusal;
  // Where the per-worker memory comes from: a stored trial, or the estimate.
  std::string worker_basis;
  // The budgets that could not be applied and why (a command whose sample
  // bytes feedtune does not know); empty when all were.
  std::string not_applied;
};

// `stored`: the trials of an earlier run of this host and workload, in id
// order (empty when there is none): the per-worker memory and the slot size
// are learnt from them as the sweep learnt them. Without a measured worker
// memory, `estimate_worker_rss_bytes` is taken for each worker.
SettingCheck CheckSetting(const BudgetFacts& facts, const BudgetOptions& options, WorkerMemory source,
                          const std::vector<results::TrialRecord>& stored, int64_t estimate_worker_rss_bytes,
                          const loader::Knobs& knobs);

// A TrialMeasurer that asks the budget before each trial: a trial that does
// not fit comes back with status "skipped" and the reason in `error`, and
// never runs. The budget and the inner measurer must outlive it.
class BudgetGate final : public TrialMeasurer {
 public:
  BudgetGate(const Budget& budget, TrialMeasurer& inner) : budget_(budget), inner_(inner) {}

  results::TrialRecord Measure(const loader::Knobs& knobs) override { return MeasurePlanned(knobs, {}); }
  results::TrialRecord MeasurePlanned(const loader::Knobs& knobs, const TrialPlan& plan) override;
  std::string last_warning() const override { return skipped_ ? std::string() : inner_.last_warning(); }
  std::optional<double> last_cache_resident_fraction() const override {
    return skipped_ ? std::nullopt : inner_.last_cache_resident_fraction();
  }

  // The prediction for the last trial asked for.
  const Prediction& last_prediction() const { return last_; }

 private:
  const Budget& budget_;
  TrialMeasurer& inner_;
  Prediction last_;
  bool skipped_ = false;
};

}  // namespace feedtune::tuner
