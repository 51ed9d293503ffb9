#!/usr/bin/env python3
"""feedtune_probe: measures a real torch.utils.data.DataLoader the way a training
loop sees it, and prints one JSON line for feedtune's command workload.

The loop, per batch: wait for the loader, ``batch.to(device, non_blocking=...)``,
then a model step of --step-us (``torch.cuda._sleep`` on CUDA, a sleep on CPU),
and every --sync-every-steps steps wait for the device (as ``loss.item()`` does).
After --warmup-batches, it measures --seconds of this loop and prints, last on
stdout:

    {"samples_per_s": ..., "gpu_idle_frac": ..., "wait_p50_us": ..., "wait_p99_us": ...,
     "startup_s": ..., "peak_rss_bytes": ..., "mb_per_s": ..., ...}

On CUDA, GPU idle is 1 - (model-step time measured with torch.cuda.Event) /
(window time measured the same way). On CPU the step is a sleep of the main
thread and the same fraction is reported for it.

The dataset is your own (--dataset module:factory, --dataset-args JSON,
--pythonpath DIR) or a built-in synthetic one with the knobs of feedtune's
native synthetic workload (--samples, --sample-bytes, --cpu-us-per-sample,
--io-us-per-sample, --jitter, --worker-init-us, --seed). Works with torch 1.13
and 2.x, under /usr/bin/python3 with Debian's python3-torch.

Example, as feedtune runs it (configs/torch-probe.yaml):

    python3 workloads/python/feedtune_probe.py --num-workers 4 --pin-memory true \\
        --dataset mypkg.data:make_dataset --dataset-args '{"root": "/data/train"}' \\
        --pythonpath ~/src/myproject --seconds 2
"""

import argparse
import importlib
import json
import math
import os
import resource
import sys
import time
import zlib

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
    k = p.add_argument_group("DataLoader knobs")
    k.add_argument("--batch-size", type=int, default=64)
    k.add_argument("--num-workers", type=int, default=0)
    k.add_argument("--pin-memory", type=parse_bool, default=False)
    k.add_argument("--non-blocking", type=parse_bool, default=False)
    k.add_argument("--prefetch-factor", type=int, default=2)
    k.add_argument("--persistent-workers", type=parse_bool, default=False)
    k.add_argument("--shuffle", type=parse_bool, default=True)
    k.add_argument("--drop-last", type=parse_bool, default=True)
    t = p.add_argument_group("training loop and measurement")
    t.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto")
    t.add_argument("--step-us", type=float, default=20000, help="model step per batch")
    t.add_argument("--sync-every-steps", type=int, default=1, help="wait for the device every N steps; 0 = never")
    t.add_argument("--warmup-batches", type=int, default=8)
    t.add_argument("--seconds", type=float, default=2.0, help="length of the measured window")
    return p


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
        self.cycles = 0
        if step_us > 0:
            # Calibrate _sleep's cycles per microsecond on this GPU.
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            probe = 10_000_000
            best = None
            for _ in range(3):
                start.record()
                torch.cuda._sleep(probe)
                end.record()
                end.synchronize()
                ms = start.elapsed_time(end)
                best = ms if best is None else min(best, ms)
            self.cycles = int(probe / max(best * 1000.0, 1e-3) * step_us)

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

    def busy_s(self):
        return sum(a.elapsed_time(b) for a, b in self.pairs) / 1000.0


class CpuStep:
    """The model step on CPU: the main thread sleeps for step_us (no CPU used)."""

    def __init__(self, step_us):
        self.step_s = step_us / 1e6
        self.busy = 0.0

    def step(self, measuring):
        if self.step_s <= 0:
            return
        t0 = time.perf_counter()
        time.sleep(self.step_s)
        if measuring:
            self.busy += time.perf_counter() - t0

    def sync(self):
        pass

    def busy_s(self):
        return self.busy


def peak_rss_bytes():
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return int(max(own, children) * 1024)  # kilobytes on Linux


