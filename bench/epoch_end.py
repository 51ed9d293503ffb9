#!/usr/bin/python3
"""What a DataLoader's epoch boundary costs inside next(): the call that ends an epoch, and the one that starts the next.

Without persistent workers the next() that raises StopIteration shuts the
workers down, and the first next() of the next epoch starts new ones; with
them both are nearly free. autotune counts both in a trial's window
(docs/python.md); this prints them for bench/in_job's profiles, 4 epochs per
setting, the profile's step on every batch.

Usage: /usr/bin/python3 bench/epoch_end.py [--profile cnn]
Needs torch (Debian's python3-torch). Exits 0; one line per setting.
"""

import argparse
import os
import sys
import time

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), os.pardir))
sys.path.insert(0, os.path.join(REPO, "python"))
sys.path.insert(0, os.path.join(REPO, "bench"))
import in_job_module  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--profile", default="cnn")
    parser.add_argument("--epochs", type=int, default=4)
    args = parser.parse_args()
    in_job = in_job_module.load()
    import torch
    import torch.utils.data as tud

    torch.set_num_threads(1)
    dataset, step, batch_size, _ = in_job.profile(args.profile)
    for workers, persistent in [(1, False), (1, True), (2, False), (4, False), (8, False)]:
        loader = tud.DataLoader(dataset, batch_size=batch_size, shuffle=True, num_workers=workers,
                                persistent_workers=persistent)
        firsts, ends = [], []
        for _ in range(args.epochs):
            it = iter(loader)
            t0 = time.monotonic()
            batch = next(it)
            firsts.append(time.monotonic() - t0)
            step(batch)
            for _ in range(len(loader) - 1):
                step(next(it))
            t0 = time.monotonic()
            try:
                next(it)
            except StopIteration:
                pass
            ends.append(time.monotonic() - t0)
        print("num_workers %d, persistent_workers %d: first next() of an epoch %s ms, the next() that ends it %s ms"
              % (workers, persistent, [round(x * 1e3) for x in firsts], [round(x * 1e3) for x in ends]), flush=True)
        it = getattr(loader, "_iterator", None)
        if it is not None and hasattr(it, "_shutdown_workers"):
            it._shutdown_workers()
    return 0


if __name__ == "__main__":
    sys.exit(main())
