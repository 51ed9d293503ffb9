// SleepUntil: waits for a steady_clock deadline without oversleeping it, for the
// host-sim device's modelled waits (copies, Synchronize), which are often a few
// microseconds long and must cost the host no more than their modelled time.
//
// A plain sleep is no good for that: nanosleep wakes 25-100 us late on a VM
// (the thread's timer slack, 50 us by default, plus wake-up latency), so a 2 us
// modelled copy would cost ~75 us. SleepUntil sleeps only to kSpinMargin before
// the deadline, with the calling thread's timer slack lowered for that one
// sleep, and spins on steady_clock for the rest. A deadline that is already
// past, or nearer than the margin, costs no syscall at all. The spin burns at
// most about kSpinMargin of CPU per wait; a CUDA host thread spins in
// cudaStreamSynchronize as well (cudaDeviceScheduleAuto), so this is also the
// more faithful model of a training loop's host thread.
//
// Stateless; any thread may call it. The timer slack is the calling thread's
// own and is restored before the spin, so the thread's other sleeps (e.g. a
// dataset's modelled storage latency at num_workers=0) keep the default slack,
// as they would in Python.
#pragma once

#include <chrono>

namespace feedtune::device {

// How far before the deadline the sleep ends and the spin begins: above the
// usual wake-up latency of a loaded VM with 1 ns slack (p90 ~40-70 us on the
// 2-core dev box), so the sleep rarely ends past the deadline.
inline constexpr std::chrono::microseconds kSpinMargin{100};

// Returns at `deadline` or, when the scheduler runs the thread late, soon after.
void SleepUntil(std::chrono::steady_clock::time_point deadline);

}  // namespace feedtune::device
