"""feedtune.watch: how the swept setting does in the training job, and the
record of it back in the results file.

    for batch in feedtune.watch(loader, every=100, results="fleet.db", config="resnet50"):
        train_step(batch)

Each `every` steps it logs one line with the input-bound share of those steps:
the time spent waiting for the next batch over the whole step (from one batch
handed out to the next), with the TensorBoard input-pipeline analyzer's bands
that the sweep's verdict uses (results/verdict.h):

    feedtune.watch: step 200: 60.8% input-bound (highly input-bound): batch wait 11.20 of 18.43 ms per step, 3471.8 samples/s over the last 100 steps

Every `record_every` steps, and when the loop ends, it records an observed run
(the loader's knobs, samples/s, the input-bound share, steps, this host) in
`results` by running `feedtune observe` on a background thread: the schema
keeps one writer (the C++ store), the training thread never waits on the disk,
and a failed write is logged, never raised into the job. `feedtune check`
then holds the job against the sweep of the same host and config, and
`feedtune report` shows it beside that sweep. Stdlib only (the loader is
whatever iterable the job has; its knobs are read from its attributes).
"""

import datetime
import json
import subprocess
import threading
import time
import uuid

from .results import ResultsError, find_binary

# The bands of results/verdict.h (InputBoundBand): TensorBoard's input-pipeline analyzer.
_MODERATE = 0.05
_HIGH = 0.20


def band(input_bound_frac):
    """The verdict's words for an input-bound share (wait / step time)."""
    if input_bound_frac < _MODERATE:
        return "not input-bound"
    if input_bound_frac < _HIGH:
        return "moderately input-bound"
    return "highly input-bound"


def _utc_now():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _batch_len(batch):
    """Samples in a batch whose loader has no batch_size (a batch_sampler): the
    first dimension of its first tensor; 1 when there is none to read."""
    while isinstance(batch, (list, tuple)) and batch:
        batch = batch[0]
    if isinstance(batch, dict) and batch:
        return _batch_len(next(iter(batch.values())))
    shape = getattr(batch, "shape", None)
    if shape is not None and len(shape) > 0:
        return int(shape[0])
    return 1


def loader_knobs(loader, non_blocking=None):
    """The knobs `feedtune observe` takes, read from a DataLoader (or any
    object with the same attributes; what it lacks reads as torch's default)."""
    workers = int(getattr(loader, "num_workers", 0) or 0)
    prefetch = getattr(loader, "prefetch_factor", None)
    return {
        "batch_size": getattr(loader, "batch_size", None),
        "num_workers": workers,
        "pin_memory": bool(getattr(loader, "pin_memory", False)),
        # torch >= 2.0 keeps None without workers; the store keeps torch's 2 there.
        "prefetch_factor": int(prefetch) if prefetch is not None and workers > 0 else None,
        "persistent_workers": bool(getattr(loader, "persistent_workers", False)),
        "non_blocking": non_blocking,
    }


class _Writer:
    """Runs `feedtune observe` on a background thread, started when a record
    is submitted and ended when none is left, so it never keeps a finished
    job alive and needs no close. Only the newest pending record is written
    (a job's record replaces its earlier ones by uid). Not a daemon: a job
    that ends right after its loop still gets its last record written."""

    def __init__(self, results, feedtune_bin, label, log, timeout_s):
        self._results = results
        self._feedtune_bin = feedtune_bin
        self._label = label
        self._log = log
        self._timeout_s = timeout_s
        self._lock = threading.Lock()
        self._pending = None   # the newest record not yet written; guarded by _lock
        self._thread = None    # the running writer, None when idle; guarded by _lock
        self.written = 0
        self.failures = 0
        self.last_error = None

    def submit(self, record):
        with self._lock:
            self._pending = record
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="feedtune.watch writer")
                self._thread.start()

    def close(self, timeout=None):
        """Waits for what is pending to be written; True when it was in time."""
        with self._lock:
            thread = self._thread
        if thread is not None:
            thread.join(timeout)
            return not thread.is_alive()
        return True

    def _run(self):
        while True:
            with self._lock:
                record, self._pending = self._pending, None
                if record is None:
                    self._thread = None
                    return
            self._write(record)

    def _write(self, record):
        try:
            binary = find_binary(self._feedtune_bin)
            command = [binary, "observe", "--db", self._results, "--record", json.dumps(record)]
            if self._label:
                command += ["--label", self._label]
            done = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  timeout=self._timeout_s, universal_newlines=True)
            if done.returncode != 0:
                raise ResultsError("`feedtune observe --db %s` exited %d: %s" %
                                   (self._results, done.returncode, done.stderr.strip() or done.stdout.strip()))
            self.written += 1
        except Exception as error:  # a failed record must never end the job
            self.failures += 1
            self.last_error = str(error)
            self._safe_log("feedtune.watch: could not record the observed run in %s: %s (the job goes on)" %
                           (self._results, error))

    def _safe_log(self, line):
        try:
            self._log(line)
        except Exception:
            pass


