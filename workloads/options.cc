#include "workloads/options.h"

namespace feedtune::workloads {

const char* WorkloadKindName(WorkloadKind kind) {
  switch (kind) {
    case WorkloadKind::kSynthetic: return "synthetic";
  }
  return "?";
}

}  // namespace feedtune::workloads
