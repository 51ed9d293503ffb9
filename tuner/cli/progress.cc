#include "tuner/cli/progress.h"

#include <unistd.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "results/json_form.h"
#include "results/memory_growth.h"
#include "results/report.h"
#include "results/units.h"

namespace feedtune::tuner {
namespace {

using results::Format;  // results/units.h

constexpr int kBarWidth = 24;
constexpr size_t kBarLineMax = 118;  // keep the redrawn line within a terminal row

// NaN (not measured) as null.

template <typename T>
nlohmann::json Optional(const std::optional<T>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

// "GPU idle  61.7%", or "GPU idle not measured" (a command that did not report it).
std::string IdleText(double frac) {
  return std::isfinite(frac) ? Format("GPU idle %5.1f%%", frac * 100.0) : std::string("GPU idle not measured");
}


}  // namespace

ProgressMode DetectProgressMode(std::FILE* out, bool quiet) {
  if (quiet) return ProgressMode::kQuiet;
  return isatty(fileno(out)) != 0 ? ProgressMode::kBar : ProgressMode::kLines;
}

std::string ClockText(double seconds) {
  const long s = std::lround(std::max(0.0, seconds));
  if (s >= 3600) return Format("%ld:%02ld:%02ld", s / 3600, s / 60 % 60, s % 60);
  return Format("%ld:%02ld", s / 60, s % 60);
}

double Progress::elapsed_s() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

std::optional<double> Progress::left_s(const SearchProgress& progress) const {
  if (measured_ == 0) return std::nullopt;
  return measured_s_ / measured_ * progress.trials_left;
}

void Progress::Clear() {
  if (!bar_drawn_) return;
  std::fputs("\r\033[K", out_);
  std::fflush(out_);
  bar_drawn_ = false;
}

void Progress::Note(const std::string& line) {
  if (mode_ == ProgressMode::kQuiet) return;
  Clear();
  std::fprintf(out_, "%s\n", line.c_str());
  std::fflush(out_);
}

void Progress::Start(const TrialPlan& plan, const loader::Knobs& knobs, const SearchProgress& progress) {
  trial_start_ = std::chrono::steady_clock::now();
  if (mode_ != ProgressMode::kBar) return;
  const int total = progress.trials_done + 1 + progress.trials_left;
  const int filled = total > 0 ? kBarWidth * progress.trials_done / total : 0;
  const std::string bar = std::string(static_cast<size_t>(filled), '#') +
                          std::string(static_cast<size_t>(kBarWidth - filled), '.');
  const auto left = left_s(progress);
  std::string line = Format("[%s] %d/~%d %s %s  measuring...  %s elapsed%s", bar.c_str(), progress.trials_done + 1,
                            total, plan.phase.c_str(), KnobsShort(knobs).c_str(), ClockText(elapsed_s()).c_str(),
                            left ? (", ~" + ClockText(*left) + " left").c_str() : "");
  if (line.size() > kBarLineMax) line.resize(kBarLineMax);
  std::fprintf(out_, "\r\033[K%s", line.c_str());
  std::fflush(out_);
  bar_drawn_ = true;
}

void Progress::Trial(const results::TrialRecord& t, const SearchProgress& progress, bool replayed) {
  if (!replayed) {
    measured_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - trial_start_).count();
    ++measured_;
  }
  if (mode_ == ProgressMode::kQuiet) return;
  Clear();
  std::string figures;
  if (t.status == results::TrialStatus::kOk) {
    figures = Format("%9.1f samples/s [%.1f, %.1f]  ", t.samples_per_s, t.ci_low, t.ci_high) + IdleText(t.gpu_idle_frac);
  } else {
    figures = results::TrialStatusName(t.status);
  }
  const auto left = left_s(progress);
  std::fprintf(out_, "[%2d] %-18s %s  %s  %s  (%s%s%s)\n", progress.trials_done, t.phase.c_str(),
               KnobsShort(t.knobs).c_str(), figures.c_str(), t.decision.c_str(), ClockText(elapsed_s()).c_str(),
               left ? (", ~" + ClockText(*left) + " left").c_str() : "", replayed ? ", stored" : "");
  std::fflush(out_);
}

std::string StartEventJson(int64_t run_id, const std::string& workload, const std::string& backend,
                           int max_workers, bool resumed, int stored_trials) {
  return nlohmann::json{{"event", "start"},      {"run_id", run_id},           {"workload", workload},
                        {"backend", backend},    {"max_workers", max_workers}, {"resumed", resumed},
                        {"stored_trials", stored_trials}}
      .dump();
}

std::string TrialEventJson(const results::TrialRecord& t, const SearchProgress& progress, double elapsed_s,
                           std::optional<double> left_s, bool replayed) {
  return nlohmann::json{{"event", "trial"},
                        {"number", progress.trials_done},
                        {"id", t.id},
                        {"phase", t.phase},
                        {"config", results::SettingJson(t.knobs)},
                        {"status", results::TrialStatusName(t.status)},
                        {"error", t.error ? nlohmann::json(*t.error) : nlohmann::json(nullptr)},
                        {"samples_per_s", t.samples_per_s},
                        {"ci", {t.ci_low, t.ci_high}},
                        {"cv", results::JsonNumber(t.cv)},
                        {"gpu_idle_frac", results::JsonNumber(t.gpu_idle_frac)},
                        {"epoch_boundary_ms", results::JsonNumber(t.epoch_boundary_ms)},
                        {"worker_busy_frac", results::JsonNumber(t.worker_busy_frac)},
                        {"worker_rss_bytes", results::JsonNumber(t.worker_rss_bytes)},
                        {"decision", t.decision},
                        {"replayed", replayed},
                        {"elapsed_s", elapsed_s},
                        {"left_s", Optional(left_s)},
                        {"trials_left", progress.trials_left}}
      .dump();
}

nlohmann::json DoneEvent(const SearchOutcome& outcome, const results::RunRecord& run) {
  const nlohmann::json phases = results::PhasesArray(outcome.phases);
  const auto trial_json = [&](const std::optional<size_t>& i) -> nlohmann::json {
    if (!i) return nullptr;
    const auto& t = outcome.trials[*i];
    return {{"id", t.id}, {"config", results::SettingJson(t.knobs)}, {"samples_per_s", t.samples_per_s},
            {"ci", {t.ci_low, t.ci_high}}, {"gpu_idle_frac", results::JsonNumber(t.gpu_idle_frac)}};
  };
  return nlohmann::json{{"event", "done"},
                        {"run_id", run.id},
                        {"status", results::RunStatusName(run.status)},
                        {"trials", outcome.trials.size()},
                        {"baseline", trial_json(outcome.baseline)},
                        {"best", trial_json(outcome.best)},
                        {"fastest", trial_json(outcome.fastest)},
                        {"knee_workers", Optional(outcome.knee_workers)},
                        {"knee_kneedle_workers", Optional(outcome.kneedle_workers)},
                        {"workers_estimate", outcome.estimate_workers
                                                 ? nlohmann::json{{"workers", *outcome.estimate_workers},
                                                                  {"how", outcome.estimate_how}}
                                                 : nlohmann::json(nullptr)},
                        {"safe_max_workers", Optional(run.safe_max_workers)},
                        {"safe_limit", results::SafeLimitJson(run.facts.safe_limit)},
                        {"speedup", Optional(outcome.speedup)},
                        {"speedup_ci", outcome.speedup_ci_low ? nlohmann::json({*outcome.speedup_ci_low,
                                                                                *outcome.speedup_ci_high})
                                                              : nlohmann::json(nullptr)},
                        {"best_is_reference", outcome.best_is_reference},
                        {"slower_than_reference", SlowerBeyondTheNoise(outcome)},
                        {"phases", phases}};
}

std::string InterruptedEventJson(int64_t run_id, int trials_kept) {
  return nlohmann::json{{"event", "interrupted"}, {"run_id", run_id}, {"trials_kept", trials_kept}}.dump();
}

std::string SummaryText(const SearchOutcome& outcome, const results::RunRecord& run, const std::string& db_path) {
  std::string out;
  const long long run_id = static_cast<long long>(run.id);
  if (!outcome.best || !outcome.baseline) {
    out = Format("run %lld: no successful trial\n", run_id);
    for (const auto& p : outcome.phases) out += Format("  %-18s %s\n", p.phase.c_str(), p.why.c_str());
    return out;
  }
  const auto& base = outcome.trials[*outcome.baseline];
  const auto& best = outcome.trials[*outcome.best];
  out += Format("run %lld: %zu trials\n", run_id, outcome.trials.size());
  out += Format("baseline:  %-36s %9.1f samples/s  %s\n", KnobsShort(base.knobs).c_str(), base.samples_per_s,
                IdleText(base.gpu_idle_frac).c_str());
  if (outcome.knee_workers) {
    std::string kneedle;
    if (outcome.kneedle_workers && *outcome.kneedle_workers != *outcome.knee_workers) {
      kneedle = Format("  (Kneedle: %d)", *outcome.kneedle_workers);
    }
    out += Format("knee:      num_workers=%-23d %9.1f samples/s%s\n", *outcome.knee_workers,
                  outcome.knee_samples_per_s, kneedle.c_str());
  }
  out += Format("best:      %-36s %9.1f samples/s  %s\n", KnobsShort(best.knobs).c_str(), best.samples_per_s,
                IdleText(best.gpu_idle_frac).c_str());
  if (outcome.fastest && *outcome.fastest != *outcome.best) {
    const auto& fastest = outcome.trials[*outcome.fastest];
    out += Format("fastest:   %-36s %9.1f samples/s  (within noise or knee_tolerance of the best)\n",
                  KnobsShort(fastest.knobs).c_str(), fastest.samples_per_s);
  }
  const std::string basis = results::SafeLimitBasis(run);
  if (run.safe_max_workers) {
    out += Format("safe:      num_workers <= %d within the memory, /dev/shm and open-file budgets%s\n",
                  *run.safe_max_workers, basis.empty() ? "" : ("; per worker: " + basis).c_str());
  } else if (!basis.empty()) {
    out += "safe:      " + basis + "\n";  // "unknown: ...": no number
  }
  if (outcome.speedup && outcome.speedup_ci_low) {
    out += Format("speedup:   x%.2f [%.2f, %.2f] over the baseline (interleaved final check)\n", *outcome.speedup,
                  *outcome.speedup_ci_low, *outcome.speedup_ci_high);
  } else if (base.samples_per_s > 0) {
    out += Format("speedup:   x%.2f over the baseline\n", best.samples_per_s / base.samples_per_s);
  }
  // Trials whose workers grew past the flag (results/memory_growth.h).
  if (const std::string growth = results::GrowthFlagsText(outcome.trials, "           "); !growth.empty()) {
    out += "memory:    worker memory grows per epoch (docs/measurement.md):\n" + growth;
  }
  out += "decisions:\n";
  for (const auto& p : outcome.phases) {
    out += Format("  %-18s %s\n", p.phase.c_str(), p.why.c_str());
  }
  out += Format("stored in %s; see `feedtune report --db %s --run %lld`\n", db_path.c_str(), db_path.c_str(),
                run_id);
  return out;
}

}  // namespace feedtune::tuner
