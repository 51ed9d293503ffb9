"""What a measuring process sets up once (torch, the device, the ranks, the
dataset, the model step) and the user's own parts of the loop (step,
collate_fn, sampler, worker_init_fn, other DataLoader arguments), checked
before the first trial so that bad input fails with what, where and the fix.
"""

import importlib
import os
import sys
from datetime import timedelta

from . import measure

EXIT_USAGE = 2

# DataLoader arguments that are the sweep's knobs, or have their own argument:
# the user's extra loader arguments must leave them to feedtune.
SWEPT = ("num_workers", "pin_memory", "prefetch_factor", "persistent_workers", "multiprocessing_context",
         "batch_size")
OWN_ARGUMENT = ("dataset", "sampler", "collate_fn", "worker_init_fn")


class UsageError(Exception):
    """Bad input from the command line or the arguments of feedtune.serve:
    the process exits 2 with the message."""


def fail_usage(prog, message):
    sys.stderr.write("%s: %s\n" % (prog, message))
    sys.exit(EXIT_USAGE)


def load_object(spec, option, example="mypkg.train:train_step"):
    """MODULE:NAME (NAME may be dotted) imported; UsageError naming `option`
    and what to do when the module or the name is missing."""
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise UsageError("%s: expected %s (e.g. %s), got %r"
                         % (option, "MODULE:FACTORY" if option == "--dataset" else "MODULE:NAME", example, spec))
    try:
        obj = importlib.import_module(module_name)
    except Exception as e:  # an import error of the user's module: say where we looked
        raise UsageError("%s: cannot import %r: %s: %s (sys.path starts with %s; add the folder that holds it "
                         "with --pythonpath DIR)" % (option, module_name, type(e).__name__, e, sys.path[:3]))
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise UsageError("%s: module %r (%s) has no attribute %r; check the name after the colon"
                             % (option, module_name, getattr(obj, "__file__", "?"), attr))
        obj = getattr(obj, part)
    return obj


def describe(value):
    """'a list of str', 'a dict', 'a str': what a non-tensor batch was."""
    kind = type(value).__name__
    if isinstance(value, (list, tuple)) and value:
        return "a %s of %s" % (kind, type(value[0]).__name__)
    return "a %s" % kind


class UserParts:
    """The user's own pieces of the training loop; None = the probe's own
    (torch's default collate, its shuffle or DistributedSampler, no
    worker_init_fn, a timed sleep for the step). `names` says how each was
    given (e.g. "--step mymod:train_step" or "serve(step=train_step)"), for
    the error messages."""

    def __init__(self, step=None, collate_fn=None, sampler=None, worker_init_fn=None, loader_args=None,
                 batch_size=None, names=None):
        self.step, self.collate_fn, self.sampler = step, collate_fn, sampler
        self.worker_init_fn, self.batch_size = worker_init_fn, batch_size
        self.loader_args = dict(loader_args or {})
        self.names = names or {}

    def name(self, key):
        return self.names.get(key, key)

    def check(self):
        """Raises UsageError for what can be seen without torch or data."""
        for key in ("step", "collate_fn", "worker_init_fn"):
            value = getattr(self, key)
            if value is not None and not callable(value):
                raise UsageError("%s: expected a function, got %s" % (self.name(key), describe(value)))
        for key in self.loader_args:
            if key in SWEPT:
                raise UsageError("%s: %r is a knob feedtune sets per trial; remove it (the sweep measures it, "
                                 "and loader_kwargs() hands the answer to the job)" % (self.name("loader_args"), key))
            if key in OWN_ARGUMENT:
                raise UsageError("%s: %r has its own argument; pass it as %s instead"
                                 % (self.name("loader_args"), key, self.name(key)))
        if self.batch_size is not None and (not isinstance(self.batch_size, int) or self.batch_size < 1):
            raise UsageError("%s: expected a whole number >= 1, got %r" % (self.name("batch_size"), self.batch_size))

    def make_sampler(self, dataset):
        """The trial's sampler: the user's own, or made by the user's factory(dataset)."""
        made = self.sampler
        if isinstance(made, type) or (callable(made) and not hasattr(made, "__iter__")):
            made = made(dataset)  # a factory (a function or a Sampler class): one new sampler per trial
        if not hasattr(made, "__iter__"):
            raise TypeError("%s made %s, expected a Sampler (an iterable of dataset indices); a factory is called "
                            "with the dataset and must return one" % (self.name("sampler"), describe(made)))
        return made

    def check_batch(self, batch, torch):
        """The user's collate_fn must return tensors: pinning and the copy to the
        device act on tensors, and a batch without one measures nothing."""
        if self.collate_fn is None or measure.has_tensor(batch, torch):
            return
        raise TypeError("%s returned %s with no tensor anywhere in it; pin_memory and the copy to the device "
                        "need tensors: return torch tensors from it (e.g. torch.stack of the samples), inside "
                        "a tuple, list or dict if you like" % (self.name("collate_fn"), describe(batch)))


