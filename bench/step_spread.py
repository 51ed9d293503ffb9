#!/usr/bin/env python3
"""How much a training step's time moves from one process to the next.

Runs the step of examples/tune_cnn.py (a small CNN, one intra-op thread) on one
fixed batch, with a seeded model, in --processes fresh Python processes, one
after another. Each times --blocks blocks of --steps steps after a warm-up and
prints its median block. Then the spread: the slowest process's median over the
fastest's, next to the largest within-process spread.

Why: a serving sweep (protocol serve) is one process, so it measures every trial
at the step speed that process drew; a grid or a check with one process per
point draws one speed per point. Where the across-process spread is large and
the within-process spread small, per-process comparisons of a job with this
step need many pairs (docs/regret.md, the real-step profiles).

Usage: /usr/bin/python3 bench/step_spread.py [--processes 9] [--blocks 6] [--steps 10]
Needs torch (Debian's python3-torch). Exits 0; prints the figures.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CHILD = r"""
import importlib.util, json, statistics, sys, time
sys.argv = ["tune_cnn"]
sys.path.insert(0, REPO + "/python")
spec = importlib.util.spec_from_file_location("tune_cnn", REPO + "/examples/tune_cnn.py")
job = importlib.util.module_from_spec(spec)
spec.loader.exec_module(job)  # not as __main__: serve() is not called
import torch
torch.manual_seed(0)
job.model = job.SmallCnn()
job.optimizer = torch.optim.SGD(job.model.parameters(), lr=0.01, momentum=0.9)
data = job.AugmentedImages()
batch = torch.utils.data.default_collate([data[i] for i in range(32)])
for _ in range(3):
    job.train_step(batch)
blocks = []
for _ in range(BLOCKS):
    start = time.perf_counter()
    for _ in range(STEPS):
        job.train_step(batch)
    blocks.append((time.perf_counter() - start) / STEPS * 1e3)
print(json.dumps({"blocks_ms": blocks, "threads": torch.get_num_threads()}))
"""


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--processes", type=int, default=9)
    parser.add_argument("--blocks", type=int, default=6)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--python", default="/usr/bin/python3")
    args = parser.parse_args()
    code = CHILD.replace("REPO", repr(REPO)).replace("BLOCKS", str(args.blocks)).replace("STEPS", str(args.steps))
    medians, inside = [], []
    print(f"step_spread: examples/tune_cnn.py's train_step, batch 32, seeded model, "
          f"{args.processes} processes x {args.blocks} blocks of {args.steps} steps "
          f"(load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs)")
    for p in range(args.processes):
        out = subprocess.run([args.python, "-c", code], check=True, capture_output=True, text=True).stdout
        blocks = json.loads(out.strip().splitlines()[-1])["blocks_ms"]
        medians.append(statistics.median(blocks))
        inside.append(max(blocks) / min(blocks))
        print(f"  process {p + 1}: median {medians[-1]:.1f} ms per step; blocks "
              + ", ".join(f"{b:.1f}" for b in blocks))
    print(f"across processes: {min(medians):.1f} to {max(medians):.1f} ms (x{max(medians) / min(medians):.2f}); "
          f"within one process at most x{max(inside):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
