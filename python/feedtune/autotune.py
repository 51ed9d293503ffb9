"""feedtune.autotune: tune the DataLoader inside the training job, on the job's
own batches and its own step, with feedtune's own search.

    loader = feedtune.autotune(DataLoader(ds, batch_size=64, shuffle=True), results="fleet.db", config="my-job")
    for epoch in range(epochs):
        for x, y in loader:                    # the first batches try settings; the rest run at the best
            train_step(x.to(dev, non_blocking=loader.non_blocking), y)

How (docs/python.md, "Tuning inside the job"):
- The job starts the feedtune binary as its child (`feedtune sweep CONFIG
  --serve-fd N`), which runs the same search as `feedtune sweep` and sends
  its requests, one per trial, on a socket (the serve protocol of
  docs/command-protocol.md, turned around: the job answers, feedtune asks).
- Each epoch's batches of indices are drawn once, from the user's own
  batch_sampler, consuming the user's generator as the user's DataLoader
  would (its base seed, then the sampler). A trial's DataLoader gets the
  trial's knobs over a batch_sampler that hands out the next of those
  batches; when its windows are measured it is cut off and drains what it
  had dispatched, so every batch reaches the loop once, in order.
- A window's figures: samples over the time of its batches, where a batch's
  time is the wait inside next() plus the user's step (the time until the
  loop asks again); the time between epochs (the user's own end-of-epoch
  work) counts in neither.
- Anything that goes wrong (no binary, the controller dies, a trial's
  DataLoader fails) puts the loader in "fallback": the user's own setting,
  from the next undelivered batch on, with one warning.

Stdlib and torch only.
"""

import json
import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import types
import warnings
import weakref

from . import preflight
from .measure import batch_bytes, batch_len, percentile
from .session import UserParts

# The knobs a trial sets, and the user's DataLoader arguments kept for every trial.
_KNOBS = ("num_workers", "pin_memory", "prefetch_factor", "persistent_workers")
_KEPT = ("collate_fn", "worker_init_fn", "timeout", "pin_memory_device")
# Batches run at the user's own setting before the controller starts, to size
# the windows and the default budget (the first one pays the workers' start).
_PROBE_BATCHES = 4
_MIN_BUDGET_S = 30.0
# A time window also holds at least this many of the job's batches: a slow
# setting's window grows to them, a fast one's stays at measure_seconds.
_MIN_WINDOW_BATCHES = 4
# How long a controller told to stop (SIGINT) may take to mark its run
# interrupted and exit before it is killed: it sees the signal within 0.1 s
# (its wait for the job's lines), then writes one transaction.
_STOP_GRACE_S = 5.0


class AutotuneError(Exception):
    """The user's DataLoader cannot be tuned in the job (the message says why and what to use instead)."""


def _find_binary(feedtune_bin):
    """(path, None), or (None, why): feedtune_bin, then $FEEDTUNE_BIN, then
    PATH, then the build tree beside the package. A binary named by the
    argument or the variable must be there: it is not looked for elsewhere."""
    for named, where in ((feedtune_bin, "feedtune_bin=%r"), (os.environ.get("FEEDTUNE_BIN"), "FEEDTUNE_BIN=%r")):
        if named:
            if os.path.isfile(named) and os.access(named, os.X_OK):
                return os.path.abspath(named), None
            return None, "no executable feedtune binary at " + where % named
    built = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir, "build", "tuner", "cli",
                         "feedtune")
    for path in (shutil.which("feedtune"), built):
        if path and os.path.isfile(path) and os.access(path, os.X_OK):
            return os.path.abspath(path), None
    return None, ("no feedtune binary (install it, put it on PATH, set FEEDTUNE_BIN, or build it in the checkout: "
                  "make build)")


def _yaml_str(text):
    return json.dumps(str(text))  # a JSON string is a YAML double-quoted scalar


class _Feed:
    """The batch_sampler of a trial's (or the final) DataLoader: hands out the
    current epoch's index batches from `pos` on, until cut off. torch iterates
    it in the main process, so `pos` counts the batches dispatched."""

    def __init__(self):
        self.plan, self.pos, self.cut = [], 0, False
        self.end_s = 0.0  # the last next() that ended an epoch: the DataLoader's own (its workers' shutdown)

    def start(self, plan, pos):
        self.plan, self.pos, self.cut = plan, pos, False

    def __iter__(self):
        while not self.cut and self.pos < len(self.plan):
            batch = self.plan[self.pos]
            self.pos += 1
            yield batch

    def __len__(self):
        return len(self.plan)


