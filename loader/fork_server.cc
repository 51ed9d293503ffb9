#include "loader/fork_server.h"

#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <span>
#include <system_error>
#include <utility>

#include "loader/data_loader.h"
#include "loader/worker_process.h"

namespace feedtune::loader {
namespace {

// How long Spawn waits for the server's answer: a fork takes milliseconds, so
// this only turns a stopped server into an error instead of a hang.
constexpr int kSpawnReplyTimeoutMs = 30000;
constexpr auto kServerExitGrace = std::chrono::milliseconds(2000);
// Exit code of a worker that could not map the slot arena.
constexpr int kExitNoArena = 120;

struct SpawnRequest {
  int32_t worker;
  int32_t num_slots;
  uint64_t slot_bytes;
};
constexpr int kSpawnFds = 4;  // arena memfd, task socket, report pipe, status socket

enum class StatusKind : int32_t { kStarted = 1, kExited = 2, kForkFailed = 3 };
struct StatusMessage {
  StatusKind kind;
  int32_t pid;
  int32_t code;    // kExited: CLD_*; kForkFailed: errno
  int32_t status;  // kExited: exit code or signal
};

// Sends `data` with up to a few descriptors attached (SCM_RIGHTS).
bool SendWithFds(int socket, const void* data, size_t size, std::span<const int> fds) {
  iovec iov{const_cast<void*>(data), size};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kSpawnFds)] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  if (!fds.empty()) {
    msg.msg_control = control;
    msg.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
    std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
  }
  while (true) {
    const ssize_t n = sendmsg(socket, &msg, MSG_NOSIGNAL);
    if (n == static_cast<ssize_t>(size)) return true;
    if (n < 0 && errno == EINTR) continue;
    return false;
  }
}

// Receives one message of exactly `size` bytes and its descriptors (close-on-exec);
// returns the number of descriptors, or -1 on EOF or error (any descriptors closed).
int RecvWithFds(int socket, void* data, size_t size, std::span<int> fds) {
  iovec iov{data, size};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kSpawnFds)] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  ssize_t n;
  do {
    n = recvmsg(socket, &msg, MSG_CMSG_CLOEXEC);
  } while (n < 0 && errno == EINTR);
  int count = 0;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const size_t got = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < got; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
      if (count < static_cast<int>(fds.size())) {
        fds[static_cast<size_t>(count++)] = fd;
      } else {
        close(fd);
      }
    }
  }
  if (n != static_cast<ssize_t>(size) || (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC))) {
    for (int i = 0; i < count; ++i) close(fds[static_cast<size_t>(i)]);
    return -1;
  }
  return count;
}

void SendStatus(int fd, StatusMessage message, int attached_fd = -1) {
  const int fds[1] = {attached_fd};
  SendWithFds(fd, &message, sizeof message, attached_fd >= 0 ? std::span<const int>(fds) : std::span<const int>());
}

