"""On-disk cache of judge replies: one SQLite row per exact request, committed as soon as it returns.

The key is a hash of the request as sent (endpoint host and path, model, messages, sampling
parameters, seed): the same request is never paid for twice, a crash loses no finished call,
and the key holds nothing secret (the API key is a header, never part of the request body).
SQLite in WAL mode lets several processes (e.g. data-parallel ranks) share one file.

The cache only saves calls, so a cache that fails during a run never stops it: a file that
cannot be opened or read at all stops the run before any call with one message (how to move
it aside), a read that fails later (a damaged page) turns the cache off for the rest of the
run, a write that fails (read-only file, full disk, a lock held too long) stops storing while
cached replies are still used; each with one warning.
"""
from __future__ import annotations

import hashlib
import json
import logging
import shlex
import sqlite3
import threading
import time
from pathlib import Path
from urllib.parse import quote

from .config import how_to_set
from .errors import JudgeCacheError

log = logging.getLogger(__name__)

# How long a write waits for another process's lock before it counts as failed.
BUSY_TIMEOUT = 60.0


def request_key(endpoint: str, request: dict) -> str:
    """The cache key of one chat-completions request body sent to ``endpoint``."""
    canonical = json.dumps({"endpoint": endpoint, "request": request}, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def _damaged(exc: sqlite3.Error) -> bool:
    """Whether SQLite says the file is corrupt or not a database at all."""
    return _error_name(exc).startswith(("SQLITE_CORRUPT", "SQLITE_NOTADB"))


def _error_name(exc: sqlite3.Error) -> str:
    name = getattr(exc, "sqlite_errorname", None)
    if name:
        return name
    # Python 3.10 gives no error name: SQLite's messages for the same codes
    for text, code in (("malformed", "SQLITE_CORRUPT"), ("not a database", "SQLITE_NOTADB"),
                       ("readonly", "SQLITE_READONLY")):
        if text in str(exc):
            return code
    return ""


def move_aside_hint(path: Path) -> str:
    """The shell command that moves a damaged cache (and its WAL files) out of the way."""
    quoted = shlex.quote(str(path))
    return (f"for f in {quoted} {shlex.quote(str(path) + '-wal')} {shlex.quote(str(path) + '-shm')}; "
            'do if [ -e "$f" ]; then mv "$f" "$f.broken"; fi; done')


def _other_cache() -> str:
    return (f"give another file with {how_to_set('cache', 'PATH')}, or {how_to_set('cache', 'none')} to judge "
            "without a cache")


class JudgeCache:
    """Judge replies by request key; ``path=None`` keeps nothing (every lookup misses).

    ``problem`` is None, or what stopped the cache from being read or written during the run.
    """

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.problem: str | None = None
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None
        self._writable = True
        if path is None:
            return
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(str(path), timeout=BUSY_TIMEOUT, check_same_thread=False,
                                       isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            # WAL with synchronous=NORMAL: a commit is safe when the process is killed (the WAL is in the
            # OS's hands); only a power cut can lose the last replies. FULL would fsync on every reply.
            self._db.execute("PRAGMA synchronous=NORMAL")
            # check each page's cells as it is read: a damaged page is then an error (the warning, the cache off)
            # instead of lookups that miss without one, each paying for a call the cache holds
            self._db.execute("PRAGMA cell_size_check=ON")
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS judge_replies ("
                "key TEXT PRIMARY KEY, reply TEXT NOT NULL, model TEXT NOT NULL, created REAL NOT NULL)"
            )
        except sqlite3.Error as exc:  # the header or the schema is unreadable, or the file is not writable
            self._close()
            if _damaged(exc):
                raise JudgeCacheError(
                    f"The judge cache {path} cannot be read: {exc}. Move the damaged file aside (a new cache "
                    f"starts in its place; the replies it held will be asked for again): {move_aside_hint(path)} "
                    f"-- or {_other_cache()}."
                ) from None
            if _error_name(exc).startswith("SQLITE_READONLY") and self._open_read_only():
                return
            raise JudgeCacheError(f"Cannot open the judge cache {path}: {exc}. Check the file, its directory "
                                   f"and their permissions, or {_other_cache()}.") from None
        except OSError as exc:
            raise JudgeCacheError(f"Cannot open the judge cache {path}: {exc}. Check the directory and its "
                                   f"permissions, or {_other_cache()}.") from None

    def _open_read_only(self) -> bool:
        """A cache that cannot be written at all (not even switched to WAL): read it as it is, if possible."""
        try:
            self._db = sqlite3.connect(f"file:{quote(str(self.path.resolve()))}?mode=ro", uri=True, timeout=BUSY_TIMEOUT,
                                       check_same_thread=False, isolation_level=None)
            self._db.execute("PRAGMA cell_size_check=ON")  # as in __init__
            self._db.execute("SELECT key FROM judge_replies LIMIT 1").fetchall()
        except sqlite3.Error:
            self._close()
            return False
        self._stop_writing(sqlite3.OperationalError("attempt to write a readonly database"))
        return True

    def get(self, key: str) -> str | None:
        """The stored reply for ``key``, or None (also once reading the cache has failed)."""
        with self._lock:
            if self._db is None:
                return None
            try:
                row = self._db.execute("SELECT reply FROM judge_replies WHERE key = ?", (key,)).fetchone()
            except sqlite3.Error as exc:
                self._stop_reading(exc)
                return None
        return None if row is None else row[0]

    def put(self, key: str, reply: str, model: str) -> None:
        """Store a reply (autocommit: it is in the file when this returns); a failed write stops storing."""
        with self._lock:
            if self._db is None or not self._writable:
                return
            try:
                self._db.execute(
                    "INSERT OR REPLACE INTO judge_replies (key, reply, model, created) VALUES (?, ?, ?, ?)",
                    (key, reply, model, time.time()),
                )
            except sqlite3.Error as exc:
                if _damaged(exc):  # nothing read from it can be trusted either
                    self._stop_reading(exc)
                else:  # locked, read-only, full, I/O: reading may still work
                    self._stop_writing(exc)

    def _stop_writing(self, exc: sqlite3.Error) -> None:
        self._writable = False
        self.problem = f"not written: {exc}"
        log.warning("The judge cache %s cannot be written (%s): replies of this run are not stored in it; the "
                    "replies it already holds are still used. To keep new replies, free space or fix the file's "
                    "permissions, or %s.", self.path, exc, _other_cache())

    def _stop_reading(self, exc: sqlite3.Error) -> None:
        self._close()
        self.problem = f"not used: {exc}"
        log.warning("The judge cache %s failed while being read (%s): the run goes on without it (no reply is "
                    "replayed from it or stored in it). If the file is damaged, move it aside: %s", self.path, exc,
                    move_aside_hint(self.path))

    def _close(self) -> None:
        if self._db is not None:
            try:
                self._db.close()
            except sqlite3.Error:  # the replies committed so far are in the file already
                pass
        self._db = None

    def close(self) -> None:
        """Close the database (the cache stays on disk)."""
        with self._lock:
            self._close()
