#!/usr/bin/env python3
"""feedtune_probe: measures a real torch.utils.data.DataLoader the way a training
loop sees it, and prints one JSON line for feedtune's command workload.

The loop, per batch: wait for the loader, ``batch.to(device, non_blocking=...)``,
then a model step of --step-us (``torch.cuda._sleep`` on CUDA, a sleep on CPU),
and every --sync-every-steps steps wait for the device (as ``loss.item()`` does).
After --warmup-batches, it measures --seconds of this loop and prints, last on
stdout:

    {"samples_per_s": ..., "gpu_idle_frac": ..., "wait_p50_us": ..., "wait_p99_us": ...,
     "time_to_first_batch_s": ..., "peak_rss_bytes": ..., "mb_per_s": ..., ...}

With workers it also reports what the workers measure about themselves,
through memory shared with the probe (a wrapper around the dataset and the
collate function, and a worker_init_fn): "worker_busy_frac" (their seconds in
__getitem__ and collate over the window, over workers x window), "startup_s"
(the mean time from asking for an iterator to a worker being ready, its
set-up included) and "worker_peak_rss_bytes" (VmHWM from /proc of the workers
alive at the window's end, summed and divided by their count). A window that
holds an epoch start reports "epoch_boundary_ms": the wait for the epoch's
first batch beyond the window's median wait. What it cannot measure it leaves
out, and feedtune records it as not measured.

On CUDA, GPU idle is 1 - (model-step time measured with torch.cuda.Event) /
(window time measured the same way). On CPU the step is a sleep of the main
thread and the same fraction is reported for it.

The dataset is your own (--dataset module:factory, --dataset-args JSON,
--pythonpath DIR) or a built-in synthetic one with the knobs of feedtune's
native synthetic workload (--samples, --sample-bytes, --cpu-us-per-sample,
--io-us-per-sample, --jitter, --worker-init-us, --seed). Works with torch 1.13
and 2.x, under /usr/bin/python3 with Debian's python3-torch.

Example, one run per repeat (workload.protocol: run):

    python3 workloads/python/feedtune_probe.py --num-workers 4 --pin-memory true \\
        --dataset mypkg.data:make_dataset --dataset-args '{"root": "/data/train"}' \\
        --pythonpath ~/src/myproject --seconds 2

With --serve (workload.protocol: serve, as configs/torch-probe.yaml runs it) the
probe starts once per sweep: it imports torch and builds the dataset once, then
reads one JSON request per trial on stdin ({"trial": N, "num_workers": ...,
"repeats": R, "window_epochs": E, ...}), builds a new DataLoader over the same
dataset (new workers, as a training job would), warms up, and prints one result
line per window and {"trial_end": N}; an exception in a trial is reported as
{"error": "..."} (its traceback on stderr) and the probe waits for the next
request. The knob and loop options (--num-workers ... --sync-every-steps) come
from each request, so they are errors on the command line with --serve. Its
own stdout carries only protocol lines: everything else printed (by the
dataset, by workers) goes to stderr. End of stdin ends it.
docs/command-protocol.md describes the protocol.

Ranks (data-parallel, as torchrun starts them): when WORLD_SIZE > 1 in the
environment (feedtune's sweep.ranks with protocol run sets RANK, LOCAL_RANK,
WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR and MASTER_PORT), the probe joins the
process group (gloo on CPU, NCCL on CUDA, with --dist-timeout-s), reads its
torch.utils.data.DistributedSampler share of each epoch, meets the other ranks
at a dist.barrier() before each measured window, and prints its own result
line with "rank" and "world_size" in it; feedtune adds the ranks up
(docs/node-sweep.md). --report-share PATH also writes the line, with the
indices of the rank's epoch-0 share, to PATH (use {rank} in it).
"""

import argparse
import gc
import importlib
import json
import math
import multiprocessing
import os
import resource
import sys
import time
import traceback
import zlib
from datetime import timedelta

