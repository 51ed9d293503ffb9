// TraceBuffer: the spans of one trial (sample fetches, batches, the pin stage,
// the main loop's waits, the device's copies and steps), recorded into shared
// memory by every process and thread of the loader, and written out as a
// Chrome trace event file (WriteChromeTrace) that Perfetto and chrome://tracing load,
// with counter tracks beside the spans (TraceCounter); and the short excerpt
// of a trace that the HTML report draws (TimelineExcerpt).
//
// Why this shape:
// - The buffer lies at the end of the slot arena's memfd (SlotArena's trace
//   region), which every worker process already maps: no new descriptor, no
//   change to the worker protocol, and the events of a forked worker are in
//   the parent's memory the moment they are written.
// - One fixed-size ring (an array and a count) per track, and one writer per
//   track at a time (a worker, the pin thread, the consumer thread): a record
//   is a bounds check, a 40-byte store and a release store of the count. No
//   lock, no system call, no allocation, nothing that can block a worker or
//   make it wait for another: recording must not change what it records.
//   A full ring drops the event and counts it.
// - Spans are kept only while the buffer is armed (the first `seconds` of the
//   first measurement window): the file's size is bounded by the ring sizes.
// - Times are steady_clock (CLOCK_MONOTONIC) nanoseconds, one clock for every
//   process on the machine.
// - When tracing is off the arena has no trace region, Attach returns nullptr,
//   and each hook is one untaken branch.
//
// Threads: Record may be called from any thread or process, one writer per
// track; Arm/Disarm/Events from the owner (the consumer thread).
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <ostream>
#include <span>
#include <string>
#include <vector>

#include "loader/device/device.h"

namespace feedtune::loader {

enum class TraceKind : int32_t {
  kSample = 0,  // a worker reads one sample (batch = the sample's index)
  kBatch = 1,   // a worker fills one batch slot (collate into the slot)
  kPin = 2,     // the pin stage copies a batch into page-locked memory
  kWait = 3,    // the main loop waits for its next batch
  kCopy = 4,    // host-to-device copy, on the device's timeline
  kStep = 5,    // model step, on the device's timeline
};

// One span. Plain data: it lives in shared memory.
struct TraceEvent {
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  int64_t batch = 0;  // the batch's index in its epoch; a sample span: the sample index
  int32_t pid = 0;    // the recording process (a pseudo pid for the device, kDevicePid)
  int32_t tid = 0;    // the recording thread, unique across processes (kernel tids are)
  TraceKind kind = TraceKind::kSample;
  int32_t track = 0;
};

// Fixed tracks; worker w records on kFirstWorkerTrack + w.
inline constexpr int kMainTrack = 0;  // the consumer: waits (and, without workers, its own batches)
inline constexpr int kPinTrack = 1;
inline constexpr int kCopyTrack = 2;
inline constexpr int kStepTrack = 3;
inline constexpr int kFirstWorkerTrack = 4;
inline int TraceTracks(int num_workers) { return kFirstWorkerTrack + num_workers; }

// The device is no process: its tracks get ids above Linux's largest pid
// (PID_MAX_LIMIT, 2^22), so they can never collide with a real pid or tid.
inline constexpr int32_t kDevicePid = (1 << 22) + 1;
inline constexpr int32_t kDeviceCopyTid = (1 << 22) + 2;
inline constexpr int32_t kDeviceStepTid = (1 << 22) + 3;

// Events in all rings together: at 40 bytes 10 MiB of shared memory, and a
// file of at most kMaxTraceFileBytes (events plus their flow arrows).
inline constexpr int64_t kMaxTraceEvents = 262144;
inline constexpr int64_t kMaxTraceFileBytes = 96ll << 20;

class TraceBuffer {
 public:
  // Bytes a buffer of `tracks` rings sharing `max_events` events needs.
  static size_t RegionBytes(int tracks, int64_t max_events = kMaxTraceEvents);
  // Lays out an empty, disarmed buffer in `region` (the consumer, before any
  // worker maps it). `region` must be RegionBytes(tracks, max_events) long.
  static TraceBuffer* Create(std::span<std::byte> region, int tracks, int64_t max_events = kMaxTraceEvents);
  // The buffer Create laid out in `region`; nullptr for an empty region (tracing off).
  static TraceBuffer* Attach(std::span<std::byte> region);

  TraceBuffer(const TraceBuffer&) = delete;
  TraceBuffer& operator=(const TraceBuffer&) = delete;

  // Spans that start in [begin_ns, end_ns) are kept from now on.
  void Arm(int64_t begin_ns, int64_t end_ns);
  void Disarm();
  int64_t begin_ns() const { return begin_ns_.load(std::memory_order_relaxed); }

