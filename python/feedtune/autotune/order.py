"""feedtune.autotune's order and batch feed: each epoch's index batches drawn
once, as the user's DataLoader would draw them (_Delivery.draw_epoch), the
batch_sampler that hands them to a trial's DataLoader (_Feed), the
DataLoader of a setting over that feed (_Delivery.make_loader), the delivery
of its batches to the job's loop (_Delivery.deliver, which raises
_TrialFailed when the DataLoader fails), and the shutdown of a DataLoader's
workers (_shutdown_loader).

Apart because this is what keeps the promise of feedtune.autotune (the same
batches, in the same order, each once, whatever the setting): a reader
checking it needs this module and no other. It imports no other module of
the package: _Delivery is given what it reads of the job's loader as
arguments (loader.py builds it), and it holds no controller, trial or
decision; the tuning (tuning.py) and the steady run (verdict.py) ask it for
DataLoaders and batches, and shut theirs down.
"""

import time

# The knobs a setting sets, and the user's DataLoader arguments kept for every DataLoader made here.
_KNOBS = ("num_workers", "pin_memory", "prefetch_factor", "persistent_workers")
_KEPT = ("collate_fn", "worker_init_fn", "timeout", "pin_memory_device")


class _TrialFailed(Exception):
    """A DataLoader made here failed (a trial's, the probe's or the steady
    one's): `error` the exception, `delivered` the position of the first
    batch not delivered, so that none is lost or given twice; `text` a line
    for the warning."""

    def __init__(self, error, delivered):
        super().__init__(str(error))
        self.error, self.delivered = error, delivered
        self.text = "%s: %s" % (type(error).__name__, str(error).splitlines()[0] if str(error) else "")


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


class _Delivery:
    """The job's order and the DataLoaders that keep it: each epoch's batches
    drawn once, the DataLoader of a setting over a _Feed, its batches
    delivered.

    torch: the torch module. user: the user's DataLoader. batches: its
    batch_sampler (or its sampler of batches). seeds: the generator the
    DataLoaders made here draw their workers' base seeds from. own: the
    user's own setting (its fetch_concurrency is the one set where a
    setting gives none). remote: the dataset reads a store, and its
    fetch_concurrency is set for each DataLoader."""

    def __init__(self, torch, user, batches, seeds, own, remote):
        self._torch = torch
        self._user = user
        self._batches = batches
        self._seeds = seeds
        self._own = own
        self._remote = remote
        self._epochs = 0

    def draw_epoch(self):
        """This epoch's batches of indices, drawn as the user's DataLoader's
        iterator would: the base seed from its generator (once in all with
        persistent workers, which keep one iterator), then its batch_sampler."""
        user = self._user
        if self._epochs == 0 or not (user.persistent_workers and user.num_workers > 0):
            self._torch.empty((), dtype=self._torch.int64).random_(generator=user.generator)
        self._epochs += 1
        return [list(b) for b in self._batches]

    def make_loader(self, knobs):
        """A DataLoader of the setting `knobs` (a dict keyed by _KNOBS, with
        multiprocessing_context and fetch_concurrency where they apply) over a
        new _Feed, which it carries as .feedtune_feed."""
        torch = self._torch
        user = self._user
        kwargs = {k: getattr(user, k) for k in _KEPT}
        kwargs.update(num_workers=knobs["num_workers"], pin_memory=knobs["pin_memory"])
        if knobs["num_workers"] > 0:
            kwargs.update(prefetch_factor=knobs["prefetch_factor"], persistent_workers=knobs["persistent_workers"])
            if knobs.get("multiprocessing_context"):
                kwargs["multiprocessing_context"] = knobs["multiprocessing_context"]
        if self._remote:  # the dataset's requests in flight, read by its workers as they start
            user.dataset.fetch_concurrency = knobs.get("fetch_concurrency") or self._own["fetch_concurrency"]
        feed = _Feed()
        if self._batch_fetch():
            # The dataset is handed each batch whole (torch 1.13 fetches a
            # map-style batch a sample at a time): the feed as the sampler, no
            # automatic batching, the user's collate_fn over the batch's list.
            loader = torch.utils.data.DataLoader(user.dataset, sampler=feed, batch_size=None, generator=self._seeds,
                                                 **kwargs)
        else:
            loader = torch.utils.data.DataLoader(user.dataset, batch_sampler=feed, generator=self._seeds, **kwargs)
        loader.feedtune_feed = feed
        return loader

    def _batch_fetch(self):
        """Whether a trial's DataLoader hands the dataset whole batches: the
        user's did (feedtune.data.batch_fetch), or the dataset fetches a batch
        together (__getitems__, as feedtune.data's) and this torch would not
        call it (torch 2 does by itself)."""
        if self._user.batch_sampler is None:
            return True
        return hasattr(self._user.dataset, "__getitems__") and int(self._torch.__version__.split(".")[0]) < 2

    def deliver(self, loader, plan, pos, on_batch=None):
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
                _shutdown_iterator(it)
                it = None
                _shutdown_loader(loader)
                raise _TrialFailed(e, delivered) from e
            t1 = time.monotonic()
            yield batch
            delivered += 1
            if on_batch is not None:
                on_batch(batch, t1 - t0, time.monotonic() - t1)


# --- shutting down ------------------------------------------------------------

def _shutdown_iterator(it):
    """Stops a DataLoader iterator's workers and takes their pids out of
    torch's SIGCHLD table; a worker already dead is no error here."""
    if it is not None and hasattr(it, "_shutdown_workers"):
        try:
            it._shutdown_workers()
        except Exception:  # the SIGCHLD of the dead worker, raised while the others are joined
            pass


def _shutdown_loader(loader):
    """Stops a DataLoader's workers, those of its current iterator included."""
    _shutdown_iterator(getattr(loader, "_iterator", None))  # persistent workers outlive the epoch's iterator
    loader._iterator = None
