#include "results/memory_growth.h"

#include <cmath>
#include <nlohmann/json.hpp>

#include "results/json_form.h"
#include "results/units.h"


namespace feedtune::results {

bool GrowthFlagged(const TrialRecord& t) {
  return t.status == TrialStatus::kOk && std::isfinite(t.worker_rss_growth_bytes_per_epoch) &&
         std::isfinite(t.worker_rss_epochs) && t.worker_rss_epochs >= kGrowthFlagMinEpochs &&
         t.worker_rss_growth_bytes_per_epoch >= kGrowthFlagBytesPerEpoch;
}

std::string GrowthText(const TrialRecord& t) {
  const std::string grows = "memory grows " + MiB(std::llround(t.worker_rss_growth_bytes_per_epoch)) + " per epoch";
  // Thread workers (and reads without workers) grow this process, which no
  // restart of the workers frees.
  if (t.worker_rss_in_consumer) {
    return t.knobs.num_workers > 0
               ? grows + " per worker in the loading process: a cache or a leak; the workers are threads of it, "
                         "so no restart frees it"
               : grows + " in the loading process (no workers): a cache or a leak";
  }
  return grows + " per worker: a cache or a leak; " +
         (t.knobs.persistent_workers ? "persistent_workers: false frees it at each epoch"
                                     : "the workers restart each epoch, which frees it");
}

nlohmann::ordered_json WorkerMemoryJson(const TrialRecord& t) {
  using Json = nlohmann::ordered_json;
  const auto number = [](double value) { return JsonNumber<Json>(value); };
  return Json{{"worker_rss_start_bytes", number(t.worker_rss_start_bytes)},
              {"worker_rss_peak_bytes", number(t.worker_rss_peak_bytes)},
              {"worker_rss_growth_bytes_per_epoch", number(t.worker_rss_growth_bytes_per_epoch)},
              {"worker_rss_epochs", number(t.worker_rss_epochs)},
              {"worker_rss_samples", t.worker_rss_samples},
              {"worker_rss_flag", GrowthFlagged(t) ? Json(GrowthText(t)) : Json(nullptr)}};
}

std::string GrowthFlagsText(const std::vector<TrialRecord>& trials, const std::string& indent) {
  std::string text;
  for (const TrialRecord& t : trials) {
    if (!GrowthFlagged(t)) continue;
    text += indent + Format("trial %lld (%d %s%s): ", static_cast<long long>(t.id), t.knobs.num_workers,
                            t.knobs.num_workers == 1 ? "worker" : "workers",
                            t.knobs.persistent_workers && t.knobs.num_workers > 0 ? ", persistent" : "") +
            GrowthText(t) + Format(" (over %.1f epochs, %d samples)\n", t.worker_rss_epochs, t.worker_rss_samples);
  }
  return text;
}

}  // namespace feedtune::results
