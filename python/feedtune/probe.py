"""feedtune.probe (workloads/python/feedtune_probe.py): measures a real torch.utils.data.DataLoader the way a training
loop sees it, and prints one JSON line for feedtune's command workload.

The loop, per batch: wait for the loader, ``batch.to(device, non_blocking=...)``,
then a model step of --step-us (``torch.cuda._sleep`` on CUDA, a sleep on CPU),
and every --sync-every-steps steps wait for the device (as ``loss.item()`` does).
After --warmup-batches, it measures --seconds of this loop and prints, last on
stdout:

    {"samples_per_s": ..., "gpu_idle_frac": ..., "wait_p50_us": ..., "wait_p99_us": ...,
     "time_to_first_batch_s": ..., "peak_rss_bytes": ..., "mb_per_s": ..., ...}

With workers it also reports what the workers measure about themselves,
through memory shared with the probe (a wrapper around the dataset and the
collate function, and a worker_init_fn): "worker_busy_frac" (their seconds in
__getitem__ and collate over the window, over workers x window), "startup_s"
(the mean time from asking for an iterator to a worker being ready, its
set-up included) and "worker_peak_rss_bytes" (VmHWM from /proc of the workers
alive at the window's end, summed and divided by their count). Each window
also reports the workers' memory over the trial so far (memory.py, as
feedtune's native trials sample it; the probe's own process with no workers):
"worker_rss_start_bytes", "worker_rss_peak_bytes",
"worker_rss_growth_bytes_per_epoch", "worker_rss_samples" and
"worker_rss_epochs" (--leak-bytes-per-sample N makes the synthetic dataset
leak, to drill the growth flag). A window that
holds an epoch start reports "epoch_boundary_ms": the wait for the epoch's
first batch beyond the window's median wait. What it cannot measure it leaves
out, and feedtune records it as not measured.

On CUDA, GPU idle is 1 - (model-step time measured with torch.cuda.Event) /
(window time measured the same way). On CPU the step is a sleep of the main
thread and the same fraction is reported for it.

The dataset is your own (--dataset module:factory, --dataset-args JSON,
--pythonpath DIR) or a built-in synthetic one with the knobs of feedtune's
native synthetic workload (--samples, --sample-bytes, --cpu-us-per-sample,
--io-us-per-sample, --jitter, --worker-init-us, --seed). Works with torch 1.13
and 2.x, under /usr/bin/python3 with Debian's python3-torch.

Your own training loop: --step MODULE:FN runs your training step,
step(batch) with the batch already on the device, instead of the sleep (then
--step-us is ignored, and each window also reports "step_ms", "step_cpu_ms" and
"main_cpu_ms_per_batch"); --collate-fn, --sampler (a factory called with the
dataset, or a Sampler), --worker-init-fn and --loader-args (other DataLoader
keyword arguments, as a JSON object) are your own too. From Python,
feedtune.serve(dataset=..., step=...) does the same in a five-line tune.py.

Example, one run per repeat (workload.protocol: run):

    python3 workloads/python/feedtune_probe.py --num-workers 4 --pin-memory true \\
        --dataset mypkg.data:make_dataset --dataset-args '{"root": "/data/train"}' \\
        --pythonpath ~/src/myproject --seconds 2

With --serve (workload.protocol: serve, as configs/torch-probe.yaml runs it) the
probe starts once per sweep: it imports torch and builds the dataset once, then
reads one JSON request per trial on stdin ({"trial": N, "num_workers": ...,
"repeats": R, "window_epochs": E, ...}), builds a new DataLoader over the same
dataset (new workers, as a training job would), warms up, and prints one result
line per window and {"trial_end": N}; an exception in a trial is reported as
{"error": "..."} (its traceback on stderr) and the probe waits for the next
request. The knob and loop options (--num-workers ... --sync-every-steps) come
from each request, so they are errors on the command line with --serve. Its
own stdout carries only protocol lines: everything else printed (by the
dataset, by workers) goes to stderr. End of stdin ends it.
docs/command-protocol.md describes the protocol.

Ranks (data-parallel, as torchrun starts them): when WORLD_SIZE > 1 in the
environment (feedtune's sweep.ranks with protocol run sets RANK, LOCAL_RANK,
WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR and MASTER_PORT), the probe joins the
process group (gloo on CPU, NCCL on CUDA, with --dist-timeout-s), reads its
torch.utils.data.DistributedSampler share of each epoch, meets the other ranks
at a dist.barrier() before each measured window, and prints its own result
line with "rank" and "world_size" in it; feedtune adds the ranks up
(docs/node-sweep.md). --report-share PATH also writes the line, with the
indices of the rank's epoch-0 share, to PATH (use {rank} in it).
"""

import argparse
import json
import os
import sys

from . import preflight, protocol
from .measure import peak_rss_bytes
from .session import EXIT_USAGE, Setup, UserParts, UsageError, fail_usage, load_object

PROG = "feedtune_probe"


