#include "loader/trace.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <limits>
#include <map>
#include <new>
#include <stdexcept>
#include <string>
#include <utility>

namespace feedtune::loader {
namespace {

constexpr uint64_t kMagic = 0x6674747261636531ull;  // "fttrace1"
constexpr size_t kLine = 64;

size_t RoundUp(size_t n) { return (n + kLine - 1) / kLine * kLine; }

const char* KindName(TraceKind kind) {
  switch (kind) {
    case TraceKind::kSample: return "sample";
    case TraceKind::kBatch: return "batch";
    case TraceKind::kPin: return "pin";
    case TraceKind::kWait: return "wait for batch";
    case TraceKind::kCopy: return "h2d copy";
    case TraceKind::kStep: return "step";
  }
  return "span";
}

// JSON string contents: quotes, backslashes and control characters escaped.
std::string Escape(const std::string& s) {
  std::string out;
  for (const char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  return out;
}

// Microseconds from `t0` with nanosecond resolution, as the format's ts and dur want.
std::string Us(int64_t ns) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%lld.%03lld", static_cast<long long>(ns / 1000),
                static_cast<long long>(ns % 1000));
  return buf;
}

std::string TrackName(const TraceEvent& e) {
  switch (e.track) {
    case kMainTrack: return "main loop";
    case kPinTrack: return "pin stage";
    case kCopyTrack: return "h2d copy stream";
    case kStepTrack: return "compute stream (model step)";
    default: return "worker " + std::to_string(e.track - kFirstWorkerTrack);
  }
}

// Appends text to the file while it stays under the byte cap.
class CappedWriter {
 public:
  explicit CappedWriter(std::ostream& out) : out_(out) {}
  // Writes `text` unless that would leave less than `reserve` bytes of the cap.
  bool Put(const std::string& text, int64_t reserve = 4096) {
    if (written_ + static_cast<int64_t>(text.size()) + reserve > kMaxTraceFileBytes) {
      full_ = true;
      return false;
    }
    out_ << text;
    written_ += static_cast<int64_t>(text.size());
    return true;
  }
  bool full() const { return full_; }

 private:
  std::ostream& out_;
  int64_t written_ = 0;
  bool full_ = false;
};

}  // namespace

size_t TraceBuffer::RingBytes(uint32_t capacity) {
  return RoundUp(sizeof(RingHeader) + static_cast<size_t>(capacity) * sizeof(TraceEvent));
}

size_t TraceBuffer::RegionBytes(int tracks, int64_t max_events) {
  if (tracks < 1 || max_events < tracks) throw std::invalid_argument("TraceBuffer: no room for its tracks");
  const auto capacity = static_cast<uint32_t>(max_events / tracks);
  return RoundUp(sizeof(TraceBuffer)) + static_cast<size_t>(tracks) * RingBytes(capacity);
}

TraceBuffer::TraceBuffer(int tracks, uint32_t capacity)
    : magic_(kMagic),
      begin_ns_(std::numeric_limits<int64_t>::max()),
      end_ns_(std::numeric_limits<int64_t>::min()),
      tracks_(tracks),
      capacity_(capacity) {}

TraceBuffer* TraceBuffer::Create(std::span<std::byte> region, int tracks, int64_t max_events) {
  if (region.size() < RegionBytes(tracks, max_events)) throw std::invalid_argument("TraceBuffer: region too small");
  auto* buffer = new (region.data()) TraceBuffer(tracks, static_cast<uint32_t>(max_events / tracks));
  for (int t = 0; t < tracks; ++t) new (buffer->ring(t)) RingHeader{{0}, {0}};
  return buffer;
}

TraceBuffer* TraceBuffer::Attach(std::span<std::byte> region) {
  if (region.size() < sizeof(TraceBuffer)) return nullptr;
  auto* buffer = std::launder(reinterpret_cast<TraceBuffer*>(region.data()));
  return buffer->magic_ == kMagic ? buffer : nullptr;
}

std::byte* TraceBuffer::ring(int track) const {
  auto* base = reinterpret_cast<std::byte*>(const_cast<TraceBuffer*>(this));
  return base + RoundUp(sizeof(TraceBuffer)) + static_cast<size_t>(track) * RingBytes(capacity_);
}

void TraceBuffer::Arm(int64_t begin_ns, int64_t end_ns) {
  // end first: a writer that sees the new begin never sees the old (empty) end.
  end_ns_.store(end_ns, std::memory_order_relaxed);
  begin_ns_.store(begin_ns, std::memory_order_relaxed);
}

void TraceBuffer::Disarm() { end_ns_.store(std::numeric_limits<int64_t>::min(), std::memory_order_relaxed); }

std::vector<TraceEvent> TraceBuffer::Events() const {
  std::vector<TraceEvent> out;
  for (int t = 0; t < tracks_; ++t) {
    const uint32_t n = header(t).count.load(std::memory_order_acquire);
    const TraceEvent* e = events(t);
    out.insert(out.end(), e, e + n);
  }
  return out;
}

