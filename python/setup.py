"""The one part of the build pyproject.toml cannot say: feedtune's version is
written once, in the top CMakeLists.txt of feedtune's sources (project(VERSION)),
so it is read from there, and the built package gets it as feedtune/_version.py
(where feedtune.__version__ looks first)."""

import os
import re

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))


def cmake_version():
    path = os.path.join(HERE, os.pardir, "CMakeLists.txt")
    try:
        with open(path) as f:
            text = f.read()
    except OSError as e:
        raise SystemExit("feedtune: cannot read the version from %s (%s): build the package where it lies in "
                         "feedtune's sources, python/ beside the top CMakeLists.txt" % (path, e.strerror))
    match = re.search(r"^project\(feedtune VERSION ([0-9][0-9A-Za-z.]*)", text, re.M)
    if not match:
        raise SystemExit("feedtune: %s has no 'project(feedtune VERSION x.y.z' line to take the version from" % path)
    return match.group(1)


VERSION = cmake_version()


class BuildPyWithVersion(build_py):
    def run(self):
        super().run()
        target = os.path.join(self.build_lib, "feedtune", "_version.py")
        with open(target, "w") as f:
            f.write("# Written by feedtune's python/setup.py from project(VERSION) in CMakeLists.txt.\n"
                    "__version__ = %r\n" % VERSION)


setup(version=VERSION, cmdclass={"build_py": BuildPyWithVersion})
