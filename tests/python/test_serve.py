"""feedtune.serve and the probe's user-loop flags (--step, --collate-fn,
--sampler, --worker-init-fn, --loader-args), driven as feedtune drives them:
a process per test speaking the run or the serve protocol
(docs/command-protocol.md), with tiny datasets and short windows.

    PYTHONPATH=python python3 -m unittest discover -s tests/python
"""

import json
import os
import subprocess
import sys
import tempfile
import textwrap
import unittest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), os.pardir, os.pardir))
PROBE = os.path.join(REPO, "workloads", "python", "feedtune_probe.py")
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable

# The user's code, as a project would have it: imported by MODULE:NAME.
USERMOD = textwrap.dedent('''
    import os, time
    import torch

    class Indexed(torch.utils.data.Dataset):
        """Sample i: tensor([i, the worker's tag]) (tag -1 unless worker_init_fn set one)."""
        def __init__(self, n=256):
            self.n = n
        def __len__(self):
            return self.n
        def __getitem__(self, i):
            return torch.tensor([i, TAG[0]])

    TAG = [-1]

    def tag_worker(worker_id):
        TAG[0] = 100 + worker_id

    def make_dataset():
        count = os.environ.get("COUNT_FILE")
        if count:
            with open(count, "a") as f:
                f.write("called\\n")
        return Indexed()

    def sleep_step(batch):
        time.sleep(0.005)

    def burn_step(batch):
        end = time.thread_time() + 0.005
        while time.thread_time() < end:
            pass

    CALLS = [0]

    def fail_third(batch):
        CALLS[0] += 1
        if CALLS[0] == 3:
            raise ValueError("boom at step 3")

    def even_only(batch):
        if (batch[:, 0] % 2).any():
            raise AssertionError("an odd index: the sampler was not used")

    def tagged_only(batch):
        if (batch[:, 1] < 100).any():
            raise AssertionError("a sample from an untagged worker: worker_init_fn was not used")

    def strings(samples):
        return ["not a tensor"] * len(samples)

    def nested(samples):
        return {"meta": ["x"] * len(samples), "x": torch.stack(samples)}

    class EvenSampler(torch.utils.data.Sampler):
        def __init__(self, dataset):
            self.n = len(dataset)
        def __iter__(self):
            return iter(range(0, self.n, 2))
        def __len__(self):
            return (self.n + 1) // 2
''')

REQUEST = {"num_workers": 0, "pin_memory": False, "non_blocking": False, "prefetch_factor": 2,
           "persistent_workers": False, "batch_size": 8, "repeats": 1, "warmup_batches": 1,
           "measure_seconds": 0.2, "window_epochs": 0, "step_us": 0, "sync_every_steps": 1}


def tune_script(**serve_args):
    """A tune.py calling serve() with the given keyword arguments (code text)."""
    args = ", ".join("%s=%s" % kv for kv in serve_args.items())
    return textwrap.dedent('''
        from usermod import *
        from feedtune import serve

        if __name__ == "__main__":
            serve(%s)
    ''' % args)


