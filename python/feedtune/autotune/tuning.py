"""feedtune.autotune's tuning phase, as the job's loop drives it: the first
batches at the user's own setting (the probe, which sizes the windows and
the budget), the controller's config and start, then each request in turn:
its trial DataLoader, its windows handed back, a failure turned into a
fallback (alone) or passed to every rank (under torch.distributed).

Apart because this is the conversation with the controller, batch by batch:
the process itself is controller.py's, a window's figures trial.py's, the
batches' order order.py's, and what happens once the search is over
verdict.py's. _Tuning is a part of AutotunedLoader (loader.py), which sets
up the state its methods use.
"""

import math
import os
import sys
import time
import types

from .. import preflight
from ..measure import percentile
from ..session import UserParts
from .controller import _REMOTE, _Controller, _Ranks, _yaml_str
from .trial import _KNOBS, _MIN_WINDOW_BATCHES, _Trial, _TrialFailed

# Batches run at the user's own setting before the controller starts, to size
# the windows and the default budget (the first one pays the workers' start).
_PROBE_BATCHES = 4
# The default budget (docs/python.md, "The default budget"): 10% of the first
# epoch at the user's setting, at least _MIN_BUDGET_S, and up to
# _SLOW_EPOCH_BUDGET_S where that epoch is slow (_BUDGET_EPOCHS of it). An
# epoch that is slow at the user's setting is a job waiting for its data: its
# knee lies at many workers, each of whose trials warms up over num_workers x
# prefetch_factor batches and measures windows of a round, and their restart
# at every epoch makes persistent_workers the next gain. 30 s ended the
# tuning guides' 10 ms search at its knee of 16 workers before
# persistent_workers, whose restart was a fifth of its epoch. A job of short
# epochs settles within 30 s (the CNN and wait jobs of bench/in_job: 13-20
# trials) and is often short: at 60 s their 14-epoch jobs ended still tuning.
# At 50 ms a sample (a 200 s epoch) a trial at 63 workers spans several
# epochs, about 30 s: 60 s ended the search before persistent_workers (12%
# off the best), and it took 115 s to reach them.
_MIN_BUDGET_S = 30.0
_SLOW_EPOCH_BUDGET_S = 120.0
_BUDGET_EPOCHS = 1.5


def _default_budget(epoch_s):
    """autotune's budget_s when the job gives none, from its first epoch's
    estimated time at its own setting."""
    # Whole seconds: the budget is said in the decision line ("the time budget of 35 s ...").
    return float(math.ceil(max(_MIN_BUDGET_S, min(_SLOW_EPOCH_BUDGET_S, _BUDGET_EPOCHS * epoch_s), 0.1 * epoch_s)))


