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

}  // namespace feedtune::loader
