"""The SQL sandbox against hostile queries: nothing changes on disk, nothing runs past its bound, the run ends.

The hostile corpus runs against a writable copy of every database in the mirror (so that
only the sandbox, not file permissions, stands between a query and the file), and the
mirror's own files are checked too.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import signal
import sqlite3
import threading
import time
from pathlib import Path

import pytest

from lm_eval_ext.sql import Limits, SandboxPool, connect_readonly, run_query
from lm_eval_ext.sql.readonly import DENIED_FUNCTIONS

TIME_BOUND = 0.25  # seconds: each time hog runs until it, so it sets the test's length


def hostile_corpus(table: str, tmp: Path) -> tuple[list[str], list[str]]:
    """Queries a model might write to do harm (``table``: a real table of the database).

    (must_fail, resource_hogs): the first must all fail; the second may succeed if they stay
    within the bounds, and must end within them.
    """
    t = f'"{table}"'
    recursive = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 100000) "
    must_fail = [
        # writes and schema changes
        f"DROP TABLE {t}",
        f"DELETE FROM {t}",
        f"UPDATE {t} SET rowid = rowid + 1",
        f"INSERT INTO {t} DEFAULT VALUES",
        f"INSERT INTO {t} SELECT * FROM {t}",
        f"REPLACE INTO {t} SELECT * FROM {t}",
        f"WITH x AS (SELECT 1) DELETE FROM {t}",
        "CREATE TABLE evil (x)",
        "CREATE TEMP TABLE evil (x)",
        f"CREATE INDEX evil_index ON {t} (rowid)",
        "CREATE VIEW evil AS SELECT 1",
        f"CREATE TRIGGER evil AFTER INSERT ON {t} BEGIN SELECT 1; END",
        f"ALTER TABLE {t} RENAME TO evil",
        "UPDATE sqlite_master SET sql = 'CREATE TABLE x (y)'",
        f"SELECT 1; DROP TABLE {t}",
        f"SELECT 1 FROM {t} LIMIT 1; DELETE FROM {t}",
        # other databases, files and extensions
        f"ATTACH DATABASE '{tmp / 'attached.db'}' AS evil",
        "ATTACH DATABASE ':memory:' AS mem",
        "DETACH DATABASE main",
        f"VACUUM INTO '{tmp / 'vacuumed.db'}'",
        "VACUUM",
        "SELECT load_extension('/tmp/evil.so')",
        "SELECT load_extension('libsqlite3_evil', 'sqlite3_extension_init')",
        f"SELECT writefile('{tmp / 'written.txt'}', 'x')",
        "PRAGMA writable_schema = ON",
        "PRAGMA query_only = OFF",
        "PRAGMA journal_mode = WAL",
        "PRAGMA user_version = 42",
        "PRAGMA temp_store_directory = '/tmp'",
        f"SELECT * FROM pragma_table_info('{table}')",
        "REINDEX",
        "ANALYZE",
        "BEGIN IMMEDIATE",
        "SAVEPOINT evil",
    ]
    resource_hogs = [
        # time
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c",
        f"SELECT count(*) FROM {t} AS a, {t} AS b, {t} AS c, {t} AS d, {t} AS e, {t} AS f",
        # rows and memory
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x FROM c) SELECT x FROM c",
        recursive + "SELECT hex(randomblob(1000)) FROM n",
        recursive + "SELECT group_concat(hex(randomblob(1000))) FROM n",
        "SELECT length(printf('%.*c', 2000000000, 'x'))",
        "SELECT zeroblob(2000000000)",
        "SELECT randomblob(1000000000)",
        "SELECT replace(hex(zeroblob(4000000)), '00', 'aaaa')",
        "SELECT '" + "x" * 3_000_000 + "'",
        # deep nesting
        "SELECT " + "(" * 5000 + "1" + ")" * 5000,
        "SELECT " + "1 + " * 100_000 + "1",
        "SELECT " + " ".join(["abs("] * 2000) + "1" + ")" * 2000,
        "SELECT 1 " + "UNION ALL SELECT 1 " * 1000,
    ]
    return must_fail, resource_hogs


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _first_table(db: Path) -> str:
    conn = connect_readonly(db)
    try:
        return conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY rowid LIMIT 1").fetchone()[0]
    finally:
        conn.close()


@pytest.mark.slow  # every hostile query on every database of the mirror (~14 s on 2 cores): not the inner loop
def test_hostile_corpus_against_every_database(data_dir, tmp_path):
    mirror = sorted((data_dir / "spider" / "database").glob("*/*.sqlite"))
    assert len(mirror) >= 50
    mirror_hashes = {db: _sha256(db) for db in mirror}
    copies = tmp_path / "databases"
    for db in mirror:
        (copies / db.parent.name).mkdir(parents=True)
        shutil.copy(db, copies / db.parent.name / db.name)
        os.chmod(copies / db.parent.name / db.name, 0o666)  # writable: only the sandbox protects it
    databases = sorted(copies.glob("*/*.sqlite"))
    before = {db: _sha256(db) for db in databases}
    files_before = sorted(p.name for p in copies.rglob("*"))

    queries, origins, must_fail = [], [], []
    for db in databases:
        harmful, hogs = hostile_corpus(_first_table(db), tmp_path)
        assert len(harmful) + len(hogs) >= 40
        queries += [(str(db), sql) for sql in harmful + hogs]
        origins += [(db.parent.name, sql[:60]) for sql in harmful + hogs]
        must_fail += [True] * len(harmful) + [False] * len(hogs)

    started = time.monotonic()
    # more workers than cores: the bound is wall-clock time, and most hostile queries just wait it out
    limits = Limits(timeout=TIME_BOUND, max_rows=10_000, max_bytes=8 * 2**20)
    with SandboxPool(workers=12, limits=limits, grace=0.5) as pool:
        results = pool.run(queries)
        # the pool still works afterwards
        assert pool.run([(str(databases[0]), "SELECT 1")])[0].rows == [(1,)]
    elapsed = time.monotonic() - started

    assert len(results) == len(queries) and all(r is not None for r in results)
    # every write, attach, pragma change, extension load and file access failed
    succeeded = [o for o, r, fail in zip(origins, results, must_fail) if fail and r.ok]
    assert not succeeded, succeeded[:5]
    assert {db: _sha256(db) for db in databases} == before
    assert sorted(p.name for p in copies.rglob("*")) == files_before  # no journal, WAL or other new file
    for name in ("attached.db", "vacuumed.db", "written.txt"):
        assert not (tmp_path / name).exists()
    assert {db: _sha256(db) for db in mirror} == mirror_hashes
    # the never-ending ones were stopped, and reported as stopped
    stopped = [r for o, r in zip(origins, results) if o[1].startswith("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1")]
    assert len(stopped) == len(databases) and all(r.timed_out and not r.ok for r in stopped)
    print(f"{len(queries)} hostile queries on {len(databases)} databases in {elapsed:.1f} s")


@pytest.fixture
def small_db(data_dir) -> Path:
    return data_dir / "spider" / "database" / "voter_2" / "voter_2.sqlite"


def test_reads_work_and_stdev_is_the_sample_standard_deviation(small_db):
    conn = connect_readonly(small_db)
    # sample standard deviation of 2, 4, 4, 4, 5, 5, 7, 9: mean 5, squared deviations sum 32, 32 / 7
    values = "SELECT 2 AS v UNION ALL SELECT 4 UNION ALL SELECT 4 UNION ALL SELECT 4 UNION ALL SELECT 5 " \
             "UNION ALL SELECT 5 UNION ALL SELECT 7 UNION ALL SELECT 9"
    result = run_query(conn, f"SELECT stdev(v) FROM ({values})")
    assert result.ok and result.rows[0][0] == pytest.approx((32 / 7) ** 0.5, rel=1e-12)
    assert run_query(conn, "SELECT stdev(v) FROM (SELECT 3 AS v)").rows == [(None,)]
    assert run_query(conn, "SELECT count(*) FROM student").rows == [(34,)]


def test_row_limit_is_an_execution_error(small_db):
    conn = connect_readonly(small_db, Limits(max_rows=10))
    assert run_query(conn, "SELECT * FROM student LIMIT 10", Limits(max_rows=10)).ok
    result = run_query(conn, "SELECT * FROM student LIMIT 11", Limits(max_rows=10))
    assert not result.ok and "more than 10 rows" in result.error


def test_a_killed_worker_costs_one_query_not_the_run(small_db, capsys):
    never_ends = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c"
    with SandboxPool(workers=1, limits=Limits(timeout=30.0)) as pool:
        pool.run([(str(small_db), "SELECT 1")])
        (pid,) = pool.worker_pids()
        threading.Timer(0.5, os.kill, (pid, signal.SIGKILL)).start()
        results = pool.run([(str(small_db), never_ends), (str(small_db), "SELECT count(*) FROM student")],
                           progress="SQL t")
        assert not results[0].ok and "died" in results[0].error
        assert results[1].ok and results[1].rows == [(34,)]
        assert pool.replaced == 1 and pool.worker_pids() != [pid]
    assert "SQL t: 100%" in capsys.readouterr().err  # the failed query counted too


def test_a_labelled_run_shows_a_progress_bar_over_every_query(small_db, capsys):
    """Queries answered, refused before sending (too long) and run after them all count; a run without a label
    draws nothing (the gold queries when a task is loaded)."""
    with SandboxPool(workers=1, limits=Limits(max_sql_bytes=100)) as pool:
        results = pool.run([(str(small_db), "SELECT 1"), (str(small_db), "SELECT '" + "x" * 200 + "'"),
                            (str(small_db), "SELECT 2")], progress="SQL t")
        assert [result.ok for result in results] == [True, False, True]
        assert "SQL t: 100%" in capsys.readouterr().err
        pool.run([(str(small_db), "SELECT 3")])
        assert capsys.readouterr().err == ""


def test_watchdog_stops_a_query_the_progress_handler_misses(small_db):
    # With the in-process time check disabled, only the parent's watchdog can stop the query.
    limits = Limits(timeout=0.5, check_every=2**30)
    never_ends = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c"
    with SandboxPool(workers=1, limits=limits, grace=0.5) as pool:
        started = time.monotonic()
        results = pool.run([(str(small_db), never_ends), (str(small_db), "SELECT 2")])
        assert time.monotonic() - started < 3
        assert results[0].timed_out and "watchdog" in results[0].error
        assert results[1].rows == [(2,)] and pool.replaced == 1


def _write_after_confining(path: str, queue) -> None:
    from lm_eval_ext.sql.worker import _confine

    _confine()
    try:
        with open(path, "w") as handle:
            handle.write("x" * 10)
        queue.put("written")
    except OSError as err:
        queue.put(f"refused: {err}")


def test_sandbox_layers_each_refuse_writes(tmp_path, small_db):
    """The keyword check, the authorizer, and the worker's file-size limit each stop a write on their own."""
    import multiprocessing

    writable = tmp_path / "copy.sqlite"
    shutil.copy(small_db, writable)
    before = _sha256(writable)
    conn = connect_readonly(writable)
    assert "not a query" in run_query(conn, "DELETE FROM student").error
    # a WITH statement passes the keyword check; the authorizer refuses the DELETE
    assert "not authorized" in run_query(conn, "WITH x AS (SELECT 1) DELETE FROM student").error
    conn.close()
    assert _sha256(writable) == before
    # without the sandbox layers, the same copy is writable (so the checks above are not vacuous)
    plain = sqlite3.connect(writable)
    plain.execute("DELETE FROM student")
    plain.commit()
    plain.close()
    assert _sha256(writable) != before
    if os.name != "posix":
        return
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    child = ctx.Process(target=_write_after_confining, args=(str(tmp_path / "out.txt"), queue))
    child.start()
    child.join(60)
    assert queue.get(timeout=5).startswith("refused")
    assert not (tmp_path / "out.txt").exists() or (tmp_path / "out.txt").stat().st_size == 0


