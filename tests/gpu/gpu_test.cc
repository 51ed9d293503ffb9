// GPU tests: run by scripts/gpu-check on a machine with a GPU. Built with the
// CUDA backend; each test skips (with the reason) when no device is usable, so
// the suite also passes on machines without one.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "loader/device/device.h"

namespace feedtune::device {
namespace {

using Clock = std::chrono::steady_clock;

std::unique_ptr<Device> CudaOrSkip(int64_t step_us, std::string* why) {
  DeviceOptions options;
  options.backend = BackendChoice::kCuda;
  options.step_us = step_us;
  auto device = MakeCudaDevice(options, why);
  return device;
}

#define REQUIRE_CUDA(device, step_us)                                  \
  std::string why_##device;                                            \
  auto device = CudaOrSkip(step_us, &why_##device);                    \
  if (!device) GTEST_SKIP() << "no usable CUDA device: " << why_##device

class StepKernel : public testing::TestWithParam<int64_t> {};

TEST_P(StepKernel, LastsTheRequestedTimeWithinTwoPercent) {
  const int64_t step_us = GetParam();
  REQUIRE_CUDA(device, step_us);
  device->Prepare(1 << 20);
  device->Step();  // warm-up: first launch loads the module
  device->Synchronize();
  device->BeginWindow();
  for (int i = 0; i < 5; ++i) device->Step();
  device->Synchronize();
  const DeviceWindow w = device->EndWindow();
  EXPECT_EQ(w.steps, 5);
  EXPECT_NEAR(w.step_busy_s / 5, step_us * 1e-6, step_us * 1e-6 * 0.02);
}

INSTANTIATE_TEST_SUITE_P(Durations, StepKernel, testing::Values(1000, 5000, 20000, 50000));

TEST(IdleAccounting, KnownGapsGiveKnownIdleWithinTwoPercent) {
  // 10 ms steps with 10 ms host gaps between them: idle 0.5.
  REQUIRE_CUDA(device, 10000);
  device->Prepare(1 << 20);
  device->Step();
  device->Synchronize();
  device->BeginWindow();
  for (int i = 0; i < 20; ++i) {
    device->Step();
    device->Synchronize();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const DeviceWindow w = device->EndWindow();
  EXPECT_NEAR(w.idle_frac(), 0.5, 0.02) << "busy " << w.step_busy_s << " s of " << w.wall_s << " s";
}

TEST(Pinned, AllocPinnedReallyIsPageLocked) {
  REQUIRE_CUDA(device, 1000);
  HostBuffer buffer = device->AllocPinned(8 << 20);
  ASSERT_TRUE(buffer.pinned());
  cudaPointerAttributes attributes{};
  ASSERT_EQ(cudaPointerGetAttributes(&attributes, buffer.data()), cudaSuccess);
  EXPECT_EQ(attributes.type, cudaMemoryTypeHost);
}

TEST(NonBlocking, FromPinnedReturnsAtOnceFromPageableWaits) {
  REQUIRE_CUDA(device, 20000);
  HostBuffer pinned = device->AllocPinned(4 << 20);
  std::vector<std::byte> pageable(4 << 20);
  device->Prepare(4 << 20);
  device->Step();  // 20 ms queued ahead of the copy
  auto start = Clock::now();
  device->CopyToDevice(pinned.data(), 4 << 20, true, true);
  EXPECT_LT(Clock::now() - start, std::chrono::milliseconds(5)) << "non_blocking from pinned must not wait";
  device->Synchronize();

  device->Step();
  start = Clock::now();
  device->CopyToDevice(pageable.data(), 4 << 20, false, true);
  EXPECT_GE(Clock::now() - start, std::chrono::milliseconds(15)) << "pageable copies are synchronous";
  device->Synchronize();
}

}  // namespace
}  // namespace feedtune::device
