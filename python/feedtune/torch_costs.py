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
  worker_start_s                    a worker's own start, measured where it
                                    happens: in the worker, from its fork
                                    (os.register_at_fork) to its first
                                    sample (median of 5 starts of one
                                    worker)
  main_worker_start_s               the main process's CPU per worker it
                                    starts (forks, one after another, in
                                    iter(loader)): the slope from 1 to 8
                                    workers
  main_stop_fixed_s,                the main process's wait when it stops
  main_worker_stop_s                its workers at an epoch's end without
                                    persistent workers: a fixed part and a
                                    part per worker, the line through 1 and
                                    8 workers. The workers exit together
                                    and the main process only waits (its
                                    CPU there is about 0.1 ms a worker), so
                                    a native trial pays it as a wait, not
                                    as CPU (tuner/measure/trial_runner.cc)

The per-batch, per-sample and per-byte figures are least-squares fits over
batch sizes {1, 16} and samples of {64 B, 256 KiB}. A figure that cannot be
told from zero (a fit at or below zero, a slope lost in the noise) is 0 in
the answer and named in its "not_measured" object with the reason, so no
reader takes it for a measured 0. It prints one JSON line, last on stdout:
{"torch_costs": {...}}. About 15 s on 2 CPUs. Works with torch 1.13 and 2.x.
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
    """(worker CPU s, main CPU s) per batch with one persistent worker."""
    data = torch.utils.data
    loader = data.DataLoader(_Empty(10 ** 9, nbytes), batch_size=batch_size, num_workers=1, persistent_workers=True)
    it = iter(loader)
    for _ in range(6):
        next(it)
    pid = it._workers[0].pid
    worker0, main0, start = _cpu_s(pid), time.process_time(), time.perf_counter()
    n = 0
    while time.perf_counter() - start < POINT_SECONDS or n < 20:
        next(it)
        n += 1
    worker_s, main_s = (_cpu_s(pid) - worker0) / n, (time.process_time() - main0) / n
    del it, loader
    return worker_s, main_s


# When this process was forked, in time.monotonic() (one clock for every
# process of the box): set in the child by os.register_at_fork, None in the
# process that imported the module.
_forked_at = None
_fork_noted = False  # the hook is registered (once per process)


def _note_fork():
    global _forked_at
    _forked_at = time.monotonic()


class _Stamped:
    """A dataset whose sample says how long after its process's fork it was
    asked for: [seconds since the fork], or [-1.0] when the process was not
    forked (a spawn or forkserver start: no fork of this process to time)."""

    def __len__(self):
        return 10 ** 9

    def __getitem__(self, i):
        import torch
        now = time.monotonic()
        return torch.tensor([now - _forked_at if _forked_at is not None else -1.0], dtype=torch.float64)


WORKER_STARTS = 5  # starts of one worker the worker start is the median of


