"""What runs inside the DataLoader's workers: the wrappers that let them time
themselves into memory shared with the main process, the built-in synthetic
dataset, and the transport stage's free samples.

Every class here is defined at module level so that it pickles: with
multiprocessing_context forkserver or spawn the workers get the dataset, the
collate function and the worker_init_fn by pickling, and a class defined
inside a function cannot be pickled. Imports torch.
"""

import multiprocessing
import os
import time
import zlib

import torch
import torch.utils.data

from .memory import process_start_ticks


class WorkerCounters:
    """What the workers of one trial's loader measure about themselves, in memory
    shared with the probe (one slot per worker id, each written by its own
    worker only, so no lock): the seconds spent in __getitem__ and collate, the
    starts and their cost, and each worker's pid, by which the probe reads the
    worker's peak RSS from /proc. Made before the DataLoader, so forked (or
    spawned) workers get it with the dataset."""

    def __init__(self, num_workers):
        self.num_workers = num_workers
        self.busy_s = multiprocessing.Array("d", num_workers, lock=False)
        self.start_s = multiprocessing.Array("d", num_workers, lock=False)
        self.starts = multiprocessing.Array("l", num_workers, lock=False)
        self.pids = multiprocessing.Array("l", num_workers, lock=False)
        # Each worker's start time (/proc/PID/stat, clock ticks since boot):
        # with the pid it names the process, whoever its parent (the probe with
        # fork, the forkserver with forkserver), and no reused pid matches it.
        self.started = multiprocessing.Array("q", num_workers, lock=False)
        # time.monotonic() when the probe last asked for a new iterator (an
        # epoch's workers start then); CLOCK_MONOTONIC is one clock for all processes.
        self.iter_at = multiprocessing.Value("d", 0.0, lock=False)

    def busy_total(self):
        return sum(self.busy_s[:])

    def startup_s(self):
        """Mean seconds from asking for an iterator to a worker being ready, or None."""
        starts = sum(self.starts[:])
        return sum(self.start_s[:]) / starts if starts else None

    def worker_peak_rss_bytes(self):
        """The peak RSS (VmHWM) of the workers alive now, summed over them and
        divided by their count; None when none could be read."""
        total, count = 0, 0
        for pid, started in zip(self.pids[:], self.started[:]):
            if pid <= 0 or process_start_ticks(pid) != started:
                continue  # gone (a non-persistent worker of an epoch that ended), or a reused pid
            try:
                with open("/proc/%d/status" % pid) as status:
                    hwm = next((int(line.split()[1]) * 1024 for line in status if line.startswith("VmHWM:")), None)
            except (OSError, ValueError):
                continue
            if hwm is not None:
                total += hwm
                count += 1
        return total / count if count else None

    def worker_keys(self):
        """(pid, start ticks) of each worker that has started, for the memory
        sampler (memory.py), which skips those gone since."""
        return [(pid, started) for pid, started in zip(self.pids[:], self.started[:]) if pid > 0]

    def add_busy(self, t0):
        """Counts the seconds since t0 as this worker's busy time (nothing in the main process)."""
        info = torch.utils.data.get_worker_info()
        if info is not None:
            self.busy_s[info.id] += time.perf_counter() - t0


class SleepInit:
    """The synthetic dataset's per-worker set-up (--worker-init-us)."""

    def __init__(self, seconds):
        self.seconds = seconds

    def __call__(self, _worker_id):
        time.sleep(self.seconds)


class TimedInit:
    """worker_init_fn: records the worker's pid and when it was ready (after
    the set-up a wrapped init function does), then counts the start."""

    def __init__(self, counters, inner=None):
        self.counters, self.inner = counters, inner

    def __call__(self, worker_id):
        self.counters.pids[worker_id] = os.getpid()
        self.counters.started[worker_id] = process_start_ticks(os.getpid()) or 0
        if self.inner is not None:
            self.inner(worker_id)
        self.counters.start_s[worker_id] += max(0.0, time.monotonic() - self.counters.iter_at.value)
        self.counters.starts[worker_id] += 1


class TimedCollate:
    """collate_fn: the wrapped collate, its time counted as the worker's busy time."""

    def __init__(self, counters, inner):
        self.counters, self.inner = counters, inner

    def __call__(self, samples):
        t0 = time.perf_counter()
        try:
            return self.inner(samples)
        finally:
            self.counters.add_busy(t0)


class TimedIterable(torch.utils.data.IterableDataset):
    """An iterable dataset whose iterator's next is timed into the counters."""

    def __init__(self, dataset, counters):
        self.dataset, self.counters = dataset, counters

    def __iter__(self):
        it = iter(self.dataset)
        while True:
            t0 = time.perf_counter()
            try:
                sample = next(it)
            except StopIteration:
                return
            finally:
                self.counters.add_busy(t0)
            yield sample


class TimedMap(torch.utils.data.Dataset):
    """A map-style dataset whose __getitem__ is timed into the counters."""

    def __init__(self, dataset, counters):
        self.dataset, self.counters = dataset, counters

    def __len__(self):
        return len(self.dataset)

    def __getitem__(self, index):
        t0 = time.perf_counter()
        try:
            return self.dataset[index]
        finally:
            self.counters.add_busy(t0)


