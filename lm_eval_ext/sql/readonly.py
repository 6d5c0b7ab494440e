"""A read-only SQLite connection for untrusted queries, and running one query on it within limits.

Layers, each enough on its own to stop a write: the file is opened with the URI
``mode=ro`` (and ``immutable=1``: SQLite then creates no journal, WAL or lock file);
``PRAGMA query_only=ON``; an authorizer that allows reading and nothing else (no
INSERT/UPDATE/DELETE/DDL, ATTACH, PRAGMA, transactions, VACUUM, and none of the
:data:`DENIED_FUNCTIONS`: ``load_extension``, ``fts3_tokenizer`` and the others that reach
outside the query or handle memory addresses);
``SQLITE_LIMIT_ATTACHED`` = 0. Temporary storage stays in memory, so a large sort
writes no temp file either. Work is bounded by a progress handler that counts SQLite's
virtual-machine instructions (the same count for the same query and database on any machine,
busy or idle), with a generous wall-clock backstop; rows and bytes fetched are bounded while
fetching.
"""
from __future__ import annotations

import math
import re
import sqlite3
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote


@dataclass(frozen=True)
class Limits:
    """Bounds on one query.

    ``budget``: SQLite virtual-machine instructions one query may execute, fetching included
    (counted by the progress handler every ``check_every`` instructions): the bound that decides,
    the same on a busy machine as on an idle one. ``timeout``: a wall-clock backstop, seconds from
    the start of execution to the last row fetched, far above what the budget takes under normal
    load (it catches what the instruction count cannot see, such as a slow disk).
    ``max_rows``: a result with more rows is an error (the comparison could not use
    it anyway: a gold result is never larger). ``max_bytes``: the memory the fetched rows
    take as Python objects (``sys.getsizeof`` of each row and of each value in it, so that an
    empty string or a small integer costs what it really does). ``max_value_bytes``: the largest string or blob SQLite may build
    (``SQLITE_LIMIT_LENGTH``). ``max_sql_bytes``: the longest query text accepted (a gold query
    is under 1 kB, a generation of 128 tokens far under the limit). ``heap_bytes``: SQLite's
    heap limit per process.
    """

    # about 5 s of one core; the costliest gold query of MAGNIFICo needs about 1.1 million
    budget: int = 200_000_000
    timeout: float = 60.0
    max_rows: int = 100_000
    max_bytes: int = 64 * 2**20
    max_value_bytes: int = 8 * 2**20
    max_sql_bytes: int = 64 * 2**10
    heap_bytes: int = 512 * 2**20
    # VM instructions between two calls of the progress handler (budget and clock checks)
    check_every: int = 1000


@dataclass(frozen=True)
class QueryResult:
    """The outcome of one query: rows on success, else the error message.

    ``out_of_budget``: stopped by the instruction budget; ``timed_out``: stopped by the wall-clock
    backstop. ``seconds``: execution and fetching, measured where the query ran; ``wall``: from the
    moment the query became its worker's current job to its reply, measured by the pool
    (None outside a pool). ``match``: when the pool compared the rows with gold rows in its
    worker (:class:`~lm_eval_ext.sql.compare.Against`), whether they are equal; ``rows`` is
    then None, so that no result of a query crosses to the parent process.
    """

    ok: bool
    rows: list[tuple] | None = None
    error: str | None = None
    seconds: float = 0.0
    timed_out: bool = False
    wall: float | None = None
    out_of_budget: bool = False
    match: bool | None = None


class Stdev:
    """``stdev(x)``: sample standard deviation (n - 1 denominator), NULLs skipped; NULL below 2 values.

    The aggregate MAGNIFICo's code registers (Welford's running update, as the authors'
    ``StdevFunc``); the ``outlier_range`` gold queries use it.
    """

    def __init__(self) -> None:
        self.n = 0
        self.mean = 0.0
        self.m2 = 0.0

    def step(self, value) -> None:
        if value is None:
            return
        self.n += 1
        delta = value - self.mean
        self.mean += delta / self.n
        self.m2 += delta * (value - self.mean)

    def finalize(self):
        if self.n < 2:
            return None
        return math.sqrt(self.m2 / (self.n - 1))


_READ_ACTIONS = frozenset({sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_RECURSIVE})
# Functions with effects outside the query, or that hand out or take memory addresses; everything
# else SQLite offers computes on its arguments and the database (tests/test_sql_sandbox.py reviews
# the whole list). load_extension runs native code; fts3_tokenizer returns a pointer into the SQLite
# library (and, given one, calls it); fts5 hands out a pointer to its API; rtreenode/rtreedepth/
# rtreecheck decode raw R*Tree pages (debugging aids, with a past out-of-bounds read); sqlite_log
# writes to the host's error log; readfile/writefile/edit/fsdir are the sqlite3 shell's file
# functions, refused should a build carry them.
DENIED_FUNCTIONS = frozenset({
    "load_extension", "fts3_tokenizer", "fts5", "rtreenode", "rtreedepth", "rtreecheck", "sqlite_log",
    "readfile", "writefile", "edit", "fsdir",
})


