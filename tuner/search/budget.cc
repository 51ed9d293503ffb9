#include "tuner/search/budget.h"

#include <dirent.h>
#include <sys/resource.h>
#include <sys/statvfs.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>

#include "results/units.h"
#include "tuner/measure/proc_stats.h"

namespace feedtune::tuner {
namespace {

int64_t MemAvailableBytes() {
  std::FILE* f = std::fopen("/proc/meminfo", "r");
  if (f == nullptr) return 0;
  char line[256];
  long long kb = 0;
  while (std::fgets(line, sizeof line, f) != nullptr) {
    if (std::sscanf(line, "MemAvailable: %lld kB", &kb) == 1) break;
  }
  std::fclose(f);
  return static_cast<int64_t>(kb) * 1024;
}

int64_t ShmFreeBytes() {
  struct statvfs s {};
  if (statvfs("/dev/shm", &s) != 0) return 0;
  return static_cast<int64_t>(s.f_bavail) * static_cast<int64_t>(s.f_frsize);
}

int64_t OpenFds() {
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return 0;
  int64_t n = 0;
  while (const dirent* e = readdir(dir)) {
    if (e->d_name[0] != '.') ++n;
  }
  closedir(dir);
  return n > 0 ? n - 1 : 0;  // less the descriptor of the listing itself
}

using results::MiB;

std::string Fraction(double f) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%g", f);
  return buf;
}

}  // namespace

BudgetFacts ReadBudgetFacts(int64_t cgroup_mem_limit_bytes, double usable_cpus, int64_t batch_bytes) {
  BudgetFacts f;
  f.mem_available_bytes = MemAvailableBytes();
  if (cgroup_mem_limit_bytes > 0) {
    // What the cgroup still allows, approximated by what this process holds.
    const int64_t left = std::max<int64_t>(0, cgroup_mem_limit_bytes - ReadTreeUsage().rss_bytes);
    f.mem_available_bytes = f.mem_available_bytes > 0 ? std::min(f.mem_available_bytes, left) : left;
  }
  f.shm_free_bytes = ShmFreeBytes();
  struct rlimit limit {};
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY) {
    f.nofile_limit = static_cast<int64_t>(limit.rlim_cur);
  }
  f.fds_open = OpenFds();
  f.usable_cpus = usable_cpus;
  f.batch_bytes = batch_bytes;
  return f;
}

void Budget::Observe(const results::TrialRecord& t) {
  if (t.status != results::TrialStatus::kOk) return;
  if (batch_bytes_learnt_ == 0 && t.samples_per_s > 0 && t.mb_per_s > 0) {
    batch_bytes_learnt_ = std::llround(t.mb_per_s * 1e6 / t.samples_per_s * t.knobs.batch_size);
  }
  if (source_ == WorkerMemory::kReported && std::isfinite(t.worker_rss_bytes) && t.worker_rss_bytes > 0 &&
      t.worker_rss_bytes > static_cast<double>(reported_rss_.value_or(0))) {
    reported_rss_ = std::llround(t.worker_rss_bytes);
    reported_rss_trial_ = t.id;
  }
  if (t.knobs.num_workers > 0 && std::isfinite(t.worker_rss_growth_bytes_per_epoch)) {
    const double all_workers = t.worker_rss_growth_bytes_per_epoch * t.knobs.num_workers;
    if (all_workers > growth_per_epoch_.value_or(0)) {
      growth_per_epoch_ = all_workers;
      growth_trial_ = t.id;
    }
  }
  if (t.peak_rss_bytes <= 0) return;
  if (t.knobs.num_workers == 0) {
    if (!baseline_rss_) {
      baseline_rss_ = t.peak_rss_bytes;
      baseline_trial_ = t.id;
    }
    return;
  }
  // The tree's RSS counts the slots (and the pinned pool) of this trial, which
  // the prediction adds apart; what remains beyond the baseline is the workers'.
  const int64_t batch = batch_bytes();
  const int64_t slot_bytes = (static_cast<int64_t>(t.knobs.prefetch_factor) * t.knobs.num_workers + 1) * batch;
  const int64_t extra =
      t.peak_rss_bytes - baseline_rss_.value_or(0) - slot_bytes * (t.knobs.pin_memory ? 2 : 1);
  const int64_t per_worker = std::max<int64_t>(0, extra) / t.knobs.num_workers;
  if (!worker_rss_ || per_worker > *worker_rss_) {
    worker_rss_ = per_worker;
    worker_rss_trial_ = t.id;
  }
}

