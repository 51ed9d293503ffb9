// The CUDA backend: one non-blocking stream carries copy then step per batch,
// as a training loop does; a second stream carries copies when
// prefetch_to_device is on. Step busy time comes from CUDA events around each
// step kernel, the way a profiler measures it.
//
// Every CUDA handle has an RAII owner. Checks in constructors and methods throw
// DeviceError naming the call; checks in destructors only log (never throw).
#include <cuda_runtime.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "loader/device/device.h"

namespace feedtune::device {
namespace {

using Clock = std::chrono::steady_clock;

void Check(cudaError_t status, const char* call) {
  if (status != cudaSuccess) {
    throw DeviceError(std::string(call) + " failed: " + cudaGetErrorName(status) + ": " + cudaGetErrorString(status));
  }
}

// For destructors: report, never throw.
void CheckNoThrow(cudaError_t status, const char* call) noexcept {
  if (status != cudaSuccess) std::fprintf(stderr, "feedtune: warning: %s failed: %s\n", call, cudaGetErrorString(status));
}

__global__ void SpinKernel(unsigned long long duration_ns) {
  unsigned long long start;
  unsigned long long now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < duration_ns);
}

class Stream {
 public:
  Stream() { Check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags"); }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  ~Stream() { CheckNoThrow(cudaStreamDestroy(stream_), "cudaStreamDestroy"); }
  cudaStream_t get() const { return stream_; }

 private:
  cudaStream_t stream_{};
};

class Event {
 public:
  Event() { Check(cudaEventCreate(&event_), "cudaEventCreate"); }
  Event(Event&& other) noexcept : event_(std::exchange(other.event_, nullptr)) {}
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  ~Event() {
    if (event_ != nullptr) CheckNoThrow(cudaEventDestroy(event_), "cudaEventDestroy");
  }
  cudaEvent_t get() const { return event_; }

 private:
  cudaEvent_t event_{};
};

class DeviceMemory {
 public:
  DeviceMemory() = default;
  explicit DeviceMemory(size_t bytes) : size_(bytes) { Check(cudaMalloc(&ptr_, bytes), "cudaMalloc"); }
  DeviceMemory(DeviceMemory&& other) noexcept
      : ptr_(std::exchange(other.ptr_, nullptr)), size_(std::exchange(other.size_, 0)) {}
  DeviceMemory& operator=(DeviceMemory&& other) noexcept {
    std::swap(ptr_, other.ptr_);
    std::swap(size_, other.size_);
    return *this;
  }
  ~DeviceMemory() {
    if (ptr_ != nullptr) CheckNoThrow(cudaFree(ptr_), "cudaFree");
  }
  void* get() const { return ptr_; }
  size_t size() const { return size_; }

 private:
  void* ptr_ = nullptr;
  size_t size_ = 0;
};

void FreePinned(std::byte* data, size_t /*size*/) noexcept { CheckNoThrow(cudaFreeHost(data), "cudaFreeHost"); }

// A pair of events around one operation; timings are harvested lazily so that
// the ring never allocates inside a window.
struct Timed {
  Event begin, end;
  bool pending = false;
  int64_t seq = -1;  // with a trace sink: which call this was (DeviceTraceSink)
};

// Maps event times to the host clock while a trace is recorded: an event
// recorded on an idle stream and waited for completes at about `host`.
struct TraceAnchor {
  DeviceTraceSink* sink = nullptr;
  Event event;
  Clock::time_point host{};
};

class EventRing {
 public:
  EventRing(size_t size, bool steps, const TraceAnchor& anchor) : slots_(size), steps_(steps), anchor_(anchor) {}

  // Records `begin`, runs `op`, records `end` on `stream`; `seq` >= 0 is
  // reported to the trace sink when the events are harvested.
  template <typename Op>
  void Record(cudaStream_t stream, Op op, int64_t seq = -1) {
    Timed& t = slots_[next_++ % slots_.size()];
    if (t.pending) Harvest(t);
    t.seq = seq;
    Check(cudaEventRecord(t.begin.get(), stream), "cudaEventRecord");
    op();
    Check(cudaEventRecord(t.end.get(), stream), "cudaEventRecord");
    t.pending = true;
  }
  // Waits for every recorded operation and returns the total time since the last call.
  double Drain() {
    for (auto& t : slots_) {
      if (t.pending) Harvest(t);
    }
    return std::exchange(total_s_, 0.0);
  }
  int64_t count() const { return harvested_; }
  void ResetCount() { harvested_ = 0; }

 private:
  void Harvest(Timed& t) {
    Check(cudaEventSynchronize(t.end.get()), "cudaEventSynchronize");
    float ms = 0;
    Check(cudaEventElapsedTime(&ms, t.begin.get(), t.end.get()), "cudaEventElapsedTime");
    total_s_ += ms / 1e3;
    ++harvested_;
    t.pending = false;
    if (anchor_.sink != nullptr && t.seq >= 0) {
      float begin_ms = 0;
      Check(cudaEventElapsedTime(&begin_ms, anchor_.event.get(), t.begin.get()), "cudaEventElapsedTime");
      const auto start = anchor_.host + std::chrono::duration_cast<Clock::duration>(
                                            std::chrono::duration<double, std::milli>(begin_ms));
      const auto end = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double, std::milli>(ms));
      anchor_.sink->DeviceSpan(steps_, t.seq, start, end);
    }
  }

