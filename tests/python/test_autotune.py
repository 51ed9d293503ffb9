"""feedtune.autotune in a job: the batches the plain DataLoader would give, in
its order, every epoch, while feedtune's own search (the binary, started by
the job) tries settings on them; and the job going on at its own setting
when anything of the tuning fails.

Needs the feedtune binary: $FEEDTUNE_BIN, else build/tuner/cli/feedtune;
skipped (saying so) when neither is there.

    PYTHONPATH=python FEEDTUNE_BIN=build/tuner/cli/feedtune python3 -m unittest tests/python/test_autotune.py
"""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest
import warnings

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), os.pardir, os.pardir))
sys.path.insert(0, os.path.join(REPO, "python"))

import torch  # noqa: E402
import torch.utils.data as tud  # noqa: E402

import feedtune  # noqa: E402
from feedtune import AutotuneError, autotune  # noqa: E402

BINARY = os.environ.get("FEEDTUNE_BIN") or os.path.join(REPO, "build", "tuner", "cli", "feedtune")
HAVE_BINARY = os.path.isfile(BINARY) and os.access(BINARY, os.X_OK)
BUDGET_S = 2.0
WORKERS_BUDGET_S = 12.0  # enough for the doubling to reach 2 workers on a loaded 2-CPU box
MAX_EPOCHS = 40


class Indices(tud.Dataset):
    """Sample i is the tensor [i], after a short wait (so workers can pay off)."""

    def __init__(self, n=240, wait_s=0.0004):
        self.n, self.wait_s = n, wait_s

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        time.sleep(self.wait_s)
        return torch.tensor([i])


class KillsItsWorker(Indices):
    """Under a worker with 2 or more siblings, sample `at` kills the worker (SIGKILL)."""

    def __init__(self, at):
        super().__init__()
        self.at = at

    def __getitem__(self, i):
        info = tud.get_worker_info()
        if i == self.at and info is not None and info.num_workers >= 2:
            os.kill(os.getpid(), signal.SIGKILL)
        return super().__getitem__(i)


class EveryOtherReversed(tud.Sampler):
    """A custom sampler with state: forwards, then backwards, by turns."""

    def __init__(self, n):
        self.n, self.turn = n, 0

    def __iter__(self):
        self.turn += 1
        return iter(range(self.n) if self.turn % 2 else range(self.n - 1, -1, -1))

    def __len__(self):
        return self.n


def indices_of(batch):
    return [int(v) for v in batch.view(-1)]


def run(loader, epochs, set_epoch=None, on_batch=None):
    """The indices per epoch, as lists of batches."""
    seen = []
    for epoch in range(epochs):
        if set_epoch:
            set_epoch(epoch)
        batches = []
        for batch in loader:
            batches.append(indices_of(batch))
            if on_batch:
                on_batch(loader, batch)
        seen.append(batches)
    return seen


def children():
    """This process's child pids (the controller, DataLoader workers), but not
    multiprocessing's resource tracker and fork server, which spawn and
    forkserver start once per process."""
    from multiprocessing import forkserver, resource_tracker
    me = str(os.getpid())
    helpers = (getattr(resource_tracker._resource_tracker, "_pid", None),
               getattr(forkserver._forkserver, "_forkserver_pid", None))
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % pid) as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[1] == me and fields[0] != "Z" and int(pid) not in helpers:
            found.append(int(pid))
    return found