class Setup:
    """What a process sets up once: torch, the device, the dataset and the model step.

    make_dataset(torch) returns the dataset; it runs once, here."""

    def __init__(self, args, parts, make_dataset, prog="feedtune_probe", synthetic_init_s=0.0):
        import torch  # after argument checks: importing torch takes a second or two
        import torch.utils.data

        self.torch = torch
        self.args = args
        self.parts = parts
        self.prog = prog
        self.synthetic_init_s = synthetic_init_s  # the built-in dataset's per-worker set-up (--worker-init-us)
        if args.device == "auto":
            self.device_name = "cuda" if torch.cuda.is_available() else "cpu"
        else:
            self.device_name = args.device
        if self.device_name == "cuda" and not torch.cuda.is_available():
            fail_usage(prog, "--device cuda: torch sees no usable CUDA device")
        self.device = torch.device(self.device_name)
        self.init_ranks(args)
        self.dataset = make_dataset(torch)
        self.iterable = isinstance(self.dataset, torch.utils.data.IterableDataset)
        if self.dist is not None and self.iterable:
            sys.stderr.write("%s: rank %d: an iterable dataset gets no DistributedSampler; it must "
                             "shard itself by RANK and WORLD_SIZE\n" % (prog, self.rank))
        if parts.sampler is not None and self.iterable:
            fail_usage(prog, "%s: the dataset is iterable, and torch takes no sampler for an iterable dataset; "
                             "drop the sampler or use a map-style dataset" % parts.name("sampler"))
        self.model = None

    def init_ranks(self, args):
        """Data-parallel ranks (WORLD_SIZE > 1, from torchrun or feedtune's sweep.ranks)."""
        torch = self.torch
        self.world_size = int(os.environ.get("WORLD_SIZE", "1") or 1)
        self.rank = int(os.environ.get("RANK", "0") or 0)
        self.dist = None
        if self.world_size > 1:
            import torch.distributed as dist
            if self.device_name == "cuda":
                local_rank = int(os.environ.get("LOCAL_RANK", "0") or 0)
                torch.cuda.set_device(local_rank)
                self.device = torch.device("cuda", local_rank)
            dist.init_process_group("nccl" if self.device_name == "cuda" else "gloo", init_method="env://",
                                    rank=self.rank, world_size=self.world_size,
                                    timeout=timedelta(seconds=args.dist_timeout_s))
            self.dist = dist

    def prepare_model(self, step_us):
        """The model step, made at the first trial: the user's step, or the probe's timed sleep."""
        if self.model is None:
            cuda = self.device_name == "cuda"
            if self.parts.step is not None:
                self.model = measure.UserStep(self.torch, self.parts.step, cuda)
            elif cuda:
                self.model = measure.CudaStep(self.torch, step_us)
            else:
                self.model = measure.CpuStep(step_us)
        else:
            self.model.set_step_us(step_us)

    def check_trial(self, t):
        """A trial that cannot measure what the user's script runs fails with the fix."""
        want = self.parts.batch_size
        if want is not None and t["batch_size"] != want:
            raise ValueError("the sweep asks for batch_size %d (loader.batch_size in its config), but %s is %d: "
                             "the results would record a batch size the script does not use; set "
                             "loader.batch_size: %d in the config" % (t["batch_size"], self.parts.name("batch_size"),
                                                                      want, want))