class Base(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory(prefix="feedtune-serve-test-")
        self.addCleanup(self.dir.cleanup)
        with open(os.path.join(self.dir.name, "usermod.py"), "w") as f:
            f.write(USERMOD)

    def env(self, **extra):
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([os.path.join(REPO, "python"), self.dir.name])
        for key in [k for k in env if k.startswith("FEEDTUNE_")]:
            del env[key]
        env.update(extra)
        return env

    def run_cmd(self, argv, stdin="", env=None, timeout=120):
        return subprocess.run(argv, input=stdin, capture_output=True, text=True, env=env or self.env(),
                              cwd=self.dir.name, timeout=timeout)

    def probe(self, *args, stdin=""):
        return self.run_cmd([PYTHON, PROBE, "--device", "cpu", "--dataset", "usermod:Indexed",
                             "--pythonpath", self.dir.name] + list(args), stdin=stdin)

    def write_tune(self, **serve_args):
        path = os.path.join(self.dir.name, "tune.py")
        with open(path, "w") as f:
            f.write(tune_script(**serve_args))
        return path

    @staticmethod
    def requests(*overrides):
        return "".join(json.dumps(dict(REQUEST, trial=i + 1, **o)) + "\n" for i, o in enumerate(overrides))

    @staticmethod
    def protocol_lines(stdout):
        return [json.loads(line) for line in stdout.splitlines() if line.lstrip().startswith("{")]

    def last_json(self, result):
        self.assertEqual(result.returncode, 0, result.stderr[-2000:])
        return json.loads(result.stdout.strip().splitlines()[-1])


class ProbeFlags(Base):
    """feedtune_probe.py with the user's own loop parts."""

    def test_missing_step_module_is_a_usage_error_naming_it(self):
        r = self.probe("--step", "nosuchmod:train_step")
        self.assertEqual(r.returncode, 2)
        self.assertIn("feedtune_probe: --step: cannot import 'nosuchmod': ModuleNotFoundError", r.stderr)
        self.assertIn("--pythonpath DIR", r.stderr)
        self.assertEqual(r.stdout, "")

    def test_missing_step_function_is_a_usage_error_naming_it(self):
        r = self.probe("--step", "usermod:no_such_step")
        self.assertEqual(r.returncode, 2)
        self.assertIn("feedtune_probe: --step: module 'usermod' (", r.stderr)
        self.assertIn("has no attribute 'no_such_step'; check the name after the colon", r.stderr)

    def test_step_without_colon(self):
        r = self.probe("--step", "usermod.sleep_step")
        self.assertEqual(r.returncode, 2)
        self.assertIn("--step: expected MODULE:NAME (e.g. mypkg.train:train_step), got 'usermod.sleep_step'",
                      r.stderr)

    def test_loader_args_may_not_set_a_swept_knob(self):
        r = self.probe("--loader-args", '{"num_workers": 2}')
        self.assertEqual(r.returncode, 2)
        self.assertIn("feedtune_probe: --loader-args: 'num_workers' is a knob feedtune sets per trial; remove it",
                      r.stderr)
        r = self.probe("--loader-args", "[1]")
        self.assertEqual(r.returncode, 2)
        self.assertIn("--loader-args: expected a JSON object of DataLoader keyword arguments, got list", r.stderr)
        r = self.probe("--loader-args", '{"collate_fn": 1}')
        self.assertIn("--loader-args: 'collate_fn' has its own argument; pass it as collate_fn instead", r.stderr)

    def test_step_is_timed_and_main_cpu_reported(self):
        report = self.last_json(self.probe("--step", "usermod:sleep_step", "--batch-size", "8",
                                           "--seconds", "0.3", "--warmup-batches", "1"))
        # A 5 ms sleep: at least 5 ms of wall, almost no CPU of the main thread.
        self.assertGreaterEqual(report["step_ms"], 5.0)
        self.assertLess(report["step_ms"], 60.0)
        self.assertLess(report["step_cpu_ms"], 2.5)
        self.assertIn("main_cpu_ms_per_batch", report)
        self.assertEqual(report["samples"], 8 * report["batches"])
        report = self.last_json(self.probe("--step", "usermod:burn_step", "--batch-size", "8",
                                           "--seconds", "0.3", "--warmup-batches", "1"))
        # 5 ms of the thread's CPU per step, in the main process.
        self.assertGreaterEqual(report["step_cpu_ms"], 5.0)
        self.assertGreaterEqual(report["main_cpu_ms_per_batch"], 5.0)

    def test_without_user_parts_the_output_keys_are_the_probes(self):
        report = self.last_json(self.probe("--batch-size", "8", "--seconds", "0.2", "--warmup-batches", "1",
                                           "--step-us", "1000"))
        report.pop("epoch_boundary_ms", None)  # present when the window crossed an epoch start
        # Present when two samples of the process's memory lay at different epoch positions.
        report.pop("worker_rss_growth_bytes_per_epoch", None)
        self.assertEqual(sorted(report), sorted([
            "samples_per_s", "gpu_idle_frac", "wait_p50_us", "wait_p99_us", "time_to_first_batch_s", "mb_per_s",
            "batches", "samples", "seconds", "device", "torch", "num_workers", "pin_memory", "batches_per_epoch",
            "peak_rss_bytes", "worker_rss_start_bytes", "worker_rss_peak_bytes", "worker_rss_samples",
            "worker_rss_epochs"]))

    def test_collate_without_tensors_fails_clearly(self):
        r = self.probe("--collate-fn", "usermod:strings", "--step", "usermod:sleep_step", "--batch-size", "8",
                       "--seconds", "0.2")
        self.assertEqual(r.returncode, 1)
        self.assertIn("TypeError: --collate-fn usermod:strings returned a list of str with no tensor anywhere in "
                      "it; pin_memory and the copy to the device need tensors", r.stderr)

    def test_collate_with_a_tensor_somewhere_is_accepted(self):
        report = self.last_json(self.probe("--collate-fn", "usermod:nested", "--batch-size", "8",
                                           "--seconds", "0.2", "--warmup-batches", "1", "--step-us", "0"))
        self.assertEqual(report["samples"], 8 * report["batches"])

    def test_sampler_factory_and_worker_init_fn_are_used(self):
        self.last_json(self.probe("--sampler", "usermod:EvenSampler", "--step", "usermod:even_only",
                                  "--batch-size", "8", "--seconds", "0.2", "--warmup-batches", "1"))
        report = self.last_json(self.probe("--worker-init-fn", "usermod:tag_worker", "--step", "usermod:tagged_only",
                                           "--num-workers", "1", "--batch-size", "8", "--seconds", "0.3",
                                           "--warmup-batches", "1"))
        self.assertEqual(report["num_workers"], 1)
        self.assertIn("startup_s", report)  # the probe's own worker_init_fn still wraps the user's

    def test_serve_step_failure_fails_the_trial_and_the_probe_goes_on(self):
        r = self.probe("--serve", "--step", "usermod:fail_third",
                       stdin=self.requests({}, {}, {"batch_size": 0}))
        self.assertEqual(r.returncode, 0, r.stderr[-2000:])
        lines = self.protocol_lines(r.stdout)
        # Trial 1: warm-up (1 step), the window runs into step 3, which raises.
        self.assertEqual(lines[0], {"error": "ValueError: boom at step 3"})
        self.assertIn("samples_per_s", lines[1])
        self.assertEqual(lines[2], {"trial_end": 2})
        self.assertTrue(lines[3]["error"].startswith("bad request: batch_size and prefetch_factor must be >= 1"))
        self.assertIn("Traceback", r.stderr)


class Serve(Base):
    """feedtune.serve(...) in a tune.py."""

    def test_serve_protocol_from_the_environment(self):
        count = os.path.join(self.dir.name, "count")
        tune = self.write_tune(dataset="make_dataset", step="fail_third", batch_size=8)
        r = self.run_cmd([PYTHON, tune], stdin=self.requests({}, {}, {"batch_size": 16}, {"num_workers": 1}),
                         env=self.env(FEEDTUNE_PROTOCOL="serve", COUNT_FILE=count))
        self.assertEqual(r.returncode, 0, r.stderr[-2000:])
        lines = self.protocol_lines(r.stdout)
        self.assertEqual(lines[0], {"error": "ValueError: boom at step 3"})
        self.assertGreater(lines[1]["step_ms"], 0)
        self.assertIn("main_cpu_ms_per_batch", lines[1])
        self.assertIn("step_cpu_ms", lines[1])
        self.assertEqual(lines[2], {"trial_end": 2})
        self.assertEqual(lines[3], {"error": "ValueError: the sweep asks for batch_size 16 (loader.batch_size in its "
                                             "config), but serve(batch_size=...) is 8: the results would record a "
                                             "batch size the script does not use; set loader.batch_size: 8 in the "
                                             "config"})
        self.assertEqual(lines[4]["num_workers"], 1)
        self.assertEqual(lines[5], {"trial_end": 4})
        with open(count) as f:
            self.assertEqual(f.read(), "called\n", "the dataset factory runs once per process")

    def test_run_protocol_knobs_from_the_environment(self):
        tune = self.write_tune(dataset="Indexed()", step="sleep_step", batch_size=8)
        r = self.run_cmd([PYTHON, tune], env=self.env(FEEDTUNE_PROTOCOL="run", FEEDTUNE_NUM_WORKERS="1",
                                                      FEEDTUNE_PERSISTENT_WORKERS="true", FEEDTUNE_BATCH_SIZE="8",
                                                      FEEDTUNE_MEASURE_SECONDS="0.3", FEEDTUNE_WARMUP_BATCHES="1"))
        report = self.last_json(r)
        self.assertEqual(report["num_workers"], 1)
        self.assertEqual(report["samples"], 8 * report["batches"])
        self.assertGreaterEqual(report["step_ms"], 5.0)
        self.assertGreater(report["seconds"], 0.29)

    def test_run_protocol_flags_and_a_bad_variable(self):
        tune = self.write_tune(dataset="make_dataset", step="sleep_step", batch_size=8)
        report = self.last_json(self.run_cmd([PYTHON, tune, "--seconds", "0.2", "--warmup-batches", "1"]))
        self.assertEqual(report["num_workers"], 0)
        self.assertEqual(report["samples"], 8 * report["batches"], "serve's batch_size is the run's default")
        r = self.run_cmd([PYTHON, tune], env=self.env(FEEDTUNE_NUM_WORKERS="four"))
        self.assertEqual(r.returncode, 2)
        self.assertIn("tune.py: FEEDTUNE_NUM_WORKERS=four in the environment: invalid literal", r.stderr)

    def test_serve_protocol_refuses_knobs_on_the_command_line(self):
        tune = self.write_tune(dataset="make_dataset", step="sleep_step")
        r = self.run_cmd([PYTHON, tune, "--serve", "--num-workers", "2"])
        self.assertEqual(r.returncode, 2)
        self.assertIn("tune.py: protocol serve: --num-workers come(s) with each trial's request on stdin", r.stderr)

    def test_bad_arguments_exit_2_with_the_fix(self):
        tune = self.write_tune(dataset="make_dataset", step="sleep_step", num_workers=2)
        r = self.run_cmd([PYTHON, tune])
        self.assertEqual(r.returncode, 2)
        self.assertIn("tune.py: serve(**loader_args): 'num_workers' is a knob feedtune sets per trial", r.stderr)
        tune = self.write_tune(dataset="make_dataset", step="'not a function'")
        r = self.run_cmd([PYTHON, tune])
        self.assertEqual(r.returncode, 2)
        self.assertIn("tune.py: serve(step=...): expected a function, got a str", r.stderr)
        tune = self.write_tune(dataset="42", step="sleep_step")
        r = self.run_cmd([PYTHON, tune, "--seconds", "0.2"])
        self.assertEqual(r.returncode, 2)
        self.assertIn("serve(dataset=...): expected a torch Dataset or a function of no arguments that returns "
                      "one, got a int", r.stderr)

    def test_collate_without_tensors_fails_the_trial(self):
        tune = self.write_tune(dataset="make_dataset", step="sleep_step", collate_fn="strings")
        r = self.run_cmd([PYTHON, tune, "--serve"], stdin=self.requests({}, {"num_workers": 1}))
        lines = self.protocol_lines(r.stdout)
        expected = ("TypeError: serve(collate_fn=...) returned a list of str with no tensor anywhere in it; "
                    "pin_memory and the copy to the device need tensors: return torch tensors from it (e.g. "
                    "torch.stack of the samples), inside a tuple, list or dict if you like")
        self.assertEqual(lines, [{"error": expected}, {"error": expected}])

    def test_sampler_and_worker_init_fn_under_spawn(self):
        # spawn pickles the dataset, the collate and the init function, and
        # imports tune.py as __mp_main__: serve() must not serve again there.
        tune = self.write_tune(dataset="make_dataset", step="tagged_only", sampler="EvenSampler",
                               worker_init_fn="tag_worker")
        r = self.run_cmd([PYTHON, tune, "--serve"],
                         stdin=self.requests({"num_workers": 1, "multiprocessing_context": "spawn"}))
        self.assertEqual(r.returncode, 0, r.stderr[-2000:])
        lines = self.protocol_lines(r.stdout)
        self.assertEqual(len(lines), 2, lines)
        self.assertEqual(lines[0]["multiprocessing_context"], "spawn")
        self.assertEqual(lines[1], {"trial_end": 1})

    def test_stage_trials_run_the_users_step(self):
        # The verdict's stages (docs/verdict.md): step = the user's step on one
        # resident batch, no loader; transport = zeros shaped like a sample.
        tune = self.write_tune(dataset="make_dataset", step="sleep_step", collate_fn="nested")
        r = self.run_cmd([PYTHON, tune, "--serve"],
                         stdin=self.requests({"stage": "step"}, {"stage": "copy"}, {"stage": "transport",
                                                                                    "num_workers": 1}))
        self.assertEqual(r.returncode, 0, r.stderr[-2000:])
        lines = self.protocol_lines(r.stdout)
        self.assertEqual([line.get("trial_end") for line in lines], [None, 1, None, 2, None, 3])
        self.assertGreaterEqual(lines[0]["step_ms"], 5.0)
        self.assertEqual(lines[0]["num_workers"], 0)  # step and copy: no loader workers
        self.assertEqual(lines[4]["num_workers"], 1)

    def test_a_tune_py_without_a_main_guard_under_forkserver(self):
        # forkserver imports tune.py as __mp_main__ in its server: serve() must
        # return there, not build the dataset or read stdin a second time.
        count = os.path.join(self.dir.name, "count")
        path = os.path.join(self.dir.name, "tune.py")
        with open(path, "w") as f:
            f.write("from usermod import make_dataset, sleep_step\n"
                    "from feedtune import serve\n"
                    "serve(dataset=make_dataset, step=sleep_step, batch_size=8)\n")
        r = self.run_cmd([PYTHON, path], stdin=self.requests({"num_workers": 2, "persistent_workers": True,
                                                             "multiprocessing_context": "forkserver"}),
                         env=self.env(FEEDTUNE_PROTOCOL="serve", COUNT_FILE=count))
        self.assertEqual(r.returncode, 0, r.stderr[-2000:])
        lines = self.protocol_lines(r.stdout)
        self.assertEqual(lines[1], {"trial_end": 1})
        self.assertEqual(lines[0]["multiprocessing_context"], "forkserver")
        # The forkserver, not this process, is the workers' parent: still measured.
        self.assertGreater(lines[0]["worker_peak_rss_bytes"], 10 << 20)
        with open(count) as f:
            self.assertEqual(f.read(), "called\n")


if __name__ == "__main__":
    unittest.main()
