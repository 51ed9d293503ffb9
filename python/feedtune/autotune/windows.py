"""feedtune.autotune's trial windows: one request of the controller answered
with the job's own batches (_Trial: its warm-up, its windows, a window's
figures).

Apart because what a window measures, and when it ends, is the figure the
whole search stands on: it is read here alone, with no process, socket or
DataLoader in the way (tests/python/test_autotune.py, AutotuneWindows, builds
a _Trial by hand). A trial's DataLoader is order.py's; _Trial only holds it.
"""

import time

from ..measure import batch_bytes, batch_len, percentile

# A time window also holds at least this many of the job's batches: a slow
# setting's window grows to them, a fast one's stays at measure_seconds.
# Workers deliver in bursts that a window must average over: with n workers
# that load alike, n batches come at once and then none for a batch's loading
# time, so a window holds at least n batches, one round (16 workers on the
# guides' 10 ms dataset: windows of 4 batches read from 180 to 1,200 samples/s
# in one trial). Without workers every batch is one whole cycle, its loading
# then its step, and one is a window (at 0 workers that dataset takes 0.64 s a
# batch: four a window spent a fifth of a 30 s budget on the baseline alone).
_MIN_WINDOW_BATCHES = 4
_MIN_WINDOW_BATCHES_IN_PROCESS = 1


class _Trial:
    """One request being answered: its DataLoader, warm-up and windows."""

    def __init__(self, request, batches_per_epoch, window_batches=0):
        self.request = request
        self.failed = None  # across ranks: this rank's trial DataLoader failed (why); it goes on at its own setting
        self.loader = None  # made at its first epoch, again after the loop left one mid-trial
        # The controller's warm-up (num_workers x prefetch_factor at least:
        # WarmupBatches, tuner/measure/measurer.h) outlasts the burst it
        # skips; no burst outlasts an epoch, since an epoch's end drains the
        # loader (and the restart after it is not counted: skip_epoch_start).
        # 63 workers on a 63-batch epoch asked for two epochs of warm-up.
        # Without workers there is no pipeline to fill, and the job's first
        # batches (the probe) warmed the step: one batch (at 50 ms a sample,
        # one batch of 64 is 3.2 s).
        self.warmup_left = request["warmup_batches"]
        if batches_per_epoch > 0 and request["window_epochs"] == 0:
            self.warmup_left = min(self.warmup_left, batches_per_epoch)
        if request["num_workers"] == 0:
            self.warmup_left = min(self.warmup_left, 1)
        self.windows_left = request["repeats"]
        epochs = request["window_epochs"]
        # Whole epochs; else, across ranks, a count of batches (every rank ends
        # the window at the same batch); else measure_seconds of batches.
        self.window_batches = epochs * batches_per_epoch if epochs > 0 else window_batches
        self.seconds = request["measure_seconds"]
        self.batches_per_epoch = batches_per_epoch
        workers = request["num_workers"]
        self.min_batches = max(_MIN_WINDOW_BATCHES, workers) if workers > 0 else _MIN_WINDOW_BATCHES_IN_PROCESS
        # A time window of workers that do not persist does not count an
        # epoch's first batch: the search charges their restart once per
        # epoch (ChargeRestart, tuner/search/time_budget.cc), and a window
        # that held it by chance would count it again, one window in three
        # reading half the others. That batch waited for the restart and a
        # whole round's loading, which the burst after it is short of, so the
        # window goes on across it as if the epoch had not ended.
        self.skip_epoch_start = (self.window_batches == 0 and workers > 0 and
                                 not request.get("persistent_workers", False))
        self.created = time.monotonic()
        self.first_batch_s = None
        self.epoch_first = True  # the next batch is the first of an epoch inside this trial
        # The next() that ended the last epoch inside this trial: without
        # persistent workers it shuts the workers down (14-70 ms for 1-8
        # workers on the CNN job), a cost of the setting that no batch's wait
        # holds; the next epoch's first batch carries it.
        self.epoch_end_s = 0.0
        self._new_window()

    def _new_window(self):
        self.time_s, self.samples, self.bytes, self.batches = 0.0, 0, 0, 0
        self.waits, self.wait_s, self.first_waits = [], 0.0, []

    @property
    def measuring(self):
        return self.windows_left > 0

    def add(self, batch, wait_s, step_s, batch_size):
        """Counts one delivered batch; returns a finished window's figures or None."""
        if self.first_batch_s is None:
            self.first_batch_s = time.monotonic() - self.created
        epoch_first, self.epoch_first = self.epoch_first, False
        if epoch_first:
            wait_s, self.epoch_end_s = wait_s + self.epoch_end_s, 0.0
        if not self.measuring:
            return None
        if self.warmup_left > 0:
            self.warmup_left -= 1
            return None
        if epoch_first and self.skip_epoch_start:
            return None
        self.time_s += wait_s + step_s
        self.wait_s += wait_s
        self.samples += batch_len(batch, batch_size)
        self.bytes += batch_bytes(batch)
        self.batches += 1
        self.waits.append(wait_s)
        if epoch_first:
            self.first_waits.append(wait_s)
        if self.window_batches > 0:
            full = self.batches >= self.window_batches
        else:
            # An epoch's batches also end a time window: with the restart left
            # out, a loop with no step of its own counted 0.07 s in 83 batches
            # of a 15-batch epoch, and a 0.25 s window would have waited for
            # 200 epochs.
            enough = self.time_s >= self.seconds or 0 < self.batches_per_epoch <= self.batches
            full = enough and self.batches >= self.min_batches
        if not full:
            return None
        waits_us = [w * 1e6 for w in self.waits]
        report = {"samples_per_s": self.samples / self.time_s if self.time_s > 0 else 0.0,
                  "gpu_idle_frac": min(1.0, self.wait_s / self.time_s) if self.time_s > 0 else 0.0,
                  "wait_p50_us": percentile(waits_us, 50), "wait_p99_us": percentile(waits_us, 99),
                  "mb_per_s": self.bytes / self.time_s / 1e6 if self.time_s > 0 else 0.0,
                  "time_to_first_batch_s": self.first_batch_s}
        if self.first_waits:
            report["epoch_boundary_ms"] = (percentile(self.first_waits, 50) - percentile(self.waits, 50)) * 1e3
        self.windows_left -= 1
        self._new_window()
        return report

