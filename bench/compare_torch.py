#!/usr/bin/python3
"""Side by side: the real torch.utils.data.DataLoader and `feedtune trial`.

Runs three profiles through both loaders in one run, for num_workers 0, 1, 2,
4, 8, and prints samples/s for each and their ratio:

  tiny  64-byte samples, batch 256, no per-sample cost (loader overhead)
  cpu   150528-byte samples, batch 64, 1 ms of CPU per sample
  wait  602112-byte samples, batch 32, 10 ms of waiting per sample

Both loaders use persistent workers and measure steady-state throughput after
a warm-up, with no model step (feedtune's host-sim step is 0 us), so what is
compared is the loader itself: in the `feedtune` column the host-sim device
is free (copies take no modelled time, no sync), so it is the bare loader as
the CLI runs it. The tiny profile is also run through the whole trial path
(the `trial` column): host-sim's default bandwidths (a 16 KB batch is a 2 us
pageable copy), a sync after every step, so every batch waits for its copy,
as `feedtune trial` does by default.

Targets: on tiny, feedtune's best and the trial path's best
are each at least 50x torch's best; on cpu and wait, the num_workers at which
each peaks agrees within one doubling. Exits 1 when a target is missed.

Usage: bench/compare_torch.py [--feedtune build/tuner/cli/feedtune] [--seconds 2] [--profiles tiny,cpu,wait]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import torch
from torch.utils.data import DataLoader, Dataset

PROFILES = {
    #        sample_bytes, batch, cpu_us, io_us, samples per epoch
    "tiny": (64, 256, 0, 0, 1 << 20),
    "cpu": (150528, 64, 1000, 0, 4096),
    "wait": (602112, 32, 0, 10000, 4096),
}
WORKERS = [0, 1, 2, 4, 8]


class SyntheticDataset(Dataset):
    """The same cost model as feedtune's synthetic workload: bytes written,
    then CPU time spent (thread CPU clock), then waiting without CPU."""

    def __init__(self, samples, sample_bytes, cpu_us, io_us):
        self.samples, self.sample_bytes = samples, sample_bytes
        self.cpu_s, self.io_s = cpu_us / 1e6, io_us / 1e6

    def __len__(self):
        return self.samples

    def __getitem__(self, index):
        x = torch.empty(self.sample_bytes, dtype=torch.uint8).fill_(index & 0xFF)
        if self.cpu_s > 0:
            until = time.thread_time() + self.cpu_s
            acc = 0
            while time.thread_time() < until:
                acc += int(x[acc % self.sample_bytes])
        if self.io_s > 0:
            time.sleep(self.io_s)
        return x


def torch_rate(profile, workers, seconds):
    sample_bytes, batch, cpu_us, io_us, samples = PROFILES[profile]
    return loader_rate(SyntheticDataset(samples, sample_bytes, cpu_us, io_us), batch, workers, seconds)


def loader_rate(dataset, batch, workers, seconds, collate_fn=None):
    """Steady-state samples/s of a torch DataLoader over `dataset`, after 4 warm-up batches.
    A map-style dataset is shuffled by the loader; an IterableDataset shuffles itself."""
    # torch 1.13 refuses prefetch_factor (even None) without workers: pass it only with them.
    extra = {"persistent_workers": True, "prefetch_factor": 2} if workers > 0 else {}
    if collate_fn is not None:
        extra["collate_fn"] = collate_fn
    shuffle = not isinstance(dataset, torch.utils.data.IterableDataset)
    loader = DataLoader(dataset, batch_size=batch, shuffle=shuffle, drop_last=True, num_workers=workers, **extra)
    done, warm, start = 0, 0, None
    while True:
        for b in loader:
            if start is None:
                warm += 1
                if warm == 4:
                    start = time.perf_counter()
                continue
            done += b.shape[0]
            if time.perf_counter() - start >= seconds:
                return done / (time.perf_counter() - start)


# The host-sim device of a run: free (no copy time, no sync: the bare loader)
# or modelled (default bandwidths, a sync after every step: the trial path).
DEVICES = {
    "free": "{backend: host-sim, step_us: 0, sync_every_steps: 0, "
            "host_sim: {h2d_gbps_pinned: 1000000, h2d_gbps_pageable: 1000000}}",
    "modelled": "{backend: host-sim, step_us: 0, sync_every_steps: 1}",
}


def feedtune_rate(binary, profile, workers, seconds, tmp, device="free"):
    sample_bytes, batch, cpu_us, io_us, samples = PROFILES[profile]
    config = os.path.join(tmp, f"{profile}-{device}.yaml")
    with open(config, "w") as f:
        f.write(f"""name: compare-{profile}
