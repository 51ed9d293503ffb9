#include "tuner/measure/node_measurer.h"

#include <poll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <csignal>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <sstream>
#include <system_error>
#include <thread>

#include "tuner/measure/cpu_affinity.h"
#include "tuner/measure/line_socket.h"
#include "tuner/measure/measurer_factory.h"
#include "tuner/measure/rank_aggregate.h"
#include "tuner/measure/rank_facts.h"
#include "tuner/measure/rank_wire.h"

namespace feedtune::tuner::node {

using line_socket::ReadSome;
using line_socket::SendLine;
using line_socket::TakeLine;
using results::TrialStatus;
namespace {

std::string ExitCause(int status) {
  if (WIFSIGNALED(status)) {
    const char* name = sigabbrev_np(WTERMSIG(status));
    return std::string("killed by SIG") + (name != nullptr ? name : std::to_string(WTERMSIG(status)));
  }
  return "exited with code " + std::to_string(WEXITSTATUS(status));
}

}  // namespace

namespace {

// Rank r sees one GPU: the r-th of CUDA_VISIBLE_DEVICES, else GPU r.
void SelectGpu(int rank) {
  std::string chosen = std::to_string(rank);
  if (const char* visible = std::getenv("CUDA_VISIBLE_DEVICES"); visible != nullptr && *visible != '\0') {
    std::stringstream list(visible);
    int i = 0;
    for (std::string item; std::getline(list, item, ','); ++i) {
      if (i == rank) chosen = item;
    }
  }
  setenv("CUDA_VISIBLE_DEVICES", chosen.c_str(), 1);
}

// A rank's side of the barrier, and what it reads of its own tree.
class BarrierSync final : public RankSync {
 public:
  BarrierSync(RankBarrier& barrier, bool every_step, const std::atomic<bool>* stop)
      : barrier_(barrier), every_step_(every_step), stop_(stop) {}

  void WindowStart() override { barrier_.Arrive(false, stop_); }
  bool AfterStep(bool my_done) override { return every_step_ ? barrier_.Arrive(my_done, stop_) : my_done; }
  void WindowEnd() override {
    TreeFacts f = ReadTreeFacts(getpid());
    // The fullest moment: all workers up (they may stop at an epoch's end).
    if (f.processes >= facts_.processes) facts_ = std::move(f);
  }

  void Reset() { facts_ = TreeFacts{}; }
  const TreeFacts& facts() const { return facts_; }

