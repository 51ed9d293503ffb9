// `sweep --seed-from FILE` (docs/fleets.md): the stored run of the nearest
// machine that seeds a sweep, chosen as `export --machine this` chooses
// (results/fleet.h NearestStoredRun: this host, else its class, else the
// nearest class), and kept with the new run (results::RunFacts::seed),
// so `sweep --resume` re-seeds from what was stored, not from the file again.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "results/records.h"
#include "tuner/search/search.h"

namespace feedtune::results {
class Store;
}

namespace feedtune::tuner {

struct SweepSeed {
  SearchSeed search;      // the knee and best setting the search starts from
  std::string db_path;    // the file it came from
  int64_t run_id = 0;     // the run in that file
  std::string run_uid;    // its uid (stable across merges)
  std::string run_host;   // its host's name
  std::string run_class;  // its machine hash
  std::string match;      // how it was chosen: "host" | "class" | "neighbour"
  std::string why;        // StoredRunMatch::Describe(), e.g. "the latest run of its class 1f0c... (run 7 of box-a, ...)"
};

// The stored run of `workload` (by name) that stands for `machine` on `host`
// (with match_name, the stored run's label must equal host.name to count as
// this host's); nullopt when no run of it has a best setting.
std::optional<SweepSeed> FindSeed(const results::Store& store, const std::string& db_path,
                                  const std::string& workload, const results::Fingerprint& machine,
                                  const results::HostIdentity& host, bool match_name);

// One line for the output, naming the neighbour and how it was chosen:
// "seeded from fleet.db (class match): the latest run of its class ... ; its knee 4 workers, its best nw=4 pin=0 ...".
std::string SeedText(const SweepSeed& seed);

// The seed as the run's fact (results::RunFacts::seed, stored with the run), and back.
results::SeedFacts SeedFactsOf(const SweepSeed& seed);
SweepSeed SeedFromFacts(const results::SeedFacts& facts);

}  // namespace feedtune::tuner