workload: {{kind: synthetic, samples: {samples}, sample_bytes: {sample_bytes}, cpu_us_per_sample: {cpu_us},
           io_us_per_sample: {io_us}, jitter: 0}}
loader: {{batch_size: {batch}, worker_mode: process, persistent_workers: true}}
device: {DEVICES[device]}
sweep: {{repeats: 1, warmup_batches: 4, measure_seconds: {seconds}}}
""")
    out = subprocess.run([binary, "trial", config, "--set", f"loader.num_workers={workers}",
                          "--set", f"loader.persistent_workers={'true' if workers > 0 else 'false'}", "--json"],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])["samples_per_s"]


def peak(rates):
    best = max(rates.values())
    return min(w for w, r in rates.items() if r >= 0.95 * best)  # the knee: fewest within 5% of the best


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--feedtune", default="build/tuner/cli/feedtune")
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--profiles", default=",".join(PROFILES),
                        help="comma-separated subset of " + ", ".join(PROFILES) + " (default: all)")
    args = parser.parse_args()
    profiles = args.profiles.split(",")
    unknown = [p for p in profiles if p not in PROFILES]
    if unknown:
        parser.error(f"unknown profile {', '.join(unknown)} (known: {', '.join(PROFILES)})")

    print(f"torch {torch.__version__}, {os.cpu_count()} CPUs; samples/s, steady state, persistent workers")
    print(f"{'profile':8} {'workers':>7} {'torch':>12} {'feedtune':>12} {'ratio':>8} {'trial':>12} {'ratio':>8}")
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        for profile in profiles:
            t_rates, f_rates, d_rates = {}, {}, {}
            for w in WORKERS:
                t_rates[w] = torch_rate(profile, w, args.seconds)
                f_rates[w] = feedtune_rate(args.feedtune, profile, w, args.seconds, tmp)
                line = f"{profile:8} {w:7d} {t_rates[w]:12.1f} {f_rates[w]:12.1f} {f_rates[w] / t_rates[w]:8.2f}"
                if profile == "tiny":
                    d_rates[w] = feedtune_rate(args.feedtune, profile, w, args.seconds, tmp, device="modelled")
                    line += f" {d_rates[w]:12.1f} {d_rates[w] / t_rates[w]:8.2f}"
                print(line, flush=True)
            if profile == "tiny":
                ratio = max(f_rates.values()) / max(t_rates.values())
                trial_ratio = max(d_rates.values()) / max(t_rates.values())
                hit = ratio >= 50 and trial_ratio >= 50
                print(f"tiny: best feedtune / best torch = {ratio:.1f}x, best trial (modelled copies, sync every "
                      f"step) / best torch = {trial_ratio:.1f}x (targets >= 50x): {'ok' if hit else 'MISSED'}")
            else:
                tp, fp = peak(t_rates), peak(f_rates)
                hit = max(tp, fp) <= 2 * max(min(tp, fp), 1)
                print(f"{profile}: knee torch {tp} workers, feedtune {fp} workers (target: within one doubling): "
                      f"{'ok' if hit else 'MISSED'}")
            ok = ok and hit
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
