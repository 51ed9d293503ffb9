"""feedtune.torch_costs: what torch's DataLoader costs on this box beyond the
dataset's own work, measured on a dataset that does nothing, so that feedtune's
native trials can pay it (`feedtune calibrate`, docs/measurement.md).

A native worker costs almost nothing per batch. A torch worker is a Python
process: its loop calls __getitem__ per sample, default_collate stacks the
samples into shared memory, the batch is pickled onto a queue, and the main
process rebuilds it. On a box with few CPUs those costs bind before the
dataset does. This probe fits them:

  in_process_{batch,sample,byte}_s  num_workers 0: the main process's loop and
                                    collate, per batch, per sample, per byte
  worker_{batch,sample,byte}_s      a worker's CPU for the same, with the
                                    pickling onto the queue (/proc/PID/stat)
  main_{batch,byte}_s               the main process's CPU per batch it takes
                                    from a worker (rebuilding it), per byte
  worker_start_s                    a worker's start in the worker: from
                                    asking for the iterator to its first
                                    batch, less one batch's work and the
                                    main process's share (the default start
                                    method)
  main_worker_{start,stop}_s        the main process's CPU per worker it
                                    starts (forks, one after another) and
                                    stops (joins) at each epoch without
                                    persistent workers: from 1 and 4 workers

Each is a least-squares fit over batch sizes {1, 16} and samples of {64 B,
256 KiB}; negative fits are clamped to 0. It prints one JSON line, last on
stdout: {"torch_costs": {...}}. About 10 s on 2 CPUs. Works with torch 1.13
and 2.x.
"""

import json
import multiprocessing
import os
import platform
import sys
import time

BATCH_SIZES = (1, 16)
SAMPLE_BYTES = (64, 256 * 1024)
POINT_SECONDS = 0.6  # of loading per grid point and setting


class _Empty:
    """A map-style dataset whose samples cost nothing but their allocation."""

    def __init__(self, n, nbytes):
        self.n, self.nbytes = n, nbytes

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        import torch
        return torch.empty(self.nbytes, dtype=torch.uint8)


def _cpu_s(pid):
    """User + system CPU seconds of process `pid` (fields 14 and 15 of /proc/PID/stat)."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _in_process(torch, batch_size, nbytes):
    """Seconds per batch of the main process's own loop (num_workers 0)."""
    data = torch.utils.data
    loader = data.DataLoader(_Empty(10 ** 9, nbytes), batch_size=batch_size, num_workers=0)
    it = iter(loader)
    for _ in range(5):
        next(it)
    start = time.perf_counter()
    n = 0
    while time.perf_counter() - start < POINT_SECONDS / 2 or n < 20:
        next(it)
        n += 1
    return (time.perf_counter() - start) / n


def _with_worker(torch, batch_size, nbytes):
    """(worker CPU s, main CPU s) per batch with one persistent worker, and the time to its first batch."""
    data = torch.utils.data
    loader = data.DataLoader(_Empty(10 ** 9, nbytes), batch_size=batch_size, num_workers=1, persistent_workers=True)
    asked = time.perf_counter()
    it = iter(loader)
    next(it)
    first_batch_s = time.perf_counter() - asked
    for _ in range(5):
        next(it)
    pid = it._workers[0].pid
    worker0, main0, start = _cpu_s(pid), time.process_time(), time.perf_counter()
    n = 0
    while time.perf_counter() - start < POINT_SECONDS or n < 20:
        next(it)
        n += 1
    worker_s, main_s = (_cpu_s(pid) - worker0) / n, (time.process_time() - main0) / n
    del it, loader
    return worker_s, main_s, first_batch_s


def _start_stop(torch, workers):
    """(seconds from asking for the iterator to its first batch, seconds to shut its workers down)
    of a non-persistent DataLoader with `workers` workers over 64-byte samples, batch 1."""
    import gc
    loader = torch.utils.data.DataLoader(_Empty(10 ** 9, 64), batch_size=1, num_workers=workers)
    asked = time.perf_counter()
    it = iter(loader)
    next(it)
    first_batch_s = time.perf_counter() - asked
    stopping = time.perf_counter()
    it._shutdown_workers()  # what an epoch's end does to non-persistent workers
    del it
    gc.collect()
    return first_batch_s, time.perf_counter() - stopping


