#!/usr/bin/env python3
"""feedtune_probe: measures a real torch.utils.data.DataLoader the way a training
loop sees it, and prints one JSON line for feedtune's command workload.

The harness lives in the feedtune Python package (python/feedtune/probe.py,
where its full description is; `--help` for the options); this file stays the
entry point that configs, docs and feedtune's own stage trials name. It runs
from the checkout as it is (the package is found at <repo>/python, whether or
not it is installed) and from an install (share/feedtune/workloads/python,
with the installed package's folder written below).
"""

import os
import sys

# The folder that holds the feedtune package, relative to this file, and
# whether it goes first on sys.path: the checkout's python/, first, so an older
# installed copy cannot answer for it. An installed copy has this line
# rewritten (cmake/install_python.cmake) to the install's folder, put last:
# that folder holds other packages too (Debian's torch), which must not shadow
# those of the interpreter the config names.
_PACKAGE_PARENT, _PACKAGE_FIRST = os.path.join(os.pardir, os.pardir, "python"), True
_PACKAGE_PATH = os.path.normpath(os.path.join(os.path.dirname(os.path.realpath(__file__)), _PACKAGE_PARENT))
if _PACKAGE_FIRST:
    sys.path.insert(0, _PACKAGE_PATH)
elif _PACKAGE_PATH not in sys.path:
    sys.path.append(_PACKAGE_PATH)

from feedtune.probe import main  # noqa: E402  (after the path is set)

if __name__ == "__main__":
    sys.exit(main())