 private:
  RankBarrier& barrier_;
  const bool every_step_;
  const std::atomic<bool>* const stop_;
  TreeFacts facts_;
};

// The rank process: opens its workload and device, then measures each trial
// the tuner asks for until told to quit. Never returns.
// A rank's stop flag, raised by its own SIGINT/SIGTERM handler. The one
// mutable global here: a signal handler can reach nothing else.
std::atomic<bool> rank_stop{false};

void OnRankSignal(int) { rank_stop.store(true); }

[[noreturn]] void RankMain(int rank, int world_size, SweepConfig config, int fd, RankBarrier& barrier,
                           const RankConfigFn& adjust, const std::vector<int>& usable_cpus,
                           const std::vector<int>& gpu_nodes) {
  std::string buffer, line;
  const std::atomic<bool>* stop = &rank_stop;
  struct sigaction action {};
  action.sa_handler = OnRankSignal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
  try {
    config.sweep.ranks = 1;
    config.loader.rank = rank;
    config.loader.world_size = world_size;
    if (adjust) adjust(rank, config);
    if (config.device.backend != device::BackendChoice::kHostSim) SelectGpu(rank);
    const OpenedWorkload workload = OpenWorkload(config);
    const pid_t fork_server = workload.fork_server ? workload.fork_server->pid() : -1;
    std::string note;
    const std::unique_ptr<device::Device> device = device::CreateDevice(config.device, &note);
    TrialRunner runner(config, *device, workload.dataset, stop, workload.fork_server);
    BarrierSync sync(barrier, config.device.rank_barrier, stop);
    runner.set_rank_sync(&sync);
    // The tuner's tree holds every rank: the other ranks are the trial's own CPU.
    runner.set_background_tree_root(getppid());
    SendLine(fd, nlohmann::json{{"ready", true},
                                {"backend", device->backend_name()},
                                {"device", device->description()},
                                {"workload", workload.description}}
                     .dump());
    while (true) {
      while (!TakeLine(buffer, &line)) {
        if (!ReadSome(fd, buffer)) _exit(0);  // the tuner is gone
      }
      if (line == "quit") _exit(0);
      loader::Knobs knobs;
      TrialPlan plan;
      ParseRequest(line, &knobs, &plan);
      sync.Reset();
      results::TrialRecord trial;
      std::string binding_note;
      try {
        // Before the loader exists: the workers the fork server forks for
        // this trial inherit the mask.
        std::string bind_error;
        try {
          BindTrialCpus(BindingCpus(knobs.cpu_binding, usable_cpus, rank, world_size, gpu_nodes, &binding_note),
                        fork_server, knobs.cpu_binding);
        } catch (const std::exception& e) {
          bind_error = e.what();
        }
        if (bind_error.empty()) {
          trial = runner.MeasurePlanned(knobs, plan);
        } else {
          trial.knobs = knobs;
          trial.status = TrialStatus::kFailed;
          trial.error = bind_error;
        }
      } catch (const Interrupted&) {
        barrier.Break(rank);
        rank_stop.store(false);  // the tuner decides whether the sweep ends
        SendLine(fd, R"({"interrupted": true})");
        continue;
      }
      // Wakes the ranks waiting for this one (the first to break is the cause).
      if (trial.status != TrialStatus::kOk) barrier.Break(rank);
      results::RankRecord facts;
      facts.pid = getpid();
      facts.cpu_mask = sync.facts().cpu_mask.empty() ? CpuListOfProcess(getpid()) : sync.facts().cpu_mask;
      facts.worker_cpu_masks = sync.facts().worker_cpu_masks;
      facts.processes = sync.facts().processes;
      facts.threads = sync.facts().threads;
      facts.shm_bytes = sync.facts().shm_bytes;
      std::string warning = runner.last_warning();
      if (!binding_note.empty()) warning = binding_note + (warning.empty() ? "" : "; " + warning);
      if (!SendLine(fd, RecordLine(trial, facts, warning))) _exit(0);
    }
  } catch (const std::exception& e) {
    SendLine(fd, nlohmann::json{{"ready", false}, {"error", e.what()}}.dump());
  } catch (...) {
    SendLine(fd, R"({"ready": false, "error": "unknown error"})");
  }
  _exit(3);
}

}  // namespace

int ResolveRanks(const SweepConfig& config) {
  if (config.sweep.ranks > 0) return config.sweep.ranks;
  if (config.workload.kind == workloads::WorkloadKind::kCommand) return 1;
  if (config.device.backend == device::BackendChoice::kHostSim) return 1;
  return std::max(1, VisibleGpuCount());
}

RankSet::RankSet(const SweepConfig& config, int ranks, RankConfigFn adjust)
    : config_(config), barrier_(std::make_unique<RankBarrier>(ranks)) {
  const pid_t tuner = getpid();
  const std::vector<int> usable_cpus = AffinityCpus();
  const std::vector<int> gpu_nodes = GpuNumaNodes(config, ranks);
  for (int r = 0; r < ranks; ++r) {
    int fds[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
      throw std::system_error(errno, std::generic_category(), "socketpair for rank " + std::to_string(r));
    }
    const pid_t pid = fork();
    if (pid < 0) {
      close(fds[0]);
      close(fds[1]);
      throw std::system_error(errno, std::generic_category(), "fork of rank " + std::to_string(r));
    }
    if (pid == 0) {
      // The rank dies with the tuner; it keeps no end of another rank's socket,
      // so a rank's death is seen as its own socket's end.
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != tuner) _exit(3);
      close(fds[0]);
      for (const Rank& other : ranks_) close(other.fd);
      RankMain(r, ranks, config, fds[1], *barrier_, adjust, usable_cpus, gpu_nodes);
    }
    close(fds[1]);
    Rank rank;
    rank.index = r;
    rank.pid = pid;
    rank.fd = fds[0];
    ranks_.push_back(std::move(rank));
  }
}

