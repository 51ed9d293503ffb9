// The CUDA side of the GPU probe: device descriptions and the host-to-device
// bandwidth matrix (pinned vs pageable, blocking vs non-blocking, 64 KiB to
// 256 MiB), timed with CUDA events, plus the cost of pinning memory.
#include <cuda_runtime.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "loader/device/gpu_probe.h"

namespace feedtune::device {
namespace {

std::string ErrorText(cudaError_t status) {
  return std::string(cudaGetErrorName(status)) + ": " + cudaGetErrorString(status);
}

std::string NvidiaDriverVersion() {
  // "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  ..."
  std::ifstream in("/proc/driver/nvidia/version");
  std::string line;
  std::getline(in, line);
  const auto pos = line.find("Kernel Module");
  if (pos == std::string::npos) return {};
  std::string rest = line.substr(pos + 13);
  rest.erase(0, rest.find_first_not_of(' '));
  return rest.substr(0, rest.find(' '));
}

std::string LowerCase(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace

std::vector<GpuDescription> DescribeGpus(std::string* error) {
  int count = 0;
  if (const cudaError_t status = cudaGetDeviceCount(&count); status != cudaSuccess) {
    *error = ErrorText(status);
    return {};
  }
  int driver = 0, runtime = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  const std::string nvidia_driver = NvidiaDriverVersion();
  std::vector<GpuDescription> gpus;
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop{};
    if (const cudaError_t status = cudaGetDeviceProperties(&prop, i); status != cudaSuccess) {
      *error = ErrorText(status);
      return {};
    }
    GpuDescription g;
    g.name = prop.name;
    g.mem_bytes = static_cast<int64_t>(prop.totalGlobalMem);
    g.driver = nvidia_driver.empty() ? std::to_string(driver) : nvidia_driver;
    g.runtime = std::to_string(runtime / 1000) + "." + std::to_string(runtime % 1000 / 10);
    char bus[32] = {};
    if (cudaDeviceGetPCIBusId(bus, sizeof bus, i) == cudaSuccess) {
      g.pci_bus_id = bus;
      g.link = ReadPcieLink("/sys/bus/pci/devices/" + LowerCase(g.pci_bus_id));
    }
    gpus.push_back(std::move(g));
  }
  return gpus;
}

BandwidthReport MeasureHostToDevice(std::string* error) {
  BandwidthReport report;
  int count = 0;
  if (const cudaError_t status = cudaGetDeviceCount(&count); status != cudaSuccess || count == 0) {
    *error = status != cudaSuccess ? ErrorText(status) : "no CUDA device found";
    return report;
  }
  constexpr size_t kMax = size_t{256} << 20;
  void* device = nullptr;
  void* pinned = nullptr;
  cudaStream_t stream{};
  cudaEvent_t begin{}, end{};
  auto fail = [&](cudaError_t status, const char* call) {
    *error = std::string(call) + " failed: " + ErrorText(status);
    return false;
  };
  auto setup = [&]() {
    if (auto s = cudaMalloc(&device, kMax); s != cudaSuccess) return fail(s, "cudaMalloc");
    const auto start = std::chrono::steady_clock::now();
    if (auto s = cudaHostAlloc(&pinned, kMax, cudaHostAllocDefault); s != cudaSuccess) return fail(s, "cudaHostAlloc");
    std::memset(pinned, 1, kMax);  // first touch is part of what pinning costs
    report.pin_seconds_per_gib =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() * 4.0;  // 256 MiB -> GiB
    if (auto s = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking); s != cudaSuccess) {
      return fail(s, "cudaStreamCreateWithFlags");
    }
    if (auto s = cudaEventCreate(&begin); s != cudaSuccess) return fail(s, "cudaEventCreate");
    if (auto s = cudaEventCreate(&end); s != cudaSuccess) return fail(s, "cudaEventCreate");
    return true;
  };
  std::vector<char> pageable(kMax, 1);
  if (setup()) {
    for (size_t bytes = size_t{64} << 10; bytes <= kMax; bytes *= 4) {
      for (const bool use_pinned : {true, false}) {
        for (const bool non_blocking : {false, true}) {
          const void* src = use_pinned ? pinned : static_cast<const void*>(pageable.data());
          // Enough repeats for ~20 ms of copying at 50 GB/s, at least 3.
          const int repeats = static_cast<int>(std::clamp<size_t>((size_t{1} << 30) / bytes, 3, 200));
          std::vector<double> rates;
          for (int r = 0; r < repeats; ++r) {
            // Host wall time is what the training loop waits: the non_blocking
            // figure is the time to issue plus complete, measured by the host.
            const auto start = std::chrono::steady_clock::now();
            cudaEventRecord(begin, stream);
            cudaMemcpyAsync(device, src, bytes, cudaMemcpyHostToDevice, stream);
            cudaEventRecord(end, stream);
            if (!non_blocking) cudaStreamSynchronize(stream);
            cudaEventSynchronize(end);
            float ms = 0;
            cudaEventElapsedTime(&ms, begin, end);
            const double host_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
            const double seconds = non_blocking ? static_cast<double>(ms) / 1e3 : host_s;
            rates.push_back(static_cast<double>(bytes) / seconds / 1e9);
          }
          report.points.push_back({bytes, use_pinned, non_blocking, Median(rates)});
        }
      }
    }
  }
  if (end != nullptr) cudaEventDestroy(end);
  if (begin != nullptr) cudaEventDestroy(begin);
  if (stream != nullptr) cudaStreamDestroy(stream);
  if (pinned != nullptr) cudaFreeHost(pinned);
  if (device != nullptr) cudaFree(device);
  return report;
}

}  // namespace feedtune::device
