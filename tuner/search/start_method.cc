// multiprocessing_context: the workers' start method (a Python command with
// workers; after persistent_workers, before the node phases).
//
// What it measures: when the interpreter's default is not fork (Python 3.14+)
// with sweep.start_methods auto, or the methods sweep.start_methods lists:
// the current method again as the phase's reference, then each other method,
// all with the same windows: whole epochs when workers restart at each epoch
// (as the persistent_workers phase sizes them, tuner/search/persistent.cc),
// so the epoch boundary is inside the figure. Every trial reports its worker
// start-up.
//
// What it keeps: the fastest method that gains by THE RULE
// (tuner/search/rule.cc) over the reference; not a candidate for combined.
//
// What the time budget changes: nothing here; it may end the sequence first.
#include <cmath>

#include "results/units.h"
#include "tuner/search/phases.h"

namespace feedtune::tuner::search_internal {

using results::Format;  // results/units.h

namespace {

// The method StartMethod::kDefault stands for here (kDefault when unknown).
loader::StartMethod Resolved(const SearchState& state, loader::StartMethod method) {
  return method == loader::StartMethod::kDefault ? state.setup().default_start_method : method;
}

// "fork: start-up 0.12 s, epoch boundary 35.0 ms": what the start method costs.
std::string StartCost(const SearchState& state, const TrialRecord& t) {
  const std::string startup =
      std::isfinite(t.worker_startup_s) ? Format("%.3f s", t.worker_startup_s) : std::string("not measured");
  const loader::StartMethod method = Resolved(state, t.knobs.multiprocessing_context);
  std::string name = loader::StartMethodName(method);
  if (t.knobs.multiprocessing_context == loader::StartMethod::kDefault && method != loader::StartMethod::kDefault) {
    name += " (the default)";
  }
  return name + ": worker start-up " + startup + ", epoch boundary " + BoundaryMs(t);
}

}  // namespace

std::vector<loader::StartMethod> StartMethodCandidates(const SearchState& state, std::string* why) {
  using loader::StartMethod;
  const SearchSetup& setup = state.setup();
  std::string unused;
  std::string& reason = why != nullptr ? *why : unused;
  if (!setup.python_workload) {
    reason = "not tried: not a Python command workload";
    return {};
  }
  std::vector<StartMethod> methods = state.options().start_methods;
  if (methods.empty()) {
    if (setup.default_start_method == StartMethod::kDefault || setup.default_start_method == StartMethod::kFork) {
      reason = std::string("not tried: the interpreter's default start method is ") +
               (setup.default_start_method == StartMethod::kFork ? "fork" : "unknown") +
               " (sweep.start_methods auto measures the methods when it is not fork; list them to measure "
               "them anyway)";
      return {};
    }
    methods = {StartMethod::kFork, StartMethod::kForkserver, StartMethod::kSpawn};
  }
  const StartMethod now = Resolved(state, state.knobs().multiprocessing_context);
  std::erase_if(methods, [&](StartMethod m) { return m == now; });
  if (methods.empty()) reason = "not tried: sweep.start_methods lists only the current method";
  return methods;
}

void StartMethodPhase(SearchState& state) {
  const char* phase = "multiprocessing_context";
  const double threshold = state.options().gain_threshold;
  std::string why;
  const std::vector<loader::StartMethod> candidates = StartMethodCandidates(state, &why);
  if (candidates.empty()) {
    if (state.setup().python_workload) state.AddPhase(phase, false, why);
    return;
  }
  TrialPlan plan;
  std::string epochs_note;
  if (!state.knobs().persistent_workers) plan.window_epochs = PersistentWindowEpochs(state, &epochs_note);
  const std::optional<size_t> measured = MeasureOrEndPhase(state, phase, state.knobs(), plan);
  if (!measured) return;
  const size_t reference = *measured;
  state.Decide(reference, "reference: " + StartCost(state, state.trials()[reference]));
  std::optional<size_t> best;
  std::string costs = StartCost(state, state.trials()[reference]);
  for (const loader::StartMethod method : candidates) {
    loader::Knobs knobs = state.knobs();
    knobs.multiprocessing_context = method;
    const size_t index = state.Measure(phase, knobs, plan);
    const TrialRecord& t = state.trials()[index];
    if (t.status != TrialStatus::kOk) {
      state.DecideFailed(index);
      costs += "; " + std::string(loader::StartMethodName(method)) + ": failed";
      continue;
    }
    costs += "; " + StartCost(state, t);
    const TrialRecord& ref = state.trials()[reference];
    if (IsGain(t, ref, threshold)) {
      state.Decide(index, "gains " + Percent(Gain(t, ref)) + "; " + StartCost(state, t));
      if (!best || t.samples_per_s > state.trials()[*best].samples_per_s) best = index;
    } else {
      state.Decide(index, NotKept(t, ref, threshold) + "; " + StartCost(state, t));
    }
  }
  if (best) {
    state.Keep(*best, state.trials()[*best].knobs);
    state.AddPhase(phase, true,
                   "kept " + std::string(loader::StartMethodName(state.knobs().multiprocessing_context)) + ": " +
                       Percent(Gain(state.trials()[*best], state.trials()[reference])) + " (" + costs + ")");
  } else {
    state.AddPhase(phase, false,
                   std::string("kept ") +
                       loader::StartMethodName(Resolved(state, state.knobs().multiprocessing_context)) +
                       ": no other method gained beyond the noise and the threshold (" + costs + ")");
  }
}

}  // namespace feedtune::tuner::search_internal
