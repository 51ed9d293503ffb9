"""feedtune.autotune's controller: the feedtune binary the job starts as its
child (`feedtune sweep CONFIG --serve-fd N`), the socket it asks on, the
output it leaves, and its end (SIGINT first, so its run ends interrupted).

Apart because this is the one part that holds a process and a wire protocol
(docs/command-protocol.md, turned around: feedtune asks, the job answers):
the tuning (tuning.py) sees a request as a dict and answers with a dict, and
never a pid or a file descriptor. The job's torch.distributed ranks are here
too (_Ranks): rank 0 runs the controller, and the other ranks see it only
through rank 0's collectives. _ControllerState is where the job's parts
(tuning.py, verdict.py) find the controller: its stage (_Stage), the
_Controller while it runs here, the ranks, its start and its budget.
"""

import enum
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import weakref

# How long a controller told to stop (SIGINT) may take to mark its run
# interrupted and exit before it is killed: it sees the signal within 0.1 s
# (its wait for the job's lines), then writes one transaction.
_STOP_GRACE_S = 5.0


def _find_binary(feedtune_bin):
    """(path, None), or (None, why): feedtune_bin, then $FEEDTUNE_BIN, then
    PATH, then the build tree beside the package. A binary named by the
    argument or the variable must be there: it is not looked for elsewhere."""
    for named, where in ((feedtune_bin, "feedtune_bin=%r"), (os.environ.get("FEEDTUNE_BIN"), "FEEDTUNE_BIN=%r")):
        if named:
            if os.path.isfile(named) and os.access(named, os.X_OK):
                return os.path.abspath(named), None
            return None, "no executable feedtune binary at " + where % named
    # This file is python/feedtune/autotune/controller.py: the checkout's top is three folders up.
    built = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir, os.pardir, "build", "tuner",
                         "cli", "feedtune")
    for path in (shutil.which("feedtune"), built):
        if path and os.path.isfile(path) and os.access(path, os.X_OK):
            return os.path.abspath(path), None
    return None, ("no feedtune binary (install it, put it on PATH, set FEEDTUNE_BIN, or build it in the checkout: "
                  "make build)")


def _yaml_str(text):
    return json.dumps(str(text))  # a JSON string is a YAML double-quoted scalar


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


class _Stage(enum.Enum):
    """Where the job's controller is."""
    NOT_RUNNING = "not running"  # before the first batch, and again once it ended or could not start
    PROBING = "probing"  # the checks before the first batch passed: it starts after the probe's batches
    HERE = "here"  # it runs in this process: _ControllerState.controller
    ON_RANK_0 = "on rank 0"  # this rank is not 0: it sees the controller only through rank 0's collectives


class _ControllerState:
    """The job's controller as the tuning (tuning.py) and the answer
    (verdict.py) share it: `stage` (a _Stage), `controller` (the _Controller
    while the stage is HERE, else None), `ranks` (_Ranks under
    torch.distributed with 2 or more ranks, else None; set as the tuning
    starts), `started_s` (time.monotonic() when it started, here or on rank
    0; None before) and `budget_s` (the tuning's budget, set as it starts;
    None before)."""

    def __init__(self):
        self.stage = _Stage.NOT_RUNNING
        self.controller = None
        self.ranks = None
        self.started_s = None
        self.budget_s = None

    @property
    def running(self):
        """It runs, here or on rank 0."""
        return self.stage in (_Stage.HERE, _Stage.ON_RANK_0)

    @property
    def on_rank_0(self):
        return self.stage is _Stage.ON_RANK_0

    def probing(self):
        self.stage, self.controller = _Stage.PROBING, None

    def run_here(self, controller):
        self.stage, self.controller = _Stage.HERE, controller
        self.started_s = time.monotonic()

    def run_on_rank_0(self):
        self.stage, self.controller = _Stage.ON_RANK_0, None
        self.started_s = time.monotonic()

    def release(self):
        """Back to NOT_RUNNING; returns the _Controller that ran here (for the caller to end), or None."""
        controller = self.controller
        self.stage, self.controller = _Stage.NOT_RUNNING, None
        return controller

    def close(self):
        """Back to NOT_RUNNING, closing the _Controller that ran here (rank 0's is rank 0's to close)."""
        controller = self.release()
        if controller is not None:
            controller.close()


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
        # An earlier job on this host that ended while tuning this config left
        # its trials unfinished: the search goes on from them (replayed, not
        # measured again) rather than starting over at the baseline.
        command = [binary, "sweep", config_path, "--db", results, "--json", "--serve-fd", str(theirs.fileno()),
                   "--serve-preflight", json.dumps({"preflight": preflight}), "--continue-unfinished"]
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

    def events(self):
        """Its JSON events so far, by kind (the last of each): start, seed, done, interrupted."""
        self.out.flush()
        self.out.seek(0)
        found = {}
        for line in self.out:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if isinstance(event, dict) and "event" in event:
                found[event["event"]] = event
        return found

    def finish(self, timeout_s=60.0):
        """Waits for the controller to end; its events (events()) and its exit code."""
        try:
            code = self.process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.stop()
            code = self.process.wait()
        return self.events(), code

    def stderr_tail(self, lines=6):
        self.err.flush()
        self.err.seek(0)
        return " | ".join(l.strip() for l in self.err.read().splitlines()[-lines:] if l.strip())

    def stop(self):
        _stop(self.process, self.parent_pid)

    def close(self):
        self._end()
