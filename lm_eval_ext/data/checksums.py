"""sha256 of local files, verified once per process per (path, size, mtime)."""
from __future__ import annotations

import threading
from pathlib import Path

from pooch import file_hash

from .download import checksum_error
from .registry import PinnedFile

_verified: set[tuple[str, int, int, str]] = set()
_lock = threading.Lock()


def _key(path: Path, pinned: PinnedFile) -> tuple[str, int, int, str]:
    st = path.stat()
    return (str(path.resolve()), st.st_size, st.st_mtime_ns, pinned.sha256)


def mark_verified(path: Path, pinned: PinnedFile) -> None:
    """Record that ``path`` is known good (e.g. just downloaded and checked)."""
    with _lock:
        _verified.add(_key(path, pinned))


def verify_file(path: Path, pinned: PinnedFile, where: str) -> None:
    """Raise DataError unless ``path`` hashes to ``pinned.sha256``.

    The result is memoized on (path, size, mtime), so a file is hashed once
    per process unless it changes. ``where`` ("mirror", "cache") goes into
    the error message.
    """
    key = _key(path, pinned)
    with _lock:
        if key in _verified:
            return
    actual = file_hash(str(path))  # sha256, read in blocks
    if actual != pinned.sha256:
        if where == "mirror":
            advice = (f"Replace it with a good copy (canonical source: {pinned.source}), or unset "
                      f"LM_EVAL_EXT_DATA_DIR and run `lm-eval-ext data fetch {pinned.dataset}`.")
        else:
            advice = f"Delete {path} and run `lm-eval-ext data fetch {pinned.dataset}` to download it again."
        raise checksum_error(f"{path} ({where} copy of {pinned.dataset}/{pinned.path})", pinned.sha256, actual, advice)
    with _lock:
        _verified.add(key)
