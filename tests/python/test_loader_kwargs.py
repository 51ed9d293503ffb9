"""feedtune.loader_kwargs against real results files: one tiny sweep by the
feedtune binary on this machine, then copies of it turned into other hosts
and another hardware class (as bench/fleet_scale makes a fleet: the rows
feedtune wrote, with sqlite3 changing who ran them and what their best was),
merged with `feedtune merge`. loader_kwargs itself reads only through
`feedtune export --machine this`.

Needs the feedtune binary: $FEEDTUNE_BIN, else build/tuner/cli/feedtune;
skipped (saying so) when FEEDTUNE_BIN is unset and nothing is built.

    PYTHONPATH=python python3 -m unittest discover -s tests/python
"""

import hashlib
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import unittest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), os.pardir, os.pardir))
sys.path.insert(0, os.path.join(REPO, "python"))

import feedtune  # noqa: E402
from feedtune import ResultsError, loader_kwargs  # noqa: E402

BINARY = os.environ.get("FEEDTUNE_BIN") or os.path.join(REPO, "build", "tuner", "cli", "feedtune")

CONFIG = """name: kw-tiny
workload: {kind: synthetic, samples: 128, sample_bytes: 1024, cpu_us_per_sample: 0, io_us_per_sample: 200, jitter: 0}
loader: {batch_size: 16}
device: {backend: host-sim, step_us: 1000}
sweep: {max_workers: 2, prefetch_factors: [2], repeats: 1, warmup_batches: 1, measure_seconds: 0.05, diagnose: false}
"""

# Each host's best setting, planted so that which run was taken shows:
# (num_workers, pin_memory, non_blocking, prefetch_factor, persistent_workers).
THIS_HOST = (2, 1, 1, 4, 1)
SAME_CLASS = (5, 0, 0, 2, 0)
OTHER_CLASS = (0, 1, 0, 2, 0)  # no workers: prefetch_factor is left to torch


