// host-sim: the device modelled on a timeline, for machines without a GPU.
//
// The stream is an in-order queue kept as the time its last queued operation
// ends (`stream_free_at_`): an operation queued at `now` starts at
// max(now, stream_free_at_) and takes its modelled duration. Waiting for an
// operation is a sleep until its modelled end, so no CPU is burned for device
// time and the host side (workers, slots, pinning, staging) stays real. Step
// intervals are kept to clip them to the measurement window.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "loader/device/device.h"

namespace feedtune::device {
namespace {

using Clock = std::chrono::steady_clock;

class HostSimDevice final : public Device {
 public:
  explicit HostSimDevice(const DeviceOptions& options)
      : step_(std::chrono::microseconds(options.step_us)),
        prefetch_to_device_(options.prefetch_to_device),
        pinned_bytes_per_s_(options.host_sim.h2d_gbps_pinned * 1e9),
        pageable_bytes_per_s_(options.host_sim.h2d_gbps_pageable * 1e9),
        description_("host-sim (modelled: pinned " + Format(options.host_sim.h2d_gbps_pinned) + " GB/s, pageable " +
                     Format(options.host_sim.h2d_gbps_pageable) + " GB/s, step " +
                     std::to_string(options.step_us) + " us)") {}

  const char* backend_name() const override { return "host-sim"; }
  std::string description() const override { return description_; }

  HostBuffer AllocPinned(size_t bytes) override {
    bool locked = false;
    std::string why;
    HostBuffer buffer = AllocLockedHostSim(bytes, &locked, &why);
    if (!locked) pin_warning_ = why;
    return buffer;
  }

  std::string pin_warning() const override { return pin_warning_; }

  void Prepare(size_t max_batch_bytes) override {
    if (staging_.size() < max_batch_bytes) staging_ = AllocPageable(max_batch_bytes);
  }

  void CopyToDevice(const std::byte* src, size_t bytes, bool src_pinned, bool non_blocking) override {
    if (!src_pinned) {
      // CUDA stages a pageable copy through a pinned bounce buffer on the
      // calling thread; do that copy for real.
      if (staging_.size() < bytes) staging_ = AllocPageable(bytes);
      std::memcpy(staging_.data(), src, bytes);
    }
    const double bw = src_pinned ? pinned_bytes_per_s_ : pageable_bytes_per_s_;
    const auto duration = std::chrono::duration_cast<Clock::duration>(
        std::chrono::duration<double>(static_cast<double>(bytes) / bw));
    // With prefetch_to_device the copy runs on its own stream and the next step
    // waits for it on the device; otherwise it shares the compute stream.
    const auto [start, end] = prefetch_to_device_ ? EnqueueCopyStream(duration) : Enqueue(duration);
    copies_.push_back({start, end});
    copy_bytes_ += static_cast<int64_t>(bytes);
    if (!(non_blocking && src_pinned)) std::this_thread::sleep_until(end);
  }

  void Step() override {
    const auto [start, end] = Enqueue(step_);
    steps_.push_back({start, end});
  }

  void Synchronize() override { std::this_thread::sleep_until(std::max(stream_free_at_, copy_ready_at_)); }

  void BeginWindow() override {
    window_start_ = Clock::now();
    // Operations that ended before the window are of no further use.
    std::erase_if(steps_, [&](const Interval& i) { return i.end <= window_start_; });
    std::erase_if(copies_, [&](const Interval& i) { return i.end <= window_start_; });
    copy_bytes_ = 0;
  }

  DeviceWindow EndWindow() override {
    const auto end = Clock::now();
    DeviceWindow w;
    w.wall_s = Seconds(end - window_start_);
    for (const auto& s : steps_) {
      const double clipped = Clipped(s, window_start_, end);
      if (clipped > 0) ++w.steps;
      w.step_busy_s += clipped;
    }
    for (const auto& c : copies_) w.copy_s += Clipped(c, window_start_, end);
    w.copy_bytes = copy_bytes_;
    return w;
  }

 private:
  struct Interval {
    Clock::time_point start, end;
  };

  static std::string Format(double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", v);
    return buf;
  }
  static double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }
  static double Clipped(const Interval& i, Clock::time_point lo, Clock::time_point hi) {
    const auto a = std::max(i.start, lo);
    const auto b = std::min(i.end, hi);
    return b > a ? Seconds(b - a) : 0.0;
  }

  std::pair<Clock::time_point, Clock::time_point> Enqueue(Clock::duration duration) {
    const auto start = std::max({Clock::now(), stream_free_at_, copy_ready_at_});
    stream_free_at_ = start + duration;
    return {start, stream_free_at_};
  }
  std::pair<Clock::time_point, Clock::time_point> EnqueueCopyStream(Clock::duration duration) {
    const auto start = std::max(Clock::now(), copy_ready_at_);
    copy_ready_at_ = start + duration;
    return {start, copy_ready_at_};
  }

  // Constant after construction.
  const Clock::duration step_;
  const bool prefetch_to_device_;
  const double pinned_bytes_per_s_;
  const double pageable_bytes_per_s_;
  const std::string description_;

  Clock::time_point stream_free_at_{};
  Clock::time_point copy_ready_at_{};  // end of the last copy on the copy stream
  Clock::time_point window_start_{};
  std::vector<Interval> steps_;
  std::vector<Interval> copies_;
  int64_t copy_bytes_ = 0;
  HostBuffer staging_;
  std::string pin_warning_;
};

}  // namespace

std::unique_ptr<Device> MakeHostSimDevice(const DeviceOptions& options) {
  return std::make_unique<HostSimDevice>(options);
}

}  // namespace feedtune::device