// The fork server: forks workers on request and reports how each one ended.
// Single-threaded; never returns.
[[noreturn]] void ServerMain(const Dataset& dataset, int control_fd, pid_t owner) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != owner) _exit(0);  // the owner died before we could ask
  signal(SIGINT, SIG_IGN);           // Ctrl-C is for the owner, which stops the workers in order
  signal(SIGTERM, SIG_DFL);
  sigset_t chld, old_mask;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  sigprocmask(SIG_BLOCK, &chld, &old_mask);
  const int signal_fd = signalfd(-1, &chld, SFD_NONBLOCK | SFD_CLOEXEC);
  if (signal_fd < 0) _exit(1);
  const pid_t self = getpid();
  std::map<pid_t, int> status_fd_of;  // living workers

  auto reap = [&] {
    while (true) {
      siginfo_t info{};
      if (waitid(P_ALL, 0, &info, WEXITED | WNOHANG) != 0 || info.si_pid == 0) return;
      auto it = status_fd_of.find(info.si_pid);
      if (it == status_fd_of.end()) continue;
      SendStatus(it->second, {StatusKind::kExited, info.si_pid, info.si_code, info.si_status});
      close(it->second);
      status_fd_of.erase(it);
    }
  };

  while (true) {
    pollfd p[2] = {{control_fd, POLLIN, 0}, {signal_fd, POLLIN, 0}};
    if (poll(p, 2, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (p[1].revents & POLLIN) {
      signalfd_siginfo si;
      while (read(signal_fd, &si, sizeof si) == sizeof si) {
      }
      reap();
    }
    if (!(p[0].revents & (POLLIN | POLLHUP | POLLERR))) continue;
    SpawnRequest request{};
    int fds[kSpawnFds] = {-1, -1, -1, -1};
    const int got = RecvWithFds(control_fd, &request, sizeof request, fds);
    if (got < 0) break;  // the owner closed the socket (or died)
    if (got != kSpawnFds) {
      for (int i = 0; i < got; ++i) close(fds[i]);
      continue;
    }
    const int status_fd = fds[3];
    const pid_t pid = fork();
    if (pid == 0) {
      // The worker: keep only what it needs.
      close(control_fd);
      close(signal_fd);
      close(status_fd);
      for (const auto& [worker_pid, fd] : status_fd_of) close(fd);
      sigprocmask(SIG_SETMASK, &old_mask, nullptr);
      signal(SIGINT, SIG_DFL);  // RunWorkerProcess sets its own dispositions
      try {
        const SlotArena arena(fds[0], request.num_slots, request.slot_bytes);
        RunWorkerProcess(dataset, arena, request.worker, fds[1], fds[2], self);
      } catch (...) {
        _exit(kExitNoArena);
      }
    }
    const int fork_errno = errno;
    for (int i = 0; i < 3; ++i) close(fds[i]);
    if (pid < 0) {
      SendStatus(status_fd, {StatusKind::kForkFailed, 0, fork_errno, 0});
      close(status_fd);
      continue;
    }
    // The worker cannot have been reaped yet (only we reap it), so this pidfd
    // is surely the worker's.
    const int pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
    SendStatus(status_fd, {StatusKind::kStarted, pid, 0, 0}, pidfd);
    if (pidfd >= 0) close(pidfd);
    status_fd_of[pid] = status_fd;
  }

  // The owner is gone or done: no worker outlives the server.
  for (const auto& [pid, fd] : status_fd_of) kill(pid, SIGKILL);
  while (waitpid(-1, nullptr, 0) > 0 || errno == EINTR) {
  }
  _exit(0);
}

}  // namespace

std::string DescribeWorkerExit(const WorkerExit& exit) {
  if (exit.server_gone) return "ended with the fork server, which died";
  if (exit.code == CLD_EXITED) {
    if (exit.status == kExitNoArena) return "could not map the batch slots (exit code " + std::to_string(kExitNoArena) + ")";
    return "exited with code " + std::to_string(exit.status);
  }
  std::string text = "was killed by signal " + std::to_string(exit.status);
  if (const char* abbrev = sigabbrev_np(exit.status)) text += std::string(" (SIG") + abbrev + ")";
  if (exit.status == SIGBUS) text += "; shared memory may be exhausted: check the free space of /dev/shm";
  return text;
}

WorkerProcess::WorkerProcess(WorkerProcess&& other) noexcept
    : pid_(std::exchange(other.pid_, -1)),
      pidfd_(std::exchange(other.pidfd_, -1)),
      status_fd_(std::exchange(other.status_fd_, -1)),
      exit_(std::exchange(other.exit_, std::nullopt)) {}

WorkerProcess& WorkerProcess::operator=(WorkerProcess&& other) noexcept {
  if (this != &other) {
    Close();
    pid_ = std::exchange(other.pid_, -1);
    pidfd_ = std::exchange(other.pidfd_, -1);
    status_fd_ = std::exchange(other.status_fd_, -1);
    exit_ = std::exchange(other.exit_, std::nullopt);
  }
  return *this;
}

WorkerProcess::~WorkerProcess() { Close(); }

