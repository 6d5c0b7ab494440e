"""Writing a file so that it is either whole under its final name or not there at all.

Every file the plugin writes (reports, exports, the leaderboard site, saved answers, judge
validations, generated stimuli, downloaded data) goes through :func:`atomic_open`: the content goes
to a temporary file beside the final one (``.<name>.<random>.part``), which is flushed, synced and
renamed into place only when the write finished. A failed or interrupted write (a full disk, an
exception, Ctrl-C) removes the temporary file, so no partial file ever sits under the final name,
and an older file of that name stays as it was.

The temporary file is created as ``open()`` creates files (mode 0666 minus the user's umask,
so 0644 under umask 022), not private as :func:`tempfile.mkstemp` would make it: a web server
can serve the site and a colleague can read the report.

A command writing where the user told it to (``--output``, ``--output-dir``) uses :func:`output_dir`,
:func:`write_bytes` and :func:`write_text`: a write the system refuses there (read-only or full disk,
a file where a directory should be, no permission) is an :class:`OutputError`, one paragraph naming
the path and the option to change, never a traceback. :func:`atomic_open` and
:func:`atomic_write_bytes` leave the ``OSError`` to callers that explain it their own way (the data
layer's cache, the saved answers).
"""
from __future__ import annotations

import os
import secrets
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Iterator

from .errors import UserError

_ATTEMPTS = 100  # random names tried before giving up (each collision is a 1 in 2**32 event)


def _create_beside(final: Path) -> tuple[int, Path]:
    """A new file beside ``final`` (exclusive create, mode 0666 & ~umask): its descriptor and path."""
    for _ in range(_ATTEMPTS):
        tmp = final.with_name(f".{final.name}.{secrets.token_hex(4)}.part")
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666), tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name beside {final}")


@contextmanager
def atomic_open(final: str | Path, mode: str = "wb", *, encoding: str | None = None,
                newline: str | None = None) -> Iterator[IO]:
    """Open ``final`` for writing (``mode`` ``"wb"`` or ``"w"``) so that it appears only once written whole.

    Creates ``final``'s directory if needed. Yields the open file; on leaving the block without an
    exception the file is synced and renamed to ``final``; on any exception (KeyboardInterrupt
    included) it is removed and the exception goes on.
    """
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_open writes a whole new file: mode 'w' or 'wb', not {mode!r}")
    final = Path(final)
    final.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = _create_beside(final)
    try:
        with os.fdopen(fd, mode, encoding=encoding, newline=newline) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, final)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def atomic_write_bytes(final: str | Path, data: bytes) -> None:
    """Write ``data`` to ``final`` (see :func:`atomic_open`)."""
    with atomic_open(final, "wb") as handle:
        handle.write(data)


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
    """Write ``data`` to ``path`` atomically; returns ``path``. A refused write is an :class:`OutputError`."""
    try:
        atomic_write_bytes(path, data)
    except OSError as err:
        raise _error(path, err, option) from None
    return path


def write_text(path: Path, text: str, option: str = "--output") -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically; returns ``path``. A refused write is an :class:`OutputError`."""
    return write_bytes(path, text.encode("utf-8"), option)
