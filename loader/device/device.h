// Device: the training-loop side of a trial, per batch on one in-order stream:
//
//   x = batch.to(device, non_blocking=nb)   -> CopyToDevice
//   loss = model_step(x)                    -> Step
//   every sync_every_steps: loss.item()     -> Synchronize
//
// and the accounting of how busy the device was (docs/architecture.md, device semantics). Two backends:
// CUDA (real kernels and events) and host-sim (a modelled stream, no GPU).
//
// Copy semantics, as in CUDA: a blocking copy returns when it is done (so after
// everything queued before it); a non-blocking copy from pinned memory returns
// at once; a non-blocking copy from pageable memory is synchronous anyway.
//
// One thread drives a Device. Buffers are allocated by Prepare(), before any
// measurement window, never inside one.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>

#include "loader/device/host_buffer.h"
#include "loader/device/options.h"

namespace feedtune::device {

class DeviceError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// What the device did during one measurement window.
struct DeviceWindow {
  double wall_s = 0;
  double step_busy_s = 0;  // step time inside the window
  double copy_s = 0;       // host-to-device copy time inside the window
  int64_t copy_bytes = 0;
  int64_t steps = 0;
  // 1 - step busy time / wall time (docs/architecture.md, device semantics); copies are not "busy".
  double idle_frac() const { return wall_s > 0 ? std::max(0.0, 1.0 - step_busy_s / wall_s) : 0.0; }
};

// Receives the device's timeline while a trial is traced (loader/trace.h):
// each copy and step as it runs on the device, `seq` counting that kind of
// operation from 0 since the sink was set (a backend may report late, e.g. as
// CUDA events complete, so the count says which call it was). Called by the
// thread that drives the device.
class DeviceTraceSink {
 public:
  virtual ~DeviceTraceSink() = default;
  virtual void DeviceSpan(bool step, int64_t seq, std::chrono::steady_clock::time_point start,
                          std::chrono::steady_clock::time_point end) = 0;
};

class Device {
 public:
  virtual ~Device() = default;

  virtual const char* backend_name() const = 0;  // "host-sim" | "cuda"
  virtual std::string description() const = 0;   // one line: GPU name or the modelled bandwidths

  // Page-locked host memory for the pin stage. When the memory could not be
  // locked, the buffer says so (pinned() == false) and pin_warning() says why.
  virtual HostBuffer AllocPinned(size_t bytes) = 0;
  virtual std::string pin_warning() const { return {}; }
  // Allocates what copies of up to `max_batch_bytes` need (device buffers, staging).
  virtual void Prepare(size_t max_batch_bytes) = 0;

  virtual void CopyToDevice(const std::byte* src, size_t bytes, bool src_pinned, bool non_blocking) = 0;
  virtual void Step() = 0;         // queues one model step of step_us; returns at once
  virtual void Synchronize() = 0;  // waits for everything queued

  virtual void BeginWindow() = 0;
  virtual DeviceWindow EndWindow() = 0;  // the window ends now; queued work past now is not counted

  // Where copies and steps are reported while a trace is recorded; nullptr
  // (the default) when none is: then a copy or a step costs one untaken branch.
  void set_trace_sink(DeviceTraceSink* sink) {
    trace_sink_ = sink;
    traced_copies_ = traced_steps_ = 0;
  }

 protected:
  DeviceTraceSink* trace_sink_ = nullptr;
  int64_t traced_copies_ = 0;  // calls since the sink was set: the next seq
  int64_t traced_steps_ = 0;
};

// Creates the backend `options.backend` asks for. With kAuto, CUDA when a device
// is usable, else host-sim; `*note` then says which and why (one line).
// With kCuda and no usable device, throws DeviceError with the CUDA error text.
std::unique_ptr<Device> CreateDevice(const DeviceOptions& options, std::string* note);

std::unique_ptr<Device> MakeHostSimDevice(const DeviceOptions& options);

#ifdef FEEDTUNE_HAVE_CUDA
// The CUDA backend on device 0, or nullptr with `*error` set (the CUDA error text)
// when no device is usable.
std::unique_ptr<Device> MakeCudaDevice(const DeviceOptions& options, std::string* error);
#endif

// Whether this binary has the CUDA backend compiled in.
bool CudaCompiledIn();

}  // namespace feedtune::device
