// What `feedtune machine` asks of the GPUs: a description of each (for the
// machine fingerprint) and, on CUDA, the host-to-device bandwidth matrix and
// the cost of pinning memory. Without the CUDA backend, or without a usable
// device, both say so through `*error` and return nothing.
// Call from one thread, before a sweep (the measurements use the device).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace feedtune::device {

struct GpuDescription {
  std::string name;
  int64_t mem_bytes = 0;
  std::string driver;      // NVIDIA driver version (from /proc/driver/nvidia/version), else CUDA's number
  std::string runtime;     // CUDA runtime version, e.g. "13.0"
  std::string pci_bus_id;  // e.g. "0000:3b:00.0"
  std::string link;        // PCIe link from sysfs, e.g. "32.0 GT/s PCIe x16"
};

std::vector<GpuDescription> DescribeGpus(std::string* error);

struct BandwidthPoint {
  size_t bytes = 0;
  bool pinned = false;
  bool non_blocking = false;
  double gb_per_s = 0;  // median over repeats, 1 GB = 1e9 bytes
};

struct BandwidthReport {
  std::vector<BandwidthPoint> points;  // sizes 64 KiB .. 256 MiB x pinned/pageable x blocking/non-blocking
  double pin_seconds_per_gib = 0;      // cudaHostAlloc + first touch, per GiB
};

// Empty report with `*error` set when there is no usable CUDA device.
BandwidthReport MeasureHostToDevice(std::string* error);

// "32.0 GT/s PCIe x16" from a device folder in sysfs (root = "" for the live system).
std::string ReadPcieLink(const std::string& sysfs_device_dir);

}  // namespace feedtune::device