class TimedBatchedMap(TimedMap):
    """TimedMap for a dataset with __getitems__: torch >= 2.0 fetches a batch at
    once from a dataset that offers it; keep that."""

    def __getitems__(self, indices):
        t0 = time.perf_counter()
        try:
            return self.dataset.__getitems__(indices)
        finally:
            self.counters.add_busy(t0)


def instrument(dataset, counters):
    """The user's dataset, with its __getitem__ (or its iterator's next) timed
    into `counters`: the same samples, in the same order."""
    if isinstance(dataset, torch.utils.data.IterableDataset):
        return TimedIterable(dataset, counters)
    if getattr(dataset, "__getitems__", None):
        return TimedBatchedMap(dataset, counters)
    return TimedMap(dataset, counters)


def default_collate():
    collate = getattr(torch.utils.data, "default_collate", None)
    if collate is None:  # torch < 1.11
        from torch.utils.data._utils.collate import default_collate as collate
    return collate


def mix(x):
    """A 64-bit mixer (splitmix64's), for costs deterministic in (seed, index)."""
    x &= 0xFFFFFFFFFFFFFFFF
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF
    return x ^ (x >> 31)


def burn_cpu(seconds, data):
    """Spends `seconds` of this thread's CPU time checksumming `data` (a decode stand-in)."""
    if seconds <= 0:
        return 0
    view = memoryview(data)
    chunk = 4096
    size = len(view)
    end = time.thread_time() + seconds
    acc = 0
    pos = 0
    while time.thread_time() < end:
        acc = zlib.crc32(view[pos:pos + chunk], acc)
        pos = pos + chunk if pos + 2 * chunk <= size else 0
    return acc


# What SyntheticDataset's leak_bytes_per_sample keeps, for the life of the
# process: each worker process its own, as a real leak or cache grows.
_leaked = []


class SyntheticDataset(torch.utils.data.Dataset):
    """Samples of sample_bytes that cost cpu_us_per_sample of CPU and
    io_us_per_sample of waiting (the probe's --samples ... --seed). With
    leak_bytes_per_sample, each read keeps that many bytes, written (so they
    are resident), in the reading process, as feedtune's native
    workload.leak_bytes_per_sample does: the drill for the memory growth flag."""

    def __init__(self, samples, sample_bytes, cpu_us_per_sample, io_us_per_sample, jitter, seed,
                 leak_bytes_per_sample=0):
        self.samples = samples
        self.sample_bytes = sample_bytes
        self.cpu_us, self.io_us, self.jitter, self.seed = cpu_us_per_sample, io_us_per_sample, jitter, seed
        self.leak_bytes = leak_bytes_per_sample
        g = torch.Generator().manual_seed(seed)
        # One random pool made before the workers fork; sample i is a slice of it.
        self.pool = torch.randint(0, 256, (2 * self.sample_bytes,), dtype=torch.uint8, generator=g)

    def __len__(self):
        return self.samples

    def factor(self, index):
        if self.jitter <= 0:
            return 1.0
        u = (mix(self.seed ^ (index + 0x51ED27)) >> 11) * (2.0 ** -53)
        return 1.0 + self.jitter * (2.0 * u - 1.0)

    def __getitem__(self, index):
        if index < 0 or index >= self.samples:
            raise IndexError(index)
        offset = (index * 7919) % self.sample_bytes
        x = self.pool[offset:offset + self.sample_bytes].clone()
        if self.leak_bytes > 0:
            _leaked.append(bytearray(b"\xa5") * self.leak_bytes)  # every byte written: resident
        f = self.factor(index)
        if self.cpu_us > 0:
            burn_cpu(self.cpu_us * f / 1e6, x.numpy())
        if self.io_us > 0:
            time.sleep(self.io_us * f / 1e6)
        return x


def zeros_like_sample(sample):
    """The sample with every tensor (or array) replaced by zeros of its shape and dtype."""
    if hasattr(sample, "shape") and hasattr(sample, "dtype"):
        return torch.zeros_like(torch.as_tensor(sample))
    if isinstance(sample, (list, tuple)):
        return type(sample)(zeros_like_sample(x) for x in sample)
    if isinstance(sample, dict):
        return {k: zeros_like_sample(v) for k, v in sample.items()}
    return sample


class FreeSamples(torch.utils.data.Dataset):
    """The transport stage's dataset: as long as the real one, each sample the same zeros."""

    def __init__(self, zero, length):
        self.zero, self.length = zero, length

    def __len__(self):
        return self.length

    def __getitem__(self, index):
        return self.zero


def free_samples(dataset, iterable):
    """transport: a map-style dataset as long as the real one whose samples cost
    nothing: zeros shaped like the first real sample."""
    if iterable:
        raise RuntimeError("--stage transport needs a map-style dataset (an iterable one has no first sample "
                           "to copy the shape of)")
    return FreeSamples(zeros_like_sample(dataset[0]), len(dataset))