EXIT_USAGE = 2


def parse_bool(text):
    value = str(text).strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError("expected true or false, got %r" % text)


def build_parser():
    p = argparse.ArgumentParser(
        prog="feedtune_probe.py",
        description="Measure a real torch DataLoader in a training-loop shape; print one JSON line last.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Point it at your own Dataset:\n"
        "  --dataset mypkg.data:make_dataset --dataset-args '{\"root\": \"/data\"}' --pythonpath ~/src/proj\n"
        "The factory (a function or a class) is called with the JSON's keys as keyword\n"
        "arguments (an object) or its items as positional ones (a list), and must return\n"
        "a map-style or iterable torch Dataset whose samples the default collate can batch.",
    )
    d = p.add_argument_group("dataset")
    d.add_argument("--dataset", metavar="MODULE:FACTORY", help="your dataset; default: the built-in synthetic one")
    d.add_argument("--dataset-args", default="{}", metavar="JSON", help="arguments for the factory (object or list)")
    d.add_argument("--pythonpath", action="append", default=[], metavar="DIR", help="put DIR first on sys.path")
    s = p.add_argument_group("built-in synthetic dataset (feedtune's synthetic knobs)")
    s.add_argument("--samples", type=int, default=4096, help="per epoch")
    s.add_argument("--sample-bytes", type=int, default=150528)
    s.add_argument("--cpu-us-per-sample", type=float, default=200, help="real CPU work per sample")
    s.add_argument("--io-us-per-sample", type=float, default=0, help="waiting per sample, no CPU")
    s.add_argument("--jitter", type=float, default=0.1, help="relative spread of per-sample cost")
    s.add_argument("--worker-init-us", type=float, default=0, help="per-worker set-up, at each worker start")
    s.add_argument("--seed", type=int, default=0)
    k = p.add_argument_group("DataLoader knobs (per request with --serve)")
    k.add_argument("--batch-size", type=int, help="default 64")
    k.add_argument("--num-workers", type=int, help="default 0")
    k.add_argument("--pin-memory", type=parse_bool, help="default false")
    k.add_argument("--non-blocking", type=parse_bool, help="default false")
    k.add_argument("--prefetch-factor", type=int, help="default 2")
    k.add_argument("--persistent-workers", type=parse_bool, help="default false")
    k.add_argument("--shuffle", type=parse_bool, default=True)
    k.add_argument("--drop-last", type=parse_bool, default=True)
    t = p.add_argument_group("training loop and measurement (per request with --serve)")
    t.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto")
    t.add_argument("--step-us", type=float, help="model step per batch; default 20000")
    t.add_argument("--sync-every-steps", type=int, help="wait for the device every N steps; 0 = never; default 1")
    t.add_argument("--warmup-batches", type=int, help="default 8")
    t.add_argument("--seconds", type=float, help="length of the measured window; default 2.0")
    t.add_argument("--stage", choices=("step", "copy", "transport", "prep"),
                   help="a stage trial of feedtune's verdict (docs/verdict.md): step = one batch kept on the device, "
                        "no loader; copy = one resident host batch copied each step; transport = the DataLoader over "
                        "zero samples shaped like the first real one; prep = the real dataset (the default)")
    t.add_argument("--dist-timeout-s", type=float, default=120,
                   help="with WORLD_SIZE > 1: the process group's timeout (torch's default, 30 minutes, would "
                        "keep a rank waiting that long for a dead peer)")
    t.add_argument("--report-share", metavar="PATH",
                   help="also write the result line, with this rank's DistributedSampler share of epoch 0 "
                        "(\"share\": the sample indices), to PATH")
    t.add_argument("--serve", action="store_true",
                   help="serve feedtune's trials: one JSON request per line on stdin (docs/command-protocol.md)")
    return p


