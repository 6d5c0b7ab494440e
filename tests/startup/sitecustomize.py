"""Start-up of every process the suite starts: the doubles' reuse of work the test run does once.

Python imports ``sitecustomize`` as it starts, from the first folder of ``sys.path`` that has one; every process the
suite starts gets this folder first on ``PYTHONPATH`` (``helpers.files.subprocess_env``). In a process of the test
run (tests/conftest.py sets the variables they read), the harness's built-in task YAMLs are parsed once per test run
(doubles/builtin_index.py) and torch's environment report is made once per interpreter (doubles/env_report.py). Both
hooks wait for the module they patch to be imported: a process that never imports the harness or torch (pip, a
venv's creation, ``lm-eval-ext report``) runs as it would without them. Then any other ``sitecustomize`` on the
path runs, as it would have.
"""
import importlib.machinery
import importlib.util
import os
import sys

from doubles import builtin_index, env_report

builtin_index.install()
env_report.install()


def _the_next_one() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    rest = [entry for entry in sys.path if os.path.abspath(entry or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec(__name__, rest)
    if spec is not None:
        spec.loader.exec_module(importlib.util.module_from_spec(spec))


_the_next_one()