int64_t TraceBuffer::dropped() const {
  int64_t sum = 0;
  for (int t = 0; t < tracks_; ++t) sum += header(t).dropped.load(std::memory_order_relaxed);
  return sum;
}

int64_t TraceNowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

int32_t TraceThreadId() { return static_cast<int32_t>(syscall(SYS_gettid)); }

namespace {

// A counter's point ("ph":"C") on the main process's track, in CPUs.
std::string CounterEventJson(const TraceCounter& c, int32_t main_pid, int64_t t0) {
  char value[32];
  std::snprintf(value, sizeof value, "%.3f", c.value);
  return "{\"ph\":\"C\",\"name\":\"" + Escape(c.name) + "\",\"pid\":" + std::to_string(main_pid) +
         ",\"tid\":" + std::to_string(main_pid) + ",\"ts\":" + Us(c.ns - t0) + ",\"args\":{\"CPUs\":" + value +
         "}}";
}

}  // namespace

void WriteChromeTrace(std::ostream& out, std::vector<TraceEvent> events, const TraceInfo& info) {
  // Outer spans first at equal starts, so a reader that stacks them sees the nesting.
  std::sort(events.begin(), events.end(), [](const TraceEvent& a, const TraceEvent& b) {
    return a.start_ns != b.start_ns ? a.start_ns < b.start_ns : a.end_ns > b.end_ns;
  });
  // Time 0: the first span, or a counter's point before it.
  int64_t t0 = events.empty() ? std::numeric_limits<int64_t>::max() : events.front().start_ns;
  for (const TraceCounter& c : info.counters) t0 = std::min(t0, c.ns);
  if (t0 == std::numeric_limits<int64_t>::max()) t0 = 0;
  const int32_t main_pid = static_cast<int32_t>(getpid());

  CappedWriter w(out);
  w.Put("{\"traceEvents\":[\n", 0);
  bool first = true;
  const auto put = [&](const std::string& line) {
    const bool ok = w.Put((first ? "" : ",\n") + line);
    if (ok) first = false;
    return ok;
  };

  // Names: processes (main, each worker process, the device) and threads (tracks).
  std::map<int32_t, std::pair<std::string, int>> processes;  // pid -> name, sort index
  std::map<std::pair<int32_t, int32_t>, std::pair<std::string, int>> threads;  // (pid, tid) -> name, sort index
  processes[main_pid] = {"feedtune (main process)", 0};
  for (const TraceEvent& e : events) {
    if (e.pid == kDevicePid) {
      processes[e.pid] = {"device: " + info.device, 1 << 20};
    } else if (e.pid != main_pid) {
      processes[e.pid] = {TrackName(e) + " (pid " + std::to_string(e.pid) + ")", e.track};
    }
    threads[{e.pid, e.tid}] = {TrackName(e), e.track};
  }
  for (const auto& [pid, name] : processes) {
    put("{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":" + std::to_string(pid) + ",\"tid\":" +
        std::to_string(pid) + ",\"args\":{\"name\":\"" + Escape(name.first) + "\"}}");
    put("{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":" + std::to_string(pid) + ",\"tid\":" +
        std::to_string(pid) + ",\"args\":{\"sort_index\":" + std::to_string(name.second) + "}}");
  }
  for (const auto& [ids, name] : threads) {
    const std::string where = "\"pid\":" + std::to_string(ids.first) + ",\"tid\":" + std::to_string(ids.second);
    put("{\"ph\":\"M\",\"name\":\"thread_name\"," + where + ",\"args\":{\"name\":\"" + Escape(name.first) + "\"}}");
    put("{\"ph\":\"M\",\"name\":\"thread_sort_index\"," + where + ",\"args\":{\"sort_index\":" +
        std::to_string(name.second) + "}}");
  }

  // Flow arrows: each step is matched to the batch span (a worker's, or the
  // main loop's without workers) with its index that ended last before the
  // step began and is not matched yet; indices repeat each epoch, times do not.
  std::map<int64_t, std::vector<size_t>> batches_by_index;  // in start order
  for (size_t i = 0; i < events.size(); ++i) {
    if (events[i].kind == TraceKind::kBatch) batches_by_index[events[i].batch].push_back(i);
  }
  std::vector<std::pair<size_t, size_t>> flows;  // (batch span, step span)
  std::vector<bool> used(events.size(), false);
  for (size_t i = 0; i < events.size(); ++i) {
    const TraceEvent& step = events[i];
    if (step.kind != TraceKind::kStep) continue;
    const auto it = batches_by_index.find(step.batch);
    if (it == batches_by_index.end()) continue;
    size_t best = events.size();
    for (const size_t b : it->second) {
      if (!used[b] && events[b].end_ns <= step.start_ns &&
          (best == events.size() || events[b].end_ns > events[best].end_ns)) {
        best = b;
      }
    }
    if (best == events.size()) continue;
    used[best] = true;
    flows.emplace_back(best, i);
  }

  int64_t written_events = 0;
  for (const TraceEvent& e : events) {
    const bool sample = e.kind == TraceKind::kSample;
    if (!put("{\"ph\":\"X\",\"name\":\"" + std::string(KindName(e.kind)) + "\",\"cat\":\"" +
             (e.pid == kDevicePid ? "device" : "loader") + "\",\"pid\":" + std::to_string(e.pid) +
             ",\"tid\":" + std::to_string(e.tid) + ",\"ts\":" + Us(e.start_ns - t0) +
             ",\"dur\":" + Us(std::max<int64_t>(e.end_ns - e.start_ns, 0)) + ",\"args\":{\"" +
             (sample ? "sample" : "batch") + "\":" + std::to_string(e.batch) + "}}")) {
      break;
    }
    ++written_events;
  }
  int64_t id = 0;
  for (const auto& [b, s] : flows) {
    if (w.full()) break;
    const TraceEvent& from = events[b];
    const TraceEvent& to = events[s];
    ++id;
    // The start binds to the batch span (its samples start later); the end,
    // with bp "e", to the step that encloses its timestamp.
    const std::string common = "\"name\":\"batch " + std::to_string(from.batch) + "\",\"cat\":\"batch\",\"id\":" +
                               std::to_string(id);
    if (!put("{\"ph\":\"s\"," + common + ",\"pid\":" + std::to_string(from.pid) + ",\"tid\":" +
             std::to_string(from.tid) + ",\"ts\":" + Us(from.start_ns - t0) + "}")) {
      break;
    }
    if (!put("{\"ph\":\"f\",\"bp\":\"e\"," + common + ",\"pid\":" + std::to_string(to.pid) + ",\"tid\":" +
             std::to_string(to.tid) + ",\"ts\":" + Us(to.start_ns - t0) + "}")) {
      break;
    }
  }

  for (const TraceCounter& c : info.counters) {
    if (w.full() || !put(CounterEventJson(c, main_pid, t0))) break;
  }

  char cap[512];
  std::snprintf(cap, sizeof cap,
                "\"cap\":{\"seconds\":%g,\"what\":\"the first %g s of the first measurement window\","
                "\"max_events\":%lld,\"max_bytes\":%lld,\"dropped_events\":%lld,\"truncated\":%s}",
                info.seconds, info.seconds, static_cast<long long>(info.max_events),
                static_cast<long long>(kMaxTraceFileBytes), static_cast<long long>(info.dropped),
                w.full() ? "true" : "false");
  w.Put("\n],\n\"displayTimeUnit\":\"ms\",\n\"otherData\":{\"title\":\"" + Escape(info.title) + "\",\"device\":\"" +
            Escape(info.device) + "\",\"num_workers\":" + std::to_string(info.num_workers) + ",\"events\":" +
            std::to_string(written_events) + ",\"flows\":" + std::to_string(id) + "," + cap + "}}\n",
        0);
}