# Option name -> (request key, default) for the per-trial settings.
PER_TRIAL = {
    "batch_size": ("batch_size", 64),
    "num_workers": ("num_workers", 0),
    "pin_memory": ("pin_memory", False),
    "non_blocking": ("non_blocking", False),
    "prefetch_factor": ("prefetch_factor", 2),
    "persistent_workers": ("persistent_workers", False),
    "step_us": ("step_us", 20000.0),
    "sync_every_steps": ("sync_every_steps", 1),
    "warmup_batches": ("warmup_batches", 8),
    "seconds": ("measure_seconds", 2.0),
}


def fail_usage(message):
    sys.stderr.write("feedtune_probe: %s\n" % message)
    sys.exit(EXIT_USAGE)


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


def make_synthetic(args, torch):
    class SyntheticDataset(torch.utils.data.Dataset):
        """Samples of --sample-bytes that cost --cpu-us-per-sample of CPU and --io-us-per-sample of waiting."""

        def __init__(self):
            self.samples = args.samples
            self.sample_bytes = args.sample_bytes
            g = torch.Generator().manual_seed(args.seed)
            # One random pool made before the workers fork; sample i is a slice of it.
            self.pool = torch.randint(0, 256, (2 * self.sample_bytes,), dtype=torch.uint8, generator=g)

        def __len__(self):
            return self.samples

        def factor(self, index):
            if args.jitter <= 0:
                return 1.0
            u = (mix(args.seed ^ (index + 0x51ED27)) >> 11) * (2.0 ** -53)
            return 1.0 + args.jitter * (2.0 * u - 1.0)

        def __getitem__(self, index):
            if index < 0 or index >= self.samples:
                raise IndexError(index)
            offset = (index * 7919) % self.sample_bytes
            x = self.pool[offset:offset + self.sample_bytes].clone()
            f = self.factor(index)
            if args.cpu_us_per_sample > 0:
                burn_cpu(args.cpu_us_per_sample * f / 1e6, x.numpy())
            if args.io_us_per_sample > 0:
                time.sleep(args.io_us_per_sample * f / 1e6)
            return x

    return SyntheticDataset()


def make_user_dataset(args):
    for directory in reversed(args.pythonpath):
        sys.path.insert(0, os.path.abspath(os.path.expanduser(directory)))
    module_name, _, attr = args.dataset.partition(":")
    if not module_name or not attr:
        fail_usage("--dataset: expected MODULE:FACTORY (e.g. mypkg.data:make_dataset), got %r" % args.dataset)
    try:
        factory = importlib.import_module(module_name)
    except Exception as e:  # an import error of the user's module: say where we looked
        fail_usage("--dataset: cannot import %r: %s: %s (sys.path starts with %s)"
                   % (module_name, type(e).__name__, e, sys.path[:3]))
    for part in attr.split("."):
        if not hasattr(factory, part):
            fail_usage("--dataset: %r has no attribute %r" % (module_name, attr))
        factory = getattr(factory, part)
    try:
        dataset_args = json.loads(args.dataset_args)
    except ValueError as e:
        fail_usage("--dataset-args: not JSON: %s" % e)
    if isinstance(dataset_args, dict):
        return factory(**dataset_args)
    if isinstance(dataset_args, list):
        return factory(*dataset_args)
    fail_usage("--dataset-args: expected a JSON object or list, got %s" % type(dataset_args).__name__)


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


def percentile(values, p):
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = (len(ordered) - 1) * p / 100.0
    lo = int(math.floor(rank))
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (rank - lo)


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

    def step(self, measuring):
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


class CpuStep:
    """The model step on CPU: the main thread sleeps for step_us (no CPU used)."""

    def __init__(self, step_us):
        self.busy = 0.0
        self.set_step_us(step_us)

    def set_step_us(self, step_us):
        self.step_s = step_us / 1e6

    def step(self, measuring):
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


