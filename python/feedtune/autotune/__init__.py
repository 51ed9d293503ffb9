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

The parts, each a module of this package:
    loader.py      autotune() and AutotunedLoader: what the job calls and iterates; it holds
                   the order, the tuning and the answer (below) and hands each epoch to them
    order.py       the epoch's order, the batch feed that keeps it, the DataLoaders over it
    tuning.py      the tuning phase: the probe, the controller's start, the trials in turn
    windows.py     a trial's windows and their figures
    controller.py  the feedtune child process and its socket; where it runs (its stage); the job's ranks
    verdict.py     the verdict on the search's answer, the steady run, the fallback

Stdlib and torch only.
"""

from .loader import AutotuneError, AutotunedLoader, autotune  # noqa: F401

# The package's inner names, importable from here as when this was one module
# (tests/python/test_autotune.py imports _Trial, _default_budget and _verdict from here).
from .controller import (_STOP_GRACE_S, _Controller, _end_controller, _find_binary, _Ranks, _stop,  # noqa: F401
                         _yaml_str)
from .order import _KEPT, _KNOBS, _Feed, _TrialFailed  # noqa: F401
from .windows import _MIN_WINDOW_BATCHES, _Trial  # noqa: F401
from .tuning import _MIN_BUDGET_S, _PROBE_BATCHES, _default_budget  # noqa: F401
from .verdict import _verdict  # noqa: F401
