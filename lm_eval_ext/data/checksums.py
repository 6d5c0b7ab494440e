"""sha256 of local files, verified once per process per (path, size, mtime)."""
from __future__ import annotations

import threading
from pathlib import Path

from pooch import file_hash

from .download import checksum_error
from .registry import FileSpec

_verified: set[tuple[str, int, int, str]] = set()
_lock = threading.Lock()


def _key(path: Path, spec: FileSpec) -> tuple[str, int, int, str]:
    st = path.stat()
    return (str(path.resolve()), st.st_size, st.st_mtime_ns, spec.sha256)


def mark_verified(path: Path, spec: FileSpec) -> None:
    """Record that ``path`` is known good (e.g. just downloaded and checked)."""
    with _lock:
        _verified.add(_key(path, spec))


def verify_file(path: Path, spec: FileSpec, where: str) -> None:
    """Raise DataError unless ``path`` hashes to ``spec.sha256``.

    The result is memoized on (path, size, mtime), so a file is hashed once
    per process unless it changes. ``where`` ("mirror", "cache") goes into
    the error message.
    """
    key = _key(path, spec)
    with _lock:
        if key in _verified:
            return
    actual = file_hash(str(path))  # sha256, read in blocks
    if actual != spec.sha256:
        if where == "mirror":
            advice = (f"Replace it with a good copy (canonical source: {spec.source}), or unset "
                      f"LM_EVAL_EXT_DATA_DIR and run `lm-eval-ext data fetch {spec.dataset}`.")
        else:
            advice = f"Delete {path} and run `lm-eval-ext data fetch {spec.dataset}` to download it again."
        raise checksum_error(f"{path} ({where} copy of {spec.dataset}/{spec.path})", spec.sha256, actual, advice)
    with _lock:
        _verified.add(key)
