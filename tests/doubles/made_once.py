"""A file the test run's processes share: the first process to ask makes it, the others read it."""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path


def made_once(path: Path, make: Callable[[], bytes]) -> bytes:
    """The bytes of ``path``, made with ``make()`` by the first process of the test run that asks (under a file
    lock, so the others wait for it); a process stopped midway leaves no partial file there."""
    from filelock import FileLock

    from lm_eval_ext.atomic_write import atomic_write_bytes

    path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(f"{path}.lock"):
        if not path.exists():
            atomic_write_bytes(path, make())
    return path.read_bytes()
