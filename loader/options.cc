#include "loader/options.h"

namespace feedtune::loader {

const char* WorkerModeName(WorkerMode mode) {
  return mode == WorkerMode::kProcess ? "process" : "thread";
}

}  // namespace feedtune::loader