@unittest.skipUnless(HAVE_BINARY, "no feedtune binary at %s (make build, or set FEEDTUNE_BIN)" % BINARY)
class AutotuneOrder(unittest.TestCase):
    """Same indices, same order, as the plain DataLoader built the same way."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="autotune-test-")
        self.db = os.path.join(self.dir, "job.db")

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def tuned_and_plain(self, make, set_epoch=None, config="order"):
        """Iterates autotune(make()) until it is tuned and two epochs more, and
        make() plainly as many epochs; returns both, and the tuned loader."""
        tuned = autotune(make(), results=self.db, config=config, budget_s=BUDGET_S, verbose=False)
        seen = []
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)  # a fallback fails the test
            after = 0
            for epoch in range(MAX_EPOCHS):
                seen += run(tuned, 1, set_epoch=(lambda e, ep=epoch: set_epoch(tuned, ep)) if set_epoch else None)
                if tuned.phase != "tuning":
                    after += 1
                    if after == 2:
                        break
        self.assertEqual(tuned.phase, "tuned", tuned.decision)
        # The controller and the trial DataLoaders are gone: between epochs only
        # the steady DataLoader's persistent workers may be alive.
        alive = children()
        self.assertLessEqual(len(alive), tuned.settings["num_workers"] if tuned.settings.get("persistent_workers")
                             else 0, alive)
        plain = make()
        expected = run(plain, len(seen), set_epoch=(lambda e: set_epoch(plain, e)) if set_epoch else None)
        tuned.close()
        self.last_decision = tuned.decision
        return seen, expected, tuned

    def assert_same(self, seen, expected, n, drop_last_batch=None):
        self.assertEqual(len(seen), len(expected))
        for epoch, (got, want) in enumerate(zip(seen, expected)):
            self.assertEqual(got, want, "epoch %d differs" % epoch)
        flat = sorted(i for b in seen[0] for i in b)
        if drop_last_batch is None:
            self.assertEqual(flat, list(range(n)))  # every index once, none repeated

    def test_shuffle_with_a_generator_and_a_ragged_last_batch(self):
        def make():
            return tud.DataLoader(Indices(), batch_size=7, shuffle=True, drop_last=False,
                                  generator=torch.Generator().manual_seed(11))
        seen, expected, tuned = self.tuned_and_plain(make)
        self.assert_same(seen, expected, 240)
        self.assertGreater(len(seen), 2)
        # The decision is stored as a run, with the job's setting as the check's reference.
        report = subprocess.run([BINARY, "report", "--db", self.db, "--format", "json"], capture_output=True,
                                text=True, check=True)
        run_json = json.loads(report.stdout)
        self.assertEqual(run_json["status"], "done")
        self.assertEqual(run_json["workload"], "order")
        self.assertEqual(run_json["backend"], "in-job")  # marked as measured in the job
        self.assertIn("num_workers", tuned.settings)
        self.assertIn("non_blocking", tuned.settings)
        self.assertTrue(tuned.decision.startswith("feedtune.autotune: num_workers="), tuned.decision)
        # The next job with the same results file and config starts at the stored answer.
        again, again_expected, _ = self.tuned_and_plain(make)
        self.assert_same(again, again_expected, 240)
        report = subprocess.run([BINARY, "report", "--db", self.db, "--run", "2", "--format", "json"],
                                capture_output=True, text=True, check=True)
        second = json.loads(report.stdout)
        self.assertEqual(second["status"], "done")
        # One check of the stored answer instead of the search: re-tuned only
        # when the check puts it below the job's own setting beyond the noise.
        self.assertRegex(self.last_decision, r"; the stored answer of run 1 of [^;]+; "
                                             r"(kept the stored setting of run 1|the stored setting ran x)")
        phases = [p["phase"] for p in second["calibration"]["phases"]]
        self.assertIn("seed_check", phases)
        if "kept the stored setting" in self.last_decision:
            self.assertNotIn("num_workers", phases)

    def test_custom_sampler_and_drop_last(self):
        def make():
            return tud.DataLoader(Indices(), batch_size=16, sampler=EveryOtherReversed(240), drop_last=True)
        seen, expected, _ = self.tuned_and_plain(make)
        self.assert_same(seen, expected, 240, drop_last_batch=True)
        self.assertEqual(len(seen[0]), 240 // 16)

    def test_distributed_sampler_with_set_epoch(self):
        def make():
            ds = Indices()
            return tud.DataLoader(ds, batch_size=8, sampler=tud.DistributedSampler(ds, num_replicas=2, rank=1,
                                                                                   shuffle=True, seed=3))

        def set_epoch(loader, epoch):
            loader.sampler.set_epoch(epoch)
        seen, expected, _ = self.tuned_and_plain(make, set_epoch=set_epoch)
        self.assert_same(seen, expected, 120, drop_last_batch=True)
        self.assertNotEqual(seen[0], seen[1])  # set_epoch reshuffled

    def test_the_jobs_start_method_reaches_the_search(self):
        # A job whose workers start by forkserver (its default here): the job
        # says so in its own preflight, the run stores it, and the order holds
        # with the trials' workers started by forkserver.
        import multiprocessing
        import platform
        import sqlite3
        was = multiprocessing.get_start_method()
        multiprocessing.set_start_method("forkserver", force=True)
        # The server imports torch once, as a job that starts its workers by
        # forkserver should have it do: else each worker imports torch itself
        # (2-3 s of CPU), and the search's 26 workers took 160 s a trial.
        multiprocessing.set_forkserver_preload(["torch", "test_autotune"])
        self.addCleanup(multiprocessing.set_start_method, was, force=True)

        def make():
            return tud.DataLoader(Indices(), batch_size=8, shuffle=True, generator=torch.Generator().manual_seed(4))
        seen, expected, _ = self.tuned_and_plain(make, config="start-method")
        self.assert_same(seen, expected, 240)
        with sqlite3.connect(self.db) as db:
            row = db.execute("SELECT python_version, torch_version, default_start_method FROM runs").fetchone()
        self.assertEqual(row, (platform.python_version(), torch.__version__, "forkserver"))

    def test_batch_sampler_and_the_global_generator(self):
        def make():
            torch.manual_seed(5)  # RandomSampler without a generator draws from torch's global one
            return tud.DataLoader(Indices(), batch_sampler=tud.BatchSampler(tud.RandomSampler(range(240)), 9,
                                                                            drop_last=True))
        seen, expected, _ = self.tuned_and_plain(make)
        self.assert_same(seen, expected, 240, drop_last_batch=True)


@unittest.skipUnless(HAVE_BINARY, "no feedtune binary at %s (make build, or set FEEDTUNE_BIN)" % BINARY)
class AutotuneNeverHurts(unittest.TestCase):
    """Each fault leaves the job running at its own setting, no batch lost or repeated."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="autotune-test-")
        self.db = os.path.join(self.dir, "job.db")

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def make(self, dataset=None):
        return tud.DataLoader(dataset or Indices(), batch_size=6, shuffle=True,
                              generator=torch.Generator().manual_seed(2))

    def epochs_until_fallback(self, loader, on_batch=None, epochs=MAX_EPOCHS):
        seen = []
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for _ in range(epochs):
                seen += run(loader, 1, on_batch=on_batch)
                if loader.phase == "fallback":
                    seen += run(loader, 1)
                    break
        said = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
        return seen, said

    def test_no_binary(self):
        loader = autotune(self.make(), results=self.db, feedtune_bin=os.path.join(self.dir, "nope"), verbose=False)
        seen, said = self.epochs_until_fallback(loader, epochs=2)
        self.assertEqual(loader.phase, "fallback")
        self.assertEqual(len(said), 1)
        self.assertIn("no executable feedtune binary at feedtune_bin=", said[0])
        self.assertEqual(seen, run(self.make(), len(seen)))
        self.assertEqual(loader.settings, {"num_workers": 0, "pin_memory": False, "non_blocking": False})

    def test_the_controller_killed(self):
        killed = []

        def kill_it(loader, batch):
            c = loader._controller
            if not killed and c and c.process and len(loader._probe) >= 4 and loader._trial is not None:
                os.kill(c.process.pid, signal.SIGKILL)
                killed.append(c.process.pid)
        loader = autotune(self.make(), results=self.db, budget_s=BUDGET_S, verbose=False)
        seen, said = self.epochs_until_fallback(loader, on_batch=kill_it)
        self.assertTrue(killed)
        self.assertEqual(loader.phase, "fallback")
        self.assertEqual(len(said), 1, said)
        self.assertIn("controller", said[0])
        self.assertEqual(seen, run(self.make(), len(seen)))

    def test_a_trial_worker_killed(self):
        loader = autotune(self.make(KillsItsWorker(at=17)), results=self.db, budget_s=WORKERS_BUDGET_S,
                          verbose=False)
        seen, said = self.epochs_until_fallback(loader)
        self.assertEqual(loader.phase, "fallback", loader.decision)
        self.assertEqual(len(said), 1, said)
        self.assertIn("a trial's DataLoader failed", said[0])
        self.assertEqual(seen, run(self.make(Indices()), len(seen)))
        # The dead worker is out of torch's SIGCHLD table: no later SIGCHLD
        # raises "DataLoader worker ... is killed by signal" into the job.
        torch._C._error_if_any_worker_fails()

    def test_an_exception_of_the_loop_propagates_and_no_worker_stays(self):
        loader = autotune(self.make(), results=self.db, budget_s=WORKERS_BUDGET_S, verbose=False)

        class Mine(Exception):
            pass
        with self.assertRaises(Mine):
            for _ in range(MAX_EPOCHS):
                for batch in loader:
                    t = loader._trial
                    if t is not None and t.request["num_workers"] >= 2 and t.loader is not None:
                        raise Mine("from the training step")
        controller = loader._controller.process.pid
        workers = [pid for pid in children() if pid != controller]
        self.assertEqual(workers, [], "DataLoader workers left after the loop's exception")
        loader.close()
        self.assertEqual(children(), [])

    def test_serve_fd_needs_a_serving_command(self):
        config = os.path.join(self.dir, "native.yaml")
        with open(config, "w") as f:
            f.write("name: native\nworkload: {kind: synthetic, samples: 64}\n")
        done = subprocess.run([BINARY, "sweep", config, "--db", self.db, "--serve-fd", "0"], capture_output=True,
                              text=True, stdin=subprocess.DEVNULL)
        self.assertEqual(done.returncode, 2, done.stderr)
        self.assertIn("--serve-fd needs workload.kind command with protocol serve", done.stderr)
        self.assertFalse(os.path.exists(self.db))

    def test_serve_preflight_needs_serve_fd_and_a_preflight_object(self):
        config = os.path.join(self.dir, "job.yaml")
        with open(config, "w") as f:
            f.write("name: job\nworkload: {kind: command, protocol: serve, argv: [python3, job.py]}\n")
        cases = ([[], "--serve-preflight goes with --serve-fd"],
                 [["--serve-fd", "0"], "--serve-preflight: not a preflight object"])
        for extra, said in cases:
            done = subprocess.run([BINARY, "sweep", config, "--db", self.db, "--serve-preflight", '{"python": 3}']
                                  + extra, capture_output=True, text=True, stdin=subprocess.DEVNULL)
            self.assertEqual(done.returncode, 2, done.stderr)
            self.assertIn(said, done.stderr)
        self.assertFalse(os.path.exists(self.db))

    def test_an_iterable_dataset_is_refused(self):
        class Stream(tud.IterableDataset):
            def __iter__(self):
                return iter(range(10))
        with self.assertRaises(AutotuneError) as raised:
            autotune(tud.DataLoader(Stream(), batch_size=2))
        self.assertIn("IterableDataset", str(raised.exception))
        self.assertIn("feedtune sweep", str(raised.exception))

    def test_a_dataset_that_does_not_pickle_under_spawn(self):
        # A job that made spawn its start method (as CUDA jobs do), with no
        # workers of its own: its lambda never pickles, but a trial with
        # workers must pickle the dataset, and fails.
        import multiprocessing
        was = multiprocessing.get_start_method()
        multiprocessing.set_start_method("spawn", force=True)
        self.addCleanup(multiprocessing.set_start_method, was, force=True)
        dataset = Indices()
        dataset.transform = lambda x: x
        loader = autotune(tud.DataLoader(dataset, batch_size=6, shuffle=True,
                                         generator=torch.Generator().manual_seed(2)),
                          results=self.db, budget_s=WORKERS_BUDGET_S, verbose=False)
        seen, said = self.epochs_until_fallback(loader)
        self.assertEqual(loader.phase, "fallback", loader.decision)
        self.assertEqual(len(said), 1, said)
        # The job's own preflight finds it before the controller starts, and names it.
        self.assertIn("the trials' workers cannot be started", said[0])
        self.assertIn("Dataset attribute 'transform' holds a lambda: it does not pickle", said[0])
        self.assertIsNone(loader._controller)
        self.assertEqual(seen, run(self.make(), len(seen)))