  // Records one span on `track` (one writer per track). Lock-free, wait-free.
  void Record(int track, TraceKind kind, int64_t start_ns, int64_t end_ns, int64_t batch, int32_t pid,
              int32_t tid) {
    if (start_ns < begin_ns_.load(std::memory_order_relaxed) || start_ns >= end_ns_.load(std::memory_order_relaxed)) {
      return;
    }
    if (track < 0 || track >= tracks_) return;
    RingHeader& h = header(track);
    const uint32_t n = h.count.load(std::memory_order_relaxed);
    if (n >= capacity_) {
      h.dropped.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    events(track)[n] = TraceEvent{start_ns, end_ns, batch, pid, tid, kind, track};
    h.count.store(n + 1, std::memory_order_release);  // publishes the event to the reader
  }

  // Every recorded event, track by track (each track in recording order).
  std::vector<TraceEvent> Events() const;
  int64_t dropped() const;
  int tracks() const { return tracks_; }
  int64_t max_events() const { return static_cast<int64_t>(capacity_) * tracks_; }

 private:
  // A ring: this header (a cache line of its own, so writers of different
  // tracks never share one), then capacity_ events.
  struct alignas(64) RingHeader {
    std::atomic<uint32_t> count;
    std::atomic<uint32_t> dropped;
  };
  static_assert(std::atomic<uint32_t>::is_always_lock_free && std::atomic<int64_t>::is_always_lock_free,
                "shared-memory atomics must be lock-free (address-free)");

  TraceBuffer(int tracks, uint32_t capacity);
  static size_t RingBytes(uint32_t capacity);
  std::byte* ring(int track) const;
  RingHeader& header(int track) const { return *reinterpret_cast<RingHeader*>(ring(track)); }
  TraceEvent* events(int track) const { return reinterpret_cast<TraceEvent*>(ring(track) + sizeof(RingHeader)); }

  uint64_t magic_;
  std::atomic<int64_t> begin_ns_;
  std::atomic<int64_t> end_ns_;
  int32_t tracks_;
  uint32_t capacity_;  // events per ring
};

// steady_clock now in nanoseconds (TraceEvent's clock).
int64_t TraceNowNs();
inline int64_t TraceNs(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}
// This thread's kernel id (gettid): unique across processes. Not cached: a
// cached id would be wrong in a forked child.
int32_t TraceThreadId();

// Puts the device's copies and steps (device::DeviceTraceSink) on the copy
// and step tracks, each step tagged with the batch it consumed. The driving
// thread calls BeforeCopy(batch) before each copy; a backend may report a
// span later (CUDA, when its events are harvested), so the batch is looked up
// by the call's sequence number. Set on the device only while the buffer is armed.
class DeviceTraceRecorder final : public device::DeviceTraceSink {
 public:
  explicit DeviceTraceRecorder(TraceBuffer& buffer) : buffer_(buffer) {}
  // Between Start and Stop, each copy's batch is kept (the device's seq 0 is
  // the first copy after Start: set the sink on the device right after it).
  void Start() {
    batches_.clear();
    active_ = true;
  }
  void Stop() { active_ = false; }
  void BeforeCopy(int64_t batch) {
    if (active_) batches_.push_back(batch);
  }
  void DeviceSpan(bool step, int64_t seq, std::chrono::steady_clock::time_point start,
                  std::chrono::steady_clock::time_point end) override {
    const int64_t batch = seq >= 0 && static_cast<size_t>(seq) < batches_.size() ? batches_[static_cast<size_t>(seq)] : -1;
    buffer_.Record(step ? kStepTrack : kCopyTrack, step ? TraceKind::kStep : TraceKind::kCopy, TraceNs(start),
                   TraceNs(end), batch, kDevicePid, step ? kDeviceStepTid : kDeviceCopyTid);
  }

 private:
  TraceBuffer& buffer_;
  std::vector<int64_t> batches_;  // by call: the batch of copy k and step k
  bool active_ = false;
};

// One point of a counter track (ph C): a figure measured beside the spans,
// e.g. the CPU other processes took in the traced window (docs/trace.md).
struct TraceCounter {
  std::string name;
  int64_t ns = 0;  // the steady clock, as the spans' times
  double value = 0;
};

// A trial's trace as the trial runner hands it back (tuner/measure/trial_runner.h,
// TrialPlan::trace): the caller sets `seconds`, the trial fills the rest.
struct TraceCapture {
  double seconds = 1.0;  // the cap: the first `seconds` of the first window
  std::vector<TraceEvent> events;
  int64_t dropped = 0;
  int64_t max_events = 0;
  bool recorded = false;  // the trial ran its first window with the buffer armed
  std::vector<TraceCounter> counters;  // counter tracks beside the spans
};

// What the file says about itself besides the events.
struct TraceInfo {
  std::string title;        // e.g. "quickstart: num_workers=4 pin_memory=true ..."
  double seconds = 0;       // the cap: the first `seconds` of the first window
  int num_workers = 0;
  std::string device;       // the device backend's description
  int64_t dropped = 0;      // events lost to full rings
  int64_t max_events = 0;
  std::vector<TraceCounter> counters;  // written as counter tracks (ph C) of the main process
};

// Writes `events` (TraceBuffer::Events) as a Chrome trace event JSON object:
// complete events (ph X) per span, process and thread names (ph M), flow
// arrows (ph s/f, one id per batch) from the worker span that filled a batch
// to the step that consumed it, and `info` under "metadata". Timestamps are
// microseconds from the trace's first span. Stops adding events before the
// file would exceed kMaxTraceFileBytes (and says so in the metadata).
void WriteChromeTrace(std::ostream& out, std::vector<TraceEvent> events, const TraceInfo& info);

// A compact excerpt for the HTML report: the first `ms` milliseconds from the
// first step, one row per worker (its batch spans; "main (loads)" without
// workers), the pin stage, the copy and the step. The caller writes it as
// JSON (tuner/cli/trace_files.h).
struct TimelineExcerpt {
  struct Row {
    std::string name;                             // "worker 0", "pin", "copy", "step"
    std::vector<std::array<int64_t, 2>> spans;  // [start_us, duration_us] from the first step
  };
  int64_t ms = 0;
  std::vector<Row> rows;  // empty when the capture has no step
};
TimelineExcerpt MakeTimelineExcerpt(const std::vector<TraceEvent>& events, int num_workers, double ms = 200);

}  // namespace feedtune::loader
