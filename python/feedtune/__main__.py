"""python3 -m feedtune: the probe harness (the same as workloads/python/feedtune_probe.py)."""

import sys

from .probe import main

sys.exit(main())
