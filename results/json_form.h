// One JSON form for what feedtune writes about a trial, in every JSON it
// prints or stores (the report, the sweep's --json events and `trial --json`,
// compare, check, the verdict, the rank wire): a figure, a loader setting, a
// trial. docs/json-report.md is the contract these keep.
#pragma once

#include <cmath>
#include <nlohmann/json.hpp>

#include "loader/options.h"
#include "results/records.h"

namespace feedtune::results {

// A figure: the number, or null where it was not measured (NaN, or not
// finite); never 0. Json is nlohmann::json or nlohmann::ordered_json,
// whichever the caller builds.
template <typename Json = nlohmann::json>
Json JsonNumber(double value) {
  return std::isfinite(value) ? Json(value) : Json(nullptr);
}

// JsonNumber in the ordered JSON the renderers build (the report, compare,
// the node report, observed runs).
inline nlohmann::ordered_json FigureJson(double value) { return JsonNumber<nlohmann::ordered_json>(value); }

// The six DataLoader keyword arguments a setting names (what torch takes, and
// non_blocking for .to()): where a JSON names a loader setting to use.
template <typename Json = nlohmann::json>
Json LoaderKnobsJson(const loader::Knobs& k) {
  return Json{{"batch_size", k.batch_size},           {"num_workers", k.num_workers},
              {"pin_memory", k.pin_memory},           {"non_blocking", k.non_blocking},
              {"prefetch_factor", k.prefetch_factor}, {"persistent_workers", k.persistent_workers}};
}

// A trial's whole setting: the six, the knobs around the loader
// (tuner/search/search.h; worker_threads 0 = the workload's own), and the
// start method when the trial named one ("default", the interpreter's, is
// every other trial's, which never had the key), and fetch_concurrency when
// above 1 (requests in flight per worker, for remote data; 1 everywhere else).
template <typename Json = nlohmann::json>
Json SettingJson(const loader::Knobs& k) {
  Json j = LoaderKnobsJson<Json>(k);
  j["cpu_binding"] = loader::CpuBindingName(k.cpu_binding);
  j["worker_threads"] = k.worker_threads;
  if (k.multiprocessing_context != loader::StartMethod::kDefault) {
    j["multiprocessing_context"] = loader::StartMethodName(k.multiprocessing_context);
  }
  if (k.fetch_concurrency != 1) j["fetch_concurrency"] = k.fetch_concurrency;
  return j;
}

// A trial as the report's "trials" hold it and `trial --json` prints it: its
// setting, figures (null where not measured), decision, the workers' memory
// and, for a node trial, the ranks' figures.
nlohmann::ordered_json TrialJson(const TrialRecord& trial);

}  // namespace feedtune::results
