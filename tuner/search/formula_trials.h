// The formulas row, measured (docs/node-sweep.md): what Lightning's formula,
// cpus // ranks and timm's 4 pick for num_workers per rank on this node
// (results/node_report.h NodeFormulas) is compared with the node's best in
// numbers, at the best's other settings, so that the gap is the formula's
// alone. The doubling measures 1, 2, 4, ... workers per rank, and with the
// settings of its phase; a pick between them (Lightning's 15 on a 128-CPU,
// 8-rank node), or one measured only before later phases changed other
// settings, would have no fair figure. Each such pick is measured once after
// the search, at the best setting with only num_workers changed
// (FormulaKnobs), through the sweep's own measurer and
// events: its record is stored like any trial (phase "formulas") and a
// resumed run replays it as it replays the search. Not a search step: it
// changes no decision.
#pragma once

#include <cstddef>
#include <vector>

#include "tuner/search/search.h"

namespace feedtune::tuner::node {

// Measures the formula picks that `outcome` has no ok node trial at the
// best's other settings for, up to
// `max_workers` per rank, and appends their records to outcome.trials.
// Returns their indices. Nothing when the run has no node trials or no best.
// Throws Interrupted from the measurer.
std::vector<size_t> MeasureFormulaSettings(SearchOutcome& outcome, int usable_cpus, int max_workers,
                                           TrialMeasurer& measurer, const SearchEvents& events);

}  // namespace feedtune::tuner::node
