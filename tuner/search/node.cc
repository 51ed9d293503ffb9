// The two phases around the loader: cpu_binding, where the ranks run, then
// worker_threads, how many threads each worker's (or rank's) CPU work uses.
// Both run after persistent_workers (and the start method), with or without
// workers (the rank's own threads and mask matter then), and before
// combined, which keeps what they kept; they are no candidates for it.
//
// cpu_binding (node sweeps of 2 or more ranks, sweep.cpu_binding auto)
// measures each rank and its workers bound to an equal, disjoint share of the
// usable CPUs (split), and, where every rank's GPU has a known NUMA node, to
// its share on that node (numa), each against the inherited mask (none). A
// named sweep.cpu_binding is every trial's, not searched.
//
// worker_threads (when the workload has intra-op threads to set: a native
// workload's workload.cpu_threads > 1, or a command, whose torch runs a
// thread per core by default) measures fewer threads per worker and rank: 1,
// and the usable CPUs per worker (one rank's share / max(1, num_workers))
// when between. Single-loader sweeps too: workers x threads oversubscribe one
// loader's CPUs as well.
//
// What each keeps: the fastest candidate that gains by THE RULE
// (tuner/search/rule.cc) over the setting before the phase. The time budget
// changes nothing here; it may end the sequence first.
#include <cmath>

#include "tuner/search/phases.h"

namespace feedtune::tuner::search_internal {
namespace {

std::string ThreadsText(int n) { return std::to_string(n) + (n == 1 ? " thread" : " threads"); }

// The kept value in words.
std::string NameOf(const char* phase, const loader::Knobs& k) {
  if (std::string(phase) == "cpu_binding") return loader::CpuBindingName(k.cpu_binding);
  return ThreadsText(k.worker_threads);
}

// Measures each candidate change against the current setting and keeps the
// best that gains by THE RULE (as prefetch_factor does). `name` says a
// candidate's value in words, `from` the current one.
template <typename Apply, typename Name>
void TryValues(SearchState& state, const char* phase, const std::vector<int>& values, Apply apply, Name name,
               const std::string& from) {
  const double threshold = state.options().gain_threshold;
  std::optional<size_t> best;
  loader::Knobs best_knobs;
  std::string tried;
  const size_t reference = state.current_index();
  for (int value : values) {
    loader::Knobs knobs = state.knobs();
    apply(knobs, value);
    const size_t index = state.Measure(phase, knobs);
    tried += (tried.empty() ? "" : ", ") + name(value);
    const TrialRecord& t = state.trials()[index];
    if (t.status != TrialStatus::kOk) {
      state.DecideFailed(index);
      continue;
    }
    const TrialRecord& ref = state.trials()[reference];
    if (IsGain(t, ref, threshold)) {
      state.Decide(index, "gains " + Percent(Gain(t, ref)) + " over " + from);
      if (!best || t.samples_per_s > state.trials()[*best].samples_per_s) {
        best = index;
        best_knobs = knobs;
      }
    } else {
      state.Decide(index, NotKept(t, ref, threshold, " over " + from));
    }
  }
  if (best) {
    const std::string figure = Percent(Gain(state.trials()[*best], state.trials()[reference]));
    state.AddPhase(phase, true, "kept " + NameOf(phase, best_knobs) + ": " + figure + " over " + from);
    state.Keep(*best, best_knobs);
  } else {
    state.AddPhase(phase, false, "kept " + from + ": " + tried + " gained nothing beyond the noise and the threshold");
  }
}

}  // namespace

// split, and numa where the ranks' GPUs' NUMA nodes are known (elsewhere numa is split).
void CpuBindingPhase(SearchState& state) {
  const char* phase = "cpu_binding";
  const SearchSetup& setup = state.setup();
  if (setup.ranks < 2) {
    state.AddPhase(phase, false, "not tried: one rank; the binding matters where ranks share the CPUs (sweep.ranks)");
    return;
  }
  if (state.options().cpu_binding != BindingChoice::kAuto) {
    state.AddPhase(phase, false, std::string("not tried: sweep.cpu_binding is ") +
                                     BindingChoiceName(state.options().cpu_binding) +
                                     " for every trial (auto searches it)");
    return;
  }
  std::vector<int> values = {static_cast<int>(loader::CpuBinding::kSplit)};
  if (setup.numa_known) values.push_back(static_cast<int>(loader::CpuBinding::kNuma));
  TryValues(
      state, phase, values, [](loader::Knobs& k, int v) { k.cpu_binding = static_cast<loader::CpuBinding>(v); },
      [](int v) { return std::string(loader::CpuBindingName(static_cast<loader::CpuBinding>(v))); },
      std::string("cpu_binding ") + loader::CpuBindingName(state.knobs().cpu_binding) +
          (setup.numa_known ? "" : " (numa not tried: the GPUs' NUMA nodes are unknown, so it would be split)"));
}

// Fewer intra-op threads per worker (and rank) than the workload's own: 1,
// and the usable CPUs per worker when that differs.
void WorkerThreadsPhase(SearchState& state) {
  const char* phase = "worker_threads";
  const SearchSetup& setup = state.setup();
  const int from = state.knobs().worker_threads > 0 ? state.knobs().worker_threads : setup.default_worker_threads;
  if (from <= 1) {
    state.AddPhase(phase, false,
                   from == 1 ? "not tried: each worker runs its CPU work on 1 thread already (workload.cpu_threads 1)"
                             : "not tried: the workload has no intra-op threads to set");
    return;
  }
  // setup.usable_cpus is one rank's share in a node sweep (tuner/search/preflight.h).
  const int loaders = std::max(1, state.knobs().num_workers);
  const int share =
      setup.usable_cpus > 0 ? std::max(1, static_cast<int>(std::floor(setup.usable_cpus / loaders))) : 1;
  std::vector<int> values = {1};
  if (share > 1 && share < from) values.push_back(share);
  TryValues(
      state, phase, values, [](loader::Knobs& k, int v) { k.worker_threads = v; },
      [](int v) { return ThreadsText(v); }, ThreadsText(from) + " per worker");
}

}  // namespace feedtune::tuner::search_internal