def _starts(torch):
    """Per worker, what the main process spends starting one (it forks them one after
    another) and stopping one (it joins them one after another): from 1 and 4 workers,
    the median of 3 tries each."""
    def median(values):
        return sorted(values)[len(values) // 2]
    one = [_start_stop(torch, 1) for _ in range(3)]
    four = [_start_stop(torch, 4) for _ in range(3)]
    first1, first4 = median([f for f, _ in one]), median([f for f, _ in four])
    stop4 = median([s for _, s in four])
    return first1, max(0.0, (first4 - first1) / 3), stop4 / 4


def _fit(rows, columns):
    """Least squares of y over the named columns; rows are dicts. Negative coefficients are 0."""
    import torch
    a = torch.tensor([[row[c] for c in columns] for row in rows], dtype=torch.float64)
    y = torch.tensor([[row["y"]] for row in rows], dtype=torch.float64)
    # Scale the columns so the byte column (1e5 times the others) does not swamp the solve.
    scale = a.abs().max(dim=0).values.clamp(min=1e-30)
    solution = torch.linalg.lstsq(a / scale, y).solution.flatten() / scale
    return {c: max(0.0, float(v)) for c, v in zip(columns, solution)}


def measure():
    import torch
    torch.set_num_threads(1)
    in_rows, worker_rows, main_rows, starts = [], [], [], []
    for batch_size in BATCH_SIZES:
        for nbytes in SAMPLE_BYTES:
            terms = {"batch": 1.0, "sample": float(batch_size), "byte": float(batch_size * nbytes)}
            own = _in_process(torch, batch_size, nbytes)
            in_rows.append(dict(terms, y=own))
            worker_s, main_s, first_s = _with_worker(torch, batch_size, nbytes)
            worker_rows.append(dict(terms, y=worker_s))
            main_rows.append(dict(terms, y=main_s))
            starts.append(max(0.0, first_s - worker_s))
    first_batch_s, main_start_s, main_stop_s = _starts(torch)
    fit_in = _fit(in_rows, ("batch", "sample", "byte"))
    fit_worker = _fit(worker_rows, ("batch", "sample", "byte"))
    fit_main = _fit(main_rows, ("batch", "byte"))
    starts.sort()
    return {
        "main_worker_start_s": main_start_s, "main_worker_stop_s": main_stop_s,
        "python_version": platform.python_version(),
        "torch_version": torch.__version__.split("+")[0],
        "start_method": multiprocessing.get_start_method(),
        # The worker's own share of its start: what one worker's first batch
        # took beyond its batch and the main process's fork of it.
        "worker_start_s": max(0.0, min(starts[len(starts) // 2], first_batch_s) - main_start_s),
        "in_process_batch_s": fit_in["batch"], "in_process_sample_s": fit_in["sample"],
        "in_process_byte_s": fit_in["byte"],
        "worker_batch_s": fit_worker["batch"], "worker_sample_s": fit_worker["sample"],
        "worker_byte_s": fit_worker["byte"],
        "main_batch_s": fit_main["batch"], "main_byte_s": fit_main["byte"],
        "points": {"batch_sizes": list(BATCH_SIZES), "sample_bytes": list(SAMPLE_BYTES),
                   "in_process_s": [r["y"] for r in in_rows], "worker_s": [r["y"] for r in worker_rows],
                   "main_s": [r["y"] for r in main_rows]},
    }


def main(argv=None):
    args = sys.argv[1:] if argv is None else argv
    if args and args[0] in ("-h", "--help"):
        print(__doc__)
        return 0
    try:
        import torch  # noqa: F401
    except ImportError as e:
        print(json.dumps({"error": "torch is not importable by %s (%s)" % (sys.executable, e)}))
        return 1
    result = measure()
    sys.stdout.flush()
    print(json.dumps({"torch_costs": result}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