def parse_bool(text):
    value = str(text).strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError("expected true or false, got %r" % text)


def add_loop_options(p):
    """The knob, loop and protocol options: the probe's, and a tune.py's
    (feedtune.serve) command line."""
    k = p.add_argument_group("DataLoader knobs (per request with --serve)")
    k.add_argument("--batch-size", type=int, help="default 64")
    k.add_argument("--num-workers", type=int, help="default 0")
    k.add_argument("--pin-memory", type=parse_bool, help="default false")
    k.add_argument("--non-blocking", type=parse_bool, help="default false")
    k.add_argument("--prefetch-factor", type=int, help="default 2")
    k.add_argument("--persistent-workers", type=parse_bool, help="default false")
    k.add_argument("--multiprocessing-context", choices=("default",) + protocol.START_METHODS,
                   help="the workers' start method; default: the interpreter's (a request's optional "
                        "\"multiprocessing_context\" with --serve; feedtune's {multiprocessing_context})")
    k.add_argument("--shuffle", type=parse_bool, default=True)
    k.add_argument("--drop-last", type=parse_bool, default=True)
    t = p.add_argument_group("training loop and measurement (per request with --serve)")
    t.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto")
    t.add_argument("--step-us", type=float, help="model step per batch; default 20000")
    t.add_argument("--sync-every-steps", type=int, help="wait for the device every N steps; 0 = never; default 1")
    t.add_argument("--warmup-batches", type=int, help="default 8")
    t.add_argument("--seconds", type=float, help="length of the measured window; default 2.0")
    t.add_argument("--stage", choices=protocol.STAGES,
                   help="a stage trial of feedtune's verdict (docs/verdict.md): step = one batch kept on the device, "
                        "no loader; copy = one resident host batch copied each step; transport = the DataLoader over "
                        "zero samples shaped like the first real one; prep = the real dataset (the default)")
    t.add_argument("--dist-timeout-s", type=float, default=120,
                   help="with WORLD_SIZE > 1: the process group's timeout (torch's default, 30 minutes, would "
                        "keep a rank waiting that long for a dead peer)")
    t.add_argument("--report-share", metavar="PATH",
                   help="also write the result line, with this rank's DistributedSampler share of epoch 0 "
                        "(\"share\": the sample indices), to PATH")
    t.add_argument("--serve", action="store_true",
                   help="serve feedtune's trials: one JSON request per line on stdin (docs/command-protocol.md)")


def build_parser():
    p = argparse.ArgumentParser(
        prog="feedtune_probe.py",
        description="Measure a real torch DataLoader in a training-loop shape; print one JSON line last.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Point it at your own Dataset:\n"
        "  --dataset mypkg.data:make_dataset --dataset-args '{\"root\": \"/data\"}' --pythonpath ~/src/proj\n"
        "The factory (a function or a class) is called with the JSON's keys as keyword\n"
        "arguments (an object) or its items as positional ones (a list), and must return\n"
        "a map-style or iterable torch Dataset whose samples the default collate can batch.\n"
        "And at your own training loop:\n"
        "  --step mypkg.train:train_step --collate-fn mypkg.data:collate --sampler mypkg.data:make_sampler\n"
        "step(batch) gets each batch on the device and runs forward, backward and the optimizer.",
    )
    d = p.add_argument_group("dataset")
    d.add_argument("--dataset", metavar="MODULE:FACTORY", help="your dataset; default: the built-in synthetic one")
    d.add_argument("--dataset-args", default="{}", metavar="JSON", help="arguments for the factory (object or list)")
    d.add_argument("--pythonpath", action="append", default=[], metavar="DIR", help="put DIR first on sys.path")
    s = p.add_argument_group("built-in synthetic dataset (feedtune's synthetic knobs)")
    s.add_argument("--samples", type=int, default=4096, help="per epoch")
    s.add_argument("--sample-bytes", type=int, default=150528)
    s.add_argument("--cpu-us-per-sample", type=float, default=200, help="real CPU work per sample")
    s.add_argument("--io-us-per-sample", type=float, default=0, help="waiting per sample, no CPU")
    s.add_argument("--jitter", type=float, default=0.1, help="relative spread of per-sample cost")
    s.add_argument("--worker-init-us", type=float, default=0, help="per-worker set-up, at each worker start")
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--leak-bytes-per-sample", type=int, default=0, metavar="N",
                   help="each read keeps N bytes, written, in the process that reads it (a worker, or the probe "
                        "with no workers): a leak, to drill the memory growth flag")
    u = p.add_argument_group("your training loop (default: torch's collate, a sleep of --step-us)")
    u.add_argument("--step", metavar="MODULE:FN", help="your training step, step(batch), the batch on the device")
    u.add_argument("--collate-fn", metavar="MODULE:FN", help="your collate_fn; its batches must hold tensors")
    u.add_argument("--sampler", metavar="MODULE:FACTORY",
                   help="your sampler: a factory called with the dataset (a Sampler class is one), or a Sampler")
    u.add_argument("--worker-init-fn", metavar="MODULE:FN", help="your worker_init_fn(worker_id)")
    u.add_argument("--loader-args", metavar="JSON",
                   help="other DataLoader keyword arguments, a JSON object (not the knobs feedtune sweeps)")
    add_loop_options(p)
    return p


