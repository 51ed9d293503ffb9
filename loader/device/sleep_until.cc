#include "loader/device/sleep_until.h"

#include <thread>

#ifdef __linux__
#include <sys/prctl.h>
#endif

namespace feedtune::device {
namespace {

using Clock = std::chrono::steady_clock;

// A hint to the core that this is a spin-wait (frees the SMT sibling, saves
// power); it is not a yield to the scheduler, which would give the core away
// for a time slice and oversleep exactly as nanosleep does.
inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

// Lowers the calling thread's timer slack for its lifetime, then restores it.
class ScopedLowTimerSlack {
 public:
  ScopedLowTimerSlack() {
#ifdef __linux__
    const int previous = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
    if (previous > 1 && prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0) == 0) previous_ = previous;
#endif
  }
  ~ScopedLowTimerSlack() {
#ifdef __linux__
    if (previous_ > 0) prctl(PR_SET_TIMERSLACK, static_cast<unsigned long>(previous_), 0, 0, 0);
#endif
  }
  ScopedLowTimerSlack(const ScopedLowTimerSlack&) = delete;
  ScopedLowTimerSlack& operator=(const ScopedLowTimerSlack&) = delete;

 private:
  int previous_ = 0;  // 0: nothing to restore
};

}  // namespace

void SleepUntil(Clock::time_point deadline) {
  const Clock::time_point now = Clock::now();
  if (now >= deadline) return;
  if (deadline - now > kSpinMargin) {
    ScopedLowTimerSlack slack;
    std::this_thread::sleep_until(deadline - kSpinMargin);
  }
  while (Clock::now() < deadline) CpuRelax();
}

}  // namespace feedtune::device