class SleepInit:
    """The synthetic dataset's per-worker set-up (--worker-init-us)."""

    def __init__(self, seconds):
        self.seconds = seconds

    def __call__(self, _worker_id):
        time.sleep(self.seconds)


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
        me = os.getpid()
        for pid in self.pids[:]:
            if pid <= 0:
                continue
            hwm, parent = None, None
            try:
                with open("/proc/%d/status" % pid) as status:
                    for line in status:
                        if line.startswith("VmHWM:"):
                            hwm = int(line.split()[1]) * 1024  # kB
                        elif line.startswith("PPid:"):
                            parent = int(line.split()[1])
            except (OSError, ValueError):
                continue  # gone (a non-persistent worker of an epoch that ended)
            if hwm is not None and parent == me:  # not a reused pid
                total += hwm
                count += 1
        return total / count if count else None


def _worker_id():
    import torch.utils.data
    info = torch.utils.data.get_worker_info()
    return None if info is None else info.id


class TimedInit:
    """worker_init_fn: records the worker's pid and when it was ready (after
    the set-up a wrapped init function does), then counts the start."""

    def __init__(self, counters, inner=None):
        self.counters, self.inner = counters, inner

    def __call__(self, worker_id):
        self.counters.pids[worker_id] = os.getpid()
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
            worker = _worker_id()
            if worker is not None:
                self.counters.busy_s[worker] += time.perf_counter() - t0


def instrument(dataset, counters, torch):
    """The user's dataset, with its __getitem__ (or its iterator's next) timed
    into `counters`: the same samples, in the same order."""
    if isinstance(dataset, torch.utils.data.IterableDataset):
        class TimedIterable(torch.utils.data.IterableDataset):
            def __iter__(self):
                it = iter(dataset)
                while True:
                    t0 = time.perf_counter()
                    try:
                        sample = next(it)
                    except StopIteration:
                        return
                    finally:
                        worker = _worker_id()
                        if worker is not None:
                            counters.busy_s[worker] += time.perf_counter() - t0
                    yield sample

        return TimedIterable()

    class TimedMap(torch.utils.data.Dataset):
        def __len__(self):
            return len(dataset)

        def __getitem__(self, index):
            t0 = time.perf_counter()
            try:
                return dataset[index]
            finally:
                worker = _worker_id()
                if worker is not None:
                    counters.busy_s[worker] += time.perf_counter() - t0

    if getattr(dataset, "__getitems__", None):
        # torch >= 2.0 fetches a batch at once from a dataset that offers it; keep that.
        def getitems(self, indices):
            t0 = time.perf_counter()
            try:
                return dataset.__getitems__(indices)
            finally:
                worker = _worker_id()
                if worker is not None:
                    counters.busy_s[worker] += time.perf_counter() - t0

        TimedMap.__getitems__ = getitems
    return TimedMap()


def default_collate(torch):
    collate = getattr(torch.utils.data, "default_collate", None)
    if collate is None:  # torch < 1.11
        from torch.utils.data._utils.collate import default_collate as collate
    return collate


def peak_rss_bytes():
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return int(max(own, children) * 1024)  # kilobytes on Linux


