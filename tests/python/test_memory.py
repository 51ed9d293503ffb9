"""feedtune.memory: the workers' memory sampler of the command workload (as
tuner/measure/worker_memory.h samples a native trial): the least-squares
growth per epoch from scripted series, its weighting by span, a new worker
process as a new series, gone and reused pids, when a sample is due, and
this process's private RSS read for real.

    PYTHONPATH=python python3 -m unittest tests/python/test_memory.py
"""

import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir, "python"))

from feedtune import memory  # noqa: E402

MiB = float(1 << 20)


class Script:
    """A stand-in for /proc: each worker's RSS as a function of the epoch
    position the test sets, its start ticks, and clocks the reads advance."""

    def __init__(self):
        self.rss = {}  # pid -> f(x) or None (gone)
        self.ticks = {}  # pid -> start ticks
        self.x = 0.0
        self.now = 0.0
        self.cpu = 0.0
        self.read_cost = 0.0  # seconds each read takes, on the CPU
        self.read_wait = 0.0  # and preempted (wall time only)

    def read_rss(self, pid):
        self.now += self.read_cost + self.read_wait
        self.cpu += self.read_cost
        f = self.rss.get(pid)
        return None if f is None else f(self.x)

    def start_ticks(self, pid):
        return self.ticks.get(pid)

    def clock(self):
        return self.now

    def cpu_clock(self):
        return self.cpu

    def sampler(self):
        return memory.WorkerMemorySampler(clock=self.clock, read_rss=self.read_rss, start_ticks=self.start_ticks,
                                          cpu_clock=self.cpu_clock)

    def sample(self, sampler, workers, x):
        self.x = x
        sampler.sample(workers, x)


def least_squares(points):
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    return sum((x - mx) * (y - my) for x, y in points) / sum((x - mx) ** 2 for x, _ in points)