class _Ranks:
    """The job's torch.distributed ranks, when there are two or more. Rank 0
    runs the controller; what it decides reaches every rank at the same batch
    (a broadcast), and a window's figure is the slowest rank's (an all-gather).
    Every rank passes the same collectives in the same order: after the probe,
    at each request, at each window's end, at the decision."""

    def __init__(self, dist):
        self._dist = dist
        self.rank, self.size = dist.get_rank(), dist.get_world_size()
        self.leader = self.rank == 0

    @staticmethod
    def of_job():
        try:
            import torch.distributed as dist
        except ImportError:
            return None
        if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
            return _Ranks(dist)
        return None

    def share(self, obj):
        """Rank 0's `obj`, on every rank."""
        box = [obj if self.leader else None]
        self._dist.broadcast_object_list(box, src=0)
        return box[0]

    def gather(self, obj):
        """Every rank's `obj`, in rank order, on every rank."""
        out = [None] * self.size
        self._dist.all_gather_object(out, obj)
        return out


class _Remote:
    """The controller as a rank other than 0 sees it: on rank 0."""

    def close(self):
        pass


_REMOTE = _Remote()


def _stop(process, parent_pid, grace_s=_STOP_GRACE_S):
    """Ends the controller if it still runs: SIGINT to its group first, so that
    it marks its run interrupted with the trials so far and exits (130), as a
    sweep does on Ctrl-C; SIGKILL only when it has not within grace_s. Killed
    at once, the run would stay "running" until the next open of the results
    file found its process gone. Only from the process that started it: a
    forked DataLoader worker holds a copy of this object, not the controller."""
    if os.getpid() != parent_pid or process.poll() is not None:
        return
    for sig, wait_s in ((signal.SIGINT, grace_s), (signal.SIGKILL, None)):
        try:
            os.killpg(process.pid, sig)
        except OSError:  # gone already (not yet reaped: wait below reaps it)
            pass
        try:
            process.wait(timeout=wait_s)
            return
        except subprocess.TimeoutExpired:
            continue


def _end_controller(process, parent_pid, files, folder):
    """The controller's end, once: close() or, when the job leaves without it
    (an uncaught KeyboardInterrupt, sys.exit), at the interpreter's exit.
    The signal comes before the socket closes: a controller that read the
    socket's end first would fail the trial in flight, not stop."""
    _stop(process, parent_pid)
    for f in files:
        try:
            f.close()
        except OSError:
            pass
    if os.getpid() == parent_pid:
        shutil.rmtree(folder, ignore_errors=True)


class _Controller:
    """The feedtune child: `feedtune sweep --serve-fd`, its socket, its output files."""

    def __init__(self, binary, config_yaml, results, label, preflight):
        self.dir = tempfile.mkdtemp(prefix="feedtune-autotune-")
        config_path = os.path.join(self.dir, "autotune.yaml")
        with open(config_path, "w") as f:
            f.write(config_yaml)
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self.out = open(os.path.join(self.dir, "events.jsonl"), "w+")
        self.err = open(os.path.join(self.dir, "progress.txt"), "w+")
        # The job says its own preflight (its Python, torch and start method):
        # the sweep cannot start the job's argv to ask, and with it the
        # multiprocessing_context phase runs as in a sweep.
        command = [binary, "sweep", config_path, "--db", results, "--json", "--serve-fd", str(theirs.fileno()),
                   "--serve-preflight", json.dumps({"preflight": preflight})]
        if os.path.isfile(results):
            # An earlier tuning of this config on this host (or its class)
            # seeds the search: it starts at that answer and confirms it
            # around its knee instead of walking every phase (docs/fleets.md).
            command += ["--seed-from", results]
        if label:
            command += ["--label", label]
        # Its own session: the terminal's Ctrl-C goes to the job, which ends the controller itself.
        self.process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=self.out, stderr=self.err,
                                        pass_fds=(theirs.fileno(),), start_new_session=True)
        theirs.close()
        self.sock = ours
        self.reader = ours.makefile("r", encoding="utf-8")
        # Runs at close(), or at the interpreter's exit (weakref.finalize's
        # atexit) when the job ends without closing the loader.
        self.parent_pid = os.getpid()
        self._end = weakref.finalize(self, _end_controller, self.process, self.parent_pid,
                                     (self.reader, self.sock, self.out, self.err), self.dir)

    def next_request(self):
        """The next trial's request as a dict, or None when the search is over (the socket closed)."""
        line = self.reader.readline()
        while line and not line.strip():
            line = self.reader.readline()
        return json.loads(line) if line else None

    def say(self, obj):
        self.sock.sendall((json.dumps(obj) + "\n").encode())

    def finish(self, timeout_s=60.0):
        """Waits for the controller to end; its done and seed events (or None) and its exit code."""
        try:
            code = self.process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.stop()
            code = self.process.wait()
        self.out.seek(0)
        found = {}
        for line in self.out:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if isinstance(event, dict) and event.get("event") in ("done", "seed"):
                found[event["event"]] = event
        return found.get("done"), found.get("seed"), code

    def stderr_tail(self, lines=6):
        self.err.flush()
        self.err.seek(0)
        return " | ".join(l.strip() for l in self.err.read().splitlines()[-lines:] if l.strip())

    def stop(self):
        _stop(self.process, self.parent_pid)

    def close(self):
        self._end()


