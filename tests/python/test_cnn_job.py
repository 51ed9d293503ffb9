"""The CPU training job of examples/tune_cnn.py: a small CNN trained
in the main process on one intra-op thread, over images augmented in the
DataLoader's workers, served by feedtune.serve(step=train_step). One serving
process, as a sweep starts it, and two trials: what it measures is the CNN's
own training step (its wall and CPU time per batch), not a sleep, and the
augmentation runs where the knobs put it. bench/regret's cnn-job profile
sweeps the same script against an interleaved grid (docs/regret.md).
"""

import json
import os
import subprocess
import sys
import tempfile
import unittest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(REPO, "examples", "tune_cnn.py")


def request(trial, num_workers, persistent):
    return {"trial": trial, "num_workers": num_workers, "pin_memory": False, "non_blocking": False,
            "prefetch_factor": 2, "persistent_workers": persistent, "batch_size": 32, "repeats": 1,
            "warmup_batches": 2, "measure_seconds": 1.0, "window_epochs": 1, "step_us": 0,
            "sync_every_steps": 1}


class CnnJobTest(unittest.TestCase):
    def test_the_served_job_measures_its_own_step(self):
        env = dict(os.environ, TUNE_CNN_IMAGES="256", FEEDTUNE_PROTOCOL="serve")
        stderr = tempfile.TemporaryFile(mode="w+")  # a file, not a pipe: nobody reads it while the job runs
        self.addCleanup(stderr.close)

        def said():
            stderr.seek(0)
            return stderr.read()[-2000:]

        proc = subprocess.Popen([sys.executable, SCRIPT], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=stderr, text=True, env=env)
        try:
            windows = {}
            for trial, workers in ((1, 0), (2, 1)):
                proc.stdin.write(json.dumps(request(trial, workers, workers > 0)) + "\n")
                proc.stdin.flush()
                lines = []
                while True:
                    line = proc.stdout.readline()
                    self.assertTrue(line, "the job ended in trial %d: %s" % (trial, said()))
                    msg = json.loads(line)
                    self.assertNotIn("error", msg)
                    if msg.get("trial_end") == trial:
                        break
                    lines.append(msg)
                self.assertEqual(len(lines), 1, lines)  # one window: repeats 1
                windows[workers] = lines[0]
        finally:
            proc.stdin.close()
            proc.wait(timeout=60)
            proc.stdout.close()
        self.assertEqual(proc.returncode, 0, said())

        for workers, w in windows.items():
            self.assertGreater(w["samples_per_s"], 0, w)
            # The step is the CNN's forward, backward and SGD: CPU time, where
            # a sleep would take next to none. Its CPU time, not a share of
            # its wall time: on a loaded box the step waits for a CPU (239 ms
            # of wall for 16 ms of CPU beside a package install), and its CPU
            # time stays what the CNN costs, 16-80 ms on 2-CPU VMs.
            self.assertGreater(w["step_ms"], 1.0, w)
            self.assertGreater(w["step_cpu_ms"], 2.0, w)
            self.assertGreaterEqual(w["main_cpu_ms_per_batch"], w["step_cpu_ms"], w)
            self.assertEqual(w["batches_per_epoch"], 8, w)  # 256 images, batches of 32
        # Without workers the main process augments the images itself; with
        # one, the worker does, and its time in __getitem__ is measured.
        self.assertNotIn("worker_busy_frac", windows[0])
        self.assertGreater(windows[1]["worker_busy_frac"], 0, windows[1])


if __name__ == "__main__":
    unittest.main()
