// Process-mode workers, as torch's default: each worker is a process started by
// the fork server (loader/fork_server.h), so it holds a copy of the dataset as
// it was before this process had threads. It maps the slot arena (a shared
// memfd), reads tasks from its own socket and reports on one shared pipe.
//
// Why this shape:
// - Reports are fixed headers plus a bounded error text, at most PIPE_BUF bytes,
//   so writes from several workers to one pipe never interleave.
// - A dead worker is looked for whenever the report pipe has been quiet for
//   kPollInterval (the fork server has reaped it and says how it ended), so a
//   crash is reported within a fraction of a second with its pid and exit code
//   or signal, and the consumer never hangs.
// - Workers die with the fork server, and it with this process
//   (PR_SET_PDEATHSIG); they ignore SIGINT, so Ctrl-C reaches this process
//   alone and it shuts the pool down in order.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>
#include <exception>
#include <mutex>
#include <string>
#include <system_error>
#include <vector>

#include "loader/batch_read.h"
#include "loader/data_loader.h"
#include "loader/fork_server.h"
#include "loader/trace.h"
#include "loader/worker_pool.h"
#include "loader/worker_process.h"

namespace feedtune::loader {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kPollInterval = std::chrono::milliseconds(100);
constexpr auto kStopGrace = std::chrono::milliseconds(1000);
// After SIGKILL, how long to wait for the fork server to report the end.
constexpr int kKilledReportMs = 5000;

// Moves all `size` bytes at `p` through `io` (write, send or read of what is
// left), retrying after EINTR; false on an error, or when `io` moves nothing
// (the other end closed).
template <typename Byte, typename Io>
bool MoveAll(Byte* p, size_t size, Io io) {
  while (size > 0) {
    const ssize_t n = io(p, size);
    if (n == 0) return false;
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

bool WriteAll(int fd, const void* data, size_t size) {
  return MoveAll(static_cast<const char*>(data), size, [fd](const char* p, size_t left) { return write(fd, p, left); });
}

bool SendAll(int fd, const void* data, size_t size) {
  return MoveAll(static_cast<const char*>(data), size,
                 [fd](const char* p, size_t left) { return send(fd, p, left, MSG_NOSIGNAL); });
}

bool ReadAll(int fd, void* data, size_t size) {
  return MoveAll(static_cast<char*>(data), size, [fd](char* p, size_t left) { return read(fd, p, left); });
}

void SendReport(int fd, ReportHeader header, const std::string& error) {
  const std::string text = error.substr(0, kMaxReportError);
  header.error_len = static_cast<uint32_t>(text.size());
  char buf[sizeof(ReportHeader) + kMaxReportError];
  std::memcpy(buf, &header, sizeof header);
  std::memcpy(buf + sizeof header, text.data(), text.size());
  WriteAll(fd, buf, sizeof header + text.size());
}

}  // namespace

void RunWorkerProcess(const Dataset& dataset, const SlotArena& arena, int worker, int task_fd, int report_fd,
                      pid_t parent) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(0);  // the parent died before we could ask
  signal(SIGINT, SIG_IGN);
  signal(SIGTERM, SIG_DFL);

  std::string init_error;
  try {
    dataset.InitWorker(worker);
  } catch (const std::exception& e) {
    init_error = e.what();
  }
  SendReport(report_fd, ReportHeader{-1, 0, 0, -1, worker, 0, -1}, "");

  const int64_t stride = dataset.max_sample_bytes();
  TraceBuffer* const trace = TraceBuffer::Attach(arena.trace_region());  // null: tracing off
  const int32_t self = static_cast<int32_t>(getpid());
  std::vector<int64_t> indices;
  WorkerStream stream(dataset);
  TaskHeader task{};
  while (ReadAll(task_fd, &task, sizeof task)) {
    indices.resize(static_cast<size_t>(task.count));
    if (!ReadAll(task_fd, indices.data(), indices.size() * sizeof(int64_t))) break;
    const auto start = Clock::now();
    ReportHeader report{task.batch_index, 0, 0, task.slot, worker, 0, -1};
    std::string error;
    if (!init_error.empty()) error = "worker " + std::to_string(worker) + " failed in dataset set-up: " + init_error;
    const auto slot = arena.slot(task.slot);
    if (task.stream_batch > 0 && error.empty()) {
      try {
        const WorkerStream::Fill fill = stream.FillBatch(task.share, slot, stride, task.stream_batch);
        report.bytes = fill.bytes;
        report.samples = static_cast<int32_t>(fill.samples);
      } catch (const std::exception& e) {
        error = "worker " + std::to_string(worker) + " (pid " + std::to_string(getpid()) + ") failed on batch " +
                std::to_string(task.batch_index) + " of its stream: " + e.what();
      }
    }
    if (!indices.empty() && error.empty()) {
      try {
        report.bytes = ReadBatchSamples(dataset, indices, slot, stride, task.fetch_concurrency, trace,
                                        kFirstWorkerTrack + worker, self, self);
      } catch (const std::exception& e) {
        error = "worker " + std::to_string(worker) + " (pid " + std::to_string(getpid()) + ") failed on batch " +
                std::to_string(task.batch_index) + " " + e.what();
      }
    }
    const auto end = Clock::now();
    report.busy_s = std::chrono::duration<double>(end - start).count();
    if (trace) {
      trace->Record(kFirstWorkerTrack + worker, TraceKind::kBatch, TraceNs(start), TraceNs(end), task.batch_index,
                    self, self);
    }
    SendReport(report_fd, report, error);
  }
  _exit(0);
}

namespace {

class ProcessWorkerPool final : public WorkerPool {
 public:
  ProcessWorkerPool(ForkServer& server, const SlotArena& arena, int num_workers)
      : server_(server), arena_(arena), workers_(static_cast<size_t>(num_workers)),
        wake_fd_(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {
    if (wake_fd_ < 0) throw std::system_error(errno, std::generic_category(), "eventfd for the worker pool");
  }
  ~ProcessWorkerPool() override {
    Stop();
    close(wake_fd_);
  }

  void Wake() override {
    const uint64_t one = 1;
    [[maybe_unused]] const ssize_t n = write(wake_fd_, &one, sizeof one);
  }

  void Start() override {
    int report_pipe[2];
    if (pipe2(report_pipe, O_CLOEXEC) != 0) throw std::system_error(errno, std::generic_category(), "pipe for worker reports");
    report_fd_ = report_pipe[0];
    const int report_write = report_pipe[1];
    for (int w = 0; w < num_workers(); ++w) {
      // A socket rather than a pipe: send(MSG_NOSIGNAL) to a dead worker fails
      // with EPIPE instead of killing this process with SIGPIPE.
      int task_pipe[2];
      if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, task_pipe) != 0) {
        const int err = errno;
        close(report_write);
        Stop();
        throw std::system_error(err, std::generic_category(), "socket for worker tasks");
      }
      Worker& worker = workers_[static_cast<size_t>(w)];
      try {
        worker.process = server_.Spawn(w, arena_, task_pipe[0], report_write);
      } catch (...) {
        close(task_pipe[0]);
        close(task_pipe[1]);
        close(report_write);
        Stop();
        throw;
      }
      close(task_pipe[0]);
      worker.task_fd = task_pipe[1];
      worker.alive = true;
      worker.outstanding.clear();
    }
    close(report_write);  // only the workers hold the write end now: EOF means all are gone
    running_ = true;

