"""Session fixtures built once per test run, also when pytest-xdist spreads the tests over several workers."""
from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Callable

from filelock import FileLock


def built_once(tmp_path_factory, name: str, build: Callable[[Path], Path]) -> Path:
    """``build(directory)``'s result, built once per test run.

    In one process this is an ordinary session fixture's body. Under pytest-xdist every worker has its own
    session, so the first worker to ask builds in a directory all workers of the run share, under a file
    lock, and the others wait for it and reuse the result instead of running the same harness runs again.
    A build that fails leaves no mark, so the next worker to ask tries again (and reports its own failure).
    """
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return build(tmp_path_factory.mktemp(name))
    shared = tmp_path_factory.getbasetemp().parent  # the run's directory, the parent of every worker's own
    built = shared / f"{name}.built"  # holds the result's path, written once the build succeeded
    with FileLock(str(shared / f"{name}.lock")):
        if not built.exists():
            directory = shared / name
            shutil.rmtree(directory, ignore_errors=True)  # what a failed build left
            directory.mkdir()
            built.write_text(str(build(directory)))
        return Path(built.read_text())
