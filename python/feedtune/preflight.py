"""The preflight (FEEDTUNE_PROTOCOL=preflight; tuner/measure/python_preflight.h,
docs/command-protocol.md): before the sweep's first trial, the command sets
itself up once and says which interpreter it is (Python and torch versions,
the start method a DataLoader's workers get by default) and, when the sweep
will start workers by forkserver or spawn, whether what those send to each
worker pickles: the Dataset, the collate_fn and the worker_init_fn (torch
pickles these for each worker; the sampler and the step stay in the main
process). A failure names the attribute that does not pickle and the fix.

One line, last on stdout, then exit 0:

    {"preflight": {"python_version": "3.11.2", "torch_version": "1.13.0", "default_start_method": "fork",
                   "pickle_checked": true, "pickle_error": null}}
"""

import io
import json
import multiprocessing
import os
import pickle
import platform
import sys

# FEEDTUNE_PICKLE_CHECK: "always", "unless-fork" (only when the default start
# method is not fork), or empty (the sweep forks only: nothing is pickled).
CHECK_ALWAYS, CHECK_UNLESS_FORK = "always", "unless-fork"

_MAX_DEPTH = 4  # how deep into attributes the search for the culprit goes


def default_start_method():
    """The start method a DataLoader without multiprocessing_context uses here:
    the one set for this process (set_start_method, by the user's code), else
    the interpreter's default (the first of get_all_start_methods(), as the
    docs say). Never sets it: get_start_method(allow_none=False) would fix it."""
    return multiprocessing.get_start_method(allow_none=True) or multiprocessing.get_all_start_methods()[0]


class _Sink(io.RawIOBase):
    """Where the check pickles to: the bytes are counted away, so a large
    in-memory dataset costs time, not a second copy of its memory."""

    def writable(self):
        return True

    def write(self, data):
        return len(data)


def _pickle_error(obj):
    """None when obj pickles, else the exception."""
    try:
        pickle.Pickler(_Sink(), protocol=pickle.HIGHEST_PROTOCOL).dump(obj)
        return None
    except Exception as e:  # PicklingError, TypeError ("cannot pickle '_io.TextIOWrapper'"), AttributeError, ...
        return e


def describe_value(value):
    """'a lambda', 'an open file (data.csv)', 'a function defined inside make_dataset', 'a Lock'."""
    name = getattr(value, "__qualname__", "") or ""
    if callable(value) and getattr(value, "__name__", "") == "<lambda>":
        return "a lambda"
    if callable(value) and "<locals>" in name:
        return "a function defined inside %s (%s)" % (name.split(".<locals>")[0], name)
    if isinstance(value, io.IOBase):
        return "an open file (%s)" % getattr(value, "name", "?")
    kind = type(value)
    return "a %s.%s" % (kind.__module__, kind.__qualname__)


def _children(obj, path):
    """(path, value) of what obj holds: items of a dict, list or tuple, else its attributes."""
    if isinstance(obj, dict):
        return [("%s[%r]" % (path, key), value) for key, value in obj.items()]
    if isinstance(obj, (list, tuple)):
        return [("%s[%d]" % (path, i), value) for i, value in enumerate(obj)]
    attrs = getattr(obj, "__dict__", None)
    found = list(attrs.items()) if isinstance(attrs, dict) else []
    for slot in getattr(type(obj), "__slots__", ()) or ():
        if isinstance(slot, str) and hasattr(obj, slot):
            found.append((slot, getattr(obj, slot)))
    return [("%s.%s" % (path, key) if path else key, value) for key, value in found]


def find_unpicklable(obj, path="", depth=0):
    """(path, value, exception) of the first thing inside obj that does not
    pickle, walking its attributes (and the items of containers) depth-first;
    None when obj pickles. The deepest failing part is named: 'transform' when
    the dataset's transform is a lambda, 'files[0]' for an open file in a list."""
    error = _pickle_error(obj)
    if error is None:
        return None
    if depth < _MAX_DEPTH:
        for child_path, value in _children(obj, path):
            found = find_unpicklable(value, child_path, depth + 1)
            if found is not None:
                return found
    return path, obj, error


def pickle_problem(setup):
    """None when what torch sends to each worker pickles, else the message."""
    parts = setup.parts
    sent = [("Dataset", setup.dataset, "Dataset attribute")]
    if parts.collate_fn is not None:
        sent.append((parts.name("collate_fn"), parts.collate_fn, parts.name("collate_fn") + " attribute"))
    if parts.worker_init_fn is not None:
        sent.append((parts.name("worker_init_fn"), parts.worker_init_fn, parts.name("worker_init_fn") + " attribute"))
    for what, obj, attribute in sent:
        found = find_unpicklable(obj)
        if found is None:
            continue
        path, value, error = found
        error_text = "%s: %s" % (type(error).__name__, error)
        where = ("%s '%s' holds %s" % (attribute, path, describe_value(value)) if path
                 else "%s is %s" % (what, describe_value(value)))
        return ("%s: it does not pickle (%s). The start methods forkserver and spawn send the Dataset, "
                "collate_fn and worker_init_fn to each worker by pickling (the default here is %s). Fix: make it "
                "a module-level function (a def at the top of a module, or a class with __call__); open files "
                "and handles in __getitem__ or in worker_init_fn, not in __init__; or keep fork "
                "(loader.multiprocessing_context: fork, sweep.start_methods: [fork])"
                % (where, error_text, default_start_method()))
    return None


def pickle_check_needed(check, method=None):
    """Whether the sweep asked for the pickle check with this start method."""
    method = method or default_start_method()
    return check == CHECK_ALWAYS or (check == CHECK_UNLESS_FORK and method != "fork")


def preflight_report(setup, check, torch_module=None):
    """The preflight object. `setup` (the user's Dataset and parts) is built
    only when the pickle check runs; else None, and torch comes from
    `torch_module`, so the user's dataset factory runs once per sweep, in the
    serving process, as without a preflight."""
    method = default_start_method()
    torch_module = setup.torch if setup is not None else torch_module
    report = {
        "python_version": platform.python_version(),
        "torch_version": str(getattr(torch_module, "__version__", "")),
        "default_start_method": method,
        "pickle_checked": False,
        "pickle_error": None,
    }
    if setup is not None and pickle_check_needed(check, method):
        report["pickle_checked"] = True
        report["pickle_error"] = pickle_problem(setup)
    return report


def is_preflight():
    return os.environ.get("FEEDTUNE_PROTOCOL") == "preflight"


def run_preflight(make_setup):
    """The preflight protocol: set up once, print the line, exit code 0.
    Prints of the dataset go to stderr, as with serve."""
    protocol_out = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    check = os.environ.get("FEEDTUNE_PICKLE_CHECK", "")
    if pickle_check_needed(check):
        report = preflight_report(make_setup(), check)
    else:
        import torch  # the version only: the dataset is not built without a check
        report = preflight_report(None, check, torch_module=torch)
    protocol_out.write(json.dumps({"preflight": report}) + "\n")
    protocol_out.flush()
    sys.stdout.flush()
    return 0
