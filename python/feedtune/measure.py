"""What a trial measures in the main process: batch sizes and bytes, the copy to
the device, percentiles, and the model step (the probe's timed sleep, or the
user's own step function) with its busy time.

Stdlib only at import: torch comes in as an argument, so the argument checks of
the probe and of feedtune.serve run before torch's second of import time.
"""

import math
import resource
import time


def percentile(values, p):
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = (len(ordered) - 1) * p / 100.0
    lo = int(math.floor(rank))
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (rank - lo)


def batch_len(batch, default):
    if hasattr(batch, "shape") and len(batch.shape) > 0:
        return int(batch.shape[0])
    if isinstance(batch, (list, tuple)) and batch:
        return batch_len(batch[0], default)
    if isinstance(batch, dict) and batch:
        return batch_len(next(iter(batch.values())), default)
    return default


def batch_bytes(batch):
    if hasattr(batch, "element_size") and hasattr(batch, "numel"):
        return batch.element_size() * batch.numel()
    if isinstance(batch, (list, tuple)):
        return sum(batch_bytes(b) for b in batch)
    if isinstance(batch, dict):
        return sum(batch_bytes(b) for b in batch.values())
    return 0


def to_device(batch, device, non_blocking):
    if hasattr(batch, "to") and hasattr(batch, "is_pinned"):
        return batch.to(device, non_blocking=non_blocking)
    if isinstance(batch, (list, tuple)):
        return type(batch)(to_device(b, device, non_blocking) for b in batch)
    if isinstance(batch, dict):
        return {k: to_device(v, device, non_blocking) for k, v in batch.items()}
    return batch


def has_tensor(batch, torch):
    """Whether a tensor is anywhere in the batch (lists, tuples, dicts and their
    nesting): without one there is nothing to pin or copy to the device."""
    if isinstance(batch, torch.Tensor):
        return True
    if isinstance(batch, (list, tuple)):
        return any(has_tensor(b, torch) for b in batch)
    if isinstance(batch, dict):
        return any(has_tensor(b, torch) for b in batch.values())
    return False


def peak_rss_bytes():
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return int(max(own, children) * 1024)  # kilobytes on Linux


class CudaStep:
    """The model step on CUDA: torch.cuda._sleep for step_us, timed with events."""

    def __init__(self, torch, step_us):
        self.torch = torch
        self.pairs = []
        self.cycles_per_us = None
        self.cycles = 0
        self.set_step_us(step_us)

    def set_step_us(self, step_us):
        if step_us > 0 and self.cycles_per_us is None:
            # Calibrate _sleep's cycles per microsecond on this GPU (once per process).
            start, end = self.torch.cuda.Event(enable_timing=True), self.torch.cuda.Event(enable_timing=True)
            probe = 10_000_000
            best = None
            for _ in range(3):
                start.record()
                self.torch.cuda._sleep(probe)
                end.record()
                end.synchronize()
                ms = start.elapsed_time(end)
                best = ms if best is None else min(best, ms)
            self.cycles_per_us = probe / max(best * 1000.0, 1e-3)
        self.cycles = int(self.cycles_per_us * step_us) if step_us > 0 else 0

    def step(self, x, measuring):
        if self.cycles <= 0:
            return
        if measuring:
            a, b = self.torch.cuda.Event(enable_timing=True), self.torch.cuda.Event(enable_timing=True)
            a.record()
            self.torch.cuda._sleep(self.cycles)
            b.record()
            self.pairs.append((a, b))
        else:
            self.torch.cuda._sleep(self.cycles)

    def sync(self):
        self.torch.cuda.synchronize()

    def reset(self):
        self.pairs = []

    def busy_s(self):
        return sum(a.elapsed_time(b) for a, b in self.pairs) / 1000.0

    def extra_report(self, batches):
        return {}


class CpuStep:
    """The model step on CPU: the main thread sleeps for step_us (no CPU used)."""

    def __init__(self, step_us):
        self.busy = 0.0
        self.set_step_us(step_us)

    def set_step_us(self, step_us):
        self.step_s = step_us / 1e6

    def step(self, x, measuring):
        if self.step_s <= 0:
            return
        t0 = time.perf_counter()
        time.sleep(self.step_s)
        if measuring:
            self.busy += time.perf_counter() - t0

    def sync(self):
        pass

    def reset(self):
        self.busy = 0.0

    def busy_s(self):
        return self.busy

    def extra_report(self, batches):
        return {}


class UserStep:
    """The user's training step, step(batch) with the batch already on the
    device. It replaces the sleep of step_us (ignored), and is timed three ways
    over a window: its wall time, the main thread's CPU time inside it, and on
    CUDA the device time between events recorded just before and just after it
    (what the GPU-idle fraction rests on). The sweep's sync_every_steps is not
    applied: a real step syncs where its code does (loss.item())."""

    def __init__(self, torch, fn, cuda):
        self.torch, self.fn, self.cuda = torch, fn, cuda
        self.reset()

    def set_step_us(self, step_us):
        pass  # the step is the user's; a modelled length means nothing here

    def step(self, x, measuring):
        if not measuring:
            self.fn(x)  # an exception is the user's own: the trial fails with its traceback's last line
            return
        if self.cuda:
            a, b = self.torch.cuda.Event(enable_timing=True), self.torch.cuda.Event(enable_timing=True)
            a.record()
        wall0, cpu0 = time.perf_counter(), time.thread_time()
        self.fn(x)
        self.step_cpu += time.thread_time() - cpu0
        self.step_wall += time.perf_counter() - wall0
        if self.cuda:
            b.record()
            self.pairs.append((a, b))

    def sync(self):
        if self.cuda:
            self.torch.cuda.synchronize()

    def reset(self):
        self.pairs = []
        self.step_wall = 0.0
        self.step_cpu = 0.0

    def busy_s(self):
        if self.cuda:
            return sum(a.elapsed_time(b) for a, b in self.pairs) / 1000.0
        return self.step_wall  # on the CPU the step's wall time is the "device" time

    def extra_report(self, batches):
        if batches <= 0:
            return {}
        return {"step_ms": self.step_wall / batches * 1e3, "step_cpu_ms": self.step_cpu / batches * 1e3}
