"""feedtune.autotune's tuning phase, as the job's loop drives it: the first
batches at the user's own setting (the probe, which sizes the windows and
the budget), the controller's config and start, then each request in turn:
its trial DataLoader, its windows handed back, a failure turned into a
fallback (alone) or passed to every rank (under torch.distributed).

Apart because this is the conversation with the controller, batch by batch:
the process itself is controller.py's, a window's figures windows.py's, the
batches' order order.py's, and what happens once the search is over
verdict.py's. _Tuning is one of the parts AutotunedLoader (loader.py) holds;
it is given the job (loader.py's _Job), the order (order.py's _Delivery),
the answer (verdict.py's _Answer, which it hands the search's end and every
fallback), the controller's state (controller.py's _ControllerState, which
it starts) and what the job sees (loader.py's _View, whose settings and
non_blocking it sets to each trial's).
"""

import math
import os
import sys
import types

from .. import preflight
from ..measure import percentile
from ..session import UserParts
from .controller import _Controller, _Ranks, _Stage, _yaml_str
from .order import _KNOBS, _TrialFailed, _shutdown_loader
from .windows import _MIN_WINDOW_BATCHES, _Trial

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

    def __init__(self, job, order, answer, link, view):
        self._job = job
        self._order = order
        self._answer = answer
        self._link = link
        self._view = view
        self.trial = None  # the _Trial of the request being answered
        self.probe = []  # (wait + step) of the first batches at the user's setting
        self._window_batches = 0  # across ranks: a window's batches (0: measure_seconds)
        self._rank_failure = None  # across ranks: a trial that failed here, until the next collective

    def run(self, plan, pos):
        """One step of the tuning over the epoch's `plan` from `pos` on (the
        start, the probe, or a request and its trial, until it ends, falls
        back or the epoch ends): yields the batches it delivers and returns
        the next undelivered position."""
        job, view = self._job, self._view
        if self._link.stage is _Stage.NOT_RUNNING and not self._start(plan, pos):
            return pos
        if len(self.probe) < _PROBE_BATCHES:
            return (yield from self._probe_batches(plan, pos))
        if self.trial is None:
            message = self._next_message()
            if "broken" in message:
                self._answer.fall_back(message["broken"])
                return pos
            if "end" in message:
                self._answer.decide()
                return pos
            request = message["request"]
            self.trial = _Trial(request, len(plan), self._window_batches)
            view.non_blocking = bool(request["non_blocking"])
            view.settings = {k: request[k] for k in _KNOBS}
            view.settings["multiprocessing_context"] = request.get("multiprocessing_context")
            if job.remote:
                view.settings["fetch_concurrency"] = request.get("fetch_concurrency", job.own["fetch_concurrency"])
        trial = self.trial
        if trial.loader is None:  # the loop left the last epoch mid-trial
            trial.loader = self._order.make_loader(job.own if trial.failed else trial.request)
        trial.epoch_first = pos == 0
        broken = []

        def on_batch(batch, wait_s, step_s):
            report = trial.add(batch, wait_s, step_s, job.batch_size)
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
                pos = yield from self._order.deliver(trial.loader, plan, pos, on_batch)
                if pos >= len(plan) and trial.measuring:  # the trial goes on in the next epoch
                    trial.epoch_end_s = trial.loader.feedtune_feed.end_s
                break
            except _TrialFailed as failure:
                what = "%s, with num_workers=%d" % (failure.text, trial.request["num_workers"])
                ranks = self._link.ranks
                if ranks is None:
                    self.trial = None
                    try:
                        self._link.controller.say({"error": "in the job: %s" % failure.text})
                    except OSError:
                        pass
                    self._answer.fall_back("a trial's DataLoader failed (%s)" % what)
                    return failure.delivered
                # One rank's failure reaches the others at the next collective
                # (the window's end, or the next request); until then this rank
                # goes on at its own setting, so every rank passes it.
                trial.failed = self._rank_failure = "on rank %d: %s" % (ranks.rank, what)
                trial.loader = self._order.make_loader(job.own)
                pos = failure.delivered
        if broken:
            _shutdown_loader(trial.loader)
            self.trial = None
            self._answer.fall_back(broken[0])
        elif not trial.measuring:
            _shutdown_loader(trial.loader)
            self.trial = None
        return pos  # an epoch that ended mid-trial: the trial goes on in the next one

    def stop_trial_loader(self):
        """Stops the trial DataLoader's workers (the loop left the epoch); the
        trial makes a new one if it goes on in the next epoch."""
        if self.trial is not None and self.trial.loader is not None:
            _shutdown_loader(self.trial.loader)
            self.trial.loader = None

    def stop(self):
        """Stops the trial DataLoader's workers and drops the trial (close())."""
        self.stop_trial_loader()
        self.trial = None

    def _next_message(self):
        """What comes next, the same on every rank: {"request": ...}, {"end":
        True} (the search is over) or {"broken": why}. Rank 0 reads it from the
        controller and broadcasts it; a trial that failed on any rank ends the
        tuning on all of them."""
        link = self._link
        failures = []
        if link.ranks is not None:
            failures = [f for f in link.ranks.gather(self._rank_failure) if f]
        message = None
        if not link.on_rank_0:
            if failures:
                try:
                    link.controller.say({"error": "in the job: %s" % failures[0]})
                except OSError:
                    pass
                message = {"broken": "a trial's DataLoader failed (%s)" % failures[0]}
            else:
                try:
                    request = link.controller.next_request()
                    message = {"end": True} if request is None else {"request": request}
                except (OSError, ValueError) as e:
                    message = {"broken": "the feedtune controller broke the connection (%s)" % e}
        return link.ranks.share(message) if link.ranks is not None else message

    def _send_window(self, trial, report):
        """Hands a finished window to the controller (across ranks: the slowest
        rank's, by rank 0); returns why the tuning must stop, or None."""
        link = self._link
        why = None
        if link.ranks is not None:
            reports = link.ranks.gather({"failed": trial.failed} if trial.failed else report)
            failed = [r["failed"] for r in reports if "failed" in r]
            if failed:
                report, why = {"error": "in the job: %s" % failed[0]}, "a trial's DataLoader failed (%s)" % failed[0]
            else:
                report = min(reports, key=lambda r: r["samples_per_s"])
        if not link.on_rank_0:
            try:
                link.controller.say(report)
                if not why and not trial.measuring:
                    link.controller.say({"trial_end": trial.request["trial"]})
            except OSError as e:
                why = why or "the feedtune controller went away (%s)" % e
        return link.ranks.share(why) if link.ranks is not None else why

    def _probe_batches(self, plan, pos):
        """The first batches at the user's own setting: they size the windows and the default budget."""
        loader = self._order.make_loader(self._job.own)

        def on_batch(batch, wait_s, step_s):
            self.probe.append(wait_s + step_s)
            if len(self.probe) >= _PROBE_BATCHES:
                loader.feedtune_feed.cut = True

        try:
            pos = yield from self._order.deliver(loader, plan, pos, on_batch)
        except _TrialFailed as failure:
            self._answer.fall_back("the DataLoader at your own setting failed (%s)" % failure.text)
            return failure.delivered
        _shutdown_loader(loader)
        if len(self.probe) >= _PROBE_BATCHES:
            self._launch(len(plan))  # on failure it falls back itself
        return pos

    def _start(self, plan, pos):
        """Checks what tuning needs before the first batch; False: fallback.
        Across ranks, rank 0's binary is the one that runs."""
        link, job = self._link, self._job
        link.ranks = _Ranks.of_job()
        why = job.no_binary if job.binary is None else None
        if link.ranks is not None:
            why = link.ranks.share(why)
        if why:
            self._answer.fall_back(why)
            return False
        link.probing()  # started after the first batches
        return True

    def _launch(self, batches_per_epoch):
        """Starts the controller, sized by the probe's batches; False: fallback.
        Across ranks: sized by the slowest rank, started by rank 0, and its
        windows counted in batches, so that every rank ends each at the same batch."""
        link = self._link
        per_batch = percentile(self.probe[1:], 50)  # the first batch paid the workers' start
        if link.ranks is not None:
            per_batch = max(link.ranks.gather(per_batch))
        epoch_s = per_batch * batches_per_epoch
        budget = self._job.budget_s if self._job.budget_s else _default_budget(epoch_s)
        link.budget_s = budget
        # Windows short enough for the whole sequence (about 20 trials of
        # three windows, a warm-up and the workers' start) in the budget; each
        # also holds _MIN_WINDOW_BATCHES batches (_Trial.add).
        seconds = min(2.0, max(0.25, budget / 120.0))
        if link.ranks is not None:
            self._window_batches = max(_MIN_WINDOW_BATCHES, int(math.ceil(seconds / per_batch)) if per_batch > 0 else 0)
            why = self._start_controller(budget, seconds) if link.ranks.leader else None
            why = link.ranks.share(why)
            if why:
                self._answer.fall_back(why)
                return False
            if not link.ranks.leader:
                link.run_on_rank_0()
            return True
        why = self._start_controller(budget, seconds)
        if why:
            self._answer.fall_back(why)
            return False
        return True

    def _preflight(self, method):
        """The job's preflight object (python/feedtune/preflight.py), with the
        pickle check the sweep would ask of this config (PickleCheckFor in
        tuner/measure/python_preflight.cc): always when the user's start method
        (`method`, None: the default) pickles, else when the interpreter's
        default is not fork."""
        user = self._job.user
        check = preflight.CHECK_ALWAYS if method in ("forkserver", "spawn") else preflight.CHECK_UNLESS_FORK
        names = {"collate_fn": "the DataLoader's collate_fn", "worker_init_fn": "the DataLoader's worker_init_fn"}
        parts = UserParts(collate_fn=user.collate_fn, worker_init_fn=user.worker_init_fn, names=names)
        setup = types.SimpleNamespace(dataset=user.dataset, parts=parts, torch=self._job.torch)
        return preflight.preflight_report(setup, check)

    def _start_method(self):
        """The user's multiprocessing_context by name, or None (the interpreter's default)."""
        context = self._job.own["multiprocessing_context"]
        if context is None or isinstance(context, str):
            return context
        return context.get_start_method()

    def _start_controller(self, budget, seconds):
        """Writes the config and starts `feedtune sweep --serve-fd` here;
        returns why it could not, or None."""
        job = self._job
        user = job.user
        knobs = job.own
        method = self._start_method()
        report = self._preflight(method)
        if report["pickle_error"]:
            # Every trial with workers would fail as it starts them.
            return "the trials' workers cannot be started: " + report["pickle_error"]
        lines = [
            "# written by feedtune.autotune for one run inside the job; not a config to sweep by hand",
            "name: %s" % _yaml_str(job.config),
            "workload:",
            "  kind: command",
            "  protocol: serve",
            "  argv: [%s, %s]" % (_yaml_str(sys.executable), _yaml_str(os.path.abspath(sys.argv[0] or "job"))),
            "  timeout_s: %g" % max(600.0, 20 * budget),
        ] + (["  remote_reads: true"] if job.remote else []) + [
            "loader:",
            "  batch_size: %d" % job.batch_size,
            "  drop_last: %s" % ("true" if getattr(job.batches, "drop_last", user.drop_last) else "false"),
            "  num_workers: %d" % knobs["num_workers"],
            "  pin_memory: %s" % ("true" if knobs["pin_memory"] else "false"),
            "  prefetch_factor: %d" % knobs["prefetch_factor"],
            "  persistent_workers: %s" % ("true" if knobs["persistent_workers"] else "false"),
        ] + (["  fetch_concurrency: %d" % knobs["fetch_concurrency"]] if job.remote else []) + [
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
            "  copy_phases: %s" % ("true" if job.torch.cuda.is_available() else "false"),
        ]
        try:
            controller = _Controller(job.binary, "\n".join(lines) + "\n", job.results, job.label, report)
        except OSError as e:
            self._link.release()
            return "cannot start %s (%s)" % (job.binary, e)
        self._link.run_here(controller)
        return None
