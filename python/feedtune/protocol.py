"""feedtune's command protocols (docs/command-protocol.md), as the probe and
feedtune.serve speak them: `run` (one trial from the command line, one JSON
line last on stdout) and `serve` (one JSON request per trial on stdin; result
lines, then {"trial_end": N} or {"error": ...}, on stdout). Stdlib only.
"""

import json
import os
import sys
import traceback

# feedtune's stage trials (docs/verdict.md): --stage, or a request's optional "stage".
STAGES = ("step", "copy", "transport", "prep")

# The start methods a DataLoader takes as multiprocessing_context.
START_METHODS = ("fork", "forkserver", "spawn")

# The request's keys and their types (bool is checked before int: it is one in Python).
REQUEST_KEYS = {
    "trial": int, "num_workers": int, "pin_memory": bool, "non_blocking": bool, "prefetch_factor": int,
    "persistent_workers": bool, "batch_size": int, "repeats": int, "warmup_batches": int,
    "measure_seconds": (int, float), "window_epochs": int, "step_us": (int, float), "sync_every_steps": int,
}

# Option name -> (request key, default) for the per-trial settings of the run
# protocol's command line.
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


def trial_settings(args):
    """The one-shot run's settings, in the request's form."""
    t = {}
    for option, (key, default) in PER_TRIAL.items():
        value = getattr(args, option)
        t[key] = default if value is None else value
    t["repeats"] = 1
    t["window_epochs"] = 0
    context = getattr(args, "multiprocessing_context", None)
    if context:
        t["multiprocessing_context"] = context
    return t


def check_settings(t):
    """None when the per-trial settings are usable, else what is wrong."""
    if t["batch_size"] < 1 or t["num_workers"] < 0 or t["prefetch_factor"] < 1 or t["measure_seconds"] <= 0:
        return "batch_size and prefetch_factor must be >= 1, num_workers >= 0, measure_seconds > 0"
    if t["repeats"] < 1 or t["window_epochs"] < 0 or t["warmup_batches"] < 0 or t["step_us"] < 0:
        return "repeats must be >= 1, window_epochs, warmup_batches and step_us >= 0"
    return None


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
    context = request.get("multiprocessing_context")
    if context is not None and context not in START_METHODS:
        raise ValueError("the request's 'multiprocessing_context' is %r, expected one of %s"
                         % (context, ", ".join(START_METHODS)))
    problem = check_settings(request)
    if problem:
        raise ValueError(problem)
    return request


def error_text(e):
    """A failed trial's {"error": ...}: the traceback's last line ("ValueError:
    bad sample 3"; a user's own exception class with its module, as Python
    prints it)."""
    return traceback.format_exception_only(type(e), e)[-1].strip()


def protocol_stdout():
    """Protocol lines go to the original stdout; fd 1 becomes stderr, so prints
    of the dataset, of the user's step, of torch and of forked workers cannot
    break a line. Returns say(obj), which writes one protocol line."""
    protocol = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)

    def say(obj):
        protocol.write(json.dumps(obj) + "\n")
        protocol.flush()

    return say


def serve_requests(make_setup, run_trial):
    """The serve protocol's loop (docs/command-protocol.md): one trial per
    request line until end of stdin; a failing trial is reported and the loop
    goes on. make_setup() builds what the process sets up once (after stdout
    moved, so the dataset factory's prints land on stderr)."""
    say = protocol_stdout()
    setup = make_setup()  # the dataset factory runs here, once per process
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
        except Exception as e:  # the user's dataset, step or torch failed with these knobs: say so and go on
            traceback.print_exc(file=sys.stderr)
            say({"error": error_text(e)})
            continue
        say({"trial_end": trial})