@unittest.skipUnless(HAVE_BINARY, "no feedtune binary at %s (make build, or set FEEDTUNE_BIN)" % BINARY)
class AutotuneRanks(unittest.TestCase):
    """Two gloo ranks: rank 0 runs the search, every rank switches at the same
    batch, a window's figure is the slowest rank's, and each rank's batches are
    its plain DataLoader's (tests/python/autotune_ranks.py is one rank)."""

    def test_two_gloo_ranks(self):
        tmp = tempfile.mkdtemp(prefix="autotune-ranks-")
        self.addCleanup(shutil.rmtree, tmp, True)
        db = os.path.join(tmp, "job.db")
        env = dict(os.environ, RENDEZVOUS=os.path.join(tmp, "rendezvous"), WORLD_SIZE="2",
                   BUDGET_S=str(WORKERS_BUDGET_S))
        script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "autotune_ranks.py")
        ranks = [subprocess.Popen([sys.executable, script, db, os.path.join(tmp, "rank%d.json" % r)],
                                  env=dict(env, RANK=str(r)), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  text=True) for r in range(2)]
        outputs = [p.communicate(timeout=240)[0] for p in ranks]
        for r, p in enumerate(ranks):
            self.assertEqual(p.returncode, 0, "rank %d: %s" % (r, outputs[r][-3000:]))
        got = []
        for r in range(2):
            with open(os.path.join(tmp, "rank%d.json" % r)) as f:
                got.append(json.load(f))
        for r, g in enumerate(got):
            self.assertEqual(g["phase"], "tuned", "rank %d: %s" % (r, g["decision"]))
            self.assertEqual(g["seen"], g["plain"], "rank %d: batches differ from its plain DataLoader's" % r)
        self.assertEqual(got[0]["switches"], got[1]["switches"])  # every setting at the same batch on both
        self.assertGreater(len(got[0]["switches"]), 2)
        self.assertEqual(got[0]["decision"], got[1]["decision"])
        self.assertIn("across 2 ranks", got[0]["decision"])
        # One run, rank 0's; its figures are rank 1's, whose step alone holds
        # it under 6 / 0.004 = 1500 samples/s.
        report = subprocess.run([BINARY, "report", "--db", db, "--format", "json"], capture_output=True, text=True,
                                check=True)
        trials = json.loads(report.stdout)["trials"]
        self.assertTrue(trials)
        for t in trials:
            if t["status"] == "ok":
                self.assertLess(t["samples_per_s"], 1500, t)


