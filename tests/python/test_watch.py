"""feedtune.watch over real torch DataLoaders: the log line every N steps, the
observed record written through `feedtune observe` and read back through
`feedtune report --format json`, a record that survives `kill -9` of the job
with the file intact, and a failing binary that is logged, never raised.

Needs the feedtune binary: $FEEDTUNE_BIN, else build/tuner/cli/feedtune;
skipped (saying so) when neither is there.

    PYTHONPATH=python FEEDTUNE_BIN=build/tuner/cli/feedtune python3 -m unittest -v tests/python/test_watch.py
"""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), os.pardir, os.pardir))
sys.path.insert(0, os.path.join(REPO, "python"))

import feedtune  # noqa: E402
from feedtune import watch  # noqa: E402
from feedtune.watch import loader_knobs  # noqa: E402

BINARY = os.environ.get("FEEDTUNE_BIN") or os.path.join(REPO, "build", "tuner", "cli", "feedtune")

CONFIG = """name: watch-e2e
workload: {kind: synthetic, samples: 128, sample_bytes: 1024, cpu_us_per_sample: 0, io_us_per_sample: 200, jitter: 0}
loader: {batch_size: 8}
device: {backend: host-sim, step_us: 1000}
sweep: {max_workers: 1, prefetch_factors: [2], repeats: 1, warmup_batches: 1, measure_seconds: 0.05, diagnose: false}
"""

LINE = re.compile(r"^feedtune\.watch: step (\d+): (\d+\.\d)% input-bound "
                  r"\((not input-bound|moderately input-bound|highly input-bound)\): "
                  r"batch wait (\d+\.\d\d) of (\d+\.\d\d) ms per step, (\d+\.\d) samples/s over the last (\d+) steps$")

# A training job under watch that runs until killed, recording every 10 steps.
JOB = r"""
import sys, time, torch
from torch.utils.data import DataLoader, TensorDataset
from feedtune import watch
loader = DataLoader(TensorDataset(torch.arange(4096).float()), batch_size=16, num_workers=1,
                    persistent_workers=True)
w = watch(loader, every=0, results=sys.argv[1], config="watch-e2e", record_every=10,
          log=lambda line: print(line, flush=True))
print("started", flush=True)
while True:
    for batch in w:
        time.sleep(0.002)
"""


def have_torch():
    try:
        import torch  # noqa: F401
        return True
    except ImportError:
        return False


@unittest.skipUnless(os.path.isfile(BINARY) and os.access(BINARY, os.X_OK),
                     "no feedtune binary at %s (build it, or set FEEDTUNE_BIN)" % BINARY)
