"""feedtune's Python side: tune the DataLoader inside the training job
(autotune), measure your own training loop with feedtune's sweep (serve), and
take the answer into the training job (loader_kwargs).

    from feedtune import autotune                   # the training job tunes itself
    loader = autotune(DataLoader(ds, batch_size=64, shuffle=True), results="fleet.db", config="resnet50")
    for x, y in loader:                             # same batches, same order; the first ones try settings
        train_step(x.to(device, non_blocking=loader.non_blocking), y)

    from feedtune import serve                      # tune.py, swept by `feedtune sweep`
    serve(dataset=make_dataset, step=train_step, batch_size=64)

    from feedtune import loader_kwargs              # the training job
    kw = loader_kwargs(results="fleet.db", config="resnet50")
    loader = torch.utils.data.DataLoader(dataset, batch_size=64, **kw)
    x = x.to(device, non_blocking=kw.non_blocking)

    from feedtune import data                       # what `feedtune convert` wrote, in one line
    ds = data.open("/data/train-tar")               # map-style: sample i of the source, with its label

    from feedtune import watch                      # and back: does the setting hold?
    for batch in watch(loader, every=100, results="fleet.db", config="resnet50"):
        train_step(batch)                           # `feedtune check --db fleet.db` says

Stdlib and torch only; torch is imported when a loop is measured, not here.
workloads/python/feedtune_probe.py is the command-line entry point of the
same harness (feedtune.probe).
"""

import os as _os
import re as _re

from .api import serve
from .autotune import AutotuneError, AutotunedLoader, autotune
from .results import LoaderKwargs, ResultsError, loader_kwargs
from .watch import watch



def _read_version():
    """The version project(VERSION) sets in feedtune's top CMakeLists.txt, the one
    place it is written: from _version.py, which the CMake install and the pip
    build write beside this file, else (the package used in place, from the
    checkout) from that CMakeLists.txt itself."""
    try:
        from ._version import __version__ as version
        return version
    except ImportError:
        pass
    cmakelists = _os.path.join(_os.path.dirname(_os.path.abspath(__file__)), _os.pardir, _os.pardir, "CMakeLists.txt")
    try:
        with open(cmakelists) as f:
            match = _re.search(r"^project\(feedtune VERSION ([0-9][0-9A-Za-z.]*)", f.read(), _re.M)
    except OSError:
        match = None
    return match.group(1) if match else "unknown"


def __getattr__(name):
    """feedtune.data (what `feedtune convert` wrote, read in a job) imports
    torch and numpy, so it is loaded on first use, not with the package."""
    if name == "data":
        import importlib
        return importlib.import_module(".data", __name__)
    raise AttributeError("module 'feedtune' has no attribute %r" % name)


__version__ = _read_version()
__all__ = ["autotune", "AutotunedLoader", "AutotuneError", "serve", "loader_kwargs", "LoaderKwargs", "ResultsError", "watch", "__version__"]