class _Trial:
    """One request being answered: its DataLoader, warm-up and windows."""

    def __init__(self, request, batches_per_epoch, window_batches=0):
        self.request = request
        self.failed = None  # across ranks: this rank's trial DataLoader failed (why); it goes on at its own setting
        self.loader = None  # made at its first epoch, again after the loop left one mid-trial
        self.warmup_left = request["warmup_batches"]
        self.windows_left = request["repeats"]
        epochs = request["window_epochs"]
        # Whole epochs; else, across ranks, a count of batches (every rank ends
        # the window at the same batch); else measure_seconds of batches.
        self.window_batches = epochs * batches_per_epoch if epochs > 0 else window_batches
        self.seconds = request["measure_seconds"]
        self.created = time.monotonic()
        self.first_batch_s = None
        self.epoch_first = True  # the next batch is the first of an epoch inside this trial
        # The next() that ended the last epoch inside this trial: without
        # persistent workers it shuts the workers down (14-70 ms for 1-8
        # workers on the CNN job), a cost of the setting that no batch's wait
        # holds; the next epoch's first batch carries it.
        self.epoch_end_s = 0.0
        self._new_window()

    def _new_window(self):
        self.time_s, self.samples, self.bytes, self.batches = 0.0, 0, 0, 0
        self.waits, self.wait_s, self.first_waits = [], 0.0, []

    @property
    def measuring(self):
        return self.windows_left > 0

    def add(self, batch, wait_s, step_s, batch_size):
        """Counts one delivered batch; returns a finished window's figures or None."""
        if self.first_batch_s is None:
            self.first_batch_s = time.monotonic() - self.created
        epoch_first, self.epoch_first = self.epoch_first, False
        if epoch_first:
            wait_s, self.epoch_end_s = wait_s + self.epoch_end_s, 0.0
        if not self.measuring:
            return None
        if self.warmup_left > 0:
            self.warmup_left -= 1
            return None
        self.time_s += wait_s + step_s
        self.wait_s += wait_s
        self.samples += batch_len(batch, batch_size)
        self.bytes += batch_bytes(batch)
        self.batches += 1
        self.waits.append(wait_s)
        if epoch_first:
            self.first_waits.append(wait_s)
        if self.window_batches > 0:
            full = self.batches >= self.window_batches
        else:
            full = self.time_s >= self.seconds and self.batches >= _MIN_WINDOW_BATCHES
        if not full:
            return None
        waits_us = [w * 1e6 for w in self.waits]
        report = {"samples_per_s": self.samples / self.time_s if self.time_s > 0 else 0.0,
                  "gpu_idle_frac": min(1.0, self.wait_s / self.time_s) if self.time_s > 0 else 0.0,
                  "wait_p50_us": percentile(waits_us, 50), "wait_p99_us": percentile(waits_us, 99),
                  "mb_per_s": self.bytes / self.time_s / 1e6 if self.time_s > 0 else 0.0,
                  "time_to_first_batch_s": self.first_batch_s}
        if self.first_waits:
            report["epoch_boundary_ms"] = (percentile(self.first_waits, 50) - percentile(self.waits, 50)) * 1e3
        self.windows_left -= 1
        self._new_window()
        return report


