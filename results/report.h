// Renders a stored run for people (table) and for scripts (JSON, DESIGN.md §6).
// Pure functions of the records; the caller loads them from a Store.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "results/records.h"

namespace feedtune::results {

struct RunView {
  RunRecord run;
  std::optional<Fingerprint> machine;
  std::vector<TrialRecord> trials;
};

// Loads a run, its machine and trials. Throws StoreError when the run does not exist.
class Store;
RunView LoadRunView(const Store& store, std::optional<int64_t> run_id);

std::string RenderTable(const RunView& view);
std::string RenderJson(const RunView& view);  // pretty-printed, ends with a newline

}  // namespace feedtune::results
