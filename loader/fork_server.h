// ForkServer: starts process-mode workers from a small process forked before
// the caller has any thread (docs/architecture.md), as Python's multiprocessing
// forkserver does.
//
// Why: a process with threads (the pin stage, the CUDA runtime's own threads)
// cannot fork safely: the child gets a copy of every lock as it was, held or
// not, and none of the threads that would release them. So the CLI starts the
// fork server right after it has built the dataset and before it creates the
// device; every worker of every trial is then a fork of that single-threaded
// server, which already holds the dataset. A DataLoader given no server makes
// its own when it is constructed (before its pin thread exists).
//
// Shape:
// - The server is a child of this process that dies with it (PR_SET_PDEATHSIG)
//   or when this process closes its control socket. Its workers are its
//   children and die with it.
// - A spawn request carries the slot arena's memfd, the worker's task socket
//   and the report pipe (SCM_RIGHTS); the server forks the worker, which maps
//   the arena and runs the worker loop.
// - The server reaps its workers and tells this process how each ended on that
//   worker's status socket, so a dead worker is reported with its exit code or
//   signal just as waitid() in the parent would, and never stays a zombie.
//   A pidfd, made by the server while the worker could not yet have been
//   reaped, lets this process kill a hung worker without a pid-reuse race.
//
// Thread-safe: Spawn may be called from any thread.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "loader/dataset.h"
#include "loader/slot_arena.h"

namespace feedtune::loader {

// How a worker process ended, as waitid() reports it.
struct WorkerExit {
  int code = 0;    // CLD_EXITED, CLD_KILLED or CLD_DUMPED
  int status = 0;  // exit code, or signal number
  bool server_gone = false;  // the fork server died first, taking the worker with it
};

// "exited with code 3", "was killed by signal 11 (SIGSEGV)"; for SIGBUS, a hint
// about /dev/shm.
std::string DescribeWorkerExit(const WorkerExit& exit);

// A worker started by the server; closes its descriptors when destroyed.
class WorkerProcess {
 public:
  WorkerProcess() = default;
  WorkerProcess(pid_t pid, int pidfd, int status_fd) : pid_(pid), pidfd_(pidfd), status_fd_(status_fd) {}
  WorkerProcess(WorkerProcess&& other) noexcept;
  WorkerProcess& operator=(WorkerProcess&& other) noexcept;
  ~WorkerProcess();

  pid_t pid() const { return pid_; }
  // How the worker ended, once it has: waits up to `timeout_ms` (0: just looks,
  // -1: forever). When the server itself is gone, the worker went with it
  // (server_gone).
  std::optional<WorkerExit> WaitExit(int timeout_ms);
  void Kill();  // SIGKILL, through the pidfd

 private:
  void Close() noexcept;

  pid_t pid_ = -1;
  int pidfd_ = -1;
  int status_fd_ = -1;
  std::optional<WorkerExit> exit_;
};

class ForkServer {
 public:
  // Forks the server now; call it while this process has one thread. The
  // server keeps `dataset` (the one every worker it starts will read).
  // Throws std::system_error when it cannot start.
  explicit ForkServer(std::shared_ptr<const Dataset> dataset);
  ForkServer(const ForkServer&) = delete;
  ForkServer& operator=(const ForkServer&) = delete;
  // Ends the server and any worker still running; waits for the server.
  ~ForkServer();

  const std::shared_ptr<const Dataset>& dataset() const { return dataset_; }
  pid_t pid() const { return pid_; }

  // Starts worker `worker` on `arena`, reading tasks from `task_fd` and writing
  // reports to `report_fd` (both stay open here: the caller closes its copies).
  // Throws LoaderError when the server cannot fork or is gone.
  WorkerProcess Spawn(int worker, const SlotArena& arena, int task_fd, int report_fd);

 private:
  std::shared_ptr<const Dataset> dataset_;
  std::mutex mu_;  // one request and its reply at a time
  int control_fd_ = -1;
  pid_t pid_ = -1;
};

}  // namespace feedtune::loader
