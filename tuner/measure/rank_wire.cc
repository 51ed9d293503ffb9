#include "tuner/measure/rank_wire.h"

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "results/json_form.h"

namespace feedtune::tuner::node {
namespace {

using nlohmann::json;

json Num(double v) { return results::JsonNumber<json>(v); }
double Num(const json& j, const char* key) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::numeric_limits<double>::quiet_NaN();
  return it->get<double>();
}

json Parse(const std::string& line) {
  json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) throw std::runtime_error("a rank sent a line that is not a JSON object: " + line.substr(0, 200));
  return j;
}

}  // namespace

std::string RequestLine(const loader::Knobs& k, const TrialPlan& plan) {
  return json{{"batch_size", k.batch_size},         {"num_workers", k.num_workers},
              {"pin_memory", k.pin_memory},         {"non_blocking", k.non_blocking},
              {"prefetch_factor", k.prefetch_factor}, {"persistent_workers", k.persistent_workers},
              {"cpu_binding", static_cast<int>(k.cpu_binding)}, {"worker_threads", k.worker_threads},
              {"fetch_concurrency", k.fetch_concurrency},
              {"phase", plan.phase},                {"repeats", plan.repeats},
              {"window_epochs", plan.window_epochs}}
      .dump();
}

void ParseRequest(const std::string& line, loader::Knobs* k, TrialPlan* plan) {
  try {
    const json j = Parse(line);
    k->batch_size = j.at("batch_size");
    k->num_workers = j.at("num_workers");
    k->pin_memory = j.at("pin_memory");
    k->non_blocking = j.at("non_blocking");
    k->prefetch_factor = j.at("prefetch_factor");
    k->persistent_workers = j.at("persistent_workers");
    const int binding = j.at("cpu_binding");
    if (binding < 0 || binding > static_cast<int>(loader::CpuBinding::kNuma)) {
      throw std::runtime_error("a trial request with an unknown cpu_binding " + std::to_string(binding));
    }
    k->cpu_binding = static_cast<loader::CpuBinding>(binding);
    k->worker_threads = j.at("worker_threads");
    k->fetch_concurrency = j.value("fetch_concurrency", 1);
    plan->phase = j.at("phase");
    plan->repeats = j.at("repeats");
    plan->window_epochs = j.at("window_epochs");
  } catch (const json::exception& e) {
    throw std::runtime_error(std::string("a malformed trial request: ") + e.what());
  }
}

std::string RecordLine(const results::TrialRecord& t, const results::RankRecord& r, const std::string& warning) {
  json reps = json::array();
  for (const auto& rep : t.repeat_rows) {
    reps.push_back({{"samples_per_s", Num(rep.samples_per_s)}, {"mb_per_s", Num(rep.mb_per_s)},
                    {"gpu_idle_frac", Num(rep.gpu_idle_frac)}, {"wait_p50_us", Num(rep.wait_p50_us)},
                    {"wait_p99_us", Num(rep.wait_p99_us)}, {"wall_s", Num(rep.wall_s)},
                    {"background_cpu", Num(rep.background_cpu)}, {"tree_cpu", Num(rep.tree_cpu)}});
  }
  json line = {{"status", results::TrialStatusName(t.status)},
                {"error", t.error ? json(*t.error) : json(nullptr)},
                {"samples_per_s", Num(t.samples_per_s)},
                {"mb_per_s", Num(t.mb_per_s)},
                {"gpu_idle_frac", Num(t.gpu_idle_frac)},
                {"copy_s", Num(t.copy_s)},
                {"wait_p50_us", Num(t.wait_p50_us)},
                {"wait_p99_us", Num(t.wait_p99_us)},
                {"worker_startup_s", Num(t.worker_startup_s)},
                {"cpu_util", Num(t.cpu_util)},
                {"peak_rss_bytes", t.peak_rss_bytes},
                {"repeats", t.repeats},
                {"time_to_first_batch_s", Num(t.time_to_first_batch_s)},
                {"epoch_boundary_ms", Num(t.epoch_boundary_ms)},
                {"worker_busy_frac", Num(t.worker_busy_frac)},
                {"pinned_alloc_s", Num(t.pinned_alloc_s)},
                {"worker_rss_bytes", Num(t.worker_rss_bytes)},
                {"worker_rss_start_bytes", Num(t.worker_rss_start_bytes)},
                {"worker_rss_peak_bytes", Num(t.worker_rss_peak_bytes)},
                {"worker_rss_growth_bytes_per_epoch", Num(t.worker_rss_growth_bytes_per_epoch)},
                {"worker_rss_epochs", Num(t.worker_rss_epochs)},
                {"worker_rss_samples", t.worker_rss_samples},
                {"worker_rss_in_consumer", t.worker_rss_in_consumer},
                {"batches_per_epoch", t.batches_per_epoch ? json(*t.batches_per_epoch) : json(nullptr)},
                {"background_cpu", Num(t.background_cpu)},
                {"repeat_rows", reps},
                {"pid", r.pid},
                {"cpu_mask", r.cpu_mask},
                {"worker_cpu_masks", r.worker_cpu_masks},
                {"processes", r.processes},
                {"threads", r.threads},
                {"shm_bytes", r.shm_bytes}};
  if (!warning.empty()) line["warning"] = warning;
  return line.dump();
}

