#include "loader/device/device.h"

namespace feedtune::device {

bool CudaCompiledIn() {
#ifdef FEEDTUNE_HAVE_CUDA
  return true;
#else
  return false;
#endif
}

std::unique_ptr<Device> CreateDevice(const DeviceOptions& options, std::string* note) {
  if (options.backend == BackendChoice::kHostSim) return MakeHostSimDevice(options);
#ifdef FEEDTUNE_HAVE_CUDA
  std::string error;
  if (auto cuda = MakeCudaDevice(options, &error)) return cuda;
  if (options.backend == BackendChoice::kCuda) {
    throw DeviceError("device.backend is cuda but no CUDA device is usable: " + error +
                      "; use backend: auto or host-sim to run without a GPU");
  }
  if (note != nullptr) *note = "no usable CUDA device (" + error + "); using the host-sim backend";
#else
  if (options.backend == BackendChoice::kCuda) {
    throw DeviceError("device.backend is cuda but this feedtune was built without the CUDA backend; "
                      "rebuild with -DFEEDTUNE_WITH_CUDA=ON or use backend: host-sim");
  }
  if (note != nullptr) *note = "built without CUDA; using the host-sim backend";
#endif
  return MakeHostSimDevice(options);
}

}  // namespace feedtune::device