RankSet::~RankSet() {
  for (Rank& r : ranks_) {
    if (!r.exited) SendLine(r.fd, "quit");
    close(r.fd);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  for (Rank& r : ranks_) {
    while (!r.exited && std::chrono::steady_clock::now() < deadline) {
      Reap(r, false);
      if (!r.exited) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    if (!r.exited) {
      kill(r.pid, SIGKILL);
      Reap(r, true);
    }
  }
}

std::vector<pid_t> RankSet::pids() const {
  std::vector<pid_t> out;
  for (const Rank& r : ranks_) out.push_back(r.pid);
  return out;
}

void RankSet::Reap(Rank& rank, bool block) {
  if (rank.exited) return;
  int status = 0;
  pid_t got;
  do {
    got = waitpid(rank.pid, &status, block ? 0 : WNOHANG);
  } while (got < 0 && errno == EINTR);
  if (got == rank.pid) {
    rank.exited = true;
    rank.exit_cause = ExitCause(status);
  } else if (got < 0) {
    rank.exited = true;
    rank.exit_cause = "gone (" + std::string(std::strerror(errno)) + ")";
  }
}

void RankSet::ReadLines(std::vector<std::string>* lines) {
  lines->assign(ranks_.size(), std::string());
  std::vector<size_t> pending;
  for (size_t i = 0; i < ranks_.size(); ++i) {
    if (!ranks_[i].exited) pending.push_back(i);
  }
  while (!pending.empty()) {
    std::vector<pollfd> fds;
    for (size_t i : pending) fds.push_back({ranks_[i].fd, POLLIN, 0});
    poll(fds.data(), fds.size(), 50);
    std::vector<size_t> still;
    for (size_t k = 0; k < pending.size(); ++k) {
      Rank& rank = ranks_[pending[k]];
      bool open = true;
      if ((fds[k].revents & (POLLIN | POLLHUP | POLLERR)) != 0) open = ReadSome(rank.fd, rank.buffer);
      if (TakeLine(rank.buffer, &(*lines)[pending[k]])) continue;
      Reap(rank, /*block=*/!open);
      if (rank.exited) {
        // Every rank waiting at the barrier for this one wakes and fails.
        barrier_->Break(-1);
        continue;
      }
      still.push_back(pending[k]);
    }
    // Interrupted: the ranks got the signal too; a broken barrier ends their waits.
    if (stop_ != nullptr && stop_->load(std::memory_order_relaxed) && !barrier_->broken()) barrier_->Break(-1);
    pending = std::move(still);
  }
}

void RankSet::WaitReady() {
  if (ready_) return;
  if (!down_.empty()) throw std::runtime_error(down_);
  std::vector<std::string> lines;
  ReadLines(&lines);
  std::vector<std::string> described;
  for (size_t i = 0; i < ranks_.size(); ++i) {
    const Rank& r = ranks_[i];
    const auto j = nlohmann::json::parse(lines[i], nullptr, /*allow_exceptions=*/false);
    std::string error;
    if (r.exited && lines[i].empty()) {
      error = "rank " + std::to_string(i) + " (pid " + std::to_string(r.pid) + ") " + r.exit_cause +
              " while opening its workload";
    } else if (!j.is_object() || !j.value("ready", false)) {
      error = "rank " + std::to_string(i) + " could not start: " +
              (j.is_object() ? j.value("error", std::string("no reason given")) : lines[i]);
    }
    if (!error.empty()) {
      down_ = error;
      throw std::runtime_error(error);
    }
    if (i == 0) {
      description_ = std::to_string(ranks_.size()) + " ranks, each " + j.value("workload", std::string()) +
                     " on its own " + j.value("device", std::string());
    }
  }
  ready_ = true;
}

results::TrialRecord RankSet::Measure(const loader::Knobs& knobs, const TrialPlan& plan) {
  results::TrialRecord failed;
  failed.knobs = knobs;
  failed.status = TrialStatus::kFailed;
  last_warning_.clear();
  try {
    WaitReady();
  } catch (const std::exception& e) {
    failed.error = e.what();
    return failed;
  }
  if (!down_.empty()) {
    failed.error = down_;
    return failed;
  }
  barrier_->Reset();
  const std::string request = RequestLine(knobs, plan);
  for (Rank& r : ranks_) SendLine(r.fd, request);  // a dead rank is found below
  std::vector<std::string> lines;
  ReadLines(&lines);

  std::vector<results::TrialRecord> trials(ranks_.size());
  std::vector<results::RankRecord> rows(ranks_.size());
  bool interrupted = stop_ != nullptr && stop_->load(std::memory_order_relaxed);
  std::string dead, first_error;
  for (size_t i = 0; i < ranks_.size(); ++i) {
    const Rank& r = ranks_[i];
    if (lines[i].empty()) {
      if (dead.empty()) {
        dead = "rank " + std::to_string(i) + " (pid " + std::to_string(r.pid) + ") died during the trial: " +
               r.exit_cause;
      }
      continue;
    }
    const auto j = nlohmann::json::parse(lines[i], nullptr, /*allow_exceptions=*/false);
    if (j.is_object() && j.value("interrupted", false)) {
      interrupted = true;
      continue;
    }
    try {
      ParseRecord(lines[i], &trials[i], &rows[i]);
    } catch (const std::exception& e) {
      trials[i].status = TrialStatus::kFailed;
      trials[i].error = e.what();
    }
    rows[i].rank = static_cast<int>(i);
    if (j.is_object() && j.contains("warning") && last_warning_.empty()) {
      last_warning_ = "rank " + std::to_string(i) + ": " + j["warning"].get<std::string>();
    }
    if (trials[i].status != TrialStatus::kOk && first_error.empty()) {
      first_error = "rank " + std::to_string(i) + ": " + trials[i].error.value_or("failed");
    }
  }
  if (interrupted) throw Interrupted();
  if (!dead.empty()) {
    down_ = dead + "; the node's later trials cannot run (start the sweep again)";
    failed.error = down_;
    return failed;
  }
  // The root cause: the rank that broke the barrier, not those it woke.
  const int by = barrier_->broken_by();
  if (barrier_->broken() && by >= 0 && static_cast<size_t>(by) < trials.size() &&
      trials[by].status != TrialStatus::kOk) {
    failed.error = "rank " + std::to_string(by) + ": " + trials[by].error.value_or("failed");
    return failed;
  }
  if (!first_error.empty()) {
    failed.error = first_error;
    return failed;
  }
  results::TrialRecord node = AggregateRanks(knobs, trials, std::move(rows));
  node.node->processes += 1;  // the tuner itself
  node.node->threads += OwnThreads();
  return node;
}

}  // namespace feedtune::tuner::node
