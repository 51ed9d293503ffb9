#include "loader/device/options.h"

namespace feedtune::device {

const char* BackendChoiceName(BackendChoice choice) {
  switch (choice) {
    case BackendChoice::kAuto: return "auto";
    case BackendChoice::kCuda: return "cuda";
    case BackendChoice::kHostSim: return "host-sim";
  }
  return "?";
}

}  // namespace feedtune::device
