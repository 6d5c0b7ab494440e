"""Writing the files made from results (report pages, figures, tables, records, sites).

Every file is written atomically (:mod:`lm_eval_ext.atomic_write`: a temp file beside it, then a
rename), so that an interrupted or failed write never leaves a half-written file under the final
name, with the mode the user's umask gives new files. A write the system refuses (read-only
or full disk, a file where a directory should be, no permission) is an :class:`OutputError`:
one paragraph naming the path and what to do, never a traceback.
"""
from __future__ import annotations

from pathlib import Path

from ..atomic_write import atomic_write_bytes
from ..errors import UserError


class OutputError(UserError):
    """An output file or directory cannot be written."""


def _error(path: Path, err: OSError, option: str) -> OutputError:
    reason = err.strerror or str(err)
    return OutputError(f"Cannot write {path}: {reason} (errno {err.errno}). Nothing was left half-written; give "
                       f"{option} a directory on a disk that is writable and has free space.")


def output_dir(path: str | Path, option: str = "--output") -> Path:
    """Create the directory ``path`` (and its parents) if needed; ``option`` names the flag that chose it."""
    path = Path(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise _error(path, err, option) from None
    return path


def write_bytes(path: Path, data: bytes, option: str = "--output") -> Path:
    """Write ``data`` to ``path`` atomically; returns ``path``."""
    try:
        atomic_write_bytes(path, data)
    except OSError as err:
        raise _error(path, err, option) from None
    return path


def write_text(path: Path, text: str, option: str = "--output") -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically; returns ``path``."""
    return write_bytes(path, text.encode("utf-8"), option)
