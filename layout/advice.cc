#include "layout/advice.h"

#include <algorithm>
#include <cstdio>

namespace feedtune::layout {

// A layout within the noise of the fastest is named for its bytes only when
// it takes under this share of the fastest's.
constexpr double kBytesWorthSaving = 0.95;

namespace {

// "5%": the share of the fastest's bytes a slower layout must save.
std::string SavingText() {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%.0f%%", (1 - kBytesWorthSaving) * 100);
  return buf;
}

std::string RateText(const Rate& r) {
  char buf[96];
  std::snprintf(buf, sizeof buf, "%.0f samples/s (95%% CI %.0f-%.0f) at %d worker%s", r.median, r.ci_low, r.ci_high,
                r.workers, r.workers == 1 ? "" : "s");
  return buf;
}

std::string MbText(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MB", bytes / 1e6);
  return buf;
}

}  // namespace

Advice Advise(const std::vector<CandidateResult>& results, int64_t dataset_samples, int64_t sample_samples) {
  Advice advice;
  advice.rows.resize(results.size());
  const double scale = static_cast<double>(dataset_samples) / static_cast<double>(std::max<int64_t>(1, sample_samples));
  int fastest = -1, source = -1;
  for (size_t i = 0; i < results.size(); ++i) {
    const CandidateResult& r = results[i];
    CandidateAdvice& a = advice.rows[i];
    a.bytes_on_disk = static_cast<int64_t>(static_cast<double>(r.sample_bytes_on_disk) * scale);
    a.convert_seconds = r.as_is ? 0 : r.write_seconds * scale;
    if (!r.measured || r.cold.median <= 0) continue;
    a.epoch_seconds_cold = static_cast<double>(dataset_samples) / r.cold.median;
    if (fastest < 0 || r.cold.median > results[static_cast<size_t>(fastest)].cold.median) fastest = static_cast<int>(i);
    if (r.as_is) source = static_cast<int>(i);
  }
  if (fastest < 0) {
    advice.why = "no candidate could be measured";
    return advice;
  }
  const CandidateResult& best = results[static_cast<size_t>(fastest)];
  // Within the noise: the intervals of the two medians overlap.
  int named = fastest;
  int within = 0, measured = 0;
  for (size_t i = 0; i < results.size(); ++i) {
    const CandidateResult& r = results[i];
    if (!r.measured || r.cold.median <= 0) continue;
    ++measured;
    advice.rows[i].within_noise_of_fastest = r.cold.ci_high >= best.cold.ci_low;
    if (!advice.rows[i].within_noise_of_fastest) continue;
    ++within;
    // Fewer bytes name a slower layout only when they are a saving worth
    // having: tar's headers against npy's rows (under 1%) are not, and the
    // order of two candidates within the noise is a coin's.
    const int64_t bytes = advice.rows[i].bytes_on_disk;
    if (static_cast<double>(bytes) < kBytesWorthSaving * static_cast<double>(advice.rows[static_cast<size_t>(fastest)].bytes_on_disk) &&
        bytes < advice.rows[static_cast<size_t>(named)].bytes_on_disk) {
      named = static_cast<int>(i);
    }
  }
  if (source >= 0) {
    const double source_epoch = advice.rows[static_cast<size_t>(source)].epoch_seconds_cold;
    for (size_t i = 0; i < results.size(); ++i) {
      const CandidateAdvice& a = advice.rows[i];
      if (results[i].as_is || a.epoch_seconds_cold <= 0) continue;
      const double saved = source_epoch - a.epoch_seconds_cold;
      if (saved > 0) advice.rows[i].payback_epochs = a.convert_seconds / saved;
    }
  }
  if (within == measured && measured > 1 && source >= 0) {
    advice.layout_matters = false;
    advice.named = source;
    advice.why = "the layout does not matter here: every candidate reads within the noise of the fastest cold (" +
                 best.name + ", " + RateText(best.cold) +
                 "), so the per-sample CPU cost (decode, transforms) or the loader is the limit; keep the source "
                 "as it is";
    return advice;
  }
  advice.named = named;
  const CandidateResult& n = results[static_cast<size_t>(named)];
  if (named == fastest) {
    advice.why = n.name + ": the fastest cold, " + RateText(n.cold);
    if (within > 1) {
      advice.why += "; none of the " + std::to_string(within - 1) + " within its noise saves " + SavingText() +
                    " of its bytes";
    }
  } else {
    advice.why = n.name + ": within the noise of the fastest cold (" + best.name + ", " + RateText(best.cold) +
                 ") at " + RateText(n.cold) + ", and the fewest bytes on disk of those (" +
                 MbText(static_cast<double>(advice.rows[static_cast<size_t>(named)].bytes_on_disk)) + " against " +
                 MbText(static_cast<double>(advice.rows[static_cast<size_t>(fastest)].bytes_on_disk)) + ")";
  }
  if (source >= 0 && !n.as_is) {
    const auto& payback = advice.rows[static_cast<size_t>(named)].payback_epochs;
    char buf[160];
    if (payback) {
      const double convert_s = advice.rows[static_cast<size_t>(named)].convert_seconds;
      std::snprintf(buf, sizeof buf, "; converting the whole dataset takes about %.*f s and pays back after %.1f epochs",
                    convert_s < 10 ? 1 : 0, convert_s, *payback);
    } else {
      std::snprintf(buf, sizeof buf, "; it is not faster than the source, so converting never pays back in time");
    }
    advice.why += buf;
  }
  return advice;
}

}  // namespace feedtune::layout
