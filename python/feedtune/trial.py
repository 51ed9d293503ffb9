"""One trial: a new DataLoader with the trial's knobs, the training loop's
shape over it (wait for a batch, copy it to the device, the model step), the
warm-up, then the measured windows, each reported as soon as it ends.

The parts, in the order a trial runs them: build_loader (the DataLoader and
what the workers measure about themselves), Trial.batches (the stream of
batches across epochs), Trial.warm_up, Trial.measure_window and
Trial.window_report. run_trial ties them together and makes sure the workers
are gone when it returns or raises.
"""

import gc
import json
import multiprocessing
import sys
import time

from . import measure
from . import memory
from . import workers


class LoaderPlan:
    """The trial's DataLoader and what goes with it."""

    def __init__(self, loader, sampler, counters, created):
        self.loader = loader
        self.sampler = sampler  # set_epoch is called on it per epoch, as a training loop does
        self.counters = counters  # the workers' own figures; None without workers
        self.created = created  # perf_counter() when the DataLoader was made


def loader_kwargs_for(setup, t, stage):
    """The DataLoader's arguments for trial `t` (the dataset aside), and the
    sampler and counters made for them."""
    args, parts = setup.args, setup.parts
    kwargs = dict(batch_size=t["batch_size"], num_workers=t["num_workers"], pin_memory=t["pin_memory"],
                  drop_last=args.drop_last)
    sampler = None
    if parts.sampler is not None and not setup.iterable:
        sampler = parts.make_sampler(setup.dataset)
        kwargs["sampler"] = sampler
    elif setup.dist is not None and not setup.iterable:
        # This rank's share, as DDP training reads it: every rank shuffles the
        # same order (seed, epoch) and takes every world_size-th index.
        sampler = setup.torch.utils.data.distributed.DistributedSampler(
            setup.dataset, num_replicas=setup.world_size, rank=setup.rank, shuffle=args.shuffle, seed=args.seed)
        kwargs["sampler"] = sampler
    elif not setup.iterable:
        kwargs["shuffle"] = args.shuffle
    kwargs.update(parts.loader_args)  # the user's other DataLoader arguments (the knobs are refused there)
    collate = parts.collate_fn if parts.collate_fn is not None else workers.default_collate()
    counters = None
    if t["num_workers"] > 0:
        # torch rejects these with num_workers == 0 (1.13 and 2.x alike).
        kwargs["prefetch_factor"] = t["prefetch_factor"]
        kwargs["persistent_workers"] = t["persistent_workers"]
        if t.get("multiprocessing_context"):
            kwargs["multiprocessing_context"] = t["multiprocessing_context"]
        # The workers time their own __getitem__ and collate and say when they
        # are ready; with no workers there is nothing of theirs to measure.
        counters = workers.WorkerCounters(t["num_workers"])
        kwargs["collate_fn"] = workers.TimedCollate(counters, collate)
        init = parts.worker_init_fn
        if init is None and setup.synthetic_init_s > 0:
            init = workers.SleepInit(setup.synthetic_init_s)
        kwargs["worker_init_fn"] = workers.TimedInit(counters, init)
    else:
        if parts.collate_fn is not None:
            kwargs["collate_fn"] = parts.collate_fn
        if setup.synthetic_init_s > 0:
            time.sleep(setup.synthetic_init_s)  # the main process is the one "worker"
    return kwargs, sampler, counters


def build_loader(setup, t, stage):
    """The trial's new DataLoader (new workers, as a training job makes them)."""
    kwargs, sampler, counters = loader_kwargs_for(setup, t, stage)
    if t.get("fetch_concurrency") and hasattr(setup.dataset, "fetch_concurrency"):
        # A dataset on a store (feedtune.data.open("s3://...")): its requests
        # in flight per process, read by the workers as they start. A
        # map-style one fetches a batch together only where torch hands it
        # the batch (torch 2's __getitems__); a stream's windows ahead always.
        setup.dataset.fetch_concurrency = t["fetch_concurrency"]
    dataset = workers.free_samples(setup.dataset, setup.iterable) if stage == "transport" else setup.dataset
    if counters is not None:
        dataset = workers.instrument(dataset, counters)
    created = time.perf_counter()
    loader = setup.torch.utils.data.DataLoader(dataset, **kwargs)
    return LoaderPlan(loader, sampler, counters, created)


