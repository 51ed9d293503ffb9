#include "tuner/search/seed.h"

#include <nlohmann/json.hpp>

#include "results/fleet.h"
#include "results/store.h"
#include "loader/options.h"

namespace feedtune::tuner {

std::optional<SweepSeed> FindSeed(const results::Store& store, const std::string& db_path,
                                  const std::string& workload, const results::Fingerprint& machine,
                                  const results::HostIdentity& host, bool match_name) {
  const auto match = results::NearestStoredRun(store, workload, machine, host, match_name);
  if (!match) return std::nullopt;
  SweepSeed seed;
  seed.db_path = db_path;
  seed.run_id = match->run.id;
  seed.run_uid = match->run.uid;
  seed.run_host = match->run.host.name;
  seed.run_class = match->machine_hash;
  seed.match = results::RunMatchName(match->match);
  seed.why = match->Describe();
  seed.search.source = "run " + std::to_string(match->run.id) + " of " + match->run.host.name;
  for (const results::TrialRecord& t : store.LoadTrials(match->run.id)) {
    if (t.id == *match->run.best_trial_id) seed.search.best = t.knobs;
  }
  // The knee, else (a run stored without one) the best setting's worker count.
  seed.search.knee_workers = match->run.knee_workers.value_or(seed.search.best.num_workers);
  return seed;
}

std::string SeedText(const SweepSeed& seed) {
  return "seeded from " + seed.db_path + " (" + seed.match + " match): " + seed.why + "; its knee " +
         std::to_string(seed.search.knee_workers) + (seed.search.knee_workers == 1 ? " worker" : " workers") +
         ", its best " + loader::KnobsShort(seed.search.best);
}

std::string SeedJson(const SweepSeed& seed) {
  const loader::Knobs& k = seed.search.best;
  const nlohmann::json j = {{"db", seed.db_path},
                            {"run", seed.run_id},
                            {"run_uid", seed.run_uid},
                            {"run_host", seed.run_host},
                            {"run_class", seed.run_class},
                            {"match", seed.match},
                            {"why", seed.why},
                            {"source", seed.search.source},
                            {"knee_workers", seed.search.knee_workers},
                            {"best",
                             {{"batch_size", k.batch_size},
                              {"num_workers", k.num_workers},
                              {"pin_memory", k.pin_memory},
                              {"non_blocking", k.non_blocking},
                              {"prefetch_factor", k.prefetch_factor},
                              {"persistent_workers", k.persistent_workers}}}};
  return j.dump();
}

std::optional<SweepSeed> SeedFromRunJson(const std::string& calibration_json) {
  const auto j = nlohmann::json::parse(calibration_json, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("seed") || !j["seed"].is_object()) return std::nullopt;
  const nlohmann::json& s = j["seed"];
  SweepSeed seed;
  seed.db_path = s.value("db", "");
  seed.run_id = s.value("run", int64_t{0});
  seed.run_uid = s.value("run_uid", "");
  seed.run_host = s.value("run_host", "");
  seed.run_class = s.value("run_class", "");
  seed.match = s.value("match", "");
  seed.why = s.value("why", "");
  seed.search.source = s.value("source", "");
  seed.search.knee_workers = s.value("knee_workers", 1);
  if (s.contains("best") && s["best"].is_object()) {
    const nlohmann::json& b = s["best"];
    loader::Knobs& k = seed.search.best;
    k.batch_size = b.value("batch_size", k.batch_size);
    k.num_workers = b.value("num_workers", k.num_workers);
    k.pin_memory = b.value("pin_memory", k.pin_memory);
    k.non_blocking = b.value("non_blocking", k.non_blocking);
    k.prefetch_factor = b.value("prefetch_factor", k.prefetch_factor);
    k.persistent_workers = b.value("persistent_workers", k.persistent_workers);
  }
  return seed;
}

}  // namespace feedtune::tuner