void ParseRecord(const std::string& line, results::TrialRecord* t, results::RankRecord* r) {
  try {
    const json j = Parse(line);
    t->status = results::ParseTrialStatus(j.at("status").get<std::string>());
    if (!j.at("error").is_null()) t->error = j.at("error").get<std::string>();
    t->samples_per_s = Num(j, "samples_per_s");
    t->mb_per_s = Num(j, "mb_per_s");
    t->gpu_idle_frac = Num(j, "gpu_idle_frac");
    t->copy_s = Num(j, "copy_s");
    t->wait_p50_us = Num(j, "wait_p50_us");
    t->wait_p99_us = Num(j, "wait_p99_us");
    t->worker_startup_s = Num(j, "worker_startup_s");
    t->cpu_util = Num(j, "cpu_util");
    t->peak_rss_bytes = j.at("peak_rss_bytes");
    t->repeats = j.at("repeats");
    t->time_to_first_batch_s = Num(j, "time_to_first_batch_s");
    t->epoch_boundary_ms = Num(j, "epoch_boundary_ms");
    t->worker_busy_frac = Num(j, "worker_busy_frac");
    t->pinned_alloc_s = Num(j, "pinned_alloc_s");
    t->worker_rss_bytes = Num(j, "worker_rss_bytes");
    t->worker_rss_start_bytes = Num(j, "worker_rss_start_bytes");
    t->worker_rss_peak_bytes = Num(j, "worker_rss_peak_bytes");
    t->worker_rss_growth_bytes_per_epoch = Num(j, "worker_rss_growth_bytes_per_epoch");
    t->worker_rss_epochs = Num(j, "worker_rss_epochs");
    t->worker_rss_samples = j.at("worker_rss_samples").get<int>();
    t->worker_rss_in_consumer = j.at("worker_rss_in_consumer").get<bool>();
    if (!j.at("batches_per_epoch").is_null()) t->batches_per_epoch = j.at("batches_per_epoch").get<int64_t>();
    t->background_cpu = Num(j, "background_cpu");
    int index = 0;
    for (const auto& rep_j : j.at("repeat_rows")) {
      results::RepeatRecord rep;
      rep.index = index++;
      rep.samples_per_s = Num(rep_j, "samples_per_s");
      rep.mb_per_s = Num(rep_j, "mb_per_s");
      rep.gpu_idle_frac = Num(rep_j, "gpu_idle_frac");
      rep.wait_p50_us = Num(rep_j, "wait_p50_us");
      rep.wait_p99_us = Num(rep_j, "wait_p99_us");
      rep.wall_s = Num(rep_j, "wall_s");
      rep.background_cpu = Num(rep_j, "background_cpu");
      rep.tree_cpu = Num(rep_j, "tree_cpu");
      t->repeat_rows.push_back(rep);
    }
    r->pid = j.at("pid");
    r->cpu_mask = j.at("cpu_mask");
    r->worker_cpu_masks = j.at("worker_cpu_masks");
    r->processes = j.at("processes");
    r->threads = j.at("threads");
    r->shm_bytes = j.at("shm_bytes");
    r->status = t->status;
    r->error = t->error;
    r->samples_per_s = t->samples_per_s;
    r->gpu_idle_frac = t->gpu_idle_frac;
    r->wait_p50_us = t->wait_p50_us;
    r->wait_p99_us = t->wait_p99_us;
  } catch (const json::exception& e) {
    throw std::runtime_error(std::string("a malformed rank record: ") + e.what());
  }
}

}  // namespace feedtune::tuner::node