TimelineExcerpt MakeTimelineExcerpt(const std::vector<TraceEvent>& events, int num_workers, double ms) {
  TimelineExcerpt excerpt;
  excerpt.ms = static_cast<int64_t>(ms);
  int64_t t0 = std::numeric_limits<int64_t>::max();
  for (const TraceEvent& e : events) {
    if (e.kind == TraceKind::kStep) t0 = std::min(t0, e.start_ns);
  }
  if (t0 == std::numeric_limits<int64_t>::max()) return excerpt;
  const int64_t t1 = t0 + static_cast<int64_t>(ms * 1e6);

  // Rows: the workers (or the main loop, which loads without them), pin, copy, step.
  if (num_workers == 0) excerpt.rows.push_back({"main (loads)", {}});
  for (int w = 0; w < num_workers; ++w) excerpt.rows.push_back({"worker " + std::to_string(w), {}});
  const size_t pin_row = excerpt.rows.size();
  for (const char* name : {"pin", "copy", "step"}) excerpt.rows.push_back({name, {}});
  for (const TraceEvent& e : events) {
    size_t row;
    if (e.kind == TraceKind::kBatch) {
      row = e.track >= kFirstWorkerTrack ? static_cast<size_t>(e.track - kFirstWorkerTrack) : 0;
    } else if (e.kind == TraceKind::kPin) {
      row = pin_row;
    } else if (e.kind == TraceKind::kCopy) {
      row = pin_row + 1;
    } else if (e.kind == TraceKind::kStep) {
      row = pin_row + 2;
    } else {
      continue;
    }
    if (row >= excerpt.rows.size() || e.end_ns <= t0 || e.start_ns >= t1) continue;
    const int64_t s = (std::max(e.start_ns, t0) - t0) / 1000;
    const int64_t d = (std::min(e.end_ns, t1) - t0) / 1000 - s;
    excerpt.rows[row].spans.push_back({s, d});
  }
  return excerpt;
}

}  // namespace feedtune::loader