@unittest.skipUnless(have_torch(), "torch is not importable (python3-torch)")
class WatchTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="feedtune-watch-")
        config = os.path.join(cls.tmp, "watch.yaml")
        with open(config, "w") as f:
            f.write(CONFIG)
        cls.sweep_db = os.path.join(cls.tmp, "sweep.db")
        done = subprocess.run([BINARY, "sweep", config, "--db", cls.sweep_db, "-q"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, universal_newlines=True, timeout=240)
        if done.returncode != 0:
            raise RuntimeError("the sweep for the test failed: " + done.stderr)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def setUp(self):
        self.db = os.path.join(self.tmp, self.id().rsplit(".", 1)[-1] + ".db")
        shutil.copy(self.sweep_db, self.db)

    def report(self):
        done = subprocess.run([BINARY, "report", "--db", self.db, "--format", "json"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, universal_newlines=True, timeout=60)
        self.assertEqual(done.returncode, 0, done.stderr)
        return json.loads(done.stdout)

    def test_logs_every_n_steps_and_records_the_run(self):
        import torch
        from torch.utils.data import DataLoader, TensorDataset
        loader = DataLoader(TensorDataset(torch.arange(80).float()), batch_size=8, num_workers=0)
        lines = []
        w = watch(loader, every=3, results=self.db, config="watch-e2e", feedtune_bin=BINARY, log=lines.append)
        seen = 0
        for (batch,) in w:
            self.assertEqual(batch.shape[0], 8)
            time.sleep(0.003)
            seen += 1
        self.assertEqual(seen, 10)
        self.assertTrue(w.close(60), "the record was not written within 60 s")
        # 10 batches: 9 steps (the first batch's wait is the loader's start, not a step): lines at 3, 6, 9.
        self.assertEqual(w.steps, 9)
        self.assertEqual(len(lines), 3, lines)
        for expected_step, line in zip((3, 6, 9), lines):
            match = LINE.match(line)
            self.assertIsNotNone(match, line)
            self.assertEqual(int(match.group(1)), expected_step)
            self.assertEqual(int(match.group(7)), 3)
            self.assertGreater(float(match.group(5)), 2.9, line)  # the step holds the 3 ms sleep
        self.assertIsNone(w.last_error)
        self.assertEqual(w.records_written, 1)

        observed = self.report()["observed"]
        self.assertEqual(len(observed), 1, observed)
        record = observed[0]
        self.assertEqual(record["config"], "watch-e2e")
        self.assertEqual(record["steps"], 9)
        self.assertEqual(record["source"], "feedtune.watch")
        self.assertTrue(record["finished"])
        self.assertEqual(record["knobs"]["batch_size"], 8)
        self.assertEqual(record["knobs"]["num_workers"], 0)
        self.assertAlmostEqual(record["samples_per_s"], w.samples_per_s, delta=w.samples_per_s * 1e-6)
        self.assertLess(record["samples_per_s"], 8 / 0.003)
        self.assertGreaterEqual(record["input_bound_frac"], 0.0)
        self.assertLess(record["input_bound_frac"], 1.0)

    def test_record_survives_kill_9_with_the_file_intact(self):
        env = dict(os.environ, PYTHONPATH=os.path.join(REPO, "python"), FEEDTUNE_BIN=BINARY)
        job = subprocess.Popen([sys.executable, "-c", JOB, self.db], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, universal_newlines=True, env=env, start_new_session=True)
        try:
            deadline = time.monotonic() + 120
            steps = 0
            while time.monotonic() < deadline and steps < 50:
                time.sleep(0.2)
                if job.poll() is not None:
                    self.fail("the job ended by itself: " + job.stdout.read())
                done = subprocess.run(["sqlite3", self.db, "SELECT coalesce(max(steps), 0) FROM observed"],
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
                if done.returncode == 0 and done.stdout.strip():
                    steps = int(done.stdout.strip())
            self.assertGreaterEqual(steps, 50, "no observed record with 50 steps within 120 s")
        finally:
            # The job, its loader worker and any `feedtune observe` it was running, mid-write or not.
            os.killpg(job.pid, signal.SIGKILL)
            job.wait(30)
            job.stdout.close()
        self.assertEqual(job.returncode, -signal.SIGKILL)
        check = subprocess.run(["sqlite3", self.db, "PRAGMA integrity_check"], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, universal_newlines=True)
        self.assertEqual(check.stdout.strip(), "ok", check.stderr)
        observed = self.report()["observed"]
        self.assertEqual(len(observed), 1, observed)
        self.assertGreaterEqual(observed[0]["steps"], 50)
        self.assertEqual(observed[0]["knobs"]["num_workers"], 1)
        self.assertTrue(observed[0]["knobs"]["persistent_workers"])

    def test_a_failing_binary_is_logged_not_raised(self):
        import torch
        from torch.utils.data import DataLoader, TensorDataset
        loader = DataLoader(TensorDataset(torch.arange(40).float()), batch_size=4)
        for binary, expected in (("/nonexistent/feedtune", "/nonexistent/feedtune"), ("/bin/false", "exited 1")):
            lines, threads = [], []

            def log(line):
                lines.append(line)
                threads.append(threading.current_thread())

            w = watch(loader, every=0, results=self.db, config="watch-e2e", feedtune_bin=binary, log=log,
                      record_every=2)
            for _ in w:
                pass
            self.assertTrue(w.close(60))
            self.assertEqual(w.records_written, 0)
            self.assertTrue(lines, "the failure was not logged")
            self.assertIn("feedtune.watch: could not record the observed run in " + self.db, lines[-1])
            self.assertIn(expected, lines[-1])
            self.assertIn("the job goes on", lines[-1])
            self.assertNotIn(threading.main_thread(), threads, "the write ran on the training thread")
            self.assertIn(expected, w.last_error)
        self.assertEqual(self.report()["observed"], [])

    def test_knobs_are_read_from_the_loader(self):
        import torch
        from torch.utils.data import DataLoader, TensorDataset
        dataset = TensorDataset(torch.arange(16).float())
        loader = DataLoader(dataset, batch_size=4, num_workers=2, pin_memory=False, prefetch_factor=4,
                            persistent_workers=True)
        self.assertEqual(loader_knobs(loader, non_blocking=True),
                         {"batch_size": 4, "num_workers": 2, "pin_memory": False, "prefetch_factor": 4,
                          "persistent_workers": True, "non_blocking": True})
        self.assertEqual(loader_knobs(DataLoader(dataset, batch_size=2))["prefetch_factor"], None)
        with self.assertRaises(ValueError):
            watch(loader, results=self.db)  # no config: check could not find the sweep
        self.assertIs(feedtune.watch, watch)


if __name__ == "__main__":
    unittest.main()
