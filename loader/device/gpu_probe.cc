// Host-side parts of the GPU probe that need no CUDA: sysfs and procfs reads,
// and the answers of a build without the CUDA backend.
#include "loader/device/gpu_probe.h"

#include <fstream>

namespace feedtune::device {
namespace {

std::string FirstLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

}  // namespace

std::string ReadPcieLink(const std::string& sysfs_device_dir) {
  const std::string speed = FirstLine(sysfs_device_dir + "/current_link_speed");
  const std::string width = FirstLine(sysfs_device_dir + "/current_link_width");
  if (speed.empty() && width.empty()) return {};
  return speed + (width.empty() ? "" : " x" + width);
}

#ifndef FEEDTUNE_HAVE_CUDA
std::vector<GpuDescription> DescribeGpus(std::string* error) {
  *error = "this feedtune was built without the CUDA backend";
  return {};
}

BandwidthReport MeasureHostToDevice(std::string* error) {
  *error = "this feedtune was built without the CUDA backend";
  return {};
}
#endif

}  // namespace feedtune::device