class AutotunedLoader:
    """What feedtune.autotune returns: iterable per epoch like the user's
    DataLoader, with the same batches in the same order. `phase` is "tuning",
    "tuned" or "fallback"; `settings` the DataLoader keyword arguments in use
    now (and non_blocking); `non_blocking` what to pass to .to(). Other
    attributes (dataset, sampler, batch_size, ...) are the user's loader's."""

    def __init__(self, loader, results, config, budget_s, feedtune_bin, label, verbose):
        import torch
        import torch.utils.data

        self._torch = torch
        if isinstance(loader.dataset, torch.utils.data.IterableDataset):
            raise AutotuneError(
                "feedtune.autotune: the dataset is an IterableDataset, whose order follows the worker count "
                "(each worker reads its own shards through get_worker_info()), so no setting can be tried without "
                "changing which samples come when; tune it outside the job with `feedtune sweep` and a tune.py "
                "that calls feedtune.serve (docs/python.md), then take the answer with feedtune.loader_kwargs")
        if loader.batch_sampler is None:
            raise AutotuneError("feedtune.autotune: the DataLoader has batch_size=None (no automatic batching); "
                                "give it a batch_size or a batch_sampler")
        self._user = loader
        self._results = os.fspath(results) if results else os.path.join(tempfile.gettempdir(), "feedtune-autotune.db")
        self._config = config or "autotune"
        self._budget_s = budget_s
        self._binary, self._no_binary = _find_binary(feedtune_bin)
        self._label = label
        self._verbose = verbose
        self._own = {k: getattr(loader, k) for k in _KNOBS}
        if self._own["num_workers"] == 0:  # torch rejects these without workers
            self._own["prefetch_factor"] = 2
            self._own["persistent_workers"] = False
        self._own["multiprocessing_context"] = loader.multiprocessing_context
        self._non_blocking = False
        self._settings = self._own
        self.phase = "tuning"
        self.decision = ""
        # Trial loaders draw their workers' base seeds from their own generator,
        # so the user's generator (or torch's global one) advances exactly as
        # under the user's own DataLoader; seeded from it, so a seeded job
        # stays reproducible.
        g = loader.generator
        self._seeds = torch.Generator().manual_seed(((g.initial_seed() if g is not None else torch.initial_seed())
                                                      ^ 0x5EED) & ((1 << 63) - 1))
        self._epochs = 0
        self._controller = None
        self._trial = None
        self._final = None  # the DataLoader of "tuned" or "fallback", kept across epochs (persistent workers)
        self._probe = []  # (wait + step) of the first batches at the user's setting
        self._tuning_started = None
        self._ranks = None  # _Ranks under torch.distributed with 2 or more ranks
        self._window_batches = 0  # across ranks: a window's batches (0: measure_seconds)
        self._rank_failure = None  # across ranks: a trial that failed here, until the next collective

    # --- what the job sees -------------------------------------------------

    def __len__(self):
        return len(self._user)

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._user, name)

    @property
    def non_blocking(self):
        return self._non_blocking

    @property
    def settings(self):
        s = dict(self._settings)
        if s["num_workers"] == 0:
            s.pop("prefetch_factor", None)
            s.pop("persistent_workers", None)
        if s.get("multiprocessing_context") is None:
            s.pop("multiprocessing_context", None)
        s["non_blocking"] = self._non_blocking
        return s

    def __iter__(self):
        plan = self._draw_epoch()
        pos = 0
        try:
            while pos < len(plan):
                if self.phase == "tuning":
                    pos = yield from self._tuning(plan, pos)
                else:
                    pos = yield from self._steady(plan, pos)
        except GeneratorExit:
            # The loop left the epoch: a break, or an exception of the user's
            # own that goes on up unchanged. A trial's workers stop now (the
            # trial goes on with a new DataLoader if there is a next epoch);
            # the steady DataLoader's stay, as the user's own would.
            self._stop_trial_loader()
            raise

    def close(self):
        """Shuts every DataLoader and the controller down (also when the loader is collected)."""
        self._shutdown()

    def __del__(self):
        try:
            self._shutdown()
        except Exception:  # at interpreter exit torch or os may be gone already
            pass

    # --- the order ------------------------------------------------------------

    def _draw_epoch(self):
        """This epoch's batches of indices, drawn as the user's DataLoader's
        iterator would: the base seed from its generator (once in all with
        persistent workers, which keep one iterator), then its batch_sampler."""
        user = self._user
        if self._epochs == 0 or not (user.persistent_workers and user.num_workers > 0):
            self._torch.empty((), dtype=self._torch.int64).random_(generator=user.generator)
        self._epochs += 1
        return [list(b) for b in user.batch_sampler]

    def _make_loader(self, knobs):
        torch = self._torch
        user = self._user
        kwargs = {k: getattr(user, k) for k in _KEPT}
        kwargs.update(num_workers=knobs["num_workers"], pin_memory=knobs["pin_memory"])
        if knobs["num_workers"] > 0:
            kwargs.update(prefetch_factor=knobs["prefetch_factor"], persistent_workers=knobs["persistent_workers"])
            if knobs.get("multiprocessing_context"):
                kwargs["multiprocessing_context"] = knobs["multiprocessing_context"]
        feed = _Feed()
        loader = torch.utils.data.DataLoader(user.dataset, batch_sampler=feed, generator=self._seeds, **kwargs)
        loader.feedtune_feed = feed
        return loader

    def _deliver(self, loader, plan, pos, on_batch=None):
        """Yields `loader`'s batches of plan[pos:], until cut off; returns the
        next undelivered position. A failure inside the DataLoader rewinds to
        the first batch not delivered and raises _TrialFailed."""
        feed = loader.feedtune_feed
        feed.start(plan, pos)
        delivered = pos
        it = None
        while True:
            t0 = time.monotonic()
            try:
                if it is None:  # starts the workers: under spawn it pickles the dataset
                    it = iter(loader)
                batch = next(it)
            except StopIteration:
                feed.end_s = time.monotonic() - t0
                return delivered
            except Exception as e:  # a worker died, a dataset that does not pickle: the job goes on without it
                # The iterator outlives `it` (the exception's traceback holds
                # it), and until it shuts down its worker pids stay in torch's
                # SIGCHLD table: a later SIGCHLD then raises "DataLoader worker
                # ... is killed by signal" wherever the job happens to be (once
                # inside the message to the controller, out to the user's loop).
                self._shutdown_iterator(it)
                it = None
                self._shutdown_loader(loader)
                raise _TrialFailed(e, delivered) from e
            t1 = time.monotonic()
            yield batch
            delivered += 1
            if on_batch is not None:
                on_batch(batch, t1 - t0, time.monotonic() - t1)

    # --- tuning ---------------------------------------------------------------

    def _tuning(self, plan, pos):
        if self._controller is None and not self._start(plan, pos):
            return pos
        if len(self._probe) < _PROBE_BATCHES:
            return (yield from self._probe_batches(plan, pos))
        if self._trial is None:
            message = self._next_message()
            if "broken" in message:
                self._fall_back(message["broken"])
                return pos
            if "end" in message:
                self._decide()
                return pos
            request = message["request"]
            self._trial = _Trial(request, len(plan), self._window_batches)
            self._non_blocking = bool(request["non_blocking"])
            self._settings = {k: request[k] for k in _KNOBS}
            self._settings["multiprocessing_context"] = request.get("multiprocessing_context")
        trial = self._trial
        if trial.loader is None:  # the loop left the last epoch mid-trial
            trial.loader = self._make_loader(self._own if trial.failed else trial.request)
        trial.epoch_first = pos == 0
        broken = []

        def on_batch(batch, wait_s, step_s):
            report = trial.add(batch, wait_s, step_s, self._user.batch_size or 1)
            if report is None or broken:
                return
            report["batches_per_epoch"] = len(plan)
            why = self._send_window(trial, report)
            if why:
                broken.append(why)
            if why or not trial.measuring:
                trial.loader.feedtune_feed.cut = True  # drain what was dispatched, then the next request

        while True:
            try:
                pos = yield from self._deliver(trial.loader, plan, pos, on_batch)
                if pos >= len(plan) and trial.measuring:  # the trial goes on in the next epoch
                    trial.epoch_end_s = trial.loader.feedtune_feed.end_s
                break
            except _TrialFailed as failure:
                what = "%s, with num_workers=%d" % (failure.text, trial.request["num_workers"])
                if self._ranks is None:
                    self._trial = None
                    try:
                        self._controller.say({"error": "in the job: %s" % failure.text})
                    except OSError:
                        pass
                    self._fall_back("a trial's DataLoader failed (%s)" % what)
                    return failure.delivered
                # One rank's failure reaches the others at the next collective
                # (the window's end, or the next request); until then this rank
                # goes on at its own setting, so every rank passes it.
                trial.failed = self._rank_failure = "on rank %d: %s" % (self._ranks.rank, what)
                trial.loader = self._make_loader(self._own)
                pos = failure.delivered
        if broken:
            self._shutdown_loader(trial.loader)
            self._trial = None
            self._fall_back(broken[0])
        elif not trial.measuring:
            self._shutdown_loader(trial.loader)
            self._trial = None
        return pos  # an epoch that ended mid-trial: the trial goes on in the next one

    def _next_message(self):
        """What comes next, the same on every rank: {"request": ...}, {"end":
        True} (the search is over) or {"broken": why}. Rank 0 reads it from the
        controller and broadcasts it; a trial that failed on any rank ends the
        tuning on all of them."""
        failures = []
        if self._ranks is not None:
            failures = [f for f in self._ranks.gather(self._rank_failure) if f]
        message = None
        if self._controller is not _REMOTE:
            if failures:
                try:
                    self._controller.say({"error": "in the job: %s" % failures[0]})
                except OSError:
                    pass
                message = {"broken": "a trial's DataLoader failed (%s)" % failures[0]}
            else:
                try:
                    request = self._controller.next_request()
                    message = {"end": True} if request is None else {"request": request}
                except (OSError, ValueError) as e:
                    message = {"broken": "the feedtune controller broke the connection (%s)" % e}
        return self._ranks.share(message) if self._ranks is not None else message

    def _send_window(self, trial, report):
        """Hands a finished window to the controller (across ranks: the slowest
        rank's, by rank 0); returns why the tuning must stop, or None."""
        why = None
        if self._ranks is not None:
            reports = self._ranks.gather({"failed": trial.failed} if trial.failed else report)
            failed = [r["failed"] for r in reports if "failed" in r]
            if failed:
                report, why = {"error": "in the job: %s" % failed[0]}, "a trial's DataLoader failed (%s)" % failed[0]
            else:
                report = min(reports, key=lambda r: r["samples_per_s"])
        if self._controller is not _REMOTE:
            try:
                self._controller.say(report)
                if not why and not trial.measuring:
                    self._controller.say({"trial_end": trial.request["trial"]})
            except OSError as e:
                why = why or "the feedtune controller went away (%s)" % e
        return self._ranks.share(why) if self._ranks is not None else why

    def _probe_batches(self, plan, pos):
        """The first batches at the user's own setting: they size the windows and the default budget."""
        loader = self._make_loader(self._own)

        def on_batch(batch, wait_s, step_s):
            self._probe.append(wait_s + step_s)
            if len(self._probe) >= _PROBE_BATCHES:
                loader.feedtune_feed.cut = True

        try:
            pos = yield from self._deliver(loader, plan, pos, on_batch)
        except _TrialFailed as failure:
            self._fall_back("the DataLoader at your own setting failed (%s)" % failure.text)
            return failure.delivered
        self._shutdown_loader(loader)
        if len(self._probe) >= _PROBE_BATCHES:
            self._launch(len(plan))  # on failure it falls back itself
        return pos

    def _start(self, plan, pos):
        """Checks what tuning needs before the first batch; False: fallback.
        Across ranks, rank 0's binary is the one that runs."""
        self._ranks = _Ranks.of_job()
        why = self._no_binary if self._binary is None else None
        if self._ranks is not None:
            why = self._ranks.share(why)
        if why:
            self._fall_back(why)
            return False
        self._controller = False  # probing: started after the first batches
        return True

    def _launch(self, batches_per_epoch):
        """Starts the controller, sized by the probe's batches; False: fallback.
        Across ranks: sized by the slowest rank, started by rank 0, and its
        windows counted in batches, so that every rank ends each at the same batch."""
        per_batch = percentile(self._probe[1:], 50)  # the first batch paid the workers' start
        if self._ranks is not None:
            per_batch = max(self._ranks.gather(per_batch))
        epoch_s = per_batch * batches_per_epoch
        budget = self._budget_s if self._budget_s else max(_MIN_BUDGET_S, 0.1 * epoch_s)
        # Windows short enough for the whole sequence (about 20 trials of
        # three windows, a warm-up and the workers' start) in the budget; each
        # also holds _MIN_WINDOW_BATCHES batches (_Trial.add).
        seconds = min(2.0, max(0.25, budget / 120.0))
        if self._ranks is not None:
            self._window_batches = max(_MIN_WINDOW_BATCHES, int(math.ceil(seconds / per_batch)) if per_batch > 0 else 0)
            why = self._start_controller(budget, seconds) if self._ranks.leader else None
            why = self._ranks.share(why)
            if why:
                self._fall_back(why)
                return False
            if not self._ranks.leader:
                self._controller = _REMOTE
                self._tuning_started = time.monotonic()
            return True
        why = self._start_controller(budget, seconds)
        if why:
            self._fall_back(why)
            return False
        return True

    def _preflight(self, method):
        """The job's preflight object (python/feedtune/preflight.py), with the
        pickle check the sweep would ask of this config (PickleCheckFor in
        tuner/measure/python_preflight.cc): always when the user's start method
        (`method`, None: the default) pickles, else when the interpreter's
        default is not fork."""
        user = self._user
        check = preflight.CHECK_ALWAYS if method in ("forkserver", "spawn") else preflight.CHECK_UNLESS_FORK
        names = {"collate_fn": "the DataLoader's collate_fn", "worker_init_fn": "the DataLoader's worker_init_fn"}
        parts = UserParts(collate_fn=user.collate_fn, worker_init_fn=user.worker_init_fn, names=names)
        setup = types.SimpleNamespace(dataset=user.dataset, parts=parts, torch=self._torch)
        return preflight.preflight_report(setup, check)

    def _start_method(self):
        """The user's multiprocessing_context by name, or None (the interpreter's default)."""
        context = self._own["multiprocessing_context"]
        if context is None or isinstance(context, str):
            return context
        return context.get_start_method()

    def _start_controller(self, budget, seconds):
        """Writes the config and starts `feedtune sweep --serve-fd`; returns why it could not, or None."""
        user = self._user
        knobs = self._own
        method = self._start_method()
        report = self._preflight(method)
        if report["pickle_error"]:
            # Every trial with workers would fail as it starts them.
            return "the trials' workers cannot be started: " + report["pickle_error"]
        lines = [
            "# written by feedtune.autotune for one run inside the job; not a config to sweep by hand",
            "name: %s" % _yaml_str(self._config),
            "workload:",
            "  kind: command",
            "  protocol: serve",
            "  argv: [%s, %s]" % (_yaml_str(sys.executable), _yaml_str(os.path.abspath(sys.argv[0] or "job"))),
            "  timeout_s: %g" % max(600.0, 20 * budget),
            "loader:",
            "  batch_size: %d" % (user.batch_size or 1),
            "  drop_last: %s" % ("true" if user.drop_last else "false"),
            "  num_workers: %d" % knobs["num_workers"],
            "  pin_memory: %s" % ("true" if knobs["pin_memory"] else "false"),
            "  prefetch_factor: %d" % knobs["prefetch_factor"],
            "  persistent_workers: %s" % ("true" if knobs["persistent_workers"] else "false"),
        ] + (["  multiprocessing_context: %s" % method] if method else []) + [
            "device:",
            "  backend: host-sim",  # the job owns the GPU; the controller needs none
            "sweep:",
            "  repeats: 3",
            "  warmup_batches: 2",
            "  measure_seconds: %g" % seconds,
            "  time_budget_s: %g" % budget,
            "  ranks: 1",
            "  diagnose: false",
            # Training on the CPU, no batch is copied and torch ignores
            # pin_memory: the pin_memory and non_blocking phases are skipped.
            "  copy_phases: %s" % ("true" if self._torch.cuda.is_available() else "false"),
        ]
        try:
            self._controller = _Controller(self._binary, "\n".join(lines) + "\n", self._results, self._label, report)
        except OSError as e:
            self._controller = None
            return "cannot start %s (%s)" % (self._binary, e)
        self._tuning_started = time.monotonic()
        return None

    # --- the answer -------------------------------------------------------------

    def _decide(self):
        """The search is over: every rank takes rank 0's answer at the same batch."""
        answer = self._answer() if self._controller is not _REMOTE else None
        if self._ranks is not None:
            answer = self._ranks.share(answer)
        if "fallback" in answer:
            self._fall_back(answer["fallback"])
            return
        knobs = dict(answer["knobs"])
        if knobs.get("multiprocessing_context") is None:  # the phase kept the job's own
            knobs["multiprocessing_context"] = self._own["multiprocessing_context"]
        self._settings, self._non_blocking, self.decision = knobs, answer["non_blocking"], answer["decision"]
        if self._verbose and (self._ranks is None or self._ranks.leader):
            sys.stderr.write(self.decision + "\n")
        if self._controller is not _REMOTE:
            self._controller.close()
        self._controller = None
        self.phase = "tuned"

    def _answer(self):
        """The controller's answer: {"knobs", "non_blocking", "decision"}, or {"fallback": why}."""
        done, seed, code = self._controller.finish()
        if done is None or not done.get("best"):
            why = "the search ended with exit %d and no best setting" % code
            tail = self._controller.stderr_tail()
            return {"fallback": why + (": " + tail if tail else "")}
        spent = time.monotonic() - self._tuning_started
        knobs, non_blocking, verdict = _verdict(done, self._own)
        budget_note = ""
        if seed is not None:
            stored = seed.get("seed", {})
            budget_note += "; the stored answer of run %s of %s" % (stored.get("run"),
                                                                    stored.get("run_host") or "this host")
        for phase in done.get("phases", []):
            if phase.get("phase") in ("seed_check", "time_budget"):
                budget_note += "; " + phase.get("why", "")
        ranks = " across %d ranks (each window the slowest rank's)" % self._ranks.size if self._ranks else ""
        method = knobs["multiprocessing_context"]
        decision = ("feedtune.autotune: num_workers=%d pin_memory=%s prefetch_factor=%s persistent_workers=%s%s "
                    "non_blocking=%s: %s; %d trials in %.1f s%s (run %s in %s)%s"
                    % (knobs["num_workers"], knobs["pin_memory"], knobs["prefetch_factor"],
                       knobs["persistent_workers"], " multiprocessing_context=" + method if method else "",
                       non_blocking, verdict, done.get("trials", 0), spent, ranks,
                       done.get("run_id"), self._results, budget_note))
        return {"knobs": knobs, "non_blocking": non_blocking, "decision": decision}

    def _fall_back(self, why):
        if self._controller:
            self._controller.close()
        self._controller = None
        self._settings, self._non_blocking = dict(self._own), False
        self.phase = "fallback"
        self.decision = "feedtune.autotune: %s; the job goes on at its own DataLoader setting" % why
        warnings.warn(self.decision, RuntimeWarning, stacklevel=3)

    def _steady(self, plan, pos):
        """The rest of the job at the decided setting, one DataLoader for all epochs."""
        if self._final is None:
            self._final = self._make_loader(self._settings)
        loader = self._final
        try:
            return (yield from self._deliver(loader, plan, pos))
        except _TrialFailed as failure:
            if self._settings == self._own:
                raise failure.error  # the user's own setting fails: as their DataLoader would
            self._final = None
            self._fall_back("the tuned DataLoader failed (%s)" % failure.text)
            return failure.delivered

    # --- shutting down ------------------------------------------------------------

    @staticmethod
    def _shutdown_iterator(it):
        """Stops a DataLoader iterator's workers and takes their pids out of
        torch's SIGCHLD table; a worker already dead is no error here."""
        if it is not None and hasattr(it, "_shutdown_workers"):
            try:
                it._shutdown_workers()
            except Exception:  # the SIGCHLD of the dead worker, raised while the others are joined
                pass

    @classmethod
    def _shutdown_loader(cls, loader):
        cls._shutdown_iterator(getattr(loader, "_iterator", None))  # persistent workers outlive the epoch's iterator
        loader._iterator = None

    def _stop_trial_loader(self):
        if self._trial is not None and self._trial.loader is not None:
            self._shutdown_loader(self._trial.loader)
            self._trial.loader = None

    def _shutdown(self):
        self._stop_trial_loader()
        self._trial = None
        if self._final is not None:
            self._shutdown_loader(self._final)
            self._final = None
        if self._controller:
            self._controller.close()
            self._controller = None


