"""Model steps for bench/regret's real-step profiles (loaded by the probe with
--step regret_steps:FN --pythonpath bench).

half_cpu_step: an 8 ms step of which 4 ms is CPU in the main process and 4 ms
is waiting, the shape of a GPU step seen from the host (the launches and the
sync's spin take a core; the kernels do not). The CPU half is counted in this
thread's CPU time, not wall time, so a busy box stretches the step as it would
stretch a real one instead of shrinking its CPU share.
"""

import time

STEP_CPU_S = 0.004
STEP_WAIT_S = 0.004


def half_cpu_step(batch):
    end = time.thread_time() + STEP_CPU_S
    spins = 0
    while time.thread_time() < end:
        spins += 1
    time.sleep(STEP_WAIT_S)
    return spins
