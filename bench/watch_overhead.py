#!/usr/bin/env python3
"""What feedtune.watch adds to a training loop (at most 2% on a 5 ms step).

Runs the same loop over a real torch DataLoader, a 5 ms step per batch, with
and without watch, in interleaved rounds (A B A B ...: the box's load drifts
alike over both), and prints the median seconds per step of each and their
ratio, with the spread. watch logs every --every steps (to a list, so the
terminal costs nothing) and, with --results, records the observed run every
--record-every steps through `feedtune observe` on its background thread.

    PYTHONPATH=python python3 bench/watch_overhead.py
    PYTHONPATH=python FEEDTUNE_BIN=build/tuner/cli/feedtune python3 bench/watch_overhead.py --results /tmp/w.db

Run `uptime` beside it: on a 2-core box at load 2 a round's spread is larger
than the overhead measured.
"""

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "python"))

import torch  # noqa: E402
from torch.utils.data import DataLoader, TensorDataset  # noqa: E402

from feedtune import watch  # noqa: E402


def one_round(loader, step_s, wrap):
    """Seconds per step over one pass of the loader (the first batch's wait excluded, as watch does)."""
    iterable = wrap(loader) if wrap else loader
    steps = 0
    start = None
    for _ in iterable:
        if start is None:
            start = time.perf_counter()
        else:
            steps += 1
        if step_s:
            time.sleep(step_s)
    return (time.perf_counter() - start) / max(steps, 1)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=9, help="rounds of each (at least 5)")
    parser.add_argument("--steps", type=int, default=200, help="batches per round")
    parser.add_argument("--step-ms", type=float, default=5.0, help="the training step, ms")
    parser.add_argument("--workers", type=int, default=0,
                        help="DataLoader num_workers (0 keeps worker scheduling noise of a loaded box out)")
    parser.add_argument("--every", type=int, default=50, help="watch's log interval, steps")
    parser.add_argument("--results", help="also record observed runs in this results file")
    parser.add_argument("--record-every", type=int, default=100, help="with --results: steps between records")
    args = parser.parse_args()

    batch = 32
    data = TensorDataset(torch.randn(args.steps * batch, 64))
    loader = DataLoader(data, batch_size=batch, num_workers=args.workers,
                        persistent_workers=args.workers > 0)
    lines = []

    def wrap(inner):
        if args.results:
            return watch(inner, every=args.every, results=args.results, config="watch-overhead",
                         record_every=args.record_every, log=lines.append)
        return watch(inner, every=args.every, log=lines.append)

    one_round(loader, args.step_ms / 1e3, None)  # warm-up: workers started, pages touched
    plain, watched = [], []
    for _ in range(max(args.rounds, 5)):
        plain.append(one_round(loader, args.step_ms / 1e3, None))
        watched.append(one_round(loader, args.step_ms / 1e3, wrap))
    a, b = statistics.median(plain), statistics.median(watched)

    def spread(values):
        return "%.3f-%.3f ms" % (min(values) * 1e3, max(values) * 1e3)

    print("step %.1f ms, %d steps x %d rounds, num_workers %d%s" %
          (args.step_ms, args.steps, len(plain), args.workers,
           ", recording every %d steps" % args.record_every if args.results else ""))
    print("without watch: median %.3f ms/step (spread %s)" % (a * 1e3, spread(plain)))
    print("with watch:    median %.3f ms/step (spread %s)" % (b * 1e3, spread(watched)))
    print("ratio with/without: %.4f (target <= 1.02)" % (b / a))
    if lines:
        print("watch's last line:", lines[-1])
    # The same loops with no step: what watch itself costs per step, free of the step's noise.
    bare, timed = [], []
    for _ in range(max(args.rounds, 5)):
        bare.append(one_round(loader, 0, None))
        timed.append(one_round(loader, 0, wrap))
    cost = statistics.median(timed) - statistics.median(bare)
    print("watch's own cost: %.1f us per step (%.2f%% of a %.1f ms step); loader alone %.1f us per batch" %
          (cost * 1e6, cost / (args.step_ms / 1e3) * 100, args.step_ms, statistics.median(bare) * 1e6))
    return 0 if b / a <= 1.02 else 1


if __name__ == "__main__":
    sys.exit(main())