class Trial:
    """The loop over one trial's loader; built by run_trial."""

    def __init__(self, setup, t, stage, plan):
        self.setup, self.t, self.stage, self.plan = setup, t, stage, plan
        self.torch = setup.torch
        self.model = setup.model
        self.steps = 0
        try:
            self.epoch_len = len(plan.loader)  # an iterable dataset may have none
        except TypeError:
            self.epoch_len = None
        self.window_epochs = t.get("window_epochs", 0)
        self.per_epoch = None
        if self.window_epochs > 0:
            try:
                self.per_epoch = len(plan.loader)
            except TypeError:
                sys.stderr.write("feedtune_probe: the dataset has no len(), so windows of %d epoch(s) cannot be "
                                 "counted; measuring %g s windows instead\n" % (self.window_epochs,
                                                                                t["measure_seconds"]))
                self.window_epochs = 0
            if self.per_epoch == 0:
                raise RuntimeError("an epoch has no batch (fewer samples than the batch size with drop_last?)")
        self.epoch_batches = None  # batches the last finished epoch held: the epoch length without len()
        self.position = None  # (index in its epoch, epoch) of the last batch delivered
        # The workers' memory over the trial's windows (memory.py); step and
        # copy read no samples, so there is nothing of a loader's to sample.
        self.memory = memory.WorkerMemorySampler() if stage not in ("step", "copy") else None
        self.one = None  # step and copy: the one batch, kept
        self.resident = None  # step: the batch already on the device
        if stage in ("step", "copy"):
            self.one = next(iter(plan.loader))
            setup.parts.check_batch(self.one, self.torch)
            if stage == "copy" and t["pin_memory"] and setup.device_name == "cuda":
                self.one = self.torch.utils.data._utils.pin_memory.pin_memory(self.one)
            if stage == "step":
                self.resident = measure.to_device(self.one, setup.device, False)

    def batches(self):
        """(batch, index within its epoch, the epoch's number)."""
        if self.stage in ("step", "copy"):
            index = 0
            while True:
                yield self.one, index, 0
                index += 1
        plan = self.plan
        epoch = 0
        while True:
            produced = 0
            if plan.counters is not None:
                plan.counters.iter_at.value = time.monotonic()  # an epoch's workers start now
            if plan.sampler is not None and hasattr(plan.sampler, "set_epoch"):
                plan.sampler.set_epoch(epoch)  # a new shuffle per epoch (the same on every rank)
            for batch in plan.loader:  # non-persistent workers restart here, as in training
                self.position = (produced, epoch)
                yield batch, produced, epoch
                produced += 1
            self.epoch_batches = produced
            epoch += 1
            if produced == 0:
                raise RuntimeError("an epoch produced no batch (fewer samples than the batch size with drop_last?)")

    def epoch_position(self):
        """Epochs delivered so far, with the fraction of the current one (2.5:
        half of the third), at the last batch delivered; None before the first
        batch, or while an epoch's length is unknown (a dataset without len()
        before its first epoch ends)."""
        length = self.epoch_len or self.epoch_batches
        if self.position is None or not length:
            return None
        index, epoch = self.position
        return epoch + (index + 1) / length

    def sample_memory(self, epoch_edge=None):
        """A sample of the workers' memory (of this process without workers),
        when one is due after this step; `epoch_edge` None: at once (a window's start)."""
        if self.memory is None or (epoch_edge is not None and not self.memory.due(epoch_edge)):
            return
        position = self.epoch_position()
        if position is None:
            return
        counters = self.plan.counters
        self.memory.sample(counters.worker_keys() if counters is not None else None, position)

    def run_step(self, batch, measuring):
        x = self.resident if self.resident is not None else measure.to_device(batch, self.setup.device,
                                                                               self.t["non_blocking"])
        self.model.step(x, measuring)
        self.steps += 1
        sync_every = self.t["sync_every_steps"]
        if self.setup.parts.step is None and sync_every > 0 and self.steps % sync_every == 0:
            self.model.sync()  # the modelled loss.item(); a user's step syncs where its code does
        return x

    def warm_up(self, it):
        """The first batch (its time from the loader's creation is reported) and
        the rest of the warm-up; returns time_to_first_batch_s."""
        first, _, _ = next(it)
        first_batch_s = time.perf_counter() - self.plan.created  # worker start + the first batch
        self.setup.parts.check_batch(first, self.torch)
        self.run_step(first, False)
        del first
        warmed = 1
        # An epoch window is window_epochs * (batches per epoch) batches from
        # wherever the warm-up ended: it holds exactly window_epochs epoch
        # starts (worker restarts without persistent_workers), as a window
        # from an epoch's start would, without first running on to the end of
        # the warm-up's epoch (up to one more epoch per trial).
        while warmed < self.t["warmup_batches"]:
            batch, _, _ = next(it)
            self.run_step(batch, False)
            warmed += 1
        self.model.sync()
        return first_batch_s

    def measure_window(self, it):
        """One measured window; returns its raw figures."""
        setup, t, model, counters = self.setup, self.t, self.model, self.plan.counters
        if setup.dist is not None:
            setup.dist.barrier()  # the ranks start each window together
        model.reset()
        w = {"waits": [], "boundary_waits": [], "samples": 0, "nbytes": 0}
        target = self.window_epochs * self.per_epoch if self.window_epochs > 0 else None
        self.sample_memory()  # the window's start, outside its time
        cuda = setup.device_name == "cuda"
        if cuda:
            window_start, window_end = (self.torch.cuda.Event(enable_timing=True),
                                        self.torch.cuda.Event(enable_timing=True))
            window_start.record()
        start, cpu_start = time.perf_counter(), time.process_time()
        busy_before = counters.busy_total() if counters is not None else 0.0
        while True:
            t0 = time.perf_counter()
            batch, index, epoch = next(it)
            wait = time.perf_counter() - t0
            w["waits"].append(wait)
            if index == 0 and epoch > 0:
                w["boundary_waits"].append(wait)
            w["samples"] += measure.batch_len(batch, t["batch_size"])
            w["nbytes"] += measure.batch_bytes(batch)
            self.run_step(batch, True)
            del batch
            # After the step, outside its wait: new workers after an epoch's
            # first batch, the last figure of workers that stop after its last.
            self.sample_memory(index == 0 or (self.epoch_len is not None and index + 1 == self.epoch_len))
            if target is not None:
                if len(w["waits"]) >= target:
                    break
            elif time.perf_counter() - start >= t["measure_seconds"]:
                break
        model.sync()
        w["wall"] = time.perf_counter() - start
        w["main_cpu"] = time.process_time() - cpu_start  # every thread of this process: loop, pin, intra-op
        w["busy"] = counters.busy_total() - busy_before if counters is not None else None
        if cuda:
            window_end.record()
            window_end.synchronize()
            w["device_wall"] = window_start.elapsed_time(window_end) / 1000.0
        else:
            w["device_wall"] = w["wall"]
        return w

    def window_report(self, w, first_batch_s):
        """The result line of one window (docs/command-protocol.md)."""
        setup, t, counters = self.setup, self.t, self.plan.counters
        wall, waits = w["wall"], w["waits"]
        idle = 1.0 - self.model.busy_s() / w["device_wall"] if w["device_wall"] > 0 else 0.0
        report = {
            "samples_per_s": w["samples"] / wall,
            "gpu_idle_frac": min(1.0, max(0.0, idle)),
            "wait_p50_us": measure.percentile(waits, 50) * 1e6,
            "wait_p99_us": measure.percentile(waits, 99) * 1e6,
            "time_to_first_batch_s": first_batch_s,
            "mb_per_s": w["nbytes"] / wall / 1e6,
            "batches": len(waits),
            "samples": w["samples"],
            "seconds": wall,
            "device": setup.device_name,
            "torch": self.torch.__version__,
            "num_workers": t["num_workers"],
            "pin_memory": bool(t["pin_memory"] and setup.device_name == "cuda"),
        }
        if self.epoch_len is not None:
            # Lets the sweep see short epochs, whose curve is stepped by rounds of workers.
            report["batches_per_epoch"] = self.epoch_len
        if counters is not None:
            # The workers' own figures; with no workers there are none.
            if wall > 0:
                report["worker_busy_frac"] = min(1.0, max(0.0, w["busy"] / (t["num_workers"] * wall)))
            startup = counters.startup_s()
            if startup is not None:
                report["startup_s"] = startup
            worker_rss = counters.worker_peak_rss_bytes()
            if worker_rss is not None:
                report["worker_peak_rss_bytes"] = worker_rss
        if self.memory is not None:
            # The workers' memory over every window so far (none: this process's).
            report.update(self.memory.figures())
        if w["boundary_waits"]:
            # As feedtune's own loader reports it: the stall beyond a normal wait.
            report["epoch_boundary_ms"] = (measure.percentile(w["boundary_waits"], 50)
                                           - measure.percentile(waits, 50)) * 1e3
        if setup.parts.step is not None:
            # The user's own step: what it costs per batch, beside the loader's figures.
            report.update(self.model.extra_report(len(waits)))
            report["main_cpu_ms_per_batch"] = w["main_cpu"] / len(waits) * 1e3
            if t.get("multiprocessing_context"):
                report["multiprocessing_context"] = t["multiprocessing_context"]
        if setup.dist is not None:
            report["rank"] = setup.rank
            report["world_size"] = setup.world_size
        return report

    def write_share(self, report):
        """--report-share: the result line, with this rank's share of epoch 0."""
        shared = dict(report)
        if self.plan.sampler is not None:
            self.plan.sampler.set_epoch(0)
            shared["share"] = list(iter(self.plan.sampler))
        with open(self.setup.args.report_share, "w") as out:
            out.write(json.dumps(shared) + "\n")