# Functions with an effect outside the query or that hand out memory addresses: each must be refused.
# (readfile, writefile, edit, fsdir are the sqlite3 shell's file functions: refused if a build has them.)
HOST_OR_ADDRESS_CALLS = {
    "load_extension": "SELECT load_extension('/tmp/evil.so')",  # loads and runs native code
    "fts3_tokenizer": "SELECT hex(fts3_tokenizer('simple'))",  # returns a pointer; with 2 args, takes one
    "fts5": "SELECT fts5(NULL)",  # hands out a pointer to the FTS5 API
    "rtreenode": "SELECT rtreenode(2, zeroblob(100))",  # debugging decoders of raw R*Tree pages
    "rtreedepth": "SELECT rtreedepth(zeroblob(100))",
    "rtreecheck": "SELECT rtreecheck('x')",
    "sqlite_log": "SELECT sqlite_log(1, 'message')",  # writes to the host's error log
    "readfile": "SELECT readfile('/etc/hostname')",
    "writefile": "SELECT writefile('{tmp}/written.txt', 'x')",
    "edit": "SELECT edit('x', 'vi')",  # runs an editor
    "fsdir": "SELECT name FROM fsdir('/')",
}
# Every other function of SQLite, reviewed: computes on its arguments and the database only.
REVIEWED_PURE = {
    "->", "->>", "abs", "acos", "acosh", "asin", "asinh", "atan", "atan2", "atanh", "avg", "bm25", "ceil",
    "ceiling", "changes", "char", "coalesce", "concat", "concat_ws", "cos", "cosh", "count", "cume_dist",
    "current_date", "current_time", "current_timestamp", "date", "datetime", "degrees", "dense_rank", "exp",
    "first_value", "floor", "format", "fts5_source_id", "glob", "group_concat", "hex", "highlight", "ifnull",
    "iif", "instr", "julianday", "lag", "last_insert_rowid", "last_value", "lead", "length", "like",
    "likelihood", "likely", "ln", "log", "log10", "log2", "lower", "ltrim", "match", "matchinfo", "max", "min",
    "mod", "nth_value", "ntile", "nullif", "octet_length", "offsets", "optimize", "percent_rank", "pi", "pow",
    "power", "printf", "quote", "radians", "random", "randomblob", "rank", "replace", "round", "row_number",
    "rtrim", "sign", "sin", "sinh", "snippet", "soundex", "sqlite_compileoption_get",
    "sqlite_compileoption_used", "sqlite_source_id", "sqlite_version", "sqrt", "stdev", "strftime",
    "string_agg", "substr", "substring", "subtype", "sum", "tan", "tanh", "time", "timediff", "total",
    "total_changes", "trim", "trunc", "typeof", "unhex", "unicode", "unixepoch", "unlikely", "upper", "zeroblob",
}