class GrowthTest(unittest.TestCase):
    def test_one_worker_growing_64_mib_per_epoch(self):
        s = Script()
        s.rss[101], s.ticks[101] = (lambda x: 100 * MiB + 64 * MiB * (x - 1)), 7
        sampler = s.sampler()
        for x in (1.0, 1.25, 1.5, 2.0, 2.75, 3.0):
            s.sample(sampler, [(101, 7)], x)
        f = sampler.figures()
        self.assertAlmostEqual(f["worker_rss_growth_bytes_per_epoch"], 64 * MiB, delta=1)
        self.assertEqual(f["worker_rss_start_bytes"], 100 * MiB)
        self.assertEqual(f["worker_rss_peak_bytes"], 228 * MiB)
        self.assertEqual(f["worker_rss_samples"], 6)
        self.assertEqual(f["worker_rss_epochs"], 2.0)
        self.assertEqual(sorted(f), sorted(memory.KEYS))

    def test_the_slope_rests_on_every_sample_not_the_ends(self):
        # A read caught after a trim (the last) moves a least-squares line
        # little; last minus first would say the worker shrinks.
        s = Script()
        ys = [10 * MiB, 20 * MiB, 30 * MiB, 40 * MiB, 5 * MiB]
        xs = [0.0, 0.5, 1.0, 1.5, 2.0]
        sampler = s.sampler()
        for x, y in zip(xs, ys):
            s.rss[5] = lambda _x, y=y: y
            s.ticks[5] = 1
            s.sample(sampler, [(5, 1)], x)
        f = sampler.figures()
        self.assertAlmostEqual(f["worker_rss_growth_bytes_per_epoch"], least_squares(list(zip(xs, ys))), delta=1)
        self.assertGreater(f["worker_rss_growth_bytes_per_epoch"], 0)
        self.assertEqual(f["worker_rss_peak_bytes"], 40 * MiB)

    def test_series_are_weighted_by_their_span(self):
        # Worker 1 grows 64 MiB/epoch over 2 epochs; worker 2, seen over half
        # an epoch (a cut-off last epoch), 256 MiB/epoch: it counts a fifth.
        s = Script()
        s.rss[1], s.ticks[1] = (lambda x: 10 * MiB + 64 * MiB * x), 11
        s.rss[2], s.ticks[2] = (lambda x: 30 * MiB + 256 * MiB * (x - 1.5)), 12
        sampler = s.sampler()
        for x in (0.0, 0.5, 1.0, 1.5, 2.0):
            workers = [(1, 11)] + ([(2, 12)] if x >= 1.5 else [])
            s.sample(sampler, workers, x)
        f = sampler.figures()
        self.assertAlmostEqual(f["worker_rss_growth_bytes_per_epoch"], (64 * MiB * 2 + 256 * MiB * 0.5) / 2.5,
                               delta=1)
        self.assertEqual(f["worker_rss_start_bytes"], (10 * MiB + 30 * MiB) / 2)
        self.assertEqual(f["worker_rss_samples"], 7)
        self.assertEqual(f["worker_rss_epochs"], 2.0)

    def test_each_worker_process_is_its_own_series(self):
        # Non-persistent workers: a new process each epoch, each holding 8 MiB
        # more over its epoch and starting afresh. Their growth is 8 MiB per
        # epoch, not the saw-tooth's line through all of them (about 0).
        s = Script()
        sampler = s.sampler()
        for epoch in range(3):
            pid = 200 + epoch
            s.rss[pid], s.ticks[pid] = (lambda x, e=epoch: 50 * MiB + 8 * MiB * (x - e)), 1000 + epoch
            for frac in (0.0, 0.5, 1.0):
                s.sample(sampler, [(pid, 1000 + epoch)], epoch + frac)
            s.rss[pid] = None  # it stops at the epoch's end
        f = sampler.figures()
        self.assertAlmostEqual(f["worker_rss_growth_bytes_per_epoch"], 8 * MiB, delta=1)
        self.assertEqual(f["worker_rss_samples"], 9)
        self.assertEqual(f["worker_rss_epochs"], 1.0)
        self.assertEqual(f["worker_rss_peak_bytes"], 58 * MiB)

    def test_a_reused_pid_is_a_new_series_and_a_stale_one_is_skipped(self):
        s = Script()
        sampler = s.sampler()
        s.rss[7], s.ticks[7] = (lambda x: 10 * MiB), 1
        s.sample(sampler, [(7, 1)], 0.0)
        s.sample(sampler, [(7, 1)], 1.0)
        # Pid 7 is now someone else's process (other start ticks): the slot
        # still names the old worker, so it is skipped ...
        s.rss[7], s.ticks[7] = (lambda x: 900 * MiB), 2
        s.sample(sampler, [(7, 1)], 1.5)
        # ... and a new worker with that pid starts its own series.
        s.sample(sampler, [(7, 2)], 2.0)
        f = sampler.figures()
        self.assertEqual(f["worker_rss_samples"], 3)
        # The first series is flat; the new one has one sample, so no slope.
        self.assertEqual(f["worker_rss_growth_bytes_per_epoch"], 0.0)
        self.assertEqual(f["worker_rss_epochs"], 1.0)
        self.assertEqual(f["worker_rss_peak_bytes"], 900 * MiB)
        self.assertEqual(f["worker_rss_start_bytes"], (10 * MiB + 900 * MiB) / 2)

    def test_nothing_measured_is_left_out(self):
        s = Script()
        sampler = s.sampler()
        self.assertEqual(sampler.figures(), {})
        s.sample(sampler, [(9, 1)], 0.5)  # a worker gone before its read
        self.assertEqual(sampler.figures(), {})
        s.rss[9], s.ticks[9] = (lambda x: 4 * MiB), 1
        s.sample(sampler, [(9, 1)], 0.75)
        f = sampler.figures()  # one sample: no slope, so no growth
        self.assertNotIn("worker_rss_growth_bytes_per_epoch", f)
        self.assertEqual(f["worker_rss_samples"], 1)
        self.assertEqual(f["worker_rss_epochs"], 0.0)

    def test_no_workers_samples_this_process(self):
        s = Script()
        s.rss[0] = lambda x: 1 * MiB + 2 * MiB * x  # pid 0: /proc/self
        sampler = s.sampler()
        for x in (0.0, 1.0):
            s.sample(sampler, None, x)
        self.assertAlmostEqual(sampler.figures()["worker_rss_growth_bytes_per_epoch"], 2 * MiB, delta=1)


