#include "loader/options.h"

namespace feedtune::loader {

const char* WorkerModeName(WorkerMode mode) {
  return mode == WorkerMode::kProcess ? "process" : "thread";
}

const char* CpuBindingName(CpuBinding binding) {
  switch (binding) {
    case CpuBinding::kNone:
      return "none";
    case CpuBinding::kSplit:
      return "split";
    case CpuBinding::kNuma:
      return "numa";
  }
  return "?";
}

const char* StartMethodName(StartMethod method) {
  switch (method) {
    case StartMethod::kDefault:
      return "default";
    case StartMethod::kFork:
      return "fork";
    case StartMethod::kForkserver:
      return "forkserver";
    case StartMethod::kSpawn:
      return "spawn";
  }
  return "?";
}

bool StartMethodFromName(const std::string& name, StartMethod* method) {
  for (const auto m : {StartMethod::kDefault, StartMethod::kFork, StartMethod::kForkserver, StartMethod::kSpawn}) {
    if (name == StartMethodName(m)) {
      *method = m;
      return true;
    }
  }
  return false;
}

std::string KnobsShort(const Knobs& k) {
  std::string out = "nw=" + std::to_string(k.num_workers) + " pin=" + (k.pin_memory ? "1" : "0") +
                    " nb=" + (k.non_blocking ? "1" : "0") + " pf=" + std::to_string(k.prefetch_factor) +
                    " pers=" + (k.persistent_workers ? "1" : "0");
  if (k.cpu_binding != CpuBinding::kNone) out += std::string(" bind=") + CpuBindingName(k.cpu_binding);
  if (k.worker_threads > 0) out += " thr=" + std::to_string(k.worker_threads);
  if (k.fetch_concurrency != 1) out += " fc=" + std::to_string(k.fetch_concurrency);
  if (k.multiprocessing_context != StartMethod::kDefault) {
    out += std::string(" mp=") + StartMethodName(k.multiprocessing_context);
  }
  return out;
}

}  // namespace feedtune::loader