def test_functions_that_touch_the_host_or_leak_addresses_are_refused(data_dir, tmp_path, small_db):
    """Every function SQLite offers is either reviewed as pure or refused by the sandbox."""
    plain = sqlite3.connect(":memory:")
    available = {name for (name, *_rest) in plain.execute("PRAGMA function_list")}
    plain.close()
    unreviewed = sorted(name for name in available - REVIEWED_PURE - set(HOST_OR_ADDRESS_CALLS)
                        if not name.startswith("json"))  # the JSON functions compute on their arguments
    assert not unreviewed, (f"this SQLite offers functions nobody has reviewed: {unreviewed}; add each to the "
                            "sandbox's denied functions (lm_eval_ext/sql/readonly.py) and the list above, or to "
                            "REVIEWED_PURE")
    assert {"load_extension", "fts3_tokenizer"} <= available  # this build has the two that matter most
    assert DENIED_FUNCTIONS == set(HOST_OR_ADDRESS_CALLS)  # and nothing reviewed as pure is refused

    writable = tmp_path / "copy.sqlite"
    shutil.copy(small_db, writable)
    databases = [writable, small_db]
    before = {db: _sha256(db) for db in databases}
    for db in databases:
        conn = connect_readonly(db)
        for name, sql in HOST_OR_ADDRESS_CALLS.items():
            result = run_query(conn, sql.format(tmp=tmp_path))
            assert not result.ok, (name, result.rows)
            if name in available:  # refused by the sandbox, not merely missing
                assert result.error == f"OperationalError: not authorized to use function: {name}", name
        assert run_query(conn, "SELECT abs(-2), json_extract('[5]', '$[0]')").rows == [(2, 5)]  # others work
        conn.close()
    assert {db: _sha256(db) for db in databases} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["copy.sqlite"]