    // Wait until every worker has run its dataset set-up.
    int ready = 0;
    while (ready < num_workers()) {
      BatchDone done;
      if (!WaitDone(&done, Clock::time_point::max())) continue;
      if (!done.error.empty()) {
        Stop();
        throw LoaderError("worker failed to start: " + done.error);
      }
      if (done.batch_index == -1) ++ready;
    }
  }

  void Stop() noexcept override {
    for (auto& w : workers_) {
      if (w.task_fd >= 0) close(w.task_fd);
      w.task_fd = -1;
    }
    // Closing the task sockets asks each worker to exit; one that does not (a
    // hang) is killed after the grace period.
    const auto deadline = Clock::now() + kStopGrace;
    for (auto& w : workers_) {
      if (w.alive) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
        if (!w.process.WaitExit(static_cast<int>(std::max<int64_t>(left, 0)))) {
          w.process.Kill();
          w.process.WaitExit(kKilledReportMs);
        }
      }
      w.alive = false;
      w.outstanding.clear();
      w.process = WorkerProcess();
    }
    if (report_fd_ >= 0) close(report_fd_);
    report_fd_ = -1;
    inbuf_.clear();
    inpos_ = 0;
    TakeWake();
    running_ = false;
  }

  bool running() const override { return running_; }
  int num_workers() const override { return static_cast<int>(workers_.size()); }

  std::vector<pid_t> worker_pids() const override {
    std::vector<pid_t> pids;
    std::lock_guard lock(mu_);
    for (const Worker& w : workers_) {
      if (w.alive) pids.push_back(w.process.pid());
    }
    return pids;
  }

