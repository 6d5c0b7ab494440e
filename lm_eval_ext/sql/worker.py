"""What a sandbox worker process runs: receive batches of queries, send one reply per query.

The process confines itself first: it may not write a byte to any file
(``RLIMIT_FSIZE`` = 0; pipes to the parent are not files) and its address space is
bounded. It keeps one read-only connection per database it has seen (a small LRU), so
a database is opened once per worker, not once per query. A query sent with the gold rows
to compare against is compared here and answered with the verdict alone: whatever a
query returns stays in the worker, and the parent's memory does not grow with it.
"""
from __future__ import annotations

import signal
import sys
from collections import OrderedDict
from multiprocessing.connection import Connection

from dataclasses import replace

from .compare import Against, results_match
from .readonly import Limits, QueryResult, connect_readonly, run_query

MAX_OPEN_DATABASES = 64
ADDRESS_SPACE_BYTES = 2 * 2**30
# An error message (SQLite may quote a long token of the query) reaches the parent at most this long.
MAX_ERROR_CHARS = 500


def _confine() -> None:
    """No file writes, bounded memory, and Ctrl-C left to the parent (POSIX only)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if sys.platform == "win32":
        return
    import resource

    # A write past the limit raises SIGXFSZ, which would kill the process: make it an error instead.
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard == resource.RLIM_INFINITY or hard > ADDRESS_SPACE_BYTES:
        resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE_BYTES, ADDRESS_SPACE_BYTES))


def _execute(connections: OrderedDict, db_path: str, sql: str, limits: Limits) -> QueryResult:
    conn = connections.get(db_path)
    if conn is None:
        try:
            conn = connect_readonly(db_path, limits)
        except Exception as err:  # noqa: BLE001 -- reported to the parent as a failed execution
            return QueryResult(False, error=f"cannot open the database: {err}")
        connections[db_path] = conn
        if len(connections) > MAX_OPEN_DATABASES:
            connections.popitem(last=False)[1].close()
    else:
        connections.move_to_end(db_path)
    return run_query(conn, sql, limits)


def _reply(result: QueryResult, against: Against | None) -> QueryResult:
    """What goes back to the parent: the verdict instead of the rows when there is gold to compare with."""
    if result.error is not None and len(result.error) > MAX_ERROR_CHARS:
        result = replace(result, error=result.error[:MAX_ERROR_CHARS] + " [cut]")
    if against is None:
        return result
    return replace(result, rows=None, match=result.ok and results_match(result.rows, against))


def serve(pipe: Connection, limits: Limits) -> None:
    """Worker main loop: each message is a list of ``(job_id, db_path, sql, against)``; ``None`` ends it."""
    _confine()
    connections: OrderedDict = OrderedDict()
    while True:
        try:
            batch = pipe.recv()
        except (EOFError, OSError):  # the parent is gone
            return
        if batch is None:
            return
        for job_id, db_path, sql, against in batch:
            reply = _reply(_execute(connections, db_path, sql, limits), against)
            pipe.send((job_id, reply))
            del reply  # the rows are freed before the next query runs