_N_ROWS = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 20000) "


def test_empty_strings_and_small_values_count_toward_the_byte_bound(small_db):
    """20,000 rows of '' or of a small integer take over 1 MB as Python objects: over a 1 MB bound."""
    limits = Limits(max_bytes=2**20)
    conn = connect_readonly(small_db, limits)
    for sql in (_N_ROWS + "SELECT '' FROM n", _N_ROWS + "SELECT 1 FROM n", _N_ROWS + "SELECT '', '', '' FROM n LIMIT 5000"):
        result = run_query(conn, sql, limits)
        assert not result.ok and result.error == f"result larger than {2**20} bytes", sql
    assert run_query(conn, _N_ROWS + "SELECT '' FROM n LIMIT 5000", limits).ok  # 5,000 rows: about 0.5 MB
    assert len(run_query(conn, "SELECT * FROM student", limits).rows) == 34


def test_the_worker_compares_and_only_the_verdict_reaches_the_parent(small_db):
    """With gold rows to compare against, a reply carries no rows; its verdict is the comparison's, both rules."""
    from lm_eval_ext.sql import Against, authors_match, testsuite_match

    gold = [(1, "a"), (2, "b")]
    predictions = {  # SQL giving the rows on the right
        "SELECT 1, 'a' UNION ALL SELECT 2, 'b'": [(1, "a"), (2, "b")],
        "SELECT 'a', 1 UNION ALL SELECT 'b', 2": [("a", 1), ("b", 2)],
        "SELECT 2, 'b' UNION ALL SELECT 1, 'a'": [(2, "b"), (1, "a")],
        "SELECT 1.0, 'a' UNION ALL SELECT 2.0, 'b'": [(1.0, "a"), (2.0, "b")],
        "SELECT 1, 'a', 'a' UNION ALL SELECT 2, 'b', 'b'": [(1, "a", "a"), (2, "b", "b")],
        "SELECT 1.00000000001, 'a' UNION ALL SELECT 2, 'b'": [(1.00000000001, "a"), (2, "b")],
        "SELECT 1, 'a'": [(1, "a")],
        _N_ROWS + "SELECT hex(zeroblob(1000)), '' FROM n": None,  # big: stays in the worker
    }
    cases = [(sql, rule, ordered) for sql in predictions for rule, ordered in
             (("authors", False), ("testsuite", False), ("testsuite", True))]
    with SandboxPool(workers=2) as pool:
        results = pool.run([(str(small_db), sql, Against(gold, rule, ordered)) for sql, rule, ordered in cases])
        plain = pool.run([(str(small_db), sql) for sql in predictions])
    assert [r.rows for r in plain[:-1]] == list(predictions.values())[:-1]  # the SQL gives those rows
    assert len(plain[-1].rows) == 20000
    for (sql, rule, ordered), result in zip(cases, results):
        rows = predictions[sql] or plain[-1].rows
        expected = authors_match(rows, gold) if rule == "authors" else testsuite_match(rows, gold, ordered=ordered)
        assert result.ok and result.rows is None and result.match is expected, (sql, rule, ordered)
    assert {r.match for r in results} == {True, False}  # both outcomes occur


def test_long_error_messages_are_cut_in_the_worker(small_db):
    name = "x" * 5000
    with SandboxPool(workers=1) as pool:
        (result,) = pool.run([(str(small_db), f"SELECT {name} FROM student")])
    assert result.error == f"OperationalError: no such column: {name}"[:500] + " [cut]"
