"""feedtune.autotune's ends: the verdict on the search's answer (_verdict:
the best found, or the job's own setting when the final check put the best
slower beyond the noise), the decision every rank takes at the same batch,
the steady run at the decided setting, the fallback to the user's own
setting when anything goes wrong, and the controller's end when the job
ends while tuning.

Apart because these are the rules for what the job runs after the tuning,
and the one way out of it on a failure: a reader asking "what will my job
run, and when does it give up?" reads this module. _Answer is one of the
parts AutotunedLoader (loader.py) holds; it is given the job (loader.py's
_Job), the order (order.py's _Delivery), the controller's state
(controller.py's _ControllerState) and what the job sees (loader.py's
_View), and it reads and writes only those.
"""

import sys
import time
import warnings

from .order import _KNOBS, _TrialFailed, _shutdown_loader


class _Answer:
    """AutotunedLoader from the search's end on: "tuned" or "fallback". It
    sets what the job sees (view: phase, decision, settings, non_blocking),
    and holds the steady DataLoader of "tuned" or "fallback"."""

    def __init__(self, job, order, link, view):
        self._job = job
        self._order = order
        self._link = link
        self._view = view
        self._final = None  # the DataLoader of "tuned" or "fallback", kept across epochs (persistent workers)

    def decide(self):
        """The search is over: every rank takes rank 0's answer at the same batch."""
        link, view = self._link, self._view
        answer = self._answer() if not link.on_rank_0 else None
        if link.ranks is not None:
            answer = link.ranks.share(answer)
        if "fallback" in answer:
            self.fall_back(answer["fallback"])
            return
        knobs = dict(answer["knobs"])
        if knobs.get("multiprocessing_context") is None:  # the phase kept the job's own
            knobs["multiprocessing_context"] = self._job.own["multiprocessing_context"]
        view.settings, view.non_blocking, view.decision = knobs, answer["non_blocking"], answer["decision"]
        if self._job.verbose and (link.ranks is None or link.ranks.leader):
            sys.stderr.write(view.decision + "\n")
        link.close()
        view.phase = "tuned"

    def _answer(self):
        """The controller's answer: {"knobs", "non_blocking", "decision"}, or {"fallback": why}."""
        controller, ranks = self._link.controller, self._link.ranks
        events, code = controller.finish()
        done, seed, start = events.get("done"), events.get("seed"), events.get("start") or {}
        if done is None or not done.get("best"):
            why = "the search ended with exit %d and no best setting" % code
            tail = controller.stderr_tail()
            return {"fallback": why + (": " + tail if tail else "")}
        spent = time.monotonic() - self._link.started_s
        knobs, non_blocking, verdict = _verdict(done, self._job.own)
        budget_note = ""
        if start.get("resumed"):
            budget_note += ("; went on from the %d trials of run %s, left unfinished by an earlier job"
                            % (start.get("stored_trials", 0), start.get("run_id")))
        if seed is not None:
            stored = seed.get("seed", {})
            budget_note += "; the stored answer of run %s of %s" % (stored.get("run"),
                                                                    stored.get("run_host") or "this host")
        estimate = done.get("workers_estimate")
        if estimate:
            # Where the worker search began, from the first batches' figures (docs/search.md#the-estimate).
            budget_note += "; num_workers searched from an estimate of %d (%s)" % (estimate["workers"], estimate["how"])
        for phase in done.get("phases", []):
            if phase.get("phase") in ("seed_check", "time_budget"):
                budget_note += "; " + phase.get("why", "")
        ranks = " across %d ranks (each window the slowest rank's)" % ranks.size if ranks else ""
        method = knobs["multiprocessing_context"]
        decision = ("feedtune.autotune: num_workers=%d pin_memory=%s prefetch_factor=%s persistent_workers=%s%s "
                    "non_blocking=%s%s: %s; %d trials in %.1f s%s (run %s in %s)%s"
                    % (knobs["num_workers"], knobs["pin_memory"], knobs["prefetch_factor"],
                       knobs["persistent_workers"], " multiprocessing_context=" + method if method else "",
                       non_blocking, _in_flight_text(knobs), verdict, done.get("trials", 0), spent, ranks,
                       done.get("run_id"), self._job.results, budget_note))
        return {"knobs": knobs, "non_blocking": non_blocking, "decision": decision}

    def end_controller(self):
        """The job ends (close(), or the loader collected) with the controller
        running: one that runs here stops (rank 0's is rank 0's to stop).
        Still tuning, its run is kept unfinished with its trials, and the
        decision line says so: the next job on the same results file and
        config goes on from them (controller.py's --continue-unfinished)."""
        link, view = self._link, self._view
        controller = link.release()
        if controller is None:
            return
        if view.phase != "tuning":
            controller.close()
            return
        controller.stop()
        events = controller.events()
        controller.close()
        kept = events.get("interrupted") or {}
        spent = time.monotonic() - link.started_s if link.started_s else 0.0
        if not kept and events.get("done"):
            # The search ended as the job did, before the job took its answer.
            view.decision = ("feedtune.autotune: the job ended as its tuning did (%.1f s): run %s in %s is %s, "
                             "and the next job of this config on that file starts from its answer"
                             % (spent, events["done"].get("run_id"), self._job.results, events["done"].get("status")))
        else:
            view.decision = self._unfinished_line(spent, kept)
        if self._job.verbose:
            sys.stderr.write(view.decision + "\n")

    def _unfinished_line(self, spent, kept):
        """The decision line of a job that ended while tuning."""
        return ("feedtune.autotune: the job ended while tuning, %.1f s into a budget of %g s: run %s in %s "
                "keeps its %d trials unfinished, and the next job of this config on that file goes on from them"
                % (spent, self._link.budget_s or 0, kept.get("run_id"), self._job.results, kept.get("trials_kept", 0)))

    def fall_back(self, why):
        """The job goes on at its own setting from the next undelivered batch,
        with one warning; the controller, if it runs here, is closed."""
        view = self._view
        self._link.close()
        view.settings, view.non_blocking = dict(self._job.own), False
        view.phase = "fallback"
        view.decision = "feedtune.autotune: %s; the job goes on at its own DataLoader setting" % why
        # stacklevel=3: the warning is attributed to the caller of fall_back's caller.
        warnings.warn(view.decision, RuntimeWarning, stacklevel=3)

    def steady(self, plan, pos):
        """The rest of the job at the decided setting, one DataLoader for all epochs."""
        view = self._view
        if self._final is None:
            self._final = self._order.make_loader(view.settings)
        loader = self._final
        try:
            return (yield from self._order.deliver(loader, plan, pos))
        except _TrialFailed as failure:
            if view.settings == self._job.own:
                raise failure.error  # the user's own setting fails: as their DataLoader would
            self._final = None
            self.fall_back("the tuned DataLoader failed (%s)" % failure.text)
            return failure.delivered

    def stop(self):
        """Stops the steady DataLoader's workers (close())."""
        if self._final is not None:
            _shutdown_loader(self._final)
            self._final = None


