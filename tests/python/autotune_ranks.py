"""One rank of a 2-rank gloo job tuned by feedtune.autotune (started by
test_autotune.AutotuneRanks): RANK, WORLD_SIZE and RENDEZVOUS (a file both
ranks meet at) from the environment; argv: the results file, the output file.
Rank 1's step is slower (STEP_S_RANK1), so a window's figure must be rank 1's.

Writes {"seen": epochs of index batches, "plain": the plain DataLoader's,
"switches": [(epoch, batch, settings)] where the settings changed,
"phase", "decision"} as JSON."""

import datetime
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir, "python"))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.utils.data as tud  # noqa: E402

import feedtune  # noqa: E402

STEP_S_RANK1 = 0.004
EPOCHS_AFTER = 2


class Indices(tud.Dataset):
    def __len__(self):
        return 480

    def __getitem__(self, i):
        time.sleep(0.0004)
        return torch.tensor([i])


def make(rank):
    ds = Indices()
    return tud.DataLoader(ds, batch_size=6, sampler=tud.DistributedSampler(ds, num_replicas=2, rank=rank, seed=7))


def main():
    results, out = sys.argv[1], sys.argv[2]
    # A file to meet at, not a TCP port: a port found free and released can be
    # taken by another test before rank 0 binds it, and rank 1 then waits on
    # someone else's port (a CI run of make test hung here until its 240 s
    # timeout). The timeout turns any rendezvous that fails into an error.
    dist.init_process_group("gloo", init_method="file://" + os.environ["RENDEZVOUS"], rank=int(os.environ["RANK"]),
                            world_size=int(os.environ["WORLD_SIZE"]), timeout=datetime.timedelta(seconds=60))
    rank = dist.get_rank()
    loader = feedtune.autotune(make(rank), results=results, config="ranks", budget_s=float(os.environ["BUDGET_S"]),
                               verbose=False)
    seen, switches, last, after = [], [], None, 0
    for epoch in range(40):
        loader.sampler.set_epoch(epoch)
        batches = []
        for batch in loader:
            settings = json.dumps(loader.settings, sort_keys=True)
            if settings != last:
                switches.append([epoch, len(batches), settings])
                last = settings
            batches.append([int(v) for v in batch.view(-1)])
            if rank == 1:
                time.sleep(STEP_S_RANK1)
        seen.append(batches)
        if loader.phase != "tuning":
            after += 1
            if after == EPOCHS_AFTER:
                break
    phase, decision = loader.phase, loader.decision
    loader.close()
    plain_loader = make(rank)
    plain = []
    for epoch in range(len(seen)):
        plain_loader.sampler.set_epoch(epoch)
        plain.append([[int(v) for v in b.view(-1)] for b in plain_loader])
    with open(out, "w") as f:
        json.dump({"seen": seen, "plain": plain, "switches": switches, "phase": phase, "decision": decision}, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