class Setup:
    """What a process sets up once: torch, the device, the dataset and the model step."""

    def __init__(self, args):
        import torch  # after argument checks: importing torch takes a second or two
        import torch.utils.data

        self.torch = torch
        self.args = args
        if args.device == "auto":
            self.device_name = "cuda" if torch.cuda.is_available() else "cpu"
        else:
            self.device_name = args.device
        if self.device_name == "cuda" and not torch.cuda.is_available():
            fail_usage("--device cuda: torch sees no usable CUDA device")
        self.device = torch.device(self.device_name)
        # Data-parallel ranks (WORLD_SIZE > 1, from torchrun or feedtune's sweep.ranks).
        self.world_size = int(os.environ.get("WORLD_SIZE", "1") or 1)
        self.rank = int(os.environ.get("RANK", "0") or 0)
        self.dist = None
        if self.world_size > 1:
            import torch.distributed as dist
            if self.device_name == "cuda":
                local_rank = int(os.environ.get("LOCAL_RANK", "0") or 0)
                torch.cuda.set_device(local_rank)
                self.device = torch.device("cuda", local_rank)
            dist.init_process_group("nccl" if self.device_name == "cuda" else "gloo", init_method="env://",
                                    rank=self.rank, world_size=self.world_size,
                                    timeout=timedelta(seconds=args.dist_timeout_s))
            self.dist = dist
        self.dataset = make_user_dataset(args) if args.dataset else make_synthetic(args, torch)
        self.iterable = isinstance(self.dataset, torch.utils.data.IterableDataset)
        if self.dist is not None and self.iterable:
            sys.stderr.write("feedtune_probe: rank %d: an iterable dataset gets no DistributedSampler; it must "
                             "shard itself by RANK and WORLD_SIZE\n" % self.rank)
        self.model = None


def zeros_like_sample(sample, torch):
    """The sample with every tensor (or array) replaced by zeros of its shape and dtype."""
    if hasattr(sample, "shape") and hasattr(sample, "dtype"):
        return torch.zeros_like(torch.as_tensor(sample))
    if isinstance(sample, (list, tuple)):
        return type(sample)(zeros_like_sample(x, torch) for x in sample)
    if isinstance(sample, dict):
        return {k: zeros_like_sample(v, torch) for k, v in sample.items()}
    return sample


def free_samples(setup):
    """transport: a map-style dataset as long as the real one whose samples cost
    nothing: zeros shaped like the first real sample."""
    torch = setup.torch
    if setup.iterable:
        raise RuntimeError("--stage transport needs a map-style dataset (an iterable one has no first sample "
                           "to copy the shape of)")
    zero = zeros_like_sample(setup.dataset[0], torch)
    length = len(setup.dataset)

    class FreeSamples(torch.utils.data.Dataset):
        def __len__(self):
            return length

        def __getitem__(self, index):
            return zero

    return FreeSamples()


