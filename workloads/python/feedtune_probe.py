#!/usr/bin/env python3
"""feedtune_probe: measures a real torch.utils.data.DataLoader the way a training
loop sees it, and prints one JSON line for feedtune's command workload.

The harness lives in the feedtune Python package (python/feedtune/probe.py,
where its full description is; `--help` for the options); this file stays the
entry point that configs, docs and feedtune's own stage trials name. It runs
from the checkout as it is: the package is found beside this file, at
<repo>/python, whether or not it is installed.
"""

import os
import sys

# The checkout's package first, so an older installed copy cannot answer for it.
sys.path.insert(0, os.path.normpath(os.path.join(os.path.dirname(os.path.realpath(__file__)), os.pardir, os.pardir,
                                                 "python")))

from feedtune.probe import main  # noqa: E402  (after the path is set)

if __name__ == "__main__":
    sys.exit(main())