@unittest.skipUnless(HAVE_BINARY, "no feedtune binary at %s (make build, or set FEEDTUNE_BIN)" % BINARY)
class AutotuneStops(unittest.TestCase):
    """A job that stops mid-tuning leaves its run in a true state: interrupted,
    with the trials measured so far, whether the job closed its loader, took
    Ctrl-C, was killed alone (the controller reads the socket's end), or was
    killed with its controller (the next open of the results file finds the
    run's process gone); and the next job of the same config on the file goes
    on from it."""

    JOB = os.path.join(os.path.dirname(os.path.abspath(__file__)), "autotune_job.py")
    LONG_BUDGET_S = 60.0  # outlasts each test: the job is stopped mid-tuning

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="autotune-stop-")
        self.db = os.path.join(self.dir, "job.db")
        self.pid_file = os.path.join(self.dir, "controller.pid")

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def trials(self):
        import sqlite3
        try:
            with sqlite3.connect("file:%s?mode=ro" % self.db, uri=True) as db:
                return db.execute("SELECT count(*) FROM trials").fetchone()[0]
        except sqlite3.Error:  # not made yet
            return 0

    def wait_for_trials(self, count, job=None):
        deadline = time.monotonic() + 120
        while self.trials() < count:
            if job is not None and job.poll() is not None:
                self.fail("the job ended first: %s" % job.communicate()[0][-3000:])
            self.assertLess(time.monotonic(), deadline, "no %d trials stored within 120 s" % count)
            time.sleep(0.1)
        return self.trials()

    def start_job(self):
        """autotune_job.py in its own session, as a shell starts a job (a signal
        to its group reaches its DataLoader workers too, not the controller);
        returns it and the controller's pid once 2 trials are stored."""
        env = dict(os.environ, BUDGET_S=str(self.LONG_BUDGET_S), FEEDTUNE_BIN=BINARY)
        job = subprocess.Popen([sys.executable, self.JOB, self.db, self.pid_file], env=env, start_new_session=True,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

        def stop():
            if job.poll() is None:
                os.killpg(job.pid, signal.SIGKILL)
            job.communicate()
        self.addCleanup(stop)
        self.wait_for_trials(2, job)
        with open(self.pid_file) as f:
            controller = int(f.read())
        self.addCleanup(lambda: self.gone(controller) or os.kill(controller, signal.SIGKILL))
        return job, controller

    @staticmethod
    def gone(pid, within_s=0.0):
        """Whether process `pid` has ended (a zombie has) within `within_s`."""
        deadline = time.monotonic() + within_s
        while True:
            try:
                with open("/proc/%d/stat" % pid) as f:
                    if f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X"):
                        return True
            except OSError:
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.05)

    def run_json(self, run):
        report = subprocess.run([BINARY, "report", "--db", self.db, "--run", str(run), "--format", "json"],
                                capture_output=True, text=True)
        self.assertEqual(report.returncode, 0, report.stderr)
        return json.loads(report.stdout)

    def test_closing_the_loader_mid_tuning(self):
        loader = autotune(tud.DataLoader(Indices(), batch_size=6, shuffle=True), results=self.db, config="closed",
                          budget_s=self.LONG_BUDGET_S, verbose=False)
        for _ in range(MAX_EPOCHS):
            for _batch in loader:
                pass
            if self.trials() >= 2:
                break
        self.assertEqual(loader.phase, "tuning")
        stored = self.trials()
        controller = loader._controller.process
        loader.close()
        self.assertIsNotNone(controller.poll())
        self.assertEqual(controller.returncode, 130)  # it stopped as a sweep does on Ctrl-C, not killed
        run = self.run_json(1)
        self.assertEqual(run["status"], "interrupted")
        self.assertGreaterEqual(len(run["trials"]), stored)
        self.assertRegex(run["end_note"], r"^stopped by a signal after \d+ trials \(the training job's")

    def test_ctrl_c_of_the_job(self):
        job, controller = self.start_job()
        stored = self.trials()
        # Ctrl-C, to the job's main process: Python drops a KeyboardInterrupt
        # raised inside an at-fork handler, so one that lands while the job
        # forks a DataLoader worker is lost (a user presses it again), and a
        # worker hit while it starts dies, which makes the job fall back.
        # A Ctrl-C the job took ends its controller within a second or two (the
        # job signals it on its way out); only one that was lost is sent again,
        # and soon: 10 s after a lost first one, a second found the job tuned in
        # one CI run (the run then "done", as it truly was). One sent while the
        # job is on its way out would interrupt that.
        for _ in range(10):
            os.kill(job.pid, signal.SIGINT)
            if self.gone(controller, within_s=3):
                break
        out = job.communicate(timeout=60)[0]
        self.assertEqual(job.returncode, -signal.SIGINT, out[-3000:])  # an uncaught KeyboardInterrupt
        self.assertIn("KeyboardInterrupt", out)
        self.assertTrue(self.gone(controller), "the controller outlived the job")
        run = self.run_json(1)
        self.assertEqual(run["status"], "interrupted")
        self.assertGreaterEqual(len(run["trials"]), stored)
        self.assertRegex(run["end_note"], r"^stopped by a signal after \d+ trials")

    def test_the_job_killed_alone(self):
        job, controller = self.start_job()
        os.killpg(job.pid, signal.SIGKILL)  # no atexit: the controller reads the socket's end
        job.communicate(timeout=60)
        self.assertTrue(self.gone(controller, within_s=30), "the controller outlived the job by 30 s")
        run = self.run_json(1)
        self.assertEqual(run["status"], "interrupted")  # not "done" with a best no job runs
        self.assertGreaterEqual(len(run["trials"]), 2)
        self.assertRegex(run["end_note"], r"^the training job closed the connection in trial \d+ after \d+ of "
                                          r"\d+ windows: it ended or was killed$")

    def test_the_job_killed_with_its_controller_then_a_second_job(self):
        import socket
        job, controller = self.start_job()
        # As a cluster ends a job (scancel, the OOM killer): every process at once, no word from any.
        os.kill(controller, signal.SIGKILL)
        os.killpg(job.pid, signal.SIGKILL)
        job.communicate(timeout=60)
        self.assertTrue(self.gone(controller, within_s=10))
        stored = self.trials()
        self.assertEqual(self.run_json(1)["status"], "running")  # a read-only report changes nothing

        # The next job on the file finds run 1's process gone, marks it, and
        # runs its own search: run 1 has no answer to seed it.
        loader = autotune(tud.DataLoader(Indices(), batch_size=6, shuffle=True), results=self.db, config="stopped",
                          budget_s=BUDGET_S, verbose=False)
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)  # a fallback fails the test
            for _ in range(MAX_EPOCHS):
                run(loader, 1)
                if loader.phase != "tuning":
                    break
        self.assertEqual(loader.phase, "tuned", loader.decision)
        loader.close()
        self.assertNotIn("the stored answer", loader.decision)
        first = self.run_json(1)
        self.assertEqual(first["status"], "interrupted")
        self.assertEqual(len(first["trials"]), stored)  # its trials are kept
        self.assertRegex(first["end_note"], r"^left running by pid %d on %s, which has ended; marked interrupted "
                                            r"by pid \d+, the next to open the file for writing$"
                         % (controller, re.escape(socket.gethostname())))
        second = self.run_json(2)
        self.assertEqual(second["status"], "done")
        self.assertIsNone(second["end_note"])
        self.assertNotIn("seed_check", [p["phase"] for p in second["calibration"]["phases"]])

    def test_two_short_jobs_in_a_row_the_second_goes_on_from_the_first(self):
        # Two jobs that each end while tuning (short jobs, a budget of ten
        # minutes that no load on the box runs out): the first says so, the
        # second goes on from the first's trials instead of starting over at
        # the baseline, and repeats none.
        def job(least_trials):
            loader = autotune(tud.DataLoader(Indices(), batch_size=6, shuffle=True), results=self.db,
                              config="short", budget_s=600.0, verbose=False)
            for _ in range(MAX_EPOCHS):
                for _batch in loader:
                    pass
                if self.trials() >= least_trials:
                    break
            self.assertEqual(loader.phase, "tuning")
            loader.close()
            return loader

        first = job(2)
        self.assertRegex(first.decision, r"^feedtune\.autotune: the job ended while tuning, [\d.]+ s into a budget of "
                                         r"600 s: run 1 in .* keeps its \d+ trials unfinished, and the next job of this "
                                         r"config on that file goes on from them$")
        before = self.run_json(1)["trials"]
        second = job(len(before) + 2)
        self.assertIn("run 1", second.decision)
        after = self.run_json(1)
        self.assertEqual(after["status"], "interrupted")
        self.assertEqual([t["id"] for t in after["trials"][:len(before)]], [t["id"] for t in before])
        new = after["trials"][len(before):]
        self.assertGreaterEqual(len(new), 2, "the second job measured trials of its own")
        self.assertNotIn("baseline", [t["phase"] for t in new], "the second job started over")
        def key(t):
            return t["phase"], json.dumps(t["config"], sort_keys=True)
        self.assertFalse({key(t) for t in new} & {key(t) for t in before}, "a trial of the first job measured again")


