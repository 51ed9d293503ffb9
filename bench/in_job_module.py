"""bench/in_job as a module, for the benches that reuse its profiles, truth epoch and job.

bench/in_job is a command (no .py suffix), so it is not importable by name;
load() executes it as the module `in_job` (its main() does not run).
"""

import importlib.machinery
import importlib.util
import os


def load():
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "in_job")
    loader = importlib.machinery.SourceFileLoader("in_job", path)
    module = importlib.util.module_from_spec(importlib.util.spec_from_loader("in_job", loader))
    loader.exec_module(module)
    return module