class DueTest(unittest.TestCase):
    def test_interval_and_epoch_edges_within_their_share(self):
        s = Script()
        s.rss[0] = lambda x: MiB
        sampler = s.sampler()
        self.assertTrue(sampler.due(False))  # nothing sampled yet
        s.sample(sampler, None, 0.0)
        s.now = 0.05
        self.assertFalse(sampler.due(False))
        self.assertTrue(sampler.due(True))  # an epoch's edge, sampling has cost nothing
        s.now = 0.1
        self.assertTrue(sampler.due(False))  # the interval passed
        # Samples that cost 3 ms each: past the 5 ms allowance and 1% of the
        # time, the epoch edges wait for the interval.
        s.read_cost = 0.003
        for _ in range(3):
            sampler.sample(None, 0.5)
        s.now += 0.01
        self.assertGreater(sampler.spent, memory.WorkerMemorySampler.ALLOWANCE_S)
        self.assertFalse(sampler.due(True))
        s.now, s.read_cost = 1.0, 0.0
        sampler.sample(None, 0.75)  # a sample that costs nothing, a second after the first
        s.now += 0.01
        self.assertFalse(sampler.due(False))
        self.assertTrue(sampler.due(True))  # 9 ms is under 1% of the 1.01 s since the first sample

    def test_a_preempted_read_is_not_the_samplers_cost(self):
        # On a loaded box a /proc read can wait for the CPU for milliseconds
        # (the ProbeWorkerMemory CI failure of 2026-12-03: 4 samples of 6).
        # That wait is the box's; only the sampler's CPU time counts, so the
        # epoch edges of a short trial are still sampled.
        s = Script()
        s.rss[0] = lambda x: MiB
        sampler = s.sampler()
        s.read_cost, s.read_wait = 0.0001, 0.004
        for x in (0.0, 0.25, 0.5, 0.75, 1.0):
            s.sample(sampler, None, x)
            s.now += 0.001
            self.assertTrue(sampler.due(True))
        self.assertAlmostEqual(sampler.spent, 0.0005)


class ProcTest(unittest.TestCase):
    def test_this_process_grows_by_what_it_writes(self):
        sampler = memory.WorkerMemorySampler()
        kept = []
        for epoch in range(3):
            if epoch:
                kept.append(bytearray(b"\x01") * (32 << 20))  # written, so resident
            sampler.sample(None, float(epoch))
        f = sampler.figures()
        self.assertEqual(f["worker_rss_samples"], 3)
        self.assertGreaterEqual(f["worker_rss_growth_bytes_per_epoch"], 31 * MiB)
        self.assertLessEqual(f["worker_rss_growth_bytes_per_epoch"], 36 * MiB)
        self.assertGreaterEqual(f["worker_rss_peak_bytes"] - f["worker_rss_start_bytes"], 62 * MiB)

    def test_private_rss_and_start_ticks(self):
        self.assertGreater(memory.read_private_rss(0), 0)
        self.assertGreater(memory.read_private_rss(os.getpid()), 0)
        self.assertIsNone(memory.read_private_rss(2 ** 22 + 12345))  # above pid_max's default: no such process
        self.assertGreater(memory.process_start_ticks(os.getpid()), 0)
        self.assertIsNone(memory.process_start_ticks(2 ** 22 + 12345))


if __name__ == "__main__":
    unittest.main()
