#include "tuner/measure/rank_barrier.h"

#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdint>
#include <ctime>
#include <new>
#include <system_error>

#include "tuner/measure/trial_runner.h"

namespace feedtune::tuner::node {

namespace {
constexpr int32_t kNotBroken = INT32_MIN;
}  // namespace

// Lock-free 32-bit atomics are plain words in memory, so they work across
// processes in a MAP_SHARED mapping, and the futex can wait on one.
struct RankBarrier::Shared {
  std::atomic<uint32_t> generation{0};
  std::atomic<uint32_t> arrived{0};
  std::atomic<uint32_t> votes[2] = {0, 0};   // per generation parity: any vote done
  std::atomic<uint32_t> results[2] = {0, 0}; // the answer of a finished generation
  std::atomic<int32_t> broken_by{kNotBroken};  // who broke it, or kNotBroken
};
static_assert(std::atomic<uint32_t>::is_always_lock_free);

namespace {

uint32_t* Word(std::atomic<uint32_t>& a) { return reinterpret_cast<uint32_t*>(&a); }

// Not FUTEX_PRIVATE: the word is shared between processes.
void FutexWait(std::atomic<uint32_t>& word, uint32_t expected, long timeout_ns) {
  timespec timeout{0, timeout_ns};
  syscall(SYS_futex, Word(word), FUTEX_WAIT, expected, &timeout, nullptr, 0);
}

void FutexWakeAll(std::atomic<uint32_t>& word) {
  syscall(SYS_futex, Word(word), FUTEX_WAKE, INT32_MAX, nullptr, nullptr, 0);
}

[[noreturn]] void ThrowBroken(int by) {
  throw BarrierBroken(by, by < 0 ? std::string("the node barrier was broken: a rank process died")
                                 : "the node barrier was broken by rank " + std::to_string(by) +
                                       " (its trial failed)");
}

}  // namespace

RankBarrier::RankBarrier(int parties) : parties_(parties) {
  if (parties < 1) throw std::invalid_argument("RankBarrier: parties must be >= 1");
  void* p = mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::system_error(errno, std::generic_category(), "mmap of the node barrier");
  shared_ = new (p) Shared();
}

RankBarrier::~RankBarrier() {
  if (shared_ != nullptr) munmap(shared_, sizeof(Shared));
}

bool RankBarrier::Arrive(bool vote_done, const std::atomic<bool>* stop) {
  Shared& s = *shared_;
  if (const int32_t by = s.broken_by.load(); by != kNotBroken) ThrowBroken(by);
  const uint32_t gen = s.generation.load();
  if (vote_done) s.votes[gen & 1].store(1);
  if (s.arrived.fetch_add(1) + 1 == static_cast<uint32_t>(parties_)) {
    // The last to arrive closes the generation: publish the answer, clear the
    // next generation's votes (nobody can vote there before the increment).
    s.results[gen & 1].store(s.votes[gen & 1].load());
    s.votes[(gen + 1) & 1].store(0);
    s.arrived.store(0);
    s.generation.fetch_add(1);
    FutexWakeAll(s.generation);
    return s.results[gen & 1].load() != 0;
  }
  while (s.generation.load() == gen) {
    if (const int32_t by = s.broken_by.load(); by != kNotBroken) ThrowBroken(by);
    if (stop != nullptr && stop->load(std::memory_order_relaxed)) throw Interrupted();
    FutexWait(s.generation, gen, 50'000'000);
  }
  if (const int32_t by = s.broken_by.load(); by != kNotBroken) ThrowBroken(by);
  return s.results[gen & 1].load() != 0;
}

void RankBarrier::Break(int rank) {
  Shared& s = *shared_;
  int32_t none = kNotBroken;
  s.broken_by.compare_exchange_strong(none, rank);  // the first to break it is the cause
  s.generation.fetch_add(1);
  FutexWakeAll(s.generation);
}

bool RankBarrier::broken() const { return shared_->broken_by.load() != kNotBroken; }
int RankBarrier::broken_by() const { return shared_->broken_by.load(); }

void RankBarrier::Reset() {
  Shared& s = *shared_;
  s.arrived.store(0);
  s.votes[0].store(0);
  s.votes[1].store(0);
  s.broken_by.store(kNotBroken);
}

}  // namespace feedtune::tuner::node