void Budget::AssumeWorkerRss(int64_t bytes) {
  if (!baseline_rss_ && !worker_rss_ && !reported_rss_) baseline_rss_ = bytes;
}

int64_t Budget::worker_rss_bytes() const {
  if (reported_rss_) return *reported_rss_;
  // A streaming worker fills its shuffle buffer before its first batch, so
  // it holds at least that much, measured or not.
  if (worker_rss_) return std::max(*worker_rss_, facts_.stream_buffer_bytes);
  return std::max(baseline_rss_.value_or(0), facts_.stream_buffer_bytes);
}

SafeLimit Budget::SafeLimitFor(const loader::Knobs& knobs, int limit) const {
  SafeLimit out;
  if (source_ == WorkerMemory::kReported) {
    if (!reported_rss_) {
      out.basis = "unknown: the command reported no worker memory (worker_peak_rss_bytes)";
      return out;
    }
    out.basis = "measured worker RSS of trial " + std::to_string(reported_rss_trial_) + " (" + MiB(*reported_rss_) + ")";
    out.basis_trial = reported_rss_trial_;
  } else if (worker_rss_) {
    out.basis = "worker RSS from the process tree of trial " + std::to_string(worker_rss_trial_) + " (" +
                MiB(*worker_rss_) + ")";
    out.basis_trial = worker_rss_trial_;
  } else if (baseline_rss_) {
    out.basis = "the baseline's RSS taken for each worker (no trial with workers measured memory): trial " +
                std::to_string(baseline_trial_) + " (" + MiB(*baseline_rss_) + ")";
    out.basis_trial = baseline_trial_;
  } else {
    out.basis = "unknown: no trial measured memory";
    return out;
  }
  out.worker_rss_bytes = worker_rss_bytes();
  if (const int64_t growth = GrowthBytes(knobs); growth > 0) {
    const int epochs = knobs.persistent_workers ? options_.job_epochs : 1;
    out.growth_bytes = growth;
    out.basis += "; + " + MiB(growth) + " of worker growth over " + std::to_string(epochs) +
                 (epochs == 1 ? " epoch" : " epochs") + " (trial " + std::to_string(growth_trial_) + ": " +
                 MiB(std::llround(*growth_per_epoch_)) + " per epoch, all workers; " +
                 (knobs.persistent_workers ? "sweep.budget.job_epochs" : "workers not persistent") + ")";
  }
  out.workers = SafeMaxWorkers(knobs, limit);
  return out;
}

int64_t Budget::GrowthBytes(const loader::Knobs& knobs) const {
  if (!growth_per_epoch_ || *growth_per_epoch_ <= 0) return 0;
  const int epochs = knobs.persistent_workers ? options_.job_epochs : 1;
  return std::llround(*growth_per_epoch_ * epochs);
}

Prediction Budget::Predict(const loader::Knobs& k) const { return PredictWith(k, 0); }

Prediction Budget::PredictWith(const loader::Knobs& k, int64_t growth_bytes) const {
  Prediction p;
  const int64_t batch = batch_bytes();
  const int64_t n = k.num_workers;
  const int64_t slots = n > 0 ? static_cast<int64_t>(k.prefetch_factor) * n + 1 : 1;
  const int64_t slot_bytes = slots * batch;
  // Growth is the workers': none without them.
  p.mem_bytes = n * worker_rss_bytes() + slot_bytes + (k.pin_memory ? slot_bytes : 0) + (n > 0 ? growth_bytes : 0);
  p.shm_bytes = n > 0 ? slot_bytes : 0;
  p.fds = facts_.fds_open + kFdsPerTrial + n * kFdsPerWorker;

  const double mem_budget = options_.memory_fraction * static_cast<double>(facts_.mem_available_bytes);
  const double shm_budget = options_.shm_fraction * static_cast<double>(facts_.shm_free_bytes);
  if (facts_.mem_available_bytes > 0 && static_cast<double>(p.mem_bytes) > mem_budget) {
    p.ok = false;
    p.reason = "memory budget: needs about " + MiB(p.mem_bytes) + " (" + std::to_string(n) + " workers x " +
               MiB(worker_rss_bytes()) + " + " + std::to_string(slots) + " slots x " + MiB(batch) +
               (k.pin_memory ? " x 2 with the pinned pool" : "") +
               (n > 0 && growth_bytes > 0 ? " + " + MiB(growth_bytes) + " of worker growth" : "") + "), over " +
               Fraction(options_.memory_fraction) + " x " + MiB(facts_.mem_available_bytes) +
               " available (sweep.budget.memory_fraction)";
  } else if (facts_.shm_free_bytes > 0 && static_cast<double>(p.shm_bytes) > shm_budget) {
    p.ok = false;
    p.reason = "/dev/shm budget: " + std::to_string(slots) + " slots x " + MiB(batch) + " = " + MiB(p.shm_bytes) +
               ", over " + Fraction(options_.shm_fraction) + " x " + MiB(facts_.shm_free_bytes) +
               " free (sweep.budget.shm_fraction)";
  } else if (facts_.nofile_limit > 0 && p.fds > facts_.nofile_limit) {
    p.ok = false;
    p.reason = "file descriptors: needs about " + std::to_string(p.fds) + ", over the open-file limit of " +
               std::to_string(facts_.nofile_limit) + " (ulimit -n)";
  }
  if (facts_.usable_cpus > 0 && static_cast<double>(n) > facts_.usable_cpus) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "%lld workers on %g usable CPUs", static_cast<long long>(n), facts_.usable_cpus);
    p.note = buf;
  }
  return p;
}

