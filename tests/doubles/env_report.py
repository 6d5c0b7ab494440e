"""torch's environment report, made once per test run for each interpreter instead of once per harness run.

Every harness run records ``torch.utils.collect_env.get_pretty_env_info()`` in its results, and that report starts
about a dozen commands (``pip list``, ``gcc --version``, ``lscpu`` and the like; about 0.75 CPU seconds): the same
text, from the same interpreter, in each of the suite's ~110 harness runs. When :data:`ENV` names a directory,
:func:`install` makes this process's report come from a file there, one per interpreter: the first process of the
run to ask makes it with torch's own function and writes it (under a file lock), the others read it. The harness's
call and what it stores are unchanged; no test reads the report.

tests/conftest.py sets :data:`ENV` for the whole test run and installs it in the pytest process (in-process
harness runs); every process the suite starts installs it as it starts (tests/startup/sitecustomize.py).
"""
from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path

from doubles.made_once import made_once
from doubles.on_import import on_import

ENV = "LM_EVAL_EXT_TEST_ENV_REPORTS"
MODULE = "torch.utils.collect_env"


def install() -> None:
    """If :data:`ENV` is set, reuse this interpreter's report in this process: now when torch's module is
    imported already, else as soon as something imports it (installing does not import torch)."""
    if os.environ.get(ENV):
        on_import(MODULE, _reuse)


def _reuse(collect_env) -> None:
    make = collect_env.get_pretty_env_info
    if getattr(make, "reused", False):  # installed twice in this process
        return
    key = hashlib.sha256(f"{sys.executable}\0{sys.prefix}".encode()).hexdigest()[:16]
    path = Path(os.environ[ENV]) / f"{key}.txt"

    def get_pretty_env_info() -> str:
        return made_once(path, lambda: make().encode()).decode()

    get_pretty_env_info.reused = True
    collect_env.get_pretty_env_info = get_pretty_env_info