void WorkerProcess::Close() noexcept {
  if (pidfd_ >= 0) close(pidfd_);
  if (status_fd_ >= 0) close(status_fd_);
  pidfd_ = status_fd_ = -1;
}

std::optional<WorkerExit> WorkerProcess::WaitExit(int timeout_ms) {
  if (exit_ || status_fd_ < 0) return exit_;
  pollfd p{status_fd_, POLLIN, 0};
  int r;
  do {
    r = poll(&p, 1, timeout_ms);
  } while (r < 0 && errno == EINTR);
  if (r <= 0) return std::nullopt;
  StatusMessage message{};
  ssize_t n;
  do {
    n = recv(status_fd_, &message, sizeof message, 0);
  } while (n < 0 && errno == EINTR);
  if (n == sizeof message && message.kind == StatusKind::kExited) {
    exit_ = WorkerExit{message.code, message.status, false};
  } else {
    exit_ = WorkerExit{0, 0, true};  // EOF: the server died, and its workers with it
  }
  return exit_;
}

void WorkerProcess::Kill() {
  if (exit_ || pid_ <= 0) return;
  if (pidfd_ >= 0) {
    syscall(SYS_pidfd_send_signal, pidfd_, SIGKILL, nullptr, 0);
  } else {
    kill(pid_, SIGKILL);  // kernels before 5.3 have no pidfd
  }
}

ForkServer::ForkServer(std::shared_ptr<const Dataset> dataset) : dataset_(std::move(dataset)) {
  if (!dataset_) throw std::invalid_argument("ForkServer: no dataset");
  int control[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, control) != 0) {
    throw std::system_error(errno, std::generic_category(), "socket for the fork server");
  }
  const pid_t owner = getpid();
  pid_ = fork();
  if (pid_ == 0) {
    close(control[0]);
    ServerMain(*dataset_, control[1], owner);
  }
  const int fork_errno = errno;
  close(control[1]);
  if (pid_ < 0) {
    close(control[0]);
    throw std::system_error(fork_errno, std::generic_category(), "fork of the worker fork server");
  }
  control_fd_ = control[0];
}

ForkServer::~ForkServer() {
  close(control_fd_);  // the server sees EOF, ends its workers, and exits
  const auto deadline = std::chrono::steady_clock::now() + kServerExitGrace;
  while (waitpid(pid_, nullptr, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
      return;
    }
    usleep(1000);
  }
}

WorkerProcess ForkServer::Spawn(int worker, const SlotArena& arena, int task_fd, int report_fd) {
  const std::string who = "cannot start worker " + std::to_string(worker) + ": ";
  const std::string gone = who + "the fork server (pid " + std::to_string(pid_) + ") is gone";
  int status[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, status) != 0) {
    throw LoaderError(who + "socket: " + std::strerror(errno));
  }
  std::lock_guard lock(mu_);
  const SpawnRequest request{worker, arena.num_slots(), arena.slot_bytes()};
  const int fds[kSpawnFds] = {arena.fd(), task_fd, report_fd, status[1]};
  const bool sent = SendWithFds(control_fd_, &request, sizeof request, fds);
  close(status[1]);
  if (!sent) {
    close(status[0]);
    throw LoaderError(gone);
  }
  pollfd p{status[0], POLLIN, 0};
  int r;
  do {
    r = poll(&p, 1, kSpawnReplyTimeoutMs);
  } while (r < 0 && errno == EINTR);
  StatusMessage reply{};
  int pidfd = -1;
  const int got = r > 0 ? RecvWithFds(status[0], &reply, sizeof reply, std::span<int>(&pidfd, 1)) : -1;
  if (got < 0 || reply.kind != StatusKind::kStarted) {
    close(status[0]);
    if (got >= 0 && reply.kind == StatusKind::kForkFailed) {
      throw LoaderError(who + "fork failed: " + std::strerror(reply.code));
    }
    throw LoaderError(r == 0 ? who + "the fork server (pid " + std::to_string(pid_) + ") did not answer" : gone);
  }
  return WorkerProcess(reply.pid, got == 1 ? pidfd : -1, status[0]);
}

}  // namespace feedtune::loader