def run_trial(setup, t, emit):
    """One trial: a new DataLoader with the knobs of `t` (a dict with the request's
    keys), the warm-up, then t["repeats"] windows back to back, each passed to
    emit(report) as soon as it ends. The loader and its workers are gone when it
    returns (or raises). With stage step or copy there is no loader: one batch
    is kept on the device (step) or in host memory (copy)."""
    stage = t.get("stage") or setup.args.stage or "prep"
    if t.get("worker_threads"):
        # The intra-op threads of this process (the rank); torch gives each
        # DataLoader worker 1 itself. With the run protocol OMP_NUM_THREADS,
        # read by torch at start, does the same.
        setup.torch.set_num_threads(t["worker_threads"])
    if stage in ("step", "copy"):
        t = dict(t, num_workers=0)
    setup.check_trial(t)
    plan = build_loader(setup, t, stage)
    setup.prepare_model(t["step_us"])
    trial = Trial(setup, t, stage, plan)
    it = trial.batches()
    try:
        first_batch_s = trial.warm_up(it)
        for _ in range(t["repeats"]):
            report = trial.window_report(trial.measure_window(it), first_batch_s)
            if setup.args.report_share:
                trial.write_share(report)
            emit(report)
    finally:
        it.close()  # drops the loader's iterator: its workers shut down
        del it, trial, plan
        gc.collect()
        multiprocessing.active_children()  # reaps what has exited
