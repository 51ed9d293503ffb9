"""feedtune.loader_kwargs: the swept DataLoader settings for the machine a
training job runs on, read from a results file.

    kw = feedtune.loader_kwargs(results="fleet.db", config="resnet50")
    loader = torch.utils.data.DataLoader(dataset, batch_size=64, **kw)
    x = x.to(device, non_blocking=kw.non_blocking)
    print(kw.source)          # host | class | nearest: which run it took

The results file is read through the feedtune binary (`feedtune export
--machine this --format json`), never with SQL of our own: the schema has one
reader and writer, and the rule that picks the run (this host's latest run,
else its hardware class's, else the nearest class's) lives in one place,
results/fleet.h. Stdlib only.
"""

import json
import os
import shutil
import subprocess

# `export`'s names for what matched (results/fleet.h RunMatchName) -> ours.
_MATCH_NAMES = {"host": "host", "class": "class", "neighbour": "nearest"}

# The DataLoader keyword arguments taken from the export, in this order.
_KWARGS = ("num_workers", "pin_memory", "prefetch_factor", "persistent_workers", "multiprocessing_context")


class ResultsError(Exception):
    """The results file cannot give a setting for this machine: missing, not
    feedtune's, empty, or without a run of the config. The message names the
    file and what to do; loader_kwargs never falls back to defaults."""


class LoaderKwargs(dict):
    """DataLoader keyword arguments (a dict: pass it as **kwargs), with what
    goes beside them as attributes:

    non_blocking  for x.to(device, non_blocking=...): not a DataLoader argument
    source        what matched: "host" (this host's own run), "class" (another
                  host of the same hardware class), or "nearest" (the nearest
                  other class)
    batch_size    the batch size the sweep measured (not in the dict: the job
                  passes its own; another batch size needs another sweep)
    why           export's sentence on the choice, e.g. "this host's latest run (run 7 of gpu-3, ...)"
    run_id, run_host, results   the run taken, its host, and the results file
    """

    def __init__(self, kwargs, non_blocking, source, batch_size=None, why="", run_id=None, run_host="",
                 results=""):
        super().__init__(kwargs)
        self.non_blocking = non_blocking
        self.source = source
        self.batch_size = batch_size
        self.why = why
        self.run_id = run_id
        self.run_host = run_host
        self.results = results

    def __repr__(self):
        return "LoaderKwargs(%s, non_blocking=%r, source=%r)" % (dict.__repr__(self), self.non_blocking,
                                                                  self.source)


def find_binary(feedtune_bin=None):
    """The feedtune binary: the argument, else $FEEDTUNE_BIN, else `feedtune` on PATH."""
    if feedtune_bin:
        where = "feedtune_bin=%r" % feedtune_bin
        path = feedtune_bin
    elif os.environ.get("FEEDTUNE_BIN"):
        path = os.environ["FEEDTUNE_BIN"]
        where = "FEEDTUNE_BIN=%r" % path
    else:
        path = shutil.which("feedtune")
        if path is None:
            raise ResultsError("feedtune.loader_kwargs reads results files through the feedtune binary, and "
                               "none is on PATH; pass feedtune_bin='/path/to/feedtune' or set FEEDTUNE_BIN")
        return path
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        raise ResultsError("%s: no executable feedtune binary there; build it (make build: build/tuner/cli/feedtune) "
                           "or point to it" % where)
    return path


def _export(binary, results, config, label, timeout_s):
    """`feedtune export --machine this --format json`'s object, or ResultsError with its message."""
    command = [binary, "export", "--db", results, "--workload", config, "--machine", "this", "--format", "json"]
    if label:
        command += ["--label", label]
    try:
        done = subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise ResultsError("%s: `%s` took more than %g s" % (results, " ".join(command), timeout_s)) from None
    except OSError as e:
        raise ResultsError("cannot run the feedtune binary %s: %s" % (binary, e)) from None
    if done.returncode != 0:
        message = done.stderr.strip().replace("feedtune: ", "", 1) or "exit %d" % done.returncode
        if results not in message:
            message = "%s: %s" % (results, message)
        raise ResultsError(message)
    try:
        exported = json.loads(done.stdout)
    except ValueError as e:
        raise ResultsError("%s: `feedtune export --format json` printed no JSON (%s): %r"
                           % (results, e, done.stdout[:200])) from None
    if not isinstance(exported, dict) or not isinstance(exported.get("source"), dict):
        raise ResultsError("%s: the feedtune binary %s gave no \"source\" with its export; it predates "
                           "`export --machine this`: use a newer build" % (results, binary))
    return exported


def loader_kwargs(results, config, feedtune_bin=None, label=None, timeout_s=60.0):
    """The swept DataLoader keyword arguments for this machine, from `results`.

    results: the results file (SQLite, feedtune's), e.g. a fleet's merged file.
    config: the workload's name (the config's `name:`) whose runs to use.
    feedtune_bin: the feedtune binary; default $FEEDTUNE_BIN, else `feedtune` on PATH.
    label: this host's label, when its sweeps were run with --label.

    Returns a LoaderKwargs: num_workers, pin_memory, persistent_workers, and
    prefetch_factor (only with workers: torch rejects it without) and
    multiprocessing_context (only when the run recorded one); .non_blocking
    and .source beside them. Raises ResultsError naming the file when it is
    missing, not a feedtune results file, empty, or holds no run of `config`.
    """
    results = os.fspath(results)
    # The file's checks (missing, not feedtune's, empty, no such workload) are
    # the binary's, with its messages: they name the file and the fix.
    exported = _export(find_binary(feedtune_bin), results, config, label, timeout_s)
    source = exported["source"]
    kwargs = {}
    for key in _KWARGS:
        if exported.get(key) is not None:  # null: left to torch (prefetch_factor without workers)
            kwargs[key] = exported[key]
    match = source.get("match", "")
    return LoaderKwargs(kwargs, non_blocking=bool(exported.get("non_blocking", False)),
                        source=_MATCH_NAMES.get(match, match), batch_size=exported.get("batch_size"),
                        why=source.get("why", ""), run_id=source.get("run"), run_host=source.get("run_host", ""),
                        results=results)