  void Submit(int worker, const BatchTask& task) override {
    Worker& w = workers_[static_cast<size_t>(worker)];
    TaskHeader header{task.batch_index, task.slot, static_cast<int32_t>(task.indices.size()),
                      task.streamed ? task.batch_size : 0, task.fetch_concurrency, task.share};
    // One buffer, one write: the worker wakes once per task.
    outbuf_.resize(sizeof header + task.indices.size_bytes());
    std::memcpy(outbuf_.data(), &header, sizeof header);
    if (!task.indices.empty()) {  // a stream task has none (and memcpy must not get a null source)
      std::memcpy(outbuf_.data() + sizeof header, task.indices.data(), task.indices.size_bytes());
    }
    bool alive = false;
    {
      std::lock_guard lock(mu_);
      w.outstanding.push_back(task.batch_index);
      alive = w.alive;
    }
    // A failed write means the worker is gone; WaitDone reports how it ended.
    if (!alive || !SendAll(w.task_fd, outbuf_.data(), outbuf_.size())) return;
  }

  bool WaitDone(BatchDone* done, Clock::time_point deadline) override {
    while (true) {
      if (ReadReport(done, std::min(deadline, Clock::now() + kPollInterval))) {
        std::lock_guard lock(mu_);
        auto& out = workers_[static_cast<size_t>(done->worker)].outstanding;
        if (!out.empty() && out.front() == done->batch_index) out.pop_front();
        return true;
      }
      if (TakeWake()) return false;
      if (FindDeadWorker(done)) return true;
      if (Clock::now() >= deadline) return false;
    }
  }

 private:
  struct Worker {
    WorkerProcess process;
    int task_fd = -1;
    bool alive = false;
    std::deque<int64_t> outstanding;  // batches sent and not yet reported, oldest first
  };

  // Parses one report from the pipe, waiting until `deadline` for it.
  bool ReadReport(BatchDone* done, Clock::time_point deadline) {
    while (!TakeBufferedReport(done)) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      if (left <= 0) return false;
      pollfd p[2] = {{report_fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
      const int r = poll(p, 2, static_cast<int>(std::min<int64_t>(left, 1000)));
      if (r < 0 && errno != EINTR) return false;
      if (r <= 0) continue;
      if (p[1].revents & POLLIN) return false;  // Wake(): the caller takes it
      if (!(p[0].revents & (POLLIN | POLLHUP))) continue;
      char chunk[65536];
      const ssize_t n = read(report_fd_, chunk, sizeof chunk);
      if (n <= 0) {
        if (n < 0 && errno == EINTR) continue;
        return false;  // EOF: every worker is gone; FindDeadWorker says how
      }
      inbuf_.insert(inbuf_.end(), chunk, chunk + n);
    }
    return true;
  }

  bool TakeBufferedReport(BatchDone* done) {
    if (inbuf_.size() - inpos_ < sizeof(ReportHeader)) return false;
    ReportHeader h;
    std::memcpy(&h, inbuf_.data() + inpos_, sizeof h);
    if (inbuf_.size() - inpos_ < sizeof h + h.error_len) return false;
    done->batch_index = h.batch_index;
    done->slot = h.slot;
    done->worker = h.worker;
    done->bytes = h.bytes;
    done->busy_s = h.busy_s;
    done->samples = h.samples;
    done->error.assign(inbuf_.data() + inpos_ + sizeof h, h.error_len);
    inpos_ += sizeof h + h.error_len;
    if (inpos_ == inbuf_.size()) {
      inbuf_.clear();
      inpos_ = 0;
    }
    return true;
  }

  bool TakeWake() {
    uint64_t count = 0;
    return read(wake_fd_, &count, sizeof count) == sizeof count;  // non-blocking eventfd
  }

  bool FindDeadWorker(BatchDone* done) {
    std::lock_guard lock(mu_);
    for (size_t w = 0; w < workers_.size(); ++w) {
      Worker& worker = workers_[w];
      if (!worker.alive) continue;
      const std::optional<WorkerExit> exit = worker.process.WaitExit(0);
      if (!exit) continue;
      worker.alive = false;
      done->worker = static_cast<int>(w);
      done->batch_index = worker.outstanding.empty() ? -1 : worker.outstanding.front();
      done->error = "worker " + std::to_string(w) + " (pid " + std::to_string(worker.process.pid()) + ") " +
                    DescribeWorkerExit(*exit) +
                    (worker.outstanding.empty() ? std::string(" while idle")
                                                : " while loading batch " + std::to_string(worker.outstanding.front()));
      return true;
    }
    return false;
  }

  ForkServer& server_;
  const SlotArena& arena_;
  // `outstanding` and `alive` of each worker are guarded by mu_: the owner
  // submits while the pin stage waits for reports.
  mutable std::mutex mu_;
  std::vector<Worker> workers_;
  const int wake_fd_;
  int report_fd_ = -1;
  bool running_ = false;
  std::vector<char> inbuf_;
  size_t inpos_ = 0;
  std::vector<char> outbuf_;
};

}  // namespace

std::unique_ptr<WorkerPool> MakeProcessWorkerPool(ForkServer& server, const SlotArena& arena, int num_workers) {
  return std::make_unique<ProcessWorkerPool>(server, arena, num_workers);
}

}  // namespace feedtune::loader