def _worker_start(torch):
    """A worker's own start, where it happens: from its fork to its first
    sample, the median of WORKER_STARTS starts of one worker. Raises
    RuntimeError when no start could be timed (workers that are not forked):
    a worker's start is never free, so it is never stored as 0."""
    global _fork_noted
    if not _fork_noted and hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=_note_fork)
        _fork_noted = True
    starts = []
    for _ in range(WORKER_STARTS):
        loader = torch.utils.data.DataLoader(_Stamped(), batch_size=1, num_workers=1)
        it = iter(loader)
        seconds = float(next(it)[0][0])
        it._shutdown_workers()
        del it, loader
        if seconds > 0:
            starts.append(seconds)
    if len(starts) * 2 <= WORKER_STARTS:
        raise RuntimeError("a worker's start could not be timed from its fork (start method %s; %d of %d starts "
                           "timed): run calibrate under an interpreter whose DataLoader workers fork"
                           % (multiprocessing.get_start_method(), len(starts), WORKER_STARTS))
    return sorted(starts)[len(starts) // 2]


def _start_stop(torch, workers):
    """(the main process's CPU seconds in iter(loader), which forks the
    workers, and the seconds it waits to shut them down as an epoch's end
    does) of a non-persistent DataLoader with `workers` workers over
    64-byte samples, batch 1."""
    import gc
    loader = torch.utils.data.DataLoader(_Empty(10 ** 9, 64), batch_size=1, num_workers=workers)
    cpu = time.process_time()
    it = iter(loader)
    start_cpu_s = time.process_time() - cpu
    next(it)
    stopping = time.perf_counter()
    it._shutdown_workers()  # what an epoch's end does to non-persistent workers
    stop_s = time.perf_counter() - stopping
    del it
    gc.collect()
    return start_cpu_s, stop_s


START_STOP_WORKERS = (1, 8)  # the two worker counts the start and stop lines run through


def _starts(torch, not_measured):
    """(the main process's CPU per worker it starts, its wait to stop the
    workers: fixed, per worker): the lines through START_STOP_WORKERS, from
    the median of 3 tries at each. A slope at or below zero is 0 and named in
    `not_measured`."""
    def median(values):
        return sorted(values)[len(values) // 2]
    few, many = START_STOP_WORKERS
    at_few = [_start_stop(torch, few) for _ in range(3)]
    at_many = [_start_stop(torch, many) for _ in range(3)]
    start_few, start_many = median([c for c, _ in at_few]), median([c for c, _ in at_many])
    stop_few, stop_many = median([s for _, s in at_few]), median([s for _, s in at_many])
    start = (start_many - start_few) / (many - few)
    stop = (stop_many - stop_few) / (many - few)
    line = "the line through %d and %d workers" % (few, many)
    if start <= 0:
        not_measured["main_worker_start_s"] = "%s falls (%.3g ms of CPU at %d, %.3g at %d): within the noise" % (
            line, start_few * 1e3, few, start_many * 1e3, many)
    if stop <= 0:
        not_measured["main_worker_stop_s"] = "%s falls (a %.3g ms wait at %d, %.3g at %d): within the noise" % (
            line, stop_few * 1e3, few, stop_many * 1e3, many)
    fixed = stop_few - max(0.0, stop) * few
    if fixed <= 0:
        not_measured["main_stop_fixed_s"] = "%s meets zero workers at %.3g ms: no fixed part" % (line, fixed * 1e3)
    return max(0.0, start), max(0.0, fixed), max(0.0, stop)


def _fit(rows, columns, not_measured=None, prefix=""):
    """Least squares of y over the named columns; rows are dicts. Coefficients
    at or below zero are 0, and named in `not_measured` (keys prefix + column)."""
    import torch
    a = torch.tensor([[row[c] for c in columns] for row in rows], dtype=torch.float64)
    y = torch.tensor([[row["y"]] for row in rows], dtype=torch.float64)
    # Scale the columns so the byte column (1e5 times the others) does not swamp the solve.
    scale = a.abs().max(dim=0).values.clamp(min=1e-30)
    solution = torch.linalg.lstsq(a / scale, y).solution.flatten() / scale
    fit = {}
    for c, v in zip(columns, solution):
        fit[c] = max(0.0, float(v))
        if float(v) <= 0 and not_measured is not None:
            not_measured[prefix + c + "_s"] = ("the fit over batch sizes %s and samples of %s bytes came out at %.3g s: "
                                               "within the noise of zero" % (list(BATCH_SIZES), list(SAMPLE_BYTES),
                                                                             float(v)))
    return fit


def measure():
    import torch
    torch.set_num_threads(1)
    not_measured = {}
    worker_start_s = _worker_start(torch)
    in_rows, worker_rows, main_rows = [], [], []
    for batch_size in BATCH_SIZES:
        for nbytes in SAMPLE_BYTES:
            terms = {"batch": 1.0, "sample": float(batch_size), "byte": float(batch_size * nbytes)}
            own = _in_process(torch, batch_size, nbytes)
            in_rows.append(dict(terms, y=own))
            worker_s, main_s = _with_worker(torch, batch_size, nbytes)
            worker_rows.append(dict(terms, y=worker_s))
            main_rows.append(dict(terms, y=main_s))
    main_start_s, main_stop_fixed_s, main_stop_s = _starts(torch, not_measured)
    fit_in = _fit(in_rows, ("batch", "sample", "byte"), not_measured, "in_process_")
    fit_worker = _fit(worker_rows, ("batch", "sample", "byte"), not_measured, "worker_")
    fit_main = _fit(main_rows, ("batch", "byte"), not_measured, "main_")
    return {
        "python_version": platform.python_version(),
        "torch_version": torch.__version__.split("+")[0],
        "start_method": multiprocessing.get_start_method(),
        "worker_start_s": worker_start_s,
        "in_process_batch_s": fit_in["batch"], "in_process_sample_s": fit_in["sample"],
        "in_process_byte_s": fit_in["byte"],
        "worker_batch_s": fit_worker["batch"], "worker_sample_s": fit_worker["sample"],
        "worker_byte_s": fit_worker["byte"],
        "main_batch_s": fit_main["batch"], "main_byte_s": fit_main["byte"],
        "main_worker_start_s": main_start_s, "main_worker_stop_s": main_stop_s,
        "main_stop_fixed_s": main_stop_fixed_s,
        "not_measured": not_measured,
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
    try:
        result = measure()
    except RuntimeError as e:
        print(json.dumps({"error": str(e)}))
        return 1
    sys.stdout.flush()
    print(json.dumps({"torch_costs": result}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
