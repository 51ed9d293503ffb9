#include "results/json_form.h"

#include "results/memory_growth.h"
#include "results/node_report.h"
#include "results/store_probe.h"

namespace feedtune::results {

nlohmann::ordered_json TrialJson(const TrialRecord& t) {
  using Json = nlohmann::ordered_json;
  Json j = Json{{"id", t.id},
              {"phase", t.phase},
              {"config", SettingJson<Json>(t.knobs)},
              {"status", TrialStatusName(t.status)},
              {"samples_per_s", JsonNumber<Json>(t.samples_per_s)},
              {"ci", Json::array({JsonNumber<Json>(t.ci_low), JsonNumber<Json>(t.ci_high)})},
              {"mb_per_s", JsonNumber<Json>(t.mb_per_s)},
              {"gpu_idle_frac", JsonNumber<Json>(t.gpu_idle_frac)},
              {"copy_s", JsonNumber<Json>(t.copy_s)},
              {"wait_p50_us", JsonNumber<Json>(t.wait_p50_us)},
              {"wait_p99_us", JsonNumber<Json>(t.wait_p99_us)},
              {"worker_startup_s", JsonNumber<Json>(t.worker_startup_s)},
              {"cpu_util", JsonNumber<Json>(t.cpu_util)},
              {"peak_rss_bytes", t.peak_rss_bytes},
              {"repeats", t.repeats},
              {"decision", t.decision},
              {"error", t.error ? Json(*t.error) : Json(nullptr)},
              {"time_to_first_batch_s", JsonNumber<Json>(t.time_to_first_batch_s)},
              {"epoch_boundary_ms", JsonNumber<Json>(t.epoch_boundary_ms)},
              {"cv", JsonNumber<Json>(t.cv)},
              {"worker_busy_frac", JsonNumber<Json>(t.worker_busy_frac)},
              {"pinned_alloc_s", JsonNumber<Json>(t.pinned_alloc_s)},
              {"batches_per_epoch", t.batches_per_epoch ? Json(*t.batches_per_epoch) : Json(nullptr)},
              {"worker_rss_bytes", JsonNumber<Json>(t.worker_rss_bytes)},
              // Other processes' CPU in the windows (docs/measurement.md).
              {"background_cpu", JsonNumber<Json>(t.background_cpu)},
              {"remeasured_windows", t.remeasured_windows}};
  // The workers' memory over the trial and its flag (results/memory_growth.h).
  j.update(WorkerMemoryJson(t));
  // A node trial (sweep.ranks > 1): the ranks' figures (results/node_report.h).
  if (t.node) j["node"] = NodeFiguresJson(*t.node);
  // Remote data (schema v23): the store's figures over the trial's windows (results/store_probe.h).
  if (t.store) j["store"] = StoreFiguresJson(*t.store);
  return j;
}

}  // namespace feedtune::results