def feedtune_cmd(*args):
    done = subprocess.run([BINARY] + list(args), capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        raise RuntimeError("feedtune %s: exit %d: %s" % (" ".join(args), done.returncode, done.stderr))
    return done


def plant(path, best, host=None, machine_class=None):
    """Rewrites the run in `path`: its best trial's knobs; as another host (a new
    name, hostname, machine-id and uid); in another class (hash and CPUs)."""
    db = sqlite3.connect(path)
    with db:
        db.execute("UPDATE trials SET num_workers = ?, pin_memory = ?, non_blocking = ?, prefetch_factor = ?, "
                   "persistent_workers = ? WHERE id = (SELECT best_trial_id FROM runs)", best)
        if host is not None:
            db.execute("UPDATE runs SET host_name = ?, host_hostname = ?, host_machine_id = ?, uid = uid || ':' || ?",
                       (host, host, hashlib.md5(host.encode()).hexdigest(), host))
            db.execute("UPDATE machines SET hostname = ?, label = ?", (host, host))
        if machine_class is not None:
            db.execute("UPDATE machines SET hash = ?, usable_cpus = ?, logical_cpus = ?", machine_class)
    db.close()


# Skipped only when nobody named a binary and none is built; a named one that
# is missing fails the tests (ctest names it).
@unittest.skipUnless(os.environ.get("FEEDTUNE_BIN") or os.access(BINARY, os.X_OK),
                     "no feedtune binary at %s (build it, or set FEEDTUNE_BIN)" % BINARY)
class LoaderKwargsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="feedtune-kwargs-test-")
        d = lambda name: os.path.join(cls.tmp, name)  # noqa: E731
        with open(d("tiny.yaml"), "w") as f:
            f.write(CONFIG)
        feedtune_cmd("sweep", d("tiny.yaml"), "--db", d("this.db"), "-q")
        # Checkpoint the WAL into the file, so copies carry every row.
        sqlite3.connect(d("this.db")).execute("PRAGMA wal_checkpoint(TRUNCATE)").close()
        shutil.copyfile(d("this.db"), d("same-class.db"))
        shutil.copyfile(d("this.db"), d("other-class.db"))
        plant(d("this.db"), THIS_HOST)
        plant(d("same-class.db"), SAME_CLASS, host="box-b")
        plant(d("other-class.db"), OTHER_CLASS, host="box-c", machine_class=("c1a55000000000c3", 64, 64))
        # Two hosts of this machine's class and one of another: this host's run wins.
        feedtune_cmd("merge", d("fleet.db"), d("this.db"), d("same-class.db"), d("other-class.db"))
        # Without this host's run: the other host of its class; without both: the other class.
        feedtune_cmd("merge", d("class.db"), d("same-class.db"), d("other-class.db"))
        feedtune_cmd("merge", d("nearest.db"), d("other-class.db"))
        feedtune_cmd("machine", "--db", d("no-runs.db"), "--no-bandwidth")
        cls.d = staticmethod(d)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def kwargs(self, name, config="kw-tiny", **extra):
        return loader_kwargs(results=self.d(name), config=config, feedtune_bin=BINARY, **extra)

    def test_this_hosts_run_when_present(self):
        kw = self.kwargs("fleet.db")
        self.assertIsInstance(kw, dict)
        self.assertEqual(dict(kw), {"num_workers": 2, "pin_memory": True, "prefetch_factor": 4,
                                    "persistent_workers": True})
        self.assertIs(kw.non_blocking, True)
        self.assertEqual(kw.source, "host")
        self.assertEqual(kw.batch_size, 16)
        self.assertTrue(kw.why.startswith("this host's latest run (run 1 of "), kw.why)

    def test_another_host_of_the_class(self):
        kw = self.kwargs("class.db")
        self.assertEqual(dict(kw), {"num_workers": 5, "pin_memory": False, "prefetch_factor": 2,
                                    "persistent_workers": False})
        self.assertIs(kw.non_blocking, False)
        self.assertEqual(kw.source, "class")
        self.assertEqual(kw.run_host, "box-b")

    def test_the_nearest_class(self):
        kw = self.kwargs("nearest.db")
        # No workers: torch rejects prefetch_factor then, so it is left out.
        self.assertEqual(dict(kw), {"num_workers": 0, "pin_memory": True, "persistent_workers": False})
        self.assertEqual(kw.source, "nearest")
        self.assertEqual(kw.run_host, "box-c")

    def test_a_real_dataloader_takes_them(self):
        import torch
        import torch.utils.data

        data = torch.utils.data.TensorDataset(torch.arange(64).float().view(64, 1))
        for name, workers in (("fleet.db", 2), ("nearest.db", 0)):
            kw = self.kwargs(name)
            loader = torch.utils.data.DataLoader(data, batch_size=kw.batch_size, **kw)
            self.assertEqual(loader.num_workers, workers)
            seen = sorted(int(v) for (batch,) in loader for v in batch.view(-1).tolist())
            self.assertEqual(seen, list(range(64)))
            x = next(iter(loader))[0].to("cpu", non_blocking=kw.non_blocking)
            self.assertEqual(tuple(x.shape), (16, 1))

    def test_no_run_of_the_config(self):
        with self.assertRaises(ResultsError) as caught:
            self.kwargs("fleet.db", config="nope")
        self.assertEqual(str(caught.exception),
                         "%s: no run of workload 'nope' with a best setting; the file holds: kw-tiny (3 runs on "
                         "3 hosts) (sweep it on a machine of the fleet, then merge)" % self.d("fleet.db"))

    def test_missing_foreign_and_empty_files_never_fall_back(self):
        with open(self.d("notes.txt"), "w") as f:
            f.write("not a database\n")
        open(self.d("empty.db"), "w").close()
        cases = {
            "missing.db": "no results file; run `feedtune sweep CONFIG --db %s` first",
            "notes.txt": "not a feedtune results file (not an SQLite database); choose another --db path",
            "empty.db": "results file has schema version 0 (empty); run `feedtune sweep CONFIG --db %s` to fill it",
            "no-runs.db": "no run of workload 'kw-tiny' with a best setting; the file holds: no run with a best "
                          "setting (sweep it on a machine of the fleet, then merge)",
        }
        for name, message in cases.items():
            path = self.d(name)
            with self.subTest(name=name):
                with self.assertRaises(ResultsError) as caught:
                    loader_kwargs(results=path, config="kw-tiny", feedtune_bin=BINARY)
                expected = "%s: %s" % (path, message.replace("%s", path) if "%s" in message else message)
                self.assertEqual(str(caught.exception), expected)
        self.assertFalse(os.path.exists(self.d("missing.db")), "a read leaves no file behind")
        self.assertEqual(os.path.getsize(self.d("empty.db")), 0)

    def test_the_binary_from_the_environment_or_a_clear_error(self):
        saved = dict(os.environ)
        self.addCleanup(lambda: (os.environ.clear(), os.environ.update(saved)))
        os.environ["FEEDTUNE_BIN"] = BINARY
        self.assertEqual(loader_kwargs(results=self.d("fleet.db"), config="kw-tiny").source, "host")
        os.environ["FEEDTUNE_BIN"] = self.d("no-such-feedtune")
        with self.assertRaises(ResultsError) as caught:
            loader_kwargs(results=self.d("fleet.db"), config="kw-tiny")
        self.assertEqual(str(caught.exception),
                         "FEEDTUNE_BIN=%r: no executable feedtune binary there; build it (make build: "
                         "build/tuner/cli/feedtune) or point to it" % self.d("no-such-feedtune"))
        del os.environ["FEEDTUNE_BIN"]
        os.environ["PATH"] = self.tmp
        with self.assertRaises(ResultsError) as caught:
            loader_kwargs(results=self.d("fleet.db"), config="kw-tiny")
        self.assertIn("none is on PATH; pass feedtune_bin='/path/to/feedtune' or set FEEDTUNE_BIN",
                      str(caught.exception))

    def test_the_package_exports(self):
        self.assertTrue(issubclass(feedtune.LoaderKwargs, dict))
        self.assertTrue(callable(feedtune.serve))


if __name__ == "__main__":
    unittest.main()