  std::vector<Timed> slots_;
  const bool steps_;
  const TraceAnchor& anchor_;
  size_t next_ = 0;
  double total_s_ = 0;
  int64_t harvested_ = 0;
};

class CudaDevice final : public Device {
 public:
  CudaDevice(const DeviceOptions& options, std::string name)
      : step_ns_(static_cast<unsigned long long>(options.step_us) * 1000ULL),
        prefetch_to_device_(options.prefetch_to_device),
        name_(std::move(name)),
        steps_(1024, true, anchor_),
        copies_(1024, false, anchor_) {}

  const char* backend_name() const override { return "cuda"; }
  std::string description() const override { return "cuda (" + name_ + ")"; }

  HostBuffer AllocPinned(size_t bytes) override {
    void* p = nullptr;
    Check(cudaHostAlloc(&p, bytes, cudaHostAllocDefault), "cudaHostAlloc");
    return HostBuffer(static_cast<std::byte*>(p), bytes, true, &FreePinned);
  }

  void Prepare(size_t max_batch_bytes) override {
    for (auto& buffer : device_buffers_) {
      if (buffer.size() < max_batch_bytes) buffer = DeviceMemory(max_batch_bytes);
    }
  }

  void CopyToDevice(const std::byte* src, size_t bytes, bool src_pinned, bool non_blocking) override {
    DeviceMemory& dst = device_buffers_[next_buffer_++ % device_buffers_.size()];
    if (dst.size() < bytes) dst = DeviceMemory(bytes);
    cudaStream_t stream = prefetch_to_device_ ? copy_stream_.get() : compute_stream_.get();
    copies_.Record(
        stream,
        [&] { Check(cudaMemcpyAsync(dst.get(), src, bytes, cudaMemcpyHostToDevice, stream), "cudaMemcpyAsync"); },
        trace_sink_ != nullptr ? traced_copies_++ : -1);
    copy_bytes_ += static_cast<int64_t>(bytes);
    if (prefetch_to_device_) {
      // The step that uses this buffer waits for its copy, on the device.
      Check(cudaEventRecord(copy_done_.get(), copy_stream_.get()), "cudaEventRecord");
      Check(cudaStreamWaitEvent(compute_stream_.get(), copy_done_.get(), 0), "cudaStreamWaitEvent");
    }
    if (!(non_blocking && src_pinned)) Check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  }

  void Step() override {
    steps_.Record(
        compute_stream_.get(),
        [&] {
          SpinKernel<<<1, 1, 0, compute_stream_.get()>>>(step_ns_);
          Check(cudaGetLastError(), "SpinKernel launch");
        },
        trace_sink_ != nullptr ? traced_steps_++ : -1);
  }

  void Synchronize() override { Check(cudaStreamSynchronize(compute_stream_.get()), "cudaStreamSynchronize"); }

  void BeginWindow() override {
    // Steps queued before the window belong to the previous one.
    Synchronize();
    Check(cudaStreamSynchronize(copy_stream_.get()), "cudaStreamSynchronize");
    steps_.Drain();
    copies_.Drain();
    steps_.ResetCount();
    copy_bytes_ = 0;
    anchor_.sink = trace_sink_;
    if (trace_sink_ != nullptr) {
      // Both streams are idle: the anchor completes as soon as it is recorded.
      Check(cudaEventRecord(anchor_.event.get(), compute_stream_.get()), "cudaEventRecord");
      Check(cudaEventSynchronize(anchor_.event.get()), "cudaEventSynchronize");
      anchor_.host = Clock::now();
    }
    window_start_ = Clock::now();
  }

  // Steps queued inside the window are counted whole; at most the backlog the
  // loop allows (sync_every_steps) runs past the window's end.
  DeviceWindow EndWindow() override {
    DeviceWindow w;
    w.wall_s = std::chrono::duration<double>(Clock::now() - window_start_).count();
    w.step_busy_s = steps_.Drain();
    w.steps = steps_.count();
    w.copy_s = copies_.Drain();
    w.copy_bytes = copy_bytes_;
    return w;
  }

 private:
  const unsigned long long step_ns_;
  const bool prefetch_to_device_;
  const std::string name_;
  Stream compute_stream_;
  Stream copy_stream_;
  Event copy_done_;
  std::array<DeviceMemory, 2> device_buffers_;  // double buffer: copy k+1 while step k reads k
  size_t next_buffer_ = 0;
  TraceAnchor anchor_;  // before the rings, which refer to it
  EventRing steps_;
  EventRing copies_;
  int64_t copy_bytes_ = 0;
  Clock::time_point window_start_{};
};

}  // namespace

std::unique_ptr<Device> MakeCudaDevice(const DeviceOptions& options, std::string* error) {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess || count == 0) {
    *error = status != cudaSuccess ? std::string(cudaGetErrorName(status)) + ": " + cudaGetErrorString(status)
                                   : std::string("no CUDA device found");
    return nullptr;
  }
  try {
    Check(cudaSetDevice(0), "cudaSetDevice");
    cudaDeviceProp prop{};
    Check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
    return std::make_unique<CudaDevice>(options, prop.name);
  } catch (const DeviceError& e) {
    *error = e.what();
    return nullptr;
  }
}

}  // namespace feedtune::device
