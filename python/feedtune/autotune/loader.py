"""feedtune.autotune's public call, autotune(), and what it returns: the
AutotunedLoader the job iterates, and AutotuneError for a DataLoader that
cannot be tuned in the job.

Apart because this is all the job sees (the arguments, the attributes, the
epochs), and what it keeps of the user's DataLoader (_Job); the work is done
by the parts an AutotunedLoader holds and hands each epoch to: the order
(order.py's _Delivery), the tuning (tuning.py's _Tuning), the answer and the
fallback (verdict.py's _Answer). They share the controller's state
(controller.py's _ControllerState) and what the job sees (_View), each given
to them as it is made here.
"""

import os
import tempfile

from .controller import _ControllerState, _find_binary
from .order import _KNOBS, _Delivery
from .tuning import _Tuning
from .verdict import _Answer


class AutotuneError(Exception):
    """The user's DataLoader cannot be tuned in the job (the message says why and what to use instead)."""


class _Job:
    """What the tuning keeps of the user's DataLoader and of autotune()'s
    arguments; set here once. torch: the torch module. user: the user's
    DataLoader. batches: its batch_sampler (or its sampler of batches).
    batch_size. own: the user's own setting (the _KNOBS,
    multiprocessing_context, and fetch_concurrency where `remote`). remote:
    the dataset reads an object store with requests in flight it can set.
    results, config, budget_s, label, verbose: autotune()'s, results and
    config with their defaults. binary, no_binary: the feedtune binary, or
    None and why not."""

    def __init__(self, loader, results, config, budget_s, feedtune_bin, label, verbose):
        import torch
        import torch.utils.data

        self.torch = torch
        if isinstance(loader.dataset, torch.utils.data.IterableDataset):
            raise AutotuneError(
                "feedtune.autotune: the dataset is an IterableDataset, whose order follows the worker count "
                "(each worker reads its own shards through get_worker_info()), so no setting can be tried without "
                "changing which samples come when; tune it outside the job with `feedtune sweep` and a tune.py "
                "that calls feedtune.serve (docs/python.md), then take the answer with feedtune.loader_kwargs")
        # The batches: the batch_sampler's, or (feedtune.data.batch_fetch:
        # batch_size=None over a BatchSampler) the sampler's own batches.
        if loader.batch_sampler is not None:
            self.batches = loader.batch_sampler
        elif isinstance(loader.sampler, torch.utils.data.BatchSampler):
            self.batches = loader.sampler
        else:
            raise AutotuneError("feedtune.autotune: the DataLoader has batch_size=None (no automatic batching); "
                                "give it a batch_size or a batch_sampler")
        self.batch_size = getattr(self.batches, "batch_size", None) or loader.batch_size or 1
        self.user = loader
        self.results = os.fspath(results) if results else os.path.join(tempfile.gettempdir(), "feedtune-autotune.db")
        self.config = config or "autotune"
        self.budget_s = budget_s
        self.binary, self.no_binary = _find_binary(feedtune_bin)
        self.label = label
        self.verbose = verbose
        self.own = {k: getattr(loader, k) for k in _KNOBS}
        if self.own["num_workers"] == 0:  # torch rejects these without workers
            self.own["prefetch_factor"] = 2
            self.own["persistent_workers"] = False
        self.own["multiprocessing_context"] = loader.multiprocessing_context
        # A dataset that reads an object store with requests in flight it can
        # set (feedtune.data.open("s3://...")): fetch_concurrency is tuned too.
        self.remote = bool(getattr(loader.dataset, "reads_remote", False))
        if self.remote:
            self.own["fetch_concurrency"] = int(loader.dataset.fetch_concurrency)


class _View:
    """What the job sees of the tuning now, which the tuning and the answer
    set: phase ("tuning", "tuned" or "fallback"), decision (the decision
    line, "" until there is one), settings (the setting in use: the user's
    own at first, then each trial's, then the answer's) and non_blocking."""

    def __init__(self, own):
        self.phase = "tuning"
        self.decision = ""
        self.settings = own
        self.non_blocking = False


class AutotunedLoader:
    """What feedtune.autotune returns: iterable per epoch like the user's
    DataLoader, with the same batches in the same order. `phase` is "tuning",
    "tuned" or "fallback"; `settings` the DataLoader keyword arguments in use
    now (and non_blocking); `non_blocking` what to pass to .to(). Other
    attributes (dataset, sampler, batch_size, ...) are the user's loader's."""

    def __init__(self, loader, results, config, budget_s, feedtune_bin, label, verbose):
        job = _Job(loader, results, config, budget_s, feedtune_bin, label, verbose)
        torch = job.torch
        self._user = loader
        # Trial loaders draw their workers' base seeds from their own generator,
        # so the user's generator (or torch's global one) advances exactly as
        # under the user's own DataLoader; seeded from it, so a seeded job
        # stays reproducible.
        g = loader.generator
        seeds = torch.Generator().manual_seed(((g.initial_seed() if g is not None else torch.initial_seed())
                                               ^ 0x5EED) & ((1 << 63) - 1))
        self._view = _View(job.own)
        self._link = _ControllerState()
        self._order = _Delivery(torch, loader, job.batches, seeds, job.own, job.remote)
        self._answer = _Answer(job, self._order, self._link, self._view)
        self._tuning = _Tuning(job, self._order, self._answer, self._link, self._view)

    # --- what the job sees -------------------------------------------------

    @property
    def phase(self):
        return self._view.phase

    @phase.setter
    def phase(self, value):
        self._view.phase = value

    @property
    def decision(self):
        return self._view.decision

    @decision.setter
    def decision(self, value):
        self._view.decision = value

    def __len__(self):
        return len(self._user)

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._user, name)

    @property
    def non_blocking(self):
        return self._view.non_blocking

    @property
    def settings(self):
        s = dict(self._view.settings)
        if s["num_workers"] == 0:
            s.pop("prefetch_factor", None)
            s.pop("persistent_workers", None)
        if s.get("multiprocessing_context") is None:
            s.pop("multiprocessing_context", None)
        if s.get("fetch_concurrency") is None:
            s.pop("fetch_concurrency", None)  # not a DataLoader argument: the dataset's (ds.fetch_concurrency)
        s["non_blocking"] = self._view.non_blocking
        return s

    def __iter__(self):
        plan = self._order.draw_epoch()
        pos = 0
        try:
            while pos < len(plan):
                if self._view.phase == "tuning":
                    pos = yield from self._tuning.run(plan, pos)
                else:
                    pos = yield from self._answer.steady(plan, pos)
        except GeneratorExit:
            # The loop left the epoch: a break, or an exception of the user's
            # own that goes on up unchanged. A trial's workers stop now (the
            # trial goes on with a new DataLoader if there is a next epoch);
            # the steady DataLoader's stay, as the user's own would.
            self._tuning.stop_trial_loader()
            raise

    def close(self):
        """Shuts every DataLoader and the controller down (also when the loader is collected)."""
        self._shutdown()

    def _shutdown(self):
        self._tuning.stop()
        self._answer.stop()
        if self._link.running:
            self._answer.end_controller()

    def __del__(self):
        try:
            self._shutdown()
        except Exception:  # at interpreter exit torch or os may be gone already
            pass

    # --- the tuning as tests/python watch it from the loop -----------------

    @property
    def _controller(self):
        """The _Controller (controller.py) while it runs in this process, else None."""
        return self._link.controller

    @property
    def _probe(self):
        return self._tuning.probe

    @property
    def _trial(self):
        return self._tuning.trial


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
