#!/usr/bin/python3
"""How much the CNN job's speed moves within one process while DataLoaders come and go.

bench/step_spread.py times one fixed batch's step, block after block, and
finds a process's speed steady (within x1.10). A job being tuned is not that:
DataLoaders with workers start and stop between its windows. This bench does
the same in one process, in rounds: 40 bare steps on one batch, then 60-batch
windows of examples/tune_cnn.py's loader at 0, 1 and 2 workers (each after 5
batches of warm-up). The spread of each column over the rounds is what a
sequence of single trials in this process has to see through.

Usage: /usr/bin/python3 bench/step_drift.py [--rounds 8]
Needs torch (Debian's python3-torch). Exits 0; prints one line per round and
the spreads.
"""

import argparse
import os
import sys
import time

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), os.pardir))
sys.path.insert(0, os.path.join(REPO, "bench"))
import in_job_module  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=8)
    args = parser.parse_args()
    in_job = in_job_module.load()
    dataset, step, batch_size, _ = in_job.profile("cnn")

    def window(num_workers, batches=60):
        it = iter(in_job.loader_for(dataset, batch_size, {"num_workers": num_workers}))
        for _ in range(5):
            step(next(it))
        samples, start = 0, time.monotonic()
        for _ in range(batches):
            batch = next(it)
            step(batch)
            samples += len(batch[1])
        rate = samples / (time.monotonic() - start)
        del it  # its workers stop here, as a trial's do
        return rate

    def bare_steps(count=40):
        batch = next(iter(in_job.loader_for(dataset, batch_size, {"num_workers": 0})))
        start = time.monotonic()
        for _ in range(count):
            step(batch)
        return count / (time.monotonic() - start)

    columns = {"steps/s": [], "nw=0": [], "nw=1": [], "nw=2": []}
    print("step_drift: load average %.1f on %d CPUs" % (os.getloadavg()[0], os.cpu_count()))
    for r in range(args.rounds):
        figures = [bare_steps(), window(0), window(1), window(2)]
        for column, figure in zip(columns.values(), figures):
            column.append(figure)
        print("round %d: %.1f bare steps/s; samples/s at 0, 1, 2 workers: %.0f, %.0f, %.0f" % (r, *figures),
              flush=True)
    for name, values in columns.items():
        print("%-8s %.1f to %.1f (x%.2f)" % (name, min(values), max(values), max(values) / min(values)))


if __name__ == "__main__":
    main()
