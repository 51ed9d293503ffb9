"""A training job tuned by feedtune.autotune that a test stops from outside
(test_autotune.AutotuneStops): argv: the results file, a file to write the
controller's pid to once it runs. BUDGET_S in the environment. Its loop goes
on epoch after epoch until it is signalled or killed; after 1000 epochs
(minutes) it exits 3, so a test that meant to stop it fails rather than
waits."""

import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir, "python"))

import torch  # noqa: E402
import torch.utils.data as tud  # noqa: E402

import feedtune  # noqa: E402


class Indices(tud.Dataset):
    def __len__(self):
        return 240

    def __getitem__(self, i):
        time.sleep(0.0004)
        return torch.tensor([i])


def main():
    results, pid_file = sys.argv[1], sys.argv[2]
    loader = feedtune.autotune(tud.DataLoader(Indices(), batch_size=6, shuffle=True), results=results,
                               config="stopped", budget_s=float(os.environ["BUDGET_S"]), verbose=False)
    said = False
    for _ in range(1000):
        for _batch in loader:
            controller = loader._controller
            if not said and controller and getattr(controller, "process", None):
                with open(pid_file + ".tmp", "w") as f:
                    f.write(str(controller.process.pid))
                os.rename(pid_file + ".tmp", pid_file)  # whole when it is there
                said = True
            time.sleep(0.001)  # the step
    sys.exit(3)


if __name__ == "__main__":
    main()