def run_trial(setup, t, emit):
    """One trial: a new DataLoader with the knobs of `t` (a dict with the request's
    keys), the warm-up, then t["repeats"] windows back to back, each passed to
    emit(report) as soon as it ends. The loader and its workers are gone when it
    returns (or raises). With args.stage step or copy there is no loader: one
    batch is kept on the device (step) or in host memory (copy)."""
    torch, args = setup.torch, setup.args
    stage = t.get("stage") or args.stage or "prep"
    if t.get("worker_threads"):
        # The intra-op threads of this process (the rank); torch gives each
        # DataLoader worker 1 itself. With the run protocol OMP_NUM_THREADS,
        # read by torch at start, does the same.
        torch.set_num_threads(t["worker_threads"])
    if stage in ("step", "copy"):
        t = dict(t, num_workers=0)
    kwargs = dict(batch_size=t["batch_size"], num_workers=t["num_workers"], pin_memory=t["pin_memory"],
                  drop_last=args.drop_last)
    dataset = free_samples(setup) if stage == "transport" else setup.dataset
    sampler = None
    if setup.dist is not None and not setup.iterable:
        # This rank's share, as DDP training reads it: every rank shuffles the
        # same order (seed, epoch) and takes every world_size-th index.
        sampler = torch.utils.data.distributed.DistributedSampler(
            dataset, num_replicas=setup.world_size, rank=setup.rank, shuffle=args.shuffle, seed=args.seed)
        kwargs["sampler"] = sampler
    elif not setup.iterable:
        kwargs["shuffle"] = args.shuffle
    counters = None
    if t["num_workers"] > 0:
        # torch rejects these with num_workers == 0 (1.13 and 2.x alike).
        kwargs["prefetch_factor"] = t["prefetch_factor"]
        kwargs["persistent_workers"] = t["persistent_workers"]
        # The workers time their own __getitem__ and collate and say when they
        # are ready; with no workers there is nothing of theirs to measure.
        counters = WorkerCounters(t["num_workers"])
        dataset = instrument(dataset, counters, torch)
        kwargs["collate_fn"] = TimedCollate(counters, default_collate(torch))
        init = None
        if not args.dataset and args.worker_init_us > 0:
            init = SleepInit(args.worker_init_us / 1e6)
        kwargs["worker_init_fn"] = TimedInit(counters, init)
    elif not args.dataset and args.worker_init_us > 0:
        time.sleep(args.worker_init_us / 1e6)  # the main process is the one "worker"
    created = time.perf_counter()
    loader = torch.utils.data.DataLoader(dataset, **kwargs)

    if setup.model is None:
        setup.model = CudaStep(torch, t["step_us"]) if setup.device_name == "cuda" else CpuStep(t["step_us"])
    else:
        setup.model.set_step_us(t["step_us"])
    model = setup.model
    device = setup.device

    try:
        epoch_len = len(loader)  # an iterable dataset may have none
    except TypeError:
        epoch_len = None
    window_epochs = t.get("window_epochs", 0)
    per_epoch = None
    if window_epochs > 0:
        try:
            per_epoch = len(loader)
        except TypeError:
            sys.stderr.write("feedtune_probe: the dataset has no len(), so windows of %d epoch(s) cannot be "
                             "counted; measuring %g s windows instead\n" % (window_epochs, t["measure_seconds"]))
            window_epochs = 0
        if per_epoch == 0:
            raise RuntimeError("an epoch has no batch (fewer samples than the batch size with drop_last?)")

    resident = None  # step: the batch already on the device
    if stage in ("step", "copy"):
        one = next(iter(loader))
        if stage == "copy" and t["pin_memory"] and setup.device_name == "cuda":
            one = torch.utils.data._utils.pin_memory.pin_memory(one)
        if stage == "step":
            resident = to_device(one, device, False)

    def batches():
        """(batch, index within its epoch, the epoch's number)."""
        if stage in ("step", "copy"):
            index = 0
            while True:
                yield one, index, 0
                index += 1
        epoch = 0
        while True:
            produced = 0
            if counters is not None:
                counters.iter_at.value = time.monotonic()  # an epoch's workers start now
            if sampler is not None:
                sampler.set_epoch(epoch)  # a new shuffle per epoch, the same on every rank
            for batch in loader:  # non-persistent workers restart here, as in training
                yield batch, produced, epoch
                produced += 1
            epoch += 1
            if produced == 0:
                raise RuntimeError("an epoch produced no batch (fewer samples than the batch size with drop_last?)")

    steps = 0

    def run_step(batch, measuring):
        nonlocal steps
        x = resident if resident is not None else to_device(batch, device, t["non_blocking"])
        model.step(measuring)
        steps += 1
        if t["sync_every_steps"] > 0 and steps % t["sync_every_steps"] == 0:
            model.sync()
        return x

    it = batches()
    try:
        first, index, _ = next(it)
        first_batch_s = time.perf_counter() - created  # worker start + the first batch
        run_step(first, False)
        del first
        warmed = 1
        # An epoch window is window_epochs * (batches per epoch) batches from
        # wherever the warm-up ended: it holds exactly window_epochs epoch
        # starts (worker restarts without persistent_workers), as a window
        # from an epoch's start would, without first running on to the end of
        # the warm-up's epoch (up to one more epoch per trial).
        while warmed < t["warmup_batches"]:
            batch, index, _ = next(it)
            run_step(batch, False)
            warmed += 1
        model.sync()

        for _ in range(t["repeats"]):
            if setup.dist is not None:
                setup.dist.barrier()  # the ranks start each window together
            model.reset()
            waits = []
            boundary_waits = []
            samples = 0
            nbytes = 0
            target = window_epochs * per_epoch if window_epochs > 0 else None
            if setup.device_name == "cuda":
                window_start, window_end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                window_start.record()
            start = time.perf_counter()
            busy_before = counters.busy_total() if counters is not None else 0.0
            while True:
                t0 = time.perf_counter()
                batch, index, epoch = next(it)
                wait = time.perf_counter() - t0
                waits.append(wait)
                if index == 0 and epoch > 0:
                    boundary_waits.append(wait)
                samples += batch_len(batch, t["batch_size"])
                nbytes += batch_bytes(batch)
                run_step(batch, True)
                del batch
                if target is not None:
                    if len(waits) >= target:
                        break
                elif time.perf_counter() - start >= t["measure_seconds"]:
                    break
            model.sync()
            wall = time.perf_counter() - start
            busy = counters.busy_total() - busy_before if counters is not None else None
            if setup.device_name == "cuda":
                window_end.record()
                window_end.synchronize()
                device_wall = window_start.elapsed_time(window_end) / 1000.0
            else:
                device_wall = wall
            idle = 1.0 - model.busy_s() / device_wall if device_wall > 0 else 0.0
            report = {
                "samples_per_s": samples / wall,
                "gpu_idle_frac": min(1.0, max(0.0, idle)),
                "wait_p50_us": percentile(waits, 50) * 1e6,
                "wait_p99_us": percentile(waits, 99) * 1e6,
                "time_to_first_batch_s": first_batch_s,
                "mb_per_s": nbytes / wall / 1e6,
                "batches": len(waits),
                "samples": samples,
                "seconds": wall,
                "device": setup.device_name,
                "torch": torch.__version__,
                "num_workers": t["num_workers"],
                "pin_memory": bool(t["pin_memory"] and setup.device_name == "cuda"),
            }
            if epoch_len is not None:
                # Lets the sweep see short epochs, whose curve is stepped by rounds of workers.
                report["batches_per_epoch"] = epoch_len
            if counters is not None:
                # The workers' own figures; with no workers there are none.
                if wall > 0:
                    report["worker_busy_frac"] = min(1.0, max(0.0, busy / (t["num_workers"] * wall)))
                startup = counters.startup_s()
                if startup is not None:
                    report["startup_s"] = startup
                worker_rss = counters.worker_peak_rss_bytes()
                if worker_rss is not None:
                    report["worker_peak_rss_bytes"] = worker_rss
            if boundary_waits:
                # As feedtune's own loader reports it: the stall beyond a normal wait.
                report["epoch_boundary_ms"] = (percentile(boundary_waits, 50) - percentile(waits, 50)) * 1e3
            if setup.dist is not None:
                report["rank"] = setup.rank
                report["world_size"] = setup.world_size
            if args.report_share:
                shared = dict(report)
                if sampler is not None:
                    sampler.set_epoch(0)
                    shared["share"] = list(iter(sampler))
                with open(args.report_share, "w") as out:
                    out.write(json.dumps(shared) + "\n")
            emit(report)
    finally:
        it.close()  # drops the loader's iterator: its workers shut down
        del it, loader
        gc.collect()
        multiprocessing.active_children()  # reaps what has exited


