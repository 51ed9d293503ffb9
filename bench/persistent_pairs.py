#!/usr/bin/python3
"""persistent_workers off and on, as autotune's pairs measure them and as bench/in_job's truth does, in one process.

Under a time budget the search weighs persistent_workers in interleaved
pairs of one whole epoch each (docs/search.md#a-time-budget). In the job a
trial's DataLoader starts wherever the last one stopped, skips its warm-up
batches, and its window runs one epoch's worth of batches from there, across
one epoch boundary; a batch's time is the wait inside next() plus the step.
bench/in_job's truth instead times a fresh DataLoader's whole epoch (after a
warming epoch where workers persist). This bench does both, interleaved, at
1 worker, in rounds: whether the pairs' ratio (on over off) reads what the
truth's does in the same process, where the step's speed is the same.

With FEEDTUNE_BIN set and --job, the real in-job tuning runs first (14
epochs at autotune's default budget) and its persistent_workers trials are
printed.

Usage: /usr/bin/python3 bench/persistent_pairs.py [--profile cnn] [--rounds 5] [--job]
Needs torch (Debian's python3-torch). Exits 0; prints one line per round and
the medians.
"""

import argparse
import os
import sqlite3
import statistics
import sys
import tempfile
import time

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), os.pardir))
sys.path.insert(0, os.path.join(REPO, "python"))
sys.path.insert(0, os.path.join(REPO, "bench"))
import in_job_module  # noqa: E402


class Feed:
    """A batch_sampler over one epoch's batches of indices from `pos` on, as autotune's trial DataLoaders get."""

    def __init__(self, plan, pos):
        self.plan, self.pos = plan, pos

    def __iter__(self):
        while self.pos < len(self.plan):
            self.pos += 1
            yield self.plan[self.pos - 1]

    def __len__(self):
        return len(self.plan)


def shut_down(loader):
    it = getattr(loader, "_iterator", None)
    if it is not None and hasattr(it, "_shutdown_workers"):
        it._shutdown_workers()


def as_a_trial(tud, dataset, step, batch_size, draw, persistent, warmup=2):
    """samples/s of one epoch's worth of batches from mid-epoch, across one boundary, after `warmup` batches."""
    plan = draw()
    per_epoch = len(plan)
    feed = Feed(plan, per_epoch // 2)
    loader = tud.DataLoader(dataset, batch_sampler=feed, num_workers=1, persistent_workers=persistent)
    batches, seconds, end_s = 0, 0.0, 0.0
    while batches < per_epoch:
        for wait_s, batch in timed(loader):
            if batch is None:  # the next() that ended the epoch, counted as autotune counts it
                end_s = wait_s
                feed.plan, feed.pos = draw(), 0
                break
            t1 = time.monotonic()
            step(batch)
            if warmup:
                warmup -= 1
                continue
            seconds += end_s + wait_s + time.monotonic() - t1
            end_s = 0.0
            batches += 1
            if batches >= per_epoch:
                break
    shut_down(loader)
    return batches * batch_size / seconds


def timed(loader):
    """One epoch of (the wait inside next(), batch), then (the next() that ended it, None)."""
    it = None
    while True:
        t0 = time.monotonic()
        try:
            if it is None:
                it = iter(loader)
            batch = next(it)
        except StopIteration:
            yield time.monotonic() - t0, None
            return
        yield time.monotonic() - t0, batch


def as_the_truth(tud, in_job, dataset, step, batch_size, persistent):
    loader = tud.DataLoader(dataset, batch_size=batch_size, shuffle=True, num_workers=1,
                            persistent_workers=persistent)
    if persistent:
        in_job.time_epoch(loader, step)
    rate = in_job.time_epoch(loader, step)
    shut_down(loader)
    return rate


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--profile", default="cnn")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--job", action="store_true", help="run the in-job tuning first (needs FEEDTUNE_BIN)")
    args = parser.parse_args()
    in_job = in_job_module.load()
    import torch
    import torch.utils.data as tud

    torch.set_num_threads(1)
    dataset, step, batch_size, _ = in_job.profile(args.profile)
    if args.job:
        with tempfile.TemporaryDirectory() as tmp:
            db = os.path.join(tmp, "job.db")
            job = in_job.run_job(dataset, step, batch_size, 14, None, db, args.profile)
            print(job["decision"])
            rows = sqlite3.connect(db).execute(
                "SELECT id, num_workers, persistent_workers, samples_per_s, decision FROM trials "
                "WHERE phase = 'persistent_workers' ORDER BY id").fetchall()
            for tid, workers, persistent, rate, decision in rows:
                print("  trial %d: num_workers %d, persistent_workers %d: %.0f samples/s; %s"
                      % (tid, workers, persistent, rate, decision))
    generator = torch.Generator().manual_seed(0)

    def draw():
        sampler = tud.BatchSampler(tud.RandomSampler(dataset, generator=generator), batch_size, False)
        return [list(b) for b in sampler]

    trial_ratios, truth_ratios = [], []
    for r in range(args.rounds):
        off, on = (as_a_trial(tud, dataset, step, batch_size, draw, p) for p in (False, True))
        t_off, t_on = (as_the_truth(tud, in_job, dataset, step, batch_size, p) for p in (False, True))
        trial_ratios.append(on / off)
        truth_ratios.append(t_on / t_off)
        print("round %d: as the pairs x%.2f (%.0f / %.0f samples/s), as the truth x%.2f (%.0f / %.0f)"
              % (r + 1, on / off, on, off, t_on / t_off, t_on, t_off), flush=True)
    print("median over %d rounds: as the pairs x%.2f, as the truth x%.2f"
          % (args.rounds, statistics.median(trial_ratios), statistics.median(truth_ratios)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