class AutotuneWindows(unittest.TestCase):
    """A trial's window figures from the batches the job was handed."""

    def test_the_next_that_ends_an_epoch_counts_in_the_window(self):
        from feedtune.autotune import _Trial
        request = {"warmup_batches": 1, "repeats": 1, "window_epochs": 1, "measure_seconds": 0.25, "num_workers": 2}
        trial = _Trial(request, batches_per_epoch=2)
        batch = (torch.zeros(4, 3), torch.zeros(4))
        trial.epoch_first = False
        self.assertIsNone(trial.add(batch, 0.01, 0.02, 4))  # the warm-up
        self.assertIsNone(trial.add(batch, 0.01, 0.02, 4))
        trial.epoch_end_s = 0.5  # the next() that ended the epoch: its workers shut down
        trial.epoch_first = True
        report = trial.add(batch, 0.01, 0.02, 4)
        self.assertAlmostEqual(report["samples_per_s"], 8 / 0.56)
        self.assertAlmostEqual(report["gpu_idle_frac"], 0.52 / 0.56)
        self.assertEqual(trial.epoch_end_s, 0.0)

    def test_an_epoch_end_inside_the_warm_up_is_not_counted(self):
        from feedtune.autotune import _Trial
        request = {"warmup_batches": 1, "repeats": 1, "window_epochs": 0, "measure_seconds": 0.01, "num_workers": 2}
        trial = _Trial(request, batches_per_epoch=8)
        batch = (torch.zeros(4, 3), torch.zeros(4))
        trial.epoch_end_s = 0.5
        trial.epoch_first = True
        self.assertIsNone(trial.add(batch, 0.01, 0.02, 4))  # the warm-up, with the epoch's end
        reports = [trial.add(batch, 0.01, 0.02, 4) for _ in range(4)]
        self.assertEqual(reports[:3], [None, None, None])  # with workers, a window holds 4 batches
        self.assertAlmostEqual(reports[-1]["samples_per_s"], 16 / 0.12)

    def test_a_time_window_of_workers_holds_a_round_and_no_epoch_start(self):
        from feedtune.autotune import _Trial
        request = {"warmup_batches": 0, "repeats": 1, "window_epochs": 0, "measure_seconds": 0.01, "num_workers": 6,
                   "persistent_workers": False}
        trial = _Trial(request, batches_per_epoch=8)
        batch = (torch.zeros(4, 3), torch.zeros(4))
        trial.epoch_first = False
        reports = [trial.add(batch, 0.01, 0.02, 4) for _ in range(5)]
        trial.epoch_first = True  # the restart: not counted, the window goes on across it
        reports.append(trial.add(batch, 0.9, 0.02, 4))
        reports.append(trial.add(batch, 0.01, 0.02, 4))
        self.assertEqual(reports[:-1], [None] * 6)
        self.assertAlmostEqual(reports[-1]["samples_per_s"], 24 / 0.18)  # 6 batches: one per worker
        persistent = _Trial(dict(request, persistent_workers=True), batches_per_epoch=8)
        persistent.epoch_first = True  # kept: no restart to drop, the refill is the setting's own
        reports = [persistent.add(batch, 0.05, 0.02, 4)] + [persistent.add(batch, 0.01, 0.02, 4) for _ in range(5)]
        self.assertAlmostEqual(reports[-1]["samples_per_s"], 24 / 0.22)

    def test_an_epochs_batches_end_a_time_window(self):
        from feedtune.autotune import _Trial
        request = {"warmup_batches": 0, "repeats": 1, "window_epochs": 0, "measure_seconds": 10.0, "num_workers": 2}
        trial = _Trial(request, batches_per_epoch=8)
        batch = (torch.zeros(4, 3), torch.zeros(4))
        trial.epoch_first = False
        reports = [trial.add(batch, 0.001, 0.0, 4) for _ in range(8)]
        self.assertEqual(reports[:7], [None] * 7)  # far short of 10 s: the epoch's 8 batches end it
        self.assertAlmostEqual(reports[-1]["samples_per_s"], 32 / 0.008)

    def test_without_workers_one_batch_past_the_seconds_is_a_window(self):
        from feedtune.autotune import _Trial
        request = {"warmup_batches": 1, "repeats": 2, "window_epochs": 0, "measure_seconds": 0.5, "num_workers": 0}
        trial = _Trial(request, batches_per_epoch=8)
        batch = (torch.zeros(4, 3), torch.zeros(4))
        trial.epoch_first = False
        self.assertIsNone(trial.add(batch, 0.6, 0.04, 4))  # the warm-up
        self.assertIsNone(trial.add(batch, 0.3, 0.04, 4))  # 0.34 s: short of the seconds
        report = trial.add(batch, 0.6, 0.04, 4)
        self.assertAlmostEqual(report["samples_per_s"], 8 / 0.98)
        self.assertAlmostEqual(trial.add(batch, 0.6, 0.04, 4)["samples_per_s"], 4 / 0.64)
        self.assertFalse(trial.measuring)


