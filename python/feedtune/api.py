"""feedtune.serve: a user's tune.py, measured by feedtune's sweep.

    from feedtune import serve
    serve(dataset=make_dataset, step=train_step, collate_fn=my_collate, batch_size=64)

swept by a config whose workload is `kind: command`, `argv: [python3, tune.py]`
(protocol serve or run). Each trial builds a new torch DataLoader over the
dataset with the trial's knobs and runs the user's step on every batch, as
the probe (feedtune.probe) does with its sleep step.
"""

import os
import sys

from . import protocol
from .session import Setup, UserParts, UsageError, fail_usage

# A knob or loop setting left off the command line comes from the environment
# the run protocol exports (FEEDTUNE_NUM_WORKERS=4, ...), named after the
# request's key; argparse's option name -> that key is protocol.PER_TRIAL.
_ENV_PREFIX = "FEEDTUNE_"


def _prog():
    return os.path.basename(sys.argv[0] or "tune.py")


def _parse_args(argv, prog):
    import argparse
    from .probe import add_loop_options

    parser = argparse.ArgumentParser(
        prog=prog, description="Your training loop, measured by feedtune: feedtune.serve(...) speaks feedtune's "
                               "command protocols (docs/command-protocol.md); knobs on the command line, in "
                               "FEEDTUNE_* variables (protocol run), or per request on stdin (--serve, or "
                               "FEEDTUNE_PROTOCOL=serve).")
    add_loop_options(parser)
    args = parser.parse_args(argv)
    args.seed = 0  # the DistributedSampler's, as the probe's default
    return args


def _from_environment(args, prog):
    """Fills the run protocol's settings not given on the command line from FEEDTUNE_* variables."""
    from .probe import parse_bool

    kinds = {"pin_memory": parse_bool, "non_blocking": parse_bool, "persistent_workers": parse_bool,
             "measure_seconds": float, "step_us": float}
    for option, (key, _) in protocol.PER_TRIAL.items():
        name = _ENV_PREFIX + key.upper()
        text = os.environ.get(name, "")
        if getattr(args, option) is not None or not text:
            continue
        try:
            setattr(args, option, kinds.get(key, int)(text))
        except (ValueError, TypeError) as e:
            fail_usage(prog, "%s=%s in the environment: %s" % (name, text, e))
    context = os.environ.get(_ENV_PREFIX + "MULTIPROCESSING_CONTEXT", "")
    if context == "default":  # feedtune's name for the interpreter's own: no context is passed
        context = ""
    if args.multiprocessing_context is None and context:
        if context not in protocol.START_METHODS:
            fail_usage(prog, "FEEDTUNE_MULTIPROCESSING_CONTEXT=%s: expected one of %s"
                       % (context, ", ".join(protocol.START_METHODS)))
        args.multiprocessing_context = context


def _dataset_maker(dataset, prog):
    """make_dataset(torch) for Setup: the Dataset itself, or what the zero-argument factory returns."""
    def looks_like_dataset(obj):
        return not isinstance(obj, type) and (hasattr(obj, "__getitem__") or hasattr(obj, "__iter__"))

    def make(torch):
        if looks_like_dataset(dataset):
            return dataset
        if not callable(dataset):
            fail_usage(prog, "serve(dataset=...): expected a torch Dataset or a function of no arguments that "
                             "returns one, got a %s" % type(dataset).__name__)
        made = dataset()  # once per process, before the first trial
        if not looks_like_dataset(made):
            fail_usage(prog, "serve(dataset=%s): the factory returned a %s, expected a torch Dataset (map-style "
                             "or iterable)" % (getattr(dataset, "__name__", "..."), type(made).__name__))
        return made

    return make


def _called_in_a_worker_import():
    """True when tune.py is being imported by a spawn or forkserver process as
    __mp_main__ (to find the user's functions by name): serving again there
    would start a second server inside a DataLoader worker."""
    caller = sys._getframe(2).f_globals.get("__name__")
    return caller == "__mp_main__"


def serve(dataset=None, step=None, collate_fn=None, sampler=None, worker_init_fn=None, batch_size=None,
          argv=None, **loader_args):
    """Serves feedtune's trials over the user's own loop; returns the exit code (0).

    dataset: a torch Dataset, or a function of no arguments that returns one
        (called once per process, before the first trial).
    step: step(batch), the training step (forward, backward, optimizer); the
        batch arrives on the device, copied with the trial's non_blocking.
    collate_fn, worker_init_fn: as DataLoader takes them; the collate must return tensors.
    sampler: a Sampler, or a factory called with the dataset (one new sampler per trial).
    batch_size: the batch size the job trains with; a sweep asking another fails its trials saying so.
    loader_args: other DataLoader keyword arguments (timeout, generator, ...), not the swept knobs.
    argv: the command line (default sys.argv[1:]): the probe's knob and loop options.

    Protocol serve when --serve is given or FEEDTUNE_PROTOCOL=serve (as a sweep
    with `protocol: serve` starts it); else protocol run: one trial with the
    knobs from the command line or FEEDTUNE_* variables, its JSON line last on
    stdout. Each window reports, beside samples_per_s and the rest,
    "step_ms", "step_cpu_ms" and "main_cpu_ms_per_batch".
    """
    if _called_in_a_worker_import():
        return 0
    prog = _prog()
    names = {key: "serve(%s=...)" % key for key in ("step", "collate_fn", "sampler", "worker_init_fn",
                                                       "batch_size", "dataset")}
    names["loader_args"] = "serve(**loader_args)"
    if dataset is None:
        fail_usage(prog, "serve(dataset=...): give your Dataset, or a function of no arguments that returns it")
    if step is None:
        fail_usage(prog, "serve(step=...): give your training step, a function step(batch) (forward, backward, "
                         "optimizer); without one, use workloads/python/feedtune_probe.py")
    parts = UserParts(step=step, collate_fn=collate_fn, sampler=sampler, worker_init_fn=worker_init_fn,
                      loader_args=loader_args, batch_size=batch_size, names=names)
    try:
        parts.check()
    except UsageError as e:
        fail_usage(prog, str(e))
    args = _parse_args(sys.argv[1:] if argv is None else argv, prog)
    make_dataset = _dataset_maker(dataset, prog)

    def make_setup():
        return Setup(args, parts, make_dataset, prog=prog)

    if args.multiprocessing_context == "default":
        args.multiprocessing_context = None
    from . import preflight
    if preflight.is_preflight():  # before the sweep's first trial (tuner/measure/python_preflight.h)
        return preflight.run_preflight(make_setup)
    if args.serve or os.environ.get("FEEDTUNE_PROTOCOL") == "serve":
        given = ["--" + option.replace("_", "-") for option in protocol.PER_TRIAL if getattr(args, option) is not None]
        if given:
            fail_usage(prog, "protocol serve: %s come(s) with each trial's request on stdin; remove from the "
                             "command line" % ", ".join(given))
        from .trial import run_trial
        return protocol.serve_requests(make_setup, run_trial)
    _from_environment(args, prog)
    if args.batch_size is None:
        args.batch_size = batch_size
    t = protocol.trial_settings(args)
    problem = protocol.check_settings(t)
    if problem:
        fail_usage(prog, problem.replace("measure_seconds", "--seconds"))
    from .probe import run_once
    return run_once(make_setup(), t)
