"""feedtune.measure: the user's step timing, on the CPU and (with a stand-in
for torch.cuda's events, as no GPU is here) on the CUDA path; the batch checks.

    PYTHONPATH=python python3 -m unittest discover -s tests/python
"""

import os
import sys
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir, "python"))

import torch  # noqa: E402

from feedtune import measure  # noqa: E402


class FakeEvent:
    """torch.cuda.Event's timing calls: record() takes a made-up device clock."""
    clock_ms = [0.0]
    synchronized = [0]

    def __init__(self, enable_timing=False):
        assert enable_timing
        self.at = None

    def record(self):
        self.at = FakeEvent.clock_ms[0]

    def elapsed_time(self, end):
        return end.at - self.at


class FakeCuda:
    Event = FakeEvent

    @staticmethod
    def synchronize():
        FakeEvent.synchronized[0] += 1


class FakeTorch:
    cuda = FakeCuda


class UserStepTest(unittest.TestCase):
    def test_cpu_step_wall_and_thread_cpu(self):
        def step(batch):
            time.sleep(0.01)
        s = measure.UserStep(torch, step, cuda=False)
        s.step(None, measuring=False)  # warm-up: not counted
        for _ in range(3):
            s.step(None, measuring=True)
        self.assertGreaterEqual(s.busy_s(), 0.03)
        extra = s.extra_report(3)
        self.assertEqual(sorted(extra), ["step_cpu_ms", "step_ms"])
        self.assertGreaterEqual(extra["step_ms"], 10.0)
        self.assertLess(extra["step_cpu_ms"], 5.0)  # a sleep takes no CPU
        s.reset()
        self.assertEqual(s.busy_s(), 0.0)
        self.assertEqual(s.extra_report(0), {})

    def test_cuda_busy_time_is_between_the_events_around_the_step(self):
        def step(batch):
            FakeEvent.clock_ms[0] += 7.5  # the device runs the step's kernels for 7.5 ms
        s = measure.UserStep(FakeTorch, step, cuda=True)
        FakeEvent.clock_ms[0] = 100.0
        s.step(None, measuring=False)
        self.assertEqual(s.pairs, [])
        for _ in range(4):
            FakeEvent.clock_ms[0] += 2.0  # the device idles between steps: not busy
            s.step(None, measuring=True)
        self.assertAlmostEqual(s.busy_s(), 4 * 7.5 / 1000.0)
        before = FakeEvent.synchronized[0]
        s.sync()
        self.assertEqual(FakeEvent.synchronized[0], before + 1)

    def test_a_raising_step_raises_its_own_exception(self):
        def step(batch):
            raise KeyError("label")
        s = measure.UserStep(torch, step, cuda=False)
        with self.assertRaises(KeyError):
            s.step(None, measuring=True)


class BatchTest(unittest.TestCase):
    def test_has_tensor_looks_everywhere(self):
        t = torch.zeros(2)
        self.assertTrue(measure.has_tensor(t, torch))
        self.assertTrue(measure.has_tensor({"meta": ["a"], "x": [1, (t,)]}, torch))
        self.assertFalse(measure.has_tensor(["a", "b"], torch))
        self.assertFalse(measure.has_tensor({"x": [1, 2.0]}, torch))

    def test_len_and_bytes(self):
        batch = (torch.zeros(4, 3, dtype=torch.float32), torch.zeros(4, dtype=torch.int64))
        self.assertEqual(measure.batch_len(batch, 0), 4)
        self.assertEqual(measure.batch_bytes(batch), 4 * 3 * 4 + 4 * 8)
        self.assertEqual(measure.batch_len(["a"], 9), 9)

    def test_percentile(self):
        self.assertEqual(measure.percentile([], 50), 0.0)
        self.assertEqual(measure.percentile([3, 1, 2], 50), 2)
        self.assertAlmostEqual(measure.percentile([0, 10], 99), 9.9)


if __name__ == "__main__":
    unittest.main()
