#include "tuner/search/seed.h"


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

results::SeedFacts SeedFactsOf(const SweepSeed& seed) {
  return {seed.db_path, seed.run_id, seed.run_uid,           seed.run_host,           seed.run_class,
          seed.match,   seed.why,    seed.search.source, seed.search.knee_workers, seed.search.best};
}

SweepSeed SeedFromFacts(const results::SeedFacts& f) {
  return {{f.knee_workers, f.best, f.source}, f.db_path, f.run_id, f.run_uid, f.run_host, f.run_class, f.match,
          f.why};
}

}  // namespace feedtune::tuner