def _authorizer(action: int, arg1, arg2, db_name, trigger) -> int:
    if action in _READ_ACTIONS:
        return sqlite3.SQLITE_OK
    if action == sqlite3.SQLITE_FUNCTION:
        return sqlite3.SQLITE_DENY if (arg2 or "").lower() in DENIED_FUNCTIONS else sqlite3.SQLITE_OK
    return sqlite3.SQLITE_DENY


def database_uri(path: str | Path, immutable: bool = True) -> str:
    """The read-only URI of a database file (``immutable`` when nothing writes it during the run)."""
    uri = f"file:{quote(str(Path(path).resolve()))}?mode=ro"
    return uri + "&immutable=1" if immutable else uri


def connect_readonly(path: str | Path, limits: Limits = Limits(), immutable: bool = True) -> sqlite3.Connection:
    """Open ``path`` so that no statement run on the connection can change any file.

    Raises ``sqlite3.OperationalError`` when the file cannot be opened.
    """
    path = Path(path)
    if not path.is_file():
        # mode=ro never creates a file, but say plainly what is missing
        raise sqlite3.OperationalError(f"unable to open database file {path}")
    conn = sqlite3.connect(database_uri(path, immutable), uri=True, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA query_only = ON")
    conn.execute("PRAGMA temp_store = MEMORY")
    conn.execute(f"PRAGMA hard_heap_limit = {int(limits.heap_bytes)}")
    conn.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
    conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, limits.max_value_bytes)
    conn.setlimit(sqlite3.SQLITE_LIMIT_SQL_LENGTH, limits.max_sql_bytes)
    conn.create_aggregate("stdev", 1, Stdev)
    conn.set_authorizer(_authorizer)
    return conn


# Leading blanks, comments and opening parentheses, then the statement's first keyword.
_FIRST_KEYWORD = re.compile(r"(?:\s+|--[^\n]*(?:\n|$)|/\*.*?(?:\*/|$)|\()*([A-Za-z]*)", re.S)
QUERY_KEYWORDS = frozenset({"SELECT", "WITH", "VALUES"})


def is_query(sql: str) -> bool:
    """Whether the statement starts like a query (SELECT, WITH or VALUES): nothing else is run.

    A first line of defence with a clear message; the authorizer still checks what a
    ``WITH`` statement really does (``WITH x AS (...) DELETE ...`` is refused there).
    """
    return _FIRST_KEYWORD.match(sql).group(1).upper() in QUERY_KEYWORDS


def _rows_bytes(rows: list[tuple]) -> int:
    """Memory of fetched rows as Python objects (shared objects such as ``''`` counted each time: an upper bound)."""
    return sum(sys.getsizeof(row) + sum(map(sys.getsizeof, row)) for row in rows)


def _stopped(limits: Limits, elapsed: float, out_of_budget: bool) -> QueryResult:
    if out_of_budget:
        return QueryResult(False, error=f"stopped after its budget of {limits.budget} SQLite instructions",
                           seconds=elapsed, out_of_budget=True)
    return QueryResult(False, error=f"stopped by the wall-clock backstop of {limits.timeout:g} s", seconds=elapsed,
                       timed_out=True)


def run_query(conn: sqlite3.Connection, sql: str, limits: Limits = Limits()) -> QueryResult:
    """Execute one statement and fetch its rows within ``limits``; never raises for a bad query."""
    if not is_query(sql):
        return QueryResult(False, error="not a query: only SELECT, WITH and VALUES statements are run")
    started = time.monotonic()
    deadline = started + limits.timeout
    checks = limits.budget // limits.check_every  # handler calls the budget allows
    calls = 0
    stopped = []  # why the handler interrupted the query: True = budget, False = backstop

    def progress() -> int:
        nonlocal calls
        calls += 1
        if calls > checks:
            stopped.append(True)
            return 1
        if time.monotonic() > deadline:
            stopped.append(False)
            return 1
        return 0

    conn.set_progress_handler(progress, limits.check_every)
    try:
        cursor = conn.execute(sql)
        rows: list[tuple] = []
        size = 0
        while batch := cursor.fetchmany(1000):
            rows.extend(batch)
            if len(rows) > limits.max_rows:
                return QueryResult(False, error=f"more than {limits.max_rows} rows", seconds=time.monotonic() - started)
            size += _rows_bytes(batch)
            if size > limits.max_bytes:
                return QueryResult(False, error=f"result larger than {limits.max_bytes} bytes",
                                   seconds=time.monotonic() - started)
            if time.monotonic() > deadline:  # the progress handler sees SQLite's time, not the fetching's
                return _stopped(limits, time.monotonic() - started, out_of_budget=False)
        return QueryResult(True, rows=rows, seconds=time.monotonic() - started)
    except Exception as err:  # noqa: BLE001 -- any failure of an untrusted query is a failed execution
        elapsed = time.monotonic() - started
        if stopped:
            return _stopped(limits, elapsed, out_of_budget=stopped[0])
        return QueryResult(False, error=f"{type(err).__name__}: {err}", seconds=elapsed)
    finally:
        conn.set_progress_handler(None, 0)