class _Tuning:
    """AutotunedLoader while its phase is "tuning": from the first batch to the search's end."""

    def _tuning(self, plan, pos):
        if self._controller is None and not self._start(plan, pos):
            return pos
        if len(self._probe) < _PROBE_BATCHES:
            return (yield from self._probe_batches(plan, pos))
        if self._trial is None:
            message = self._next_message()
            if "broken" in message:
                self._fall_back(message["broken"])
                return pos
            if "end" in message:
                self._decide()
                return pos
            request = message["request"]
            self._trial = _Trial(request, len(plan), self._window_batches)
            self._non_blocking = bool(request["non_blocking"])
            self._settings = {k: request[k] for k in _KNOBS}
            self._settings["multiprocessing_context"] = request.get("multiprocessing_context")
            if self._remote:
                self._settings["fetch_concurrency"] = request.get("fetch_concurrency",
                                                                  self._own["fetch_concurrency"])
        trial = self._trial
        if trial.loader is None:  # the loop left the last epoch mid-trial
            trial.loader = self._make_loader(self._own if trial.failed else trial.request)
        trial.epoch_first = pos == 0
        broken = []

        def on_batch(batch, wait_s, step_s):
            report = trial.add(batch, wait_s, step_s, self._batch_size)
            if report is None or broken:
                return
            report["batches_per_epoch"] = len(plan)
            why = self._send_window(trial, report)
            if why:
                broken.append(why)
            if why or not trial.measuring:
                trial.loader.feedtune_feed.cut = True  # drain what was dispatched, then the next request

        while True:
            try:
                pos = yield from self._deliver(trial.loader, plan, pos, on_batch)
                if pos >= len(plan) and trial.measuring:  # the trial goes on in the next epoch
                    trial.epoch_end_s = trial.loader.feedtune_feed.end_s
                break
            except _TrialFailed as failure:
                what = "%s, with num_workers=%d" % (failure.text, trial.request["num_workers"])
                if self._ranks is None:
                    self._trial = None
                    try:
                        self._controller.say({"error": "in the job: %s" % failure.text})
                    except OSError:
                        pass
                    self._fall_back("a trial's DataLoader failed (%s)" % what)
                    return failure.delivered
                # One rank's failure reaches the others at the next collective
                # (the window's end, or the next request); until then this rank
                # goes on at its own setting, so every rank passes it.
                trial.failed = self._rank_failure = "on rank %d: %s" % (self._ranks.rank, what)
                trial.loader = self._make_loader(self._own)
                pos = failure.delivered
        if broken:
            self._shutdown_loader(trial.loader)
            self._trial = None
            self._fall_back(broken[0])
        elif not trial.measuring:
            self._shutdown_loader(trial.loader)
            self._trial = None
        return pos  # an epoch that ended mid-trial: the trial goes on in the next one

    def _next_message(self):
        """What comes next, the same on every rank: {"request": ...}, {"end":
        True} (the search is over) or {"broken": why}. Rank 0 reads it from the
        controller and broadcasts it; a trial that failed on any rank ends the
        tuning on all of them."""
        failures = []
        if self._ranks is not None:
            failures = [f for f in self._ranks.gather(self._rank_failure) if f]
        message = None
        if self._controller is not _REMOTE:
            if failures:
                try:
                    self._controller.say({"error": "in the job: %s" % failures[0]})
                except OSError:
                    pass
                message = {"broken": "a trial's DataLoader failed (%s)" % failures[0]}
            else:
                try:
                    request = self._controller.next_request()
                    message = {"end": True} if request is None else {"request": request}
                except (OSError, ValueError) as e:
                    message = {"broken": "the feedtune controller broke the connection (%s)" % e}
        return self._ranks.share(message) if self._ranks is not None else message

    def _send_window(self, trial, report):
        """Hands a finished window to the controller (across ranks: the slowest
        rank's, by rank 0); returns why the tuning must stop, or None."""
        why = None
        if self._ranks is not None:
            reports = self._ranks.gather({"failed": trial.failed} if trial.failed else report)
            failed = [r["failed"] for r in reports if "failed" in r]
            if failed:
                report, why = {"error": "in the job: %s" % failed[0]}, "a trial's DataLoader failed (%s)" % failed[0]
            else:
                report = min(reports, key=lambda r: r["samples_per_s"])
        if self._controller is not _REMOTE:
            try:
                self._controller.say(report)
                if not why and not trial.measuring:
                    self._controller.say({"trial_end": trial.request["trial"]})
            except OSError as e:
                why = why or "the feedtune controller went away (%s)" % e
        return self._ranks.share(why) if self._ranks is not None else why

    def _probe_batches(self, plan, pos):
        """The first batches at the user's own setting: they size the windows and the default budget."""
        loader = self._make_loader(self._own)

        def on_batch(batch, wait_s, step_s):
            self._probe.append(wait_s + step_s)
            if len(self._probe) >= _PROBE_BATCHES:
                loader.feedtune_feed.cut = True

        try:
            pos = yield from self._deliver(loader, plan, pos, on_batch)
        except _TrialFailed as failure:
            self._fall_back("the DataLoader at your own setting failed (%s)" % failure.text)
            return failure.delivered
        self._shutdown_loader(loader)
        if len(self._probe) >= _PROBE_BATCHES:
            self._launch(len(plan))  # on failure it falls back itself
        return pos

    def _start(self, plan, pos):
        """Checks what tuning needs before the first batch; False: fallback.
        Across ranks, rank 0's binary is the one that runs."""
        self._ranks = _Ranks.of_job()
        why = self._no_binary if self._binary is None else None
        if self._ranks is not None:
            why = self._ranks.share(why)
        if why:
            self._fall_back(why)
            return False
        self._controller = False  # probing: started after the first batches
        return True

    def _launch(self, batches_per_epoch):
        """Starts the controller, sized by the probe's batches; False: fallback.
        Across ranks: sized by the slowest rank, started by rank 0, and its
        windows counted in batches, so that every rank ends each at the same batch."""
        per_batch = percentile(self._probe[1:], 50)  # the first batch paid the workers' start
        if self._ranks is not None:
            per_batch = max(self._ranks.gather(per_batch))
        epoch_s = per_batch * batches_per_epoch
        budget = self._budget_s if self._budget_s else _default_budget(epoch_s)
        self._budget_used_s = budget
        # Windows short enough for the whole sequence (about 20 trials of
        # three windows, a warm-up and the workers' start) in the budget; each
        # also holds _MIN_WINDOW_BATCHES batches (_Trial.add).
        seconds = min(2.0, max(0.25, budget / 120.0))
        if self._ranks is not None:
            self._window_batches = max(_MIN_WINDOW_BATCHES, int(math.ceil(seconds / per_batch)) if per_batch > 0 else 0)
            why = self._start_controller(budget, seconds) if self._ranks.leader else None
            why = self._ranks.share(why)
            if why:
                self._fall_back(why)
                return False
            if not self._ranks.leader:
                self._controller = _REMOTE
                self._tuning_started = time.monotonic()
            return True
        why = self._start_controller(budget, seconds)
        if why:
            self._fall_back(why)
            return False
        return True

    def _preflight(self, method):
        """The job's preflight object (python/feedtune/preflight.py), with the
        pickle check the sweep would ask of this config (PickleCheckFor in
        tuner/measure/python_preflight.cc): always when the user's start method
        (`method`, None: the default) pickles, else when the interpreter's
        default is not fork."""
        user = self._user
        check = preflight.CHECK_ALWAYS if method in ("forkserver", "spawn") else preflight.CHECK_UNLESS_FORK
        names = {"collate_fn": "the DataLoader's collate_fn", "worker_init_fn": "the DataLoader's worker_init_fn"}
        parts = UserParts(collate_fn=user.collate_fn, worker_init_fn=user.worker_init_fn, names=names)
        setup = types.SimpleNamespace(dataset=user.dataset, parts=parts, torch=self._torch)
        return preflight.preflight_report(setup, check)

    def _start_method(self):
        """The user's multiprocessing_context by name, or None (the interpreter's default)."""
        context = self._own["multiprocessing_context"]
        if context is None or isinstance(context, str):
            return context
        return context.get_start_method()

    def _start_controller(self, budget, seconds):
        """Writes the config and starts `feedtune sweep --serve-fd`; returns why it could not, or None."""
        user = self._user
        knobs = self._own
        method = self._start_method()
        report = self._preflight(method)
        if report["pickle_error"]:
            # Every trial with workers would fail as it starts them.
            return "the trials' workers cannot be started: " + report["pickle_error"]
        lines = [
            "# written by feedtune.autotune for one run inside the job; not a config to sweep by hand",
            "name: %s" % _yaml_str(self._config),
            "workload:",
            "  kind: command",
            "  protocol: serve",
            "  argv: [%s, %s]" % (_yaml_str(sys.executable), _yaml_str(os.path.abspath(sys.argv[0] or "job"))),
            "  timeout_s: %g" % max(600.0, 20 * budget),
        ] + (["  remote_reads: true"] if self._remote else []) + [
            "loader:",
            "  batch_size: %d" % self._batch_size,
            "  drop_last: %s" % ("true" if getattr(self._batches, "drop_last", user.drop_last) else "false"),
            "  num_workers: %d" % knobs["num_workers"],
            "  pin_memory: %s" % ("true" if knobs["pin_memory"] else "false"),
            "  prefetch_factor: %d" % knobs["prefetch_factor"],
            "  persistent_workers: %s" % ("true" if knobs["persistent_workers"] else "false"),
        ] + (["  fetch_concurrency: %d" % knobs["fetch_concurrency"]] if self._remote else []) + [
        ] + (["  multiprocessing_context: %s" % method] if method else []) + [
            "device:",
            "  backend: host-sim",  # the job owns the GPU; the controller needs none
            "sweep:",
            "  repeats: 3",
            "  warmup_batches: 2",
            "  measure_seconds: %g" % seconds,
            "  time_budget_s: %g" % budget,
            "  ranks: 1",
            "  diagnose: false",
            # Training on the CPU, no batch is copied and torch ignores
            # pin_memory: the pin_memory and non_blocking phases are skipped.
            "  copy_phases: %s" % ("true" if self._torch.cuda.is_available() else "false"),
        ]
        try:
            self._controller = _Controller(self._binary, "\n".join(lines) + "\n", self._results, self._label, report)
        except OSError as e:
            self._controller = None
            return "cannot start %s (%s)" % (self._binary, e)
        self._tuning_started = time.monotonic()
        return None