class watch:
    """Wraps a training loop's iteration over `loader` (see the module doc).

    every          log a line each this many steps (0: never)
    results        results file to record the observed run in (None: only log)
    config         the config/workload name the sweep ran under (needed with results)
    record_every   also record each this many steps (None: only when the loop ends),
                   so a job that is killed leaves its figures behind
    feedtune_bin   the feedtune binary (default $FEEDTUNE_BIN, else `feedtune` on PATH)
    log            called with each line (default print)
    sweep_run_id   the run the job's setting came from (loader_kwargs(...).run_id)
    non_blocking   the job's x.to(device, non_blocking=...), when it wants it checked
    label          this host's label, when its sweeps were given one

    Attributes: steps, samples_per_s, input_bound_frac (over every step so far),
    records_written, last_error. close(timeout) waits for pending records.
    """

    def __init__(self, loader, every=100, results=None, config=None, feedtune_bin=None, log=print,
                 record_every=None, sweep_run_id=None, non_blocking=None, label=None, timeout_s=60.0):
        if results is not None and not config:
            raise ValueError("feedtune.watch(results=%r) needs config=NAME: the config its sweep ran under, "
                             "so `feedtune check` can find that sweep" % (results,))
        if every < 0 or (record_every is not None and record_every < 1):
            raise ValueError("feedtune.watch: every must be >= 0 and record_every >= 1 (or None)")
        self._loader = loader
        self._every = int(every)
        self._record_every = record_every
        self._results = results
        self._config = config
        self._log = log
        self._sweep_run_id = sweep_run_id
        self._knobs = loader_knobs(loader, non_blocking)
        self._uid = "watch:" + uuid.uuid4().hex
        self._started_at = _utc_now()
        self._writer = _Writer(results, feedtune_bin, label, log, timeout_s) if results is not None else None
        # Totals over every step observed; a step runs from one batch handed out to the next.
        self.steps = 0
        self._samples = 0
        self._step_s = 0.0
        self._wait_s = 0.0
        # The window the next log line covers.
        self._window_steps = 0
        self._window_samples = 0
        self._window_step_s = 0.0
        self._window_wait_s = 0.0

    def __len__(self):
        return len(self._loader)

    def __iter__(self):
        clock = time.perf_counter
        fixed_size = self._knobs["batch_size"]
        iterator = iter(self._loader)
        handed_out = None  # when the previous batch was handed to the loop
        size = 0           # its samples
        try:
            while True:
                asked = clock()
                try:
                    batch = next(iterator)
                except StopIteration:
                    return
                now = clock()
                if handed_out is not None:
                    # The first batch's wait is the loader's start-up, not a step.
                    self._count(now - handed_out, now - asked, size)
                size = fixed_size if fixed_size is not None else _batch_len(batch)
                handed_out = now
                yield batch
        finally:
            self._record(finished=True)

    def _count(self, step_s, wait_s, samples):
        self.steps += 1
        self._samples += samples
        self._step_s += step_s
        self._wait_s += wait_s
        self._window_steps += 1
        self._window_samples += samples
        self._window_step_s += step_s
        self._window_wait_s += wait_s
        if self._every and self._window_steps >= self._every:
            self._log_window()
        if self._record_every and self.steps % self._record_every == 0:
            self._record(finished=False)

    def _log_window(self):
        share = self._window_wait_s / self._window_step_s if self._window_step_s > 0 else 0.0
        rate = self._window_samples / self._window_step_s if self._window_step_s > 0 else 0.0
        line = ("feedtune.watch: step %d: %.1f%% input-bound (%s): batch wait %.2f of %.2f ms per step, "
                "%.1f samples/s over the last %d steps" %
                (self.steps, share * 100, band(share), self._window_wait_s / self._window_steps * 1e3,
                 self._window_step_s / self._window_steps * 1e3, rate, self._window_steps))
        self._window_steps = 0
        self._window_samples = 0
        self._window_step_s = 0.0
        self._window_wait_s = 0.0
        try:
            self._log(line)
        except Exception:
            pass  # a broken logger must not end the job either

    @property
    def samples_per_s(self):
        return self._samples / self._step_s if self._step_s > 0 else 0.0

    @property
    def input_bound_frac(self):
        return self._wait_s / self._step_s if self._step_s > 0 else 0.0

    @property
    def records_written(self):
        return self._writer.written if self._writer else 0

    @property
    def last_error(self):
        return self._writer.last_error if self._writer else None

    def record(self):
        """The observed run as `feedtune observe` takes it (None before the first step)."""
        if self.steps == 0:
            return None
        knobs = dict(self._knobs)
        if knobs["batch_size"] is None:
            knobs["batch_size"] = max(1, round(self._samples / self.steps))
        return {
            "config": self._config,
            "samples_per_s": self.samples_per_s,
            "input_bound_frac": min(1.0, self.input_bound_frac),
            "steps": self.steps,
            "knobs": knobs,
            "step_s": self._step_s / self.steps,
            "wait_s": min(self._wait_s, self._step_s) / self.steps,
            "started_at": self._started_at,
            "ended_at": _utc_now(),
            "finished": False,
            "uid": self._uid,
            "sweep_run_id": self._sweep_run_id,
            "source": "feedtune.watch",
        }

    def _record(self, finished):
        if self._writer is None:
            return
        record = self.record()
        if record is None:
            return
        record["finished"] = finished
        try:
            self._writer.submit(record)
        except Exception as error:  # e.g. no thread can start at interpreter shutdown: the job goes on
            self._writer.failures += 1
            self._writer.last_error = str(error)
            self._writer._safe_log("feedtune.watch: could not start recording the observed run in %s: %s "
                                   "(the job goes on)" % (self._results, error))

    def close(self, timeout=None):
        """Waits (up to timeout seconds) for the pending records to be written; True when done."""
        return self._writer.close(timeout) if self._writer else True