def make_user_dataset(args):
    """--dataset MODULE:FACTORY called with --dataset-args."""
    factory = load_object(args.dataset, "--dataset", example="mypkg.data:make_dataset")
    try:
        dataset_args = json.loads(args.dataset_args)
    except ValueError as e:
        raise UsageError("--dataset-args: not JSON: %s" % e)
    if isinstance(dataset_args, dict):
        return factory(**dataset_args)
    if isinstance(dataset_args, list):
        return factory(*dataset_args)
    raise UsageError("--dataset-args: expected a JSON object or list, got %s" % type(dataset_args).__name__)


def user_parts(args):
    """The user's loop parts named on the command line, imported and checked."""
    loaded, names = {}, {}
    for key in ("step", "collate_fn", "sampler", "worker_init_fn"):
        spec = getattr(args, key)
        option = "--" + key.replace("_", "-")
        if spec:
            loaded[key] = load_object(spec, option)
            names[key] = "%s %s" % (option, spec)
    loader_args = {}
    if args.loader_args:
        try:
            loader_args = json.loads(args.loader_args)
        except ValueError as e:
            raise UsageError("--loader-args: not JSON: %s (expected an object, e.g. '{\"timeout\": 60}')" % e)
        if not isinstance(loader_args, dict):
            raise UsageError("--loader-args: expected a JSON object of DataLoader keyword arguments, got %s"
                             % type(loader_args).__name__)
    names.update(loader_args="--loader-args", batch_size="--batch-size")
    parts = UserParts(loader_args=loader_args, names=names, **loaded)
    parts.check()
    return parts


def make_setup(args, parts):
    """The probe's Setup: the user's dataset (--dataset) or the built-in synthetic one."""
    def make_dataset(torch):
        if args.dataset:
            try:
                return make_user_dataset(args)
            except UsageError as e:
                fail_usage(PROG, str(e))
        from .workers import SyntheticDataset
        return SyntheticDataset(args.samples, args.sample_bytes, args.cpu_us_per_sample, args.io_us_per_sample,
                                args.jitter, args.seed, args.leak_bytes_per_sample)

    synthetic_init_s = 0.0 if args.dataset else args.worker_init_us / 1e6
    return Setup(args, parts, make_dataset, prog=PROG, synthetic_init_s=synthetic_init_s)


def run_once(setup, t):
    """The run protocol: one trial, its one window's line printed last on stdout."""
    from .trial import run_trial

    reports = []
    run_trial(setup, t, reports.append)
    report = reports[0]
    report["peak_rss_bytes"] = peak_rss_bytes()  # after the workers were joined, so theirs counts
    sys.stdout.flush()
    print(json.dumps(report), flush=True)
    if setup.dist is not None:
        setup.dist.destroy_process_group()
    return 0


def serve_protocol(make):
    """The serve protocol, with make() building the Setup once stdout has moved."""
    from .trial import run_trial

    return protocol.serve_requests(make, run_trial)


def main(argv=None):
    args = build_parser().parse_args(argv)
    if args.samples < 1 or args.sample_bytes < 1 or not 0 <= args.jitter <= 1 or args.leak_bytes_per_sample < 0:
        fail_usage(PROG, "--samples and --sample-bytes must be >= 1, --jitter in [0, 1], --leak-bytes-per-sample >= 0")
    for directory in reversed(args.pythonpath):
        sys.path.insert(0, os.path.abspath(os.path.expanduser(directory)))
    try:
        parts = user_parts(args)
    except UsageError as e:
        fail_usage(PROG, str(e))
    if args.multiprocessing_context == "default":
        args.multiprocessing_context = None  # the interpreter's: no context is passed
    if preflight.is_preflight():  # before the first trial of a sweep (python_preflight.h)
        return preflight.run_preflight(lambda: make_setup(args, parts))
    if args.serve:
        given = ["--" + option.replace("_", "-") for option in protocol.PER_TRIAL if getattr(args, option) is not None]
        if args.multiprocessing_context:
            given.append("--multiprocessing-context")
        if given:
            fail_usage(PROG, "--serve: %s come(s) with each trial's request on stdin; remove from the command line"
                       % ", ".join(given))
        return serve_protocol(lambda: make_setup(args, parts))
    t = protocol.trial_settings(args)
    problem = protocol.check_settings(t)
    if problem:
        fail_usage(PROG, problem.replace("measure_seconds", "--seconds"))
    return run_once(make_setup(args, parts), t)


__all__ = ["main", "build_parser", "add_loop_options", "parse_bool", "EXIT_USAGE"]


def _console_main():
    """The installed `feedtune-probe` command."""
    sys.exit(main())
