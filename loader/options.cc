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

std::string KnobsShort(const Knobs& k) {
  std::string out = "nw=" + std::to_string(k.num_workers) + " pin=" + (k.pin_memory ? "1" : "0") +
                    " nb=" + (k.non_blocking ? "1" : "0") + " pf=" + std::to_string(k.prefetch_factor) +
                    " pers=" + (k.persistent_workers ? "1" : "0");
  if (k.cpu_binding != CpuBinding::kNone) out += std::string(" bind=") + CpuBindingName(k.cpu_binding);
  if (k.worker_threads > 0) out += " thr=" + std::to_string(k.worker_threads);
  return out;
}

}  // namespace feedtune::loader