def _in_flight_text(knobs):
    """For a dataset on a store: its fetch_concurrency, and the requests in
    flight it makes with the processes that read (the workers, or the main
    process without them)."""
    if "fetch_concurrency" not in knobs:
        return ""
    processes = knobs["num_workers"] or 1
    return (" fetch_concurrency=%d (%d reading process%s x %d requests in flight = %d)"
            % (knobs["fetch_concurrency"], processes, "" if processes == 1 else "es", knobs["fetch_concurrency"],
               processes * knobs["fetch_concurrency"]))


def _verdict(done, own):
    """What the job runs after the search's `done` event: (knobs, non_blocking,
    the verdict's words). The search's best, unless its final check against
    the job's own setting (`own`) put it slower beyond the noise, as the
    search judges it (the event's slower_than_reference: the pairs' interval
    wholly below x1.00, the seed check's rule, tuner/search/final_check.cc;
    the job keeps no copy of the rule). A median below x1.00
    within the noise does not overturn what the search kept by THE RULE
    (docs/search.md): on a drifting machine three pairs of short windows can
    put a real gain on either side of x1.00."""
    best = done["best"]["config"]
    speedup = done.get("speedup")
    interval = done.get("speedup_ci") or [speedup, speedup]
    if done.get("slower_than_reference"):
        knobs = {k: own[k] for k in _KNOBS}
        knobs["multiprocessing_context"] = None
        if "fetch_concurrency" in own:
            knobs["fetch_concurrency"] = own["fetch_concurrency"]
        return knobs, False, ("kept your own setting: the best found ran x%.2f [%.2f, %.2f] of it in the final "
                              "check, slower beyond the noise" % (speedup, interval[0], interval[1]))
    knobs = {k: best[k] for k in _KNOBS}
    knobs["multiprocessing_context"] = best.get("multiprocessing_context")  # None: the job's own
    if "fetch_concurrency" in own:  # the dataset reads a store: its requests in flight (1 is left out of the JSON)
        knobs["fetch_concurrency"] = int(best.get("fetch_concurrency", 1))
    phases = {p.get("phase") for p in done.get("phases", [])}
    if done.get("best_is_reference"):  # the final check had nothing to check
        verdict = "your own setting is the best found"
    elif speedup is not None:
        verdict = "x%.2f [%.2f, %.2f] over your own setting (%s)" % (
            speedup, interval[0], interval[1], "final check" if "final_check" in phases else "the stored setting's check")
    else:
        verdict = "not checked against your own setting (the budget ended the search first)"
    return knobs, bool(best["non_blocking"]), verdict