def trial_settings(args):
    """The one-shot run's settings, in the request's form."""
    t = {}
    for option, (key, default) in PER_TRIAL.items():
        value = getattr(args, option)
        t[key] = default if value is None else value
    t["repeats"] = 1
    t["window_epochs"] = 0
    return t


def check_settings(t):
    """None when the per-trial settings are usable, else what is wrong."""
    if t["batch_size"] < 1 or t["num_workers"] < 0 or t["prefetch_factor"] < 1 or t["measure_seconds"] <= 0:
        return "batch_size and prefetch_factor must be >= 1, num_workers >= 0, measure_seconds > 0"
    if t["repeats"] < 1 or t["window_epochs"] < 0 or t["warmup_batches"] < 0 or t["step_us"] < 0:
        return "repeats must be >= 1, window_epochs, warmup_batches and step_us >= 0"
    return None


# feedtune's stage trials (docs/verdict.md): --stage, or a request's optional "stage".
STAGES = ("step", "copy", "transport", "prep")

# The request's keys and their types (bool is checked before int: it is one in Python).
REQUEST_KEYS = {
    "trial": int, "num_workers": int, "pin_memory": bool, "non_blocking": bool, "prefetch_factor": int,
    "persistent_workers": bool, "batch_size": int, "repeats": int, "warmup_batches": int,
    "measure_seconds": (int, float), "window_epochs": int, "step_us": (int, float), "sync_every_steps": int,
}


