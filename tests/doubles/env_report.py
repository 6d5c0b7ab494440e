"""torch's environment report, made once per test run for each interpreter instead of once per harness run.

Every harness run records ``torch.utils.collect_env.get_pretty_env_info()`` in its results, and that report starts
about a dozen commands (``pip list``, ``gcc --version``, ``lscpu`` and the like; about 0.75 CPU seconds): the same
text, from the same interpreter, in each of the suite's ~110 harness runs. When :data:`ENV` names a directory,
:func:`install` makes this process's report come from a file there, one per interpreter: the first process of the
run to ask makes it with torch's own function and writes it (under a file lock), the others read it. The harness's
call and what it stores are unchanged; no test reads the report.

tests/conftest.py sets :data:`ENV` for the whole test run and installs it in the pytest process (in-process
harness runs); ``python -m doubles ...`` processes install it too. The installed commands run without it.
"""
from __future__ import annotations

import hashlib
import importlib.abc
import importlib.util
import os
import sys
from pathlib import Path

from doubles.made_once import made_once

ENV = "LM_EVAL_EXT_TEST_ENV_REPORTS"
MODULE = "torch.utils.collect_env"


def install() -> None:
    """If :data:`ENV` is set, reuse this interpreter's report in this process: now when torch's module is
    imported already, else as soon as something imports it (installing does not import torch)."""
    if not os.environ.get(ENV):
        return
    if MODULE in sys.modules:
        _reuse(sys.modules[MODULE])
    elif not any(isinstance(finder, _OnImport) for finder in sys.meta_path):
        sys.meta_path.insert(0, _OnImport())


class _OnImport(importlib.abc.MetaPathFinder):
    """Finds nothing itself: wraps the loader of torch's module, once, so that the module is patched on import."""

    def find_spec(self, fullname, path, target=None):
        if fullname != MODULE:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)
        load = spec.loader.exec_module

        def exec_module(module):
            load(module)
            _reuse(module)

        spec.loader.exec_module = exec_module
        return spec


def _reuse(collect_env) -> None:
    make = collect_env.get_pretty_env_info
    key = hashlib.sha256(f"{sys.executable}\0{sys.prefix}".encode()).hexdigest()[:16]
    path = Path(os.environ[ENV]) / f"{key}.txt"

    def get_pretty_env_info() -> str:
        return made_once(path, lambda: make().encode()).decode()

    collect_env.get_pretty_env_info = get_pretty_env_info