int Budget::SafeMaxWorkers(const loader::Knobs& knobs, int limit) const {
  // Every figure of the model grows with n, so the fitting counts are 0..answer.
  int lo = 0, hi = limit;
  loader::Knobs k = knobs;
  while (lo < hi) {
    const int mid = lo + (hi - lo + 1) / 2;
    k.num_workers = mid;
    if (PredictWith(k, GrowthBytes(k)).ok) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

SettingCheck CheckSetting(const BudgetFacts& facts, const BudgetOptions& options, WorkerMemory source,
                          const std::vector<results::TrialRecord>& stored, int64_t estimate_worker_rss_bytes,
                          const loader::Knobs& knobs) {
  Budget budget(facts, options, source);
  for (const results::TrialRecord& t : stored) budget.Observe(t);
  SettingCheck check;
  const SafeLimit measured = budget.SafeLimitFor(knobs, 0);
  if (measured.basis_trial) {
    check.worker_basis = measured.basis + " (a stored run of this host and workload)";
  } else if (source == WorkerMemory::kReported) {
    // feedtune's own RSS says nothing of a command's workers.
    check.worker_basis = "unknown (no stored trial of this command reported worker memory): 0 MiB taken";
  } else {
    budget.AssumeWorkerRss(estimate_worker_rss_bytes);
    check.worker_basis = "an estimate: feedtune's own RSS now (" + MiB(estimate_worker_rss_bytes) +
                         "), which a forked worker may come to own; no stored trial of this host and workload "
                         "measured worker memory";
  }
  if (budget.batch_bytes() == 0) {
    check.not_applied = "the memory and /dev/shm budgets could not be applied to the slots: feedtune does not know "
                        "the size of this workload's batches (a command's samples are its own; a stored sweep of "
                        "it on this host would tell)";
  }
  check.prediction = budget.Predict(knobs);
  if (check.prediction.ok) return check;
  check.refusal = check.prediction.reason;
  const bool slots_counted = check.refusal.starts_with("memory") || check.refusal.starts_with("/dev/shm");
  if (slots_counted && knobs.num_workers > 0) {
    check.refusal += "; " + std::to_string(static_cast<int64_t>(knobs.prefetch_factor) * knobs.num_workers + 1) +
                     " slots = " + std::to_string(knobs.num_workers) + " workers x prefetch_factor " +
                     std::to_string(knobs.prefetch_factor) + " + 1";
  }
  if (check.refusal.starts_with("memory") && knobs.num_workers > 0) {
    check.refusal += "; per worker: " + check.worker_basis;
  }
  return check;
}

results::TrialRecord BudgetGate::MeasurePlanned(const loader::Knobs& knobs, const TrialPlan& plan) {
  last_ = budget_.Predict(knobs);
  skipped_ = !last_.ok;
  if (last_.ok) return inner_.MeasurePlanned(knobs, plan);
  results::TrialRecord t;
  t.knobs = knobs;
  t.status = results::TrialStatus::kSkipped;
  t.error = last_.reason;
  return t;
}

}  // namespace feedtune::tuner
