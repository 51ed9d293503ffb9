"""feedtune.autotune's public call, autotune(), and what it returns: the
AutotunedLoader the job iterates, and AutotuneError for a DataLoader that
cannot be tuned in the job.

Apart because this is all the job sees (the arguments, the attributes, the
epochs), and what it keeps of the user's DataLoader; the work is done by its
parts: the order (order.py), the tuning (tuning.py), the answer and the
fallback (verdict.py).
"""

import os
import tempfile

from .controller import _find_binary
from .order import _Delivery
from .trial import _KNOBS
from .tuning import _Tuning
from .verdict import _Answer


class AutotuneError(Exception):
    """The user's DataLoader cannot be tuned in the job (the message says why and what to use instead)."""


# Its methods, phase by phase, are in the parts it is made of (each a module of
# this package): _Tuning (tuning.py), _Answer (verdict.py), _Delivery
# (order.py). Their state is all set up here, in __init__.
class AutotunedLoader(_Tuning, _Answer, _Delivery):
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
        # The batches: the batch_sampler's, or (feedtune.data.batch_fetch:
        # batch_size=None over a BatchSampler) the sampler's own batches.
        if loader.batch_sampler is not None:
            self._batches = loader.batch_sampler
        elif isinstance(loader.sampler, torch.utils.data.BatchSampler):
            self._batches = loader.sampler
        else:
            raise AutotuneError("feedtune.autotune: the DataLoader has batch_size=None (no automatic batching); "
                                "give it a batch_size or a batch_sampler")
        self._batch_size = getattr(self._batches, "batch_size", None) or loader.batch_size or 1
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
        # A dataset that reads an object store with requests in flight it can
        # set (feedtune.data.open("s3://...")): fetch_concurrency is tuned too.
        self._remote = bool(getattr(loader.dataset, "reads_remote", False))
        if self._remote:
            self._own["fetch_concurrency"] = int(loader.dataset.fetch_concurrency)
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
        self._budget_used_s = None  # the tuning's budget, set when the controller starts
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
        if s.get("fetch_concurrency") is None:
            s.pop("fetch_concurrency", None)  # not a DataLoader argument: the dataset's (ds.fetch_concurrency)
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

    def _shutdown(self):
        self._stop_loaders()
        if self._controller:
            self._end_controller()

    def __del__(self):
        try:
            self._shutdown()
        except Exception:  # at interpreter exit torch or os may be gone already
            pass


def autotune(loader, results=None, config=None, budget_s=None, feedtune_bin=None, label=None, verbose=True):
    """Tunes `loader` (a torch DataLoader) inside the job; returns an
    AutotunedLoader that yields the same batches in the same order.

    results: the results file the tuning is stored in (a run like a sweep's);
        default a file in the temporary directory.
    config: the workload's name in that file (the `name:` a sweep would have).
    budget_s: the tuning's time bound; default 10% of the first epoch's
        estimated time at your setting, at least 30 s, and up to 120 s where
        that epoch is slow (1.5 epochs). At the budget the best so far is kept,
        and a worker curve still rising then is said, with the budget_s that
        would go on.
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