def parse_request(line):
    """The request as a dict, or raises ValueError saying what is wrong."""
    request = json.loads(line)
    if not isinstance(request, dict):
        raise ValueError("expected a JSON object, got %s" % type(request).__name__)
    for key, kind in REQUEST_KEYS.items():
        if key not in request:
            raise ValueError("the request has no %r" % key)
        value = request[key]
        if kind is bool:
            ok = isinstance(value, bool)
        else:
            ok = isinstance(value, kind) and not isinstance(value, bool)
        if not ok:
            raise ValueError("the request's %r is %r, expected %s" % (key, value, "true or false" if kind is bool
                                                                        else "a number"))
    threads = request.get("worker_threads", 0)
    if not isinstance(threads, int) or isinstance(threads, bool) or threads < 0:
        raise ValueError("the request's 'worker_threads' is %r, expected a whole number >= 0" % (threads,))
    if request.get("stage", "prep") not in STAGES:
        raise ValueError("the request's 'stage' is %r, expected one of %s" % (request["stage"], ", ".join(STAGES)))
    problem = check_settings(request)
    if problem:
        raise ValueError(problem)
    return request


def serve(args):
    """The serve protocol's loop (docs/command-protocol.md)."""
    # Protocol lines go to the original stdout; fd 1 becomes stderr, so prints
    # of the dataset, of torch and of forked workers cannot break a line.
    protocol = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)

    def say(obj):
        protocol.write(json.dumps(obj) + "\n")
        protocol.flush()

    setup = Setup(args)  # the dataset factory runs here, once per process
    while True:
        line = sys.stdin.readline()
        if not line:
            return 0  # feedtune closed stdin: the sweep is over
        if not line.strip():
            continue
        try:
            request = parse_request(line)
        except ValueError as e:
            say({"error": "bad request: %s: %r" % (e, line.strip()[:200])})
            continue
        trial = request["trial"]
        try:
            run_trial(setup, request, say)
        except Exception as e:  # the user's dataset or torch failed with these knobs: say so and go on
            traceback.print_exc(file=sys.stderr)
            say({"error": "%s: %s" % (type(e).__name__, e)})
            continue
        say({"trial_end": trial})


def main(argv=None):
    args = build_parser().parse_args(argv)
    if args.samples < 1 or args.sample_bytes < 1 or not 0 <= args.jitter <= 1:
        fail_usage("--samples and --sample-bytes must be >= 1, --jitter in [0, 1]")
    if args.serve:
        given = ["--" + option.replace("_", "-") for option in PER_TRIAL if getattr(args, option) is not None]
        if given:
            fail_usage("--serve: %s come(s) with each trial's request on stdin; remove from the command line"
                       % ", ".join(given))
        return serve(args)
    t = trial_settings(args)
    problem = check_settings(t)
    if problem:
        fail_usage(problem.replace("measure_seconds", "--seconds"))
    setup = Setup(args)
    reports = []
    run_trial(setup, t, reports.append)
    report = reports[0]
    report["peak_rss_bytes"] = peak_rss_bytes()  # after the workers were joined, so theirs counts
    sys.stdout.flush()
    print(json.dumps(report), flush=True)
    if setup.dist is not None:
        setup.dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
