// host-sim: the device modelled on a timeline, for machines without a GPU.
//
// The stream is an in-order queue kept as the time its last queued operation
// ends (`stream_free_at_`): an operation queued at `now` starts at
// max(now, stream_free_at_) and takes its modelled duration. Waiting for an
// operation is a wait until its modelled end (SleepUntil: a sleep, then a short
// spin, so a wait costs the host its modelled time and not a timer's
// granularity); the step burns no CPU and the host side (workers, slots,
// pinning, staging) stays real. Busy time is summed as operations are queued
// and clipped to the measurement window exactly (StreamBusy), so the per-batch
// path neither allocates nor keeps a record per operation.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <cstdio>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "loader/device/device.h"
#include "loader/device/sleep_until.h"

namespace feedtune::device {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// The busy time of one kind of operation (steps, or copies) inside a
// measurement window, without a record per operation. Operations of one kind
// run in order on one stream and never overlap, so their time inside
// [window start, window end] is what was queued since the window began
// (clipped at its start), less the part of the still-unfinished operations
// that lies past its end. Only the unfinished ones are kept: one or two in a
// loop that syncs or copies blocking; more only while the host runs ahead of
// the device (non-blocking copies, no sync), as many as it has queued.
class StreamBusy {
 public:
  // An operation [start, end) queued at `now` (start >= now). Zero-length
  // operations (step_us 0, an empty copy) are never busy and never counted.
  void Add(Clock::time_point start, Clock::time_point end, Clock::time_point now) {
    if (end <= start) return;
    DropEndedBy(now);
    busy_ += end - std::max(start, window_start_);
    ++count_;
    unfinished_.push_back({start, end});
  }

  // Starts a window at `start`: what ended before it no longer counts, what
  // is under way counts from `start` on.
  void BeginWindow(Clock::time_point start) {
    window_start_ = start;
    DropEndedBy(start);
    busy_ = Clock::duration::zero();
    count_ = 0;
    for (size_t i = head_; i < unfinished_.size(); ++i) {
      busy_ += unfinished_[i].end - std::max(unfinished_[i].start, start);
      ++count_;
    }
  }

  // Busy seconds and the number of operations that overlap [window start, end].
  std::pair<double, int64_t> Window(Clock::time_point end) const {
    Clock::duration busy = busy_;
    int64_t count = count_;
    for (size_t i = head_; i < unfinished_.size(); ++i) {
      const Interval& op = unfinished_[i];
      if (op.end <= end) continue;
      busy -= op.end - std::max(op.start, end);
      if (op.start >= end) --count;
    }
    return {Seconds(busy), count};
  }

 private:
  struct Interval {
    Clock::time_point start, end;
  };

  // Ends are in queue order, so the ended operations are a prefix.
  void DropEndedBy(Clock::time_point now) {
    while (head_ < unfinished_.size() && unfinished_[head_].end <= now) ++head_;
    if (head_ == unfinished_.size()) {
      unfinished_.clear();  // keeps the capacity: no allocation in steady state
      head_ = 0;
    } else if (head_ >= 64 && 2 * head_ >= unfinished_.size()) {
      unfinished_.erase(unfinished_.begin(), unfinished_.begin() + static_cast<std::ptrdiff_t>(head_));
      head_ = 0;
    }
  }

  Clock::time_point window_start_{};
  Clock::duration busy_{};  // queued since window_start_, clipped at it
  int64_t count_ = 0;
  std::vector<Interval> unfinished_;  // [head_, end) may not have ended yet
  size_t head_ = 0;
};

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
    const auto now = Clock::now();
    const auto [start, end] = prefetch_to_device_ ? EnqueueCopyStream(duration, now) : Enqueue(duration, now);
    copies_.Add(start, end, now);
    if (trace_sink_ != nullptr) trace_sink_->DeviceSpan(false, traced_copies_++, start, end);
    copy_bytes_ += static_cast<int64_t>(bytes);
    if (!(non_blocking && src_pinned)) SleepUntil(end);
  }

  void Step() override {
    const auto now = Clock::now();
    const auto [start, end] = Enqueue(step_, now);
    steps_.Add(start, end, now);
    if (trace_sink_ != nullptr) trace_sink_->DeviceSpan(true, traced_steps_++, start, end);
  }

  void Synchronize() override { SleepUntil(std::max(stream_free_at_, copy_ready_at_)); }

  void BeginWindow() override {
    window_start_ = Clock::now();
    steps_.BeginWindow(window_start_);
    copies_.BeginWindow(window_start_);
    copy_bytes_ = 0;
  }

  DeviceWindow EndWindow() override {
    const auto end = Clock::now();
    DeviceWindow w;
    w.wall_s = Seconds(end - window_start_);
    std::tie(w.step_busy_s, w.steps) = steps_.Window(end);
    w.copy_s = copies_.Window(end).first;
    w.copy_bytes = copy_bytes_;
    return w;
  }

 private:
  static std::string Format(double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", v);
    return buf;
  }

  std::pair<Clock::time_point, Clock::time_point> Enqueue(Clock::duration duration, Clock::time_point now) {
    const auto start = std::max({now, stream_free_at_, copy_ready_at_});
    stream_free_at_ = start + duration;
    return {start, stream_free_at_};
  }
  std::pair<Clock::time_point, Clock::time_point> EnqueueCopyStream(Clock::duration duration,
                                                                    Clock::time_point now) {
    const auto start = std::max(now, copy_ready_at_);
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
  StreamBusy steps_;
  StreamBusy copies_;
  int64_t copy_bytes_ = 0;
  HostBuffer staging_;
  std::string pin_warning_;
};

}  // namespace

std::unique_ptr<Device> MakeHostSimDevice(const DeviceOptions& options) {
  return std::make_unique<HostSimDevice>(options);
}

}  // namespace feedtune::device
