// RankBarrier: where the rank processes of a node trial meet (tuner/measure/node_measurer.h).
//
// It lives in one anonymous MAP_SHARED mapping made before the ranks fork, so
// the tuner and every rank see the same words; waiting is a futex on the
// generation word (no thread, no lock that a dead rank could leave held).
// Each arrival carries a vote ("my window is over"); every party leaves a
// generation with the same answer (any vote), so ranks that step in lockstep
// also end their windows on the same step, and none waits for a rank that has
// already stopped stepping.
//
// A rank that fails, or the tuner when it finds a rank dead, Break()s the
// barrier: every waiter wakes and Arrive throws BarrierBroken naming the rank
// that broke it. The tuner Reset()s it before the next trial, when no rank is
// inside. Safe from any thread of any process that shares the mapping.
#pragma once

#include <atomic>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace feedtune::tuner::node {

class BarrierBroken : public std::runtime_error {
 public:
  BarrierBroken(int rank, const std::string& what) : std::runtime_error(what), rank_(rank) {}
  int rank() const { return rank_; }  // the rank that broke it; -1 = the tuner (a rank died)

 private:
  int rank_;
};

class RankBarrier {
 public:
  // Maps the shared words. Throws std::system_error when mmap fails.
  explicit RankBarrier(int parties);
  RankBarrier(const RankBarrier&) = delete;
  RankBarrier& operator=(const RankBarrier&) = delete;
  ~RankBarrier();

  int parties() const { return parties_; }

  // Waits until every party has arrived in this generation; returns whether
  // any of them voted `done`. Throws BarrierBroken when the barrier is (or
  // becomes) broken, and Interrupted (trial_runner.h) when `stop` is raised
  // while waiting (polled every 50 ms).
  bool Arrive(bool vote_done, const std::atomic<bool>* stop = nullptr);

  // Wakes every waiter with BarrierBroken; `rank` is who broke it (-1 = the tuner).
  void Break(int rank);
  bool broken() const;
  int broken_by() const;

  // Back to a fresh barrier. Only while no party is inside Arrive.
  void Reset();

 private:
  struct Shared;
  const int parties_;
  Shared* shared_ = nullptr;
};

}  // namespace feedtune::tuner::node
