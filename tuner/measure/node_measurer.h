// NodeMeasurer: a node trial (sweep.ranks > 1). Every trial runs N loaders at
// once, one per rank process, as data-parallel training runs one DataLoader
// per GPU; the trial's samples/s is the node's aggregate (rank_aggregate.h).
//
// The rank processes are forked once, at construction, while the tuner has
// one thread and no device (docs/architecture.md: like the fork server). Each opens
// its own dataset, fork server and device (rank r: GPU r on CUDA, by
// CUDA_VISIBLE_DEVICES; its own host-sim device otherwise) and reads its
// DistributedSampler share (loader/sampler.h). The knobs are per rank.
//
// The binding is per trial (Knobs::cpu_binding): before each trial a rank
// binds its own threads and its fork server to the trial's CPUs, so the
// workers the fork server forks for the trial inherit them; a `none` trial
// gives them back the mask the tuner had when it forked the ranks. Which
// CPUs each binding gives a rank is tuner/measure/cpu_affinity.h's.
//
// The ranks meet at a RankBarrier at each window's start and, with
// device.rank_barrier, after every step (DDP's all-reduce), so a slow rank
// sets the node's pace. A rank that dies (killed, crashed) is found by
// waitpid while the tuner waits: the barrier breaks, no rank hangs, and the
// trial fails naming the rank, its pid and the cause; the node is then down
// and the later trials fail with the same reason.
//
// One thread uses a NodeMeasurer. The destructor ends the ranks.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tuner/config/config.h"
#include "tuner/measure/rank_barrier.h"
#include "tuner/measure/trial_runner.h"

namespace feedtune::tuner::node {

// sweep.ranks resolved: the configured N, or with auto the CUDA devices this
// process may use (/proc/driver/nvidia/gpus, narrowed by CUDA_VISIBLE_DEVICES;
// read without starting CUDA), 1 on host-sim or without one. Command
// workloads: 1 unless set.
int ResolveRanks(const SweepConfig& config);

// Changes rank r's config before its workload opens (tests: a slower rank).
using RankConfigFn = std::function<void(int rank, SweepConfig& config)>;

class RankSet {
 public:
  // Forks `ranks` rank processes now. Call while this process has one thread
  // and no CUDA context. A rank stops its trial on SIGINT/SIGTERM itself (its
  // own handler), as Ctrl-C reaches the whole process group.
  RankSet(const SweepConfig& config, int ranks, RankConfigFn adjust = {});
  RankSet(const RankSet&) = delete;
  RankSet& operator=(const RankSet&) = delete;
  ~RankSet();

  int ranks() const { return static_cast<int>(ranks_.size()); }
  // The tuner's stop flag (may be null), polled while it waits for the ranks.
  void set_stop(const std::atomic<bool>* stop) { stop_ = stop; }
  std::vector<pid_t> pids() const;

  // Waits until every rank has opened its workload and device. Throws
  // std::runtime_error naming the rank and its error when one could not.
  void WaitReady();
  // One line: the ranks and what each opened.
  std::string description() const { return description_; }

  results::TrialRecord Measure(const loader::Knobs& knobs, const TrialPlan& plan);
  std::string last_warning() const { return last_warning_; }

 private:
  struct Rank {
    int index = 0;
    pid_t pid = -1;
    int fd = -1;           // the tuner's end of the rank's socketpair: requests out, records in
    std::string buffer;    // bytes read, not yet a line
    bool exited = false;
    std::string exit_cause;  // "killed by SIGKILL", "exited with code 3"
  };

  // Reads one line from each rank that has not exited, watching for ranks
  // that die meanwhile. Lines land in `lines` (one entry per rank); a dead
  // rank's entry stays empty.
  void ReadLines(std::vector<std::string>* lines);
  void Reap(Rank& rank, bool block);

  const SweepConfig config_;
  const std::atomic<bool>* stop_ = nullptr;
  std::unique_ptr<RankBarrier> barrier_;
  std::vector<Rank> ranks_;
  bool ready_ = false;
  std::string down_;  // why the node cannot run trials any more, or empty
  std::string description_;
  std::string last_warning_;
};

// The TrialMeasurer of a node: the search drives it like one loader's.
class NodeMeasurer final : public TrialMeasurer {
 public:
  explicit NodeMeasurer(std::shared_ptr<RankSet> ranks) : ranks_(std::move(ranks)) {}
  results::TrialRecord Measure(const loader::Knobs& knobs) override { return ranks_->Measure(knobs, {}); }
  results::TrialRecord MeasurePlanned(const loader::Knobs& knobs, const TrialPlan& plan) override {
    return ranks_->Measure(knobs, plan);
  }
  std::string last_warning() const override { return ranks_->last_warning(); }

 private:
  std::shared_ptr<RankSet> ranks_;
};

}  // namespace feedtune::tuner::node