def _verdict(done, own):
    """What the job runs after the search's `done` event: (knobs, non_blocking,
    the verdict's words). The search's best, unless its final check against
    the job's own setting (`own`) put it slower beyond the noise: the pairs'
    interval wholly below x1.00, the seed check's rule. A median below x1.00
    within the noise does not overturn what the search kept by THE RULE
    (docs/search.md): on a drifting machine three pairs of short windows can
    put a real gain on either side of x1.00."""
    best = done["best"]["config"]
    speedup = done.get("speedup")
    interval = done.get("speedup_ci") or [speedup, speedup]
    if speedup is not None and interval[1] is not None and interval[1] < 1.0:
        knobs = {k: own[k] for k in _KNOBS}
        knobs["multiprocessing_context"] = None
        return knobs, False, ("kept your own setting: the best found ran x%.2f [%.2f, %.2f] of it in the final "
                              "check, slower beyond the noise" % (speedup, interval[0], interval[1]))
    knobs = {k: best[k] for k in _KNOBS}
    knobs["multiprocessing_context"] = best.get("multiprocessing_context")  # None: the job's own
    phases = {p.get("phase"): p for p in done.get("phases", [])}
    checked = phases.get("final_check") or phases.get("seed_check_pairs") or {}
    if checked.get("why", "").startswith("not run"):
        verdict = "your own setting is the best found"
    elif speedup is not None:
        verdict = "x%.2f [%.2f, %.2f] over your own setting (%s)" % (
            speedup, interval[0], interval[1], "final check" if "final_check" in phases else "the stored setting's check")
    else:
        verdict = "not checked against your own setting (the budget ended the search first)"
    return knobs, bool(best["non_blocking"]), verdict