class AutotuneBudget(unittest.TestCase):
    """The default budget from the first epoch's estimate at the job's own setting."""

    def test_the_default_budget_grows_with_a_slow_first_epoch(self):
        from feedtune.autotune import _default_budget
        self.assertEqual(_default_budget(2.3), 30.0)    # the CNN job: short epochs settle within 30 s
        self.assertEqual(_default_budget(23.0), 35.0)   # the wait job: 1.5 epochs, in whole seconds
        self.assertEqual(_default_budget(40.0), 60.0)   # the guides' 10 ms dataset at 0 workers
        self.assertEqual(_default_budget(200.0), 120.0)  # 50 ms: two minutes at most from 1.5 epochs
        self.assertEqual(_default_budget(3600.0), 360.0)  # an hour's epoch: 10% of it


class AutotuneVerdict(unittest.TestCase):
    """What the job runs after the search: the best found, unless the final
    check put it below the job's own setting beyond the noise."""

    OWN = {"num_workers": 0, "pin_memory": False, "prefetch_factor": 2, "persistent_workers": False}
    BEST = {"num_workers": 1, "pin_memory": False, "prefetch_factor": 2, "persistent_workers": True,
            "non_blocking": False}

    def done(self, speedup, interval, slower):
        return {"best": {"config": dict(self.BEST)}, "speedup": speedup, "speedup_ci": interval,
                "best_is_reference": False, "slower_than_reference": slower,
                "phases": [{"phase": "final_check", "kept": False, "why": "speedup x%.2f" % speedup}]}

    def test_a_check_below_one_within_the_noise_keeps_the_best(self):
        from feedtune.autotune import _verdict
        knobs, non_blocking, words = _verdict(self.done(0.82, [0.61, 1.07], False), self.OWN)
        self.assertEqual(knobs["num_workers"], 1)
        self.assertTrue(knobs["persistent_workers"])
        self.assertFalse(non_blocking)
        self.assertEqual(words, "x0.82 [0.61, 1.07] over your own setting (final check)")

    def test_a_check_below_one_beyond_the_noise_keeps_the_jobs_own(self):
        from feedtune.autotune import _verdict
        knobs, non_blocking, words = _verdict(self.done(0.82, [0.75, 0.93], True), self.OWN)
        self.assertEqual({k: knobs[k] for k in self.OWN}, self.OWN)
        self.assertIsNone(knobs["multiprocessing_context"])
        self.assertEqual(words, "kept your own setting: the best found ran x0.82 [0.75, 0.93] of it in the final "
                                "check, slower beyond the noise")

    def test_no_check_when_the_best_is_the_jobs_own(self):
        from feedtune.autotune import _verdict
        done = {"best": {"config": dict(self.OWN, non_blocking=False)}, "speedup": 1.0, "speedup_ci": None,
                "best_is_reference": True,
                "phases": [{"phase": "final_check", "why": "the check's words, which the verdict does not read"}]}
        knobs, _, words = _verdict(done, self.OWN)
        self.assertEqual(knobs["num_workers"], 0)
        self.assertEqual(words, "your own setting is the best found")
        # The field decides, never the phase's words.
        done["best_is_reference"] = False
        done["phases"][0]["why"] = "not run: the best setting is the job's own setting"
        self.assertEqual(_verdict(done, self.OWN)[2], "x1.00 [1.00, 1.00] over your own setting (final check)")


if __name__ == "__main__":
    unittest.main()
