#include "tuner/progress.h"

#include <cstdarg>

namespace feedtune::tuner {
namespace {

std::string Format(const char* format, ...) __attribute__((format(printf, 1, 2)));
std::string Format(const char* format, ...) {
  char buf[512];
  va_list args;
  va_start(args, format);
  std::vsnprintf(buf, sizeof buf, format, args);
  va_end(args);
  return buf;
}

}  // namespace

std::string KnobsShort(const loader::Knobs& k) {
  return Format("nw=%d pin=%d nb=%d pf=%d pers=%d", k.num_workers, k.pin_memory ? 1 : 0, k.non_blocking ? 1 : 0,
                k.prefetch_factor, k.persistent_workers ? 1 : 0);
}

double Progress::elapsed_s() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

void Progress::Note(const std::string& line) {
  if (quiet_) return;
  std::fprintf(out_, "%s\n", line.c_str());
  std::fflush(out_);
}

void Progress::Trial(const results::TrialRecord& t, int number) {
  if (quiet_) return;
  std::string figures;
  if (t.status == "ok") {
    figures = Format("%9.1f samples/s [%.1f, %.1f]  GPU idle %5.1f%%", t.samples_per_s, t.ci_low, t.ci_high,
                     t.gpu_idle_frac * 100.0);
  } else {
    figures = t.status;
  }
  std::fprintf(out_, "[%2d] %-18s %s  %s  %s  (%.0fs)\n", number, t.phase.c_str(), KnobsShort(t.knobs).c_str(),
               figures.c_str(), t.decision.c_str(), elapsed_s());
  std::fflush(out_);
}

std::string SummaryText(const SearchOutcome& outcome, int64_t run_id, const std::string& db_path) {
  std::string out;
  if (!outcome.best || !outcome.baseline) return "run " + std::to_string(run_id) + ": no successful trial\n";
  const auto& base = outcome.trials[*outcome.baseline];
  const auto& best = outcome.trials[*outcome.best];
  out += Format("run %lld: %zu trials\n", static_cast<long long>(run_id), outcome.trials.size());
  out += Format("baseline:  %-36s %9.1f samples/s  GPU idle %5.1f%%\n", KnobsShort(base.knobs).c_str(),
                base.samples_per_s, base.gpu_idle_frac * 100.0);
  if (outcome.knee_workers) {
    out += Format("knee:      num_workers=%-23d %9.1f samples/s\n", *outcome.knee_workers, outcome.knee_samples_per_s);
  }
  out += Format("best:      %-36s %9.1f samples/s  GPU idle %5.1f%%\n", KnobsShort(best.knobs).c_str(),
                best.samples_per_s, best.gpu_idle_frac * 100.0);
  if (base.samples_per_s > 0) out += Format("speedup:   x%.2f over the baseline\n", best.samples_per_s / base.samples_per_s);
  out += Format("stored in %s; see `feedtune report --db %s --run %lld`\n", db_path.c_str(), db_path.c_str(),
                static_cast<long long>(run_id));
  return out;
}

}  // namespace feedtune::tuner