def main(argv=None):
    args = build_parser().parse_args(argv)
    if args.batch_size < 1 or args.num_workers < 0 or args.prefetch_factor < 1 or args.seconds <= 0:
        fail_usage("--batch-size and --prefetch-factor must be >= 1, --num-workers >= 0, --seconds > 0")
    if args.samples < 1 or args.sample_bytes < 1 or not 0 <= args.jitter <= 1:
        fail_usage("--samples and --sample-bytes must be >= 1, --jitter in [0, 1]")

    import torch  # after argument checks: importing torch takes a second or two
    import torch.utils.data

    if args.device == "auto":
        device_name = "cuda" if torch.cuda.is_available() else "cpu"
    else:
        device_name = args.device
    if device_name == "cuda" and not torch.cuda.is_available():
        fail_usage("--device cuda: torch sees no usable CUDA device")
    device = torch.device(device_name)

    dataset = make_user_dataset(args) if args.dataset else make_synthetic(args, torch)
    iterable = isinstance(dataset, torch.utils.data.IterableDataset)
    kwargs = dict(batch_size=args.batch_size, num_workers=args.num_workers, pin_memory=args.pin_memory,
                  drop_last=args.drop_last)
    if not iterable:
        kwargs["shuffle"] = args.shuffle
    if args.num_workers > 0:
        # torch rejects these with num_workers == 0 (1.13 and 2.x alike).
        kwargs["prefetch_factor"] = args.prefetch_factor
        kwargs["persistent_workers"] = args.persistent_workers
        if not args.dataset and args.worker_init_us > 0:
            kwargs["worker_init_fn"] = lambda _worker: time.sleep(args.worker_init_us / 1e6)
    elif not args.dataset and args.worker_init_us > 0:
        time.sleep(args.worker_init_us / 1e6)  # the main process is the one "worker"
    loader = torch.utils.data.DataLoader(dataset, **kwargs)

    model = CudaStep(torch, args.step_us) if device_name == "cuda" else CpuStep(args.step_us)

    def batches():
        epochs = 0
        while True:
            produced = 0
            for batch in loader:  # non-persistent workers restart here, as in training
                produced += 1
                yield batch
            epochs += 1
            if produced == 0:
                raise RuntimeError("an epoch produced no batch (fewer samples than --batch-size with --drop-last?)")

    steps = 0

    def run_step(batch, measuring):
        nonlocal steps
        x = to_device(batch, device, args.non_blocking)
        model.step(measuring)
        steps += 1
        if args.sync_every_steps > 0 and steps % args.sync_every_steps == 0:
            model.sync()
        return x

    created = time.perf_counter()
    it = batches()
    first = next(it)
    startup_s = time.perf_counter() - created  # worker start + the first batch
    run_step(first, False)
    for _ in range(max(0, args.warmup_batches - 1)):
        run_step(next(it), False)
    model.sync()

    waits = []
    samples = 0
    nbytes = 0
    if device_name == "cuda":
        window_start, window_end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        window_start.record()
    start = time.perf_counter()
    while True:
        t0 = time.perf_counter()
        batch = next(it)
        waits.append(time.perf_counter() - t0)
        samples += batch_len(batch, args.batch_size)
        nbytes += batch_bytes(batch)
        run_step(batch, True)
        if time.perf_counter() - start >= args.seconds:
            break
    model.sync()
    wall = time.perf_counter() - start
    if device_name == "cuda":
        window_end.record()
        window_end.synchronize()
        device_wall = window_start.elapsed_time(window_end) / 1000.0
    else:
        device_wall = wall
    idle = 1.0 - model.busy_s() / device_wall if device_wall > 0 else 0.0

    del it, batch, first
    del loader  # joins the workers, so their peak RSS is counted
    report = {
        "samples_per_s": samples / wall,
        "gpu_idle_frac": min(1.0, max(0.0, idle)),
        "wait_p50_us": percentile(waits, 50) * 1e6,
        "wait_p99_us": percentile(waits, 99) * 1e6,
        "startup_s": startup_s,
        "peak_rss_bytes": peak_rss_bytes(),
        "mb_per_s": nbytes / wall / 1e6,
        "batches": len(waits),
        "samples": samples,
        "seconds": wall,
        "device": device_name,
        "torch": torch.__version__,
        "num_workers": args.num_workers,
        "pin_memory": bool(args.pin_memory and device_name == "cuda"),
    }
    sys.stdout.flush()
    print(json.dumps(report), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
