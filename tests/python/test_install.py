"""The package installs offline into a virtual environment that sees the
system's torch, and the installed copy works from anywhere:

    python3 -m venv --system-site-packages V && V/bin/pip install --no-index --no-build-isolation ./python

Skipped (saying why) where python3-venv is missing.
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), os.pardir, os.pardir))
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable


def cmake_version():
    """project(feedtune VERSION ...) of the top CMakeLists.txt: the one place the version is written."""
    with open(os.path.join(REPO, "CMakeLists.txt")) as f:
        return re.search(r"^project\(feedtune VERSION ([0-9][0-9A-Za-z.]*)", f.read(), re.M).group(1)


def venv_available():
    return subprocess.run([PYTHON, "-c", "import venv, ensurepip"], capture_output=True).returncode == 0


@unittest.skipUnless(venv_available(), "python3 has no venv/ensurepip: apt-get install python3-venv")
class InstallTest(unittest.TestCase):
    def test_offline_install_into_a_venv(self):
        tmp = tempfile.mkdtemp(prefix="feedtune-install-test-")
        self.addCleanup(shutil.rmtree, tmp, True)
        # Build from a copy, so the checkout gets no build/ or egg-info; the copy
        # keeps python/ beside the top CMakeLists.txt, where setup.py reads the version.
        tree = os.path.join(tmp, "src")
        source = os.path.join(tree, "python")
        shutil.copytree(os.path.join(REPO, "python"), source,
                        ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
        shutil.copy(os.path.join(REPO, "CMakeLists.txt"), tree)
        venv = os.path.join(tmp, "v")
        subprocess.run([PYTHON, "-m", "venv", "--system-site-packages", venv], check=True, timeout=300)
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        pip = subprocess.run([os.path.join(venv, "bin", "pip"), "install", "--no-index", "--no-build-isolation",
                              source], capture_output=True, text=True, env=env, timeout=300)
        self.assertEqual(pip.returncode, 0, pip.stdout[-2000:] + pip.stderr[-2000:])
        self.assertIn("Successfully installed feedtune-%s" % cmake_version(), pip.stdout)
        check = subprocess.run([os.path.join(venv, "bin", "python"), "-c",
                                "import feedtune, torch; print(feedtune.__file__); "
                                "print(sorted(feedtune.__all__)); print(feedtune.__version__)"],
                               capture_output=True, text=True, env=env, cwd=tmp, timeout=120)
        self.assertEqual(check.returncode, 0, check.stderr)
        where, names, version = check.stdout.splitlines()
        self.assertEqual(version, cmake_version())
        self.assertTrue(where.startswith(os.path.join(venv, "lib")), where)
        self.assertEqual(names, "['AutotuneError', 'AutotunedLoader', 'LoaderKwargs', 'ResultsError', '__version__', "
                                "'autotune', 'loader_kwargs', 'serve', 'watch']")
        probe = subprocess.run([os.path.join(venv, "bin", "feedtune-probe"), "--help"], capture_output=True,
                               text=True, env=env, cwd=tmp, timeout=120)
        self.assertEqual(probe.returncode, 0, probe.stderr)
        self.assertIn("--step MODULE:FN", probe.stdout)


if __name__ == "__main__":
    unittest.main()
