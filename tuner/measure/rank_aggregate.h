// How a node trial's ranks' records add up to the node's one record: the
// search, the verdict and the store see a node as one loader, so its rate is
// all ranks' samples over the slowest rank's time, and its worker memory the
// figures that must hold for every rank (the fastest growth, the largest peak). Native ranks (node_measurer.h) and a command's
// ranks (command_ranks.h) both aggregate here, so their records compare.
// Pure functions of the records: no processes, no I/O.
#pragma once

#include <vector>

#include "loader/options.h"
#include "results/records.h"

namespace feedtune::tuner::node {

// The node's trial record from its ranks' records (all ok): samples/s is all
// ranks' samples over the longest rank's window, median over windows; the
// ranks' own figures go to NodeFigures::rank_rows. Exposed for tests.
results::TrialRecord AggregateRanks(const loader::Knobs& knobs, const std::vector<results::TrialRecord>& ranks,
                                    std::vector<results::RankRecord> rows);

}  // namespace feedtune::tuner::node
