"""This box's torch DataLoader costs (docs/measurement.md#torch-costs): the
probe's fit, `feedtune calibrate` storing them per host (run beside a CPU hog
per CPU: each figure measured above zero or marked not measured, the worker
start never 0), `feedtune machine` showing them, a native trial paying them,
and a sweep's first use measuring them and the report saying so.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

from feedtune import torch_costs

FEEDTUNE = os.environ.get("FEEDTUNE_BIN", "feedtune")

# Tiny samples and no per-sample cost of its own: what the native core costs
# per sample is next to nothing, so torch's costs, when paid, dominate.
CONFIG = """name: torch-costs-test
workload: {kind: synthetic, samples: 4096, sample_bytes: 64, cpu_us_per_sample: 0, jitter: 0}
loader: {batch_size: 16}
device: {backend: host-sim, step_us: 0, sync_every_steps: 0}
sweep: {repeats: 2, warmup_batches: 2, measure_seconds: 0.3, max_workers: 2, prefetch_factors: [2]}
"""


def run(args, env=None, check=True):
    result = subprocess.run([FEEDTUNE] + args, capture_output=True, text=True, env=env, timeout=300)
    if check and result.returncode != 0:
        raise AssertionError("feedtune %s exited %d: %s" % (" ".join(args), result.returncode, result.stderr[-2000:]))
    return result


class FitTest(unittest.TestCase):
    def test_the_fit_recovers_exact_costs_and_clamps_negatives(self):
        rows = []
        for b in (1, 16):
            for n in (64, 262144):
                rows.append({"batch": 1.0, "sample": float(b), "byte": float(b * n),
                             "y": 40e-6 + b * 9e-6 + b * n * 0.3e-9})
        fit = torch_costs._fit(rows, ("batch", "sample", "byte"))
        self.assertAlmostEqual(fit["batch"], 40e-6, delta=1e-9)
        self.assertAlmostEqual(fit["sample"], 9e-6, delta=1e-10)
        self.assertAlmostEqual(fit["byte"], 0.3e-9, delta=1e-13)
        falling = [dict(r, y=1e-3 - r["sample"] * 1e-5) for r in rows]
        self.assertEqual(torch_costs._fit(falling, ("batch", "sample", "byte"))["sample"], 0.0)


class CalibrateTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="feedtune-torch-costs-")
        cls.db = os.path.join(cls.tmp, "costs.db")
        cls.config = os.path.join(cls.tmp, "tiny.yaml")
        with open(cls.config, "w") as f:
            f.write(CONFIG)
        # A loaded box: one CPU hog per CPU for the whole calibration.
        hogs = [subprocess.Popen(["yes"], stdout=subprocess.DEVNULL) for _ in range(os.cpu_count() or 1)]
        try:
            cls.calibrated = run(["calibrate", "--db", cls.db, "--python", sys.executable, "--json"])
        finally:
            for hog in hogs:
                hog.kill()
                hog.wait()

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_calibrate_stores_the_costs_and_machine_shows_them(self):
        costs = json.loads(self.calibrated.stdout.strip().splitlines()[-1])
        self.assertEqual(costs["db"], self.db)
        import torch
        self.assertEqual(costs["torch_version"], torch.__version__.split("+")[0])
        self.assertGreater(costs["in_process_sample_s"] + costs["in_process_batch_s"], 0)
        self.assertGreater(costs["worker_sample_s"] + costs["worker_batch_s"], 0)
        shown = json.loads(run(["machine", "--db", self.db, "--json", "--no-bandwidth"]).stdout)
        for key in ("worker_start_s", "worker_sample_s", "main_batch_s", "torch_version", "measured_at",
                    "not_measured"):
            self.assertEqual(shown["torch_costs"][key], costs[key], key)

    def test_on_a_loaded_box_each_figure_is_measured_or_marked_not_measured(self):
        costs = json.loads(self.calibrated.stdout.strip().splitlines()[-1])
        figures = [k for k, v in costs.items() if k.endswith("_s") and isinstance(v, float)]
        self.assertIn("main_stop_fixed_s", figures)
        for name in figures:
            if name in costs["not_measured"]:
                self.assertEqual(costs[name], 0.0, name)
                self.assertTrue(costs["not_measured"][name], name)  # with the reason
            else:
                self.assertGreater(costs[name], 0.0, name)
        # Measured in the worker, from its fork to its first sample: never
        # free, never a difference of noisy medians clamped to 0.
        self.assertNotIn("worker_start_s", costs["not_measured"])
        self.assertGreater(costs["worker_start_s"], 1e-4)

    def test_a_native_trial_pays_them_unless_off(self):
        paid = json.loads(run(["trial", self.config, "--db", self.db, "--json"]).stdout)
        raw = run(["trial", self.config, "--db", self.db, "--json", "--set", "workload.torch_costs=off"])
        raw = json.loads(raw.stdout)
        # Micro-seconds of torch per sample against the native core's tens of
        # nanoseconds: paying them is many times slower.
        self.assertLess(paid["samples_per_s"], 0.5 * raw["samples_per_s"], (paid, raw))

    def test_a_file_without_costs_says_the_figures_are_the_native_cores(self):
        other = os.path.join(self.tmp, "none.db")
        result = run(["trial", self.config, "--db", other, "--json"])
        self.assertIn("the figures are the native core's: %s holds no torch costs for this host" % other,
                      result.stderr)

    def test_a_sweeps_first_use_measures_them_and_the_report_says_so(self):
        db = os.path.join(self.tmp, "first.db")
        env = dict(os.environ, FEEDTUNE_PYTHON=sys.executable)
        sweep = run(["sweep", self.config, "--db", db], env=env)
        self.assertIn("no torch costs for this host in %s yet: measuring them first" % db, sweep.stderr)
        report = json.loads(run(["report", "--db", db, "--format", "json"]).stdout)
        self.assertIsNotNone(report["torch_costs"])
        self.assertGreater(report["torch_costs"]["worker_start_s"], 0)
        text = run(["report", "--db", db]).stdout
        self.assertIn("torch:    the native trials paid this host's torch costs (workload.torch_costs auto): torch ", text)
        exported = run(["export", "--db", db, "--format", "torch"]).stdout
        self.assertIn("paying this host's torch costs", exported)
        # A second sweep finds them stored: no probe.
        again = run(["sweep", self.config, "--db", db], env=env)
        self.assertNotIn("measuring them first", again.stderr)


if __name__ == "__main__":
    unittest.main()