class _TrialFailed(Exception):
    def __init__(self, error, delivered):
        super().__init__(str(error))
        self.error, self.delivered = error, delivered
        self.text = "%s: %s" % (type(error).__name__, str(error).splitlines()[0] if str(error) else "")


def autotune(loader, results=None, config=None, budget_s=None, feedtune_bin=None, label=None, verbose=True):
    """Tunes `loader` (a torch DataLoader) inside the job; returns an
    AutotunedLoader that yields the same batches in the same order.

    results: the results file the tuning is stored in (a run like a sweep's);
        default a file in the temporary directory.
    config: the workload's name in that file (the `name:` a sweep would have).
    budget_s: the tuning's time bound; default 10% of the first epoch's
        estimated time, at least 30 s. At the budget the best so far is kept.
    feedtune_bin: the binary; default $FEEDTUNE_BIN, then PATH, then the build
        tree beside this package.
    label: this host's label in the results file (default its hostname).
    verbose: print the decision line on stderr.

    Raises AutotuneError for a loader that cannot keep its order under
    another setting (an IterableDataset, batch_size=None).
    """
    if budget_s is not None and not budget_s > 0:
        raise ValueError("feedtune.autotune: budget_s must be > 0 seconds, got %r" % (budget_s,))
    return AutotunedLoader(loader, results, config, budget_s, feedtune_bin, label, verbose)
