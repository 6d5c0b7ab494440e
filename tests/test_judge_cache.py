"""The judge cache when its file fails: not a database, a damaged page, read-only, a full disk, a lock.

Each case uses a real file in that state and a real run against the stub judge: the run either stops
before any call with one message saying how to move the file aside, or goes on with one warning.
"""
from __future__ import annotations

import hashlib
import logging
import os
import shutil
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from lm_eval_ext.judge import JudgeItem, resolve_config
from lm_eval_ext.judge.cache import JudgeCache, request_key
from lm_eval_ext.judge.errors import JudgeCacheError
from lm_eval_ext.judge.runner import Judge

from doubles.stub_openai import StubOpenAIServer

KEY_ENV = "LMX_TEST_JUDGE_KEY"
PAGE = 4096


@pytest.fixture(autouse=True)
def _judge_key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, "sk-test-cache")


def config(srv, cache: Path, **options):
    return resolve_config(explicit={"base_url": srv.base_url, "api_key_env": KEY_ENV, "model": "stub-judge",
                                    "cache": str(cache), **options}, environ={})


def items(n: int) -> list[JudgeItem]:
    # long responses, so that the cache spans many pages
    return [JudgeItem(f"question {i}?", f"r{i} " + "padding " * 60, f"reference {i}") for i in range(n)]


def score(request: dict) -> str:
    prompt = request["messages"][-1]["content"]
    index = int(prompt.split("### Response to evaluate:\n")[1].split(" ")[0][1:])
    return f"Feedback: {'words ' * 80}\\boxed{{{index % 10 + 1}}}"


EXPECTED = [float(i % 10 + 1) for i in range(200)]


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING and r.name.endswith("judge.cache")]


def _fill(srv: StubOpenAIServer, cache: Path, n: int) -> None:
    """Judge the first n items into the cache (the key names the endpoint: rerun against the same server)."""
    judge = Judge(config(srv, cache), progress=False)
    assert [r.score for r in judge.run(items(n))] == EXPECTED[:n]
    judge.close()
    assert not Path(f"{cache}-wal").exists()  # closed cleanly: everything is in the main file


def test_a_file_that_is_not_a_cache_stops_before_any_call(tmp_path):
    cache = tmp_path / "judge_cache.sqlite"
    cache.write_bytes(b"this is not an SQLite database " * 200)
    before = _sha256(cache)
    with StubOpenAIServer(responder=score) as srv:
        with pytest.raises(JudgeCacheError) as err:
            Judge(config(srv, cache), progress=False).run(items(3))
        assert srv.call_count == 0
    message = str(err.value)
    assert "\n" not in message and f"The judge cache {cache} cannot be read: file is not a database." in message
    assert f"for f in {cache} {cache}-wal {cache}-shm; do if [ -e \"$f\" ]; then mv \"$f\" \"$f.broken\"; fi; done" in message
    # no command with --judge-* flags runs here: the advice is the harness's --metadata, in its JSON form
    assert """--metadata '{"judge_cache": "PATH"}', or --metadata '{"judge_cache": "none"}'""" in message
    assert _sha256(cache) == before


def test_the_move_aside_command_works(tmp_path):
    cache = tmp_path / "dir with space" / "judge_cache.sqlite"
    cache.parent.mkdir()
    cache.write_bytes(b"x" * PAGE)
    with StubOpenAIServer(responder=score) as srv:
        with pytest.raises(JudgeCacheError) as err:
            Judge(config(srv, cache), progress=False)
        command = str(err.value).split("aside (a new cache starts in its place; the replies it held will be "
                                       "asked for again): ")[1].split(" -- or ")[0]
        subprocess.run(["sh", "-c", command], check=True)
        assert sorted(p.name for p in cache.parent.iterdir()) == ["judge_cache.sqlite.broken"]
        judge = Judge(config(srv, cache), progress=False)
        assert [r.score for r in judge.run(items(2))] == EXPECTED[:2]


def _damage_second_half(cache: Path) -> None:
    """Garbage after the headers of the second half of the pages, where their cell pointers are."""
    pages = cache.stat().st_size // PAGE
    assert pages > 20
    with open(cache, "r+b") as handle:
        for page in range(pages // 2, pages):
            handle.seek(page * PAGE + 8)
            handle.write(b"\xde\xad\xbe\xef" * 64)


def test_a_damaged_page_is_an_error_never_a_silent_miss(tmp_path, caplog):
    # SQLite reads a cell pointer masked to the page unless it checks cells: a lookup through a damaged page could
    # then find nothing without an error (it does for these keys), and the run would pay for replies the file holds
    cache = tmp_path / "judge_cache.sqlite"
    keys = [request_key("http://127.0.0.1:3/v1/chat/completions", {"item": i}) for i in range(100)]
    replies = [f"Feedback: {'words ' * 80}\\boxed{{{i % 10 + 1}}}" for i in range(100)]
    store = JudgeCache(cache)
    for key, reply in zip(keys, replies):
        store.put(key, reply, "stub-judge")
    store.close()
    _damage_second_half(cache)
    store = JudgeCache(cache)
    found = []
    for key in keys:
        reply = store.get(key)
        if store.problem is not None:
            break
        found.append(reply)
    assert found == replies[:len(found)]  # each lookup before the damage was met found its reply
    assert store.problem == "not used: database disk image is malformed" and len(_warnings(caplog)) == 1
    assert [store.get(key) for key in keys] == [None] * 100  # the cache is off for the rest of the run


def test_a_damaged_page_turns_the_cache_off_with_one_warning(tmp_path, caplog):
    cache = tmp_path / "judge_cache.sqlite"
    with StubOpenAIServer(responder=score) as srv:
        _fill(srv, cache, 100)
        _damage_second_half(cache)
        with sqlite3.connect(cache) as db, pytest.raises(sqlite3.DatabaseError, match="malformed"):
            db.execute("SELECT * FROM judge_replies").fetchall()  # really damaged
        calls = srv.call_count
        judge = Judge(config(srv, cache), progress=False)
        results = judge.run(items(100))
        judge.close()
        calls = srv.call_count - calls
    assert [r.score for r in results] == EXPECTED[:100]  # every item judged, correctly
    # lookups stopped at the first damaged page met (which one depends on the keys, which name the port)
    assert judge.stats.from_cache < 100 and calls == 100 - judge.stats.from_cache
    assert judge.stats.to_dict()["cache_problem"] == "not used: database disk image is malformed"
    (warning,) = _warnings(caplog)
    assert f"The judge cache {cache} failed while being read (database disk image is malformed)" in warning
    assert "the run goes on without it" in warning and 'mv "$f" "$f.broken"' in warning


def _make_read_only(path: Path) -> None:
    os.chmod(path, 0o444)
    if os.geteuid() == 0:  # file modes do not bind root: make the file immutable instead
        done = subprocess.run(["chattr", "+i", str(path)], capture_output=True) if shutil.which("chattr") else None
        if done is None or done.returncode != 0:
            pytest.skip("running as root without chattr: cannot make a read-only file")


def _make_writable(path: Path) -> None:
    if os.geteuid() == 0:
        subprocess.run(["chattr", "-i", str(path)], capture_output=True)
    os.chmod(path, 0o644)


def test_a_read_only_cache_is_replayed_and_not_written_with_one_warning(tmp_path, caplog):
    cache = tmp_path / "judge_cache.sqlite"
    with StubOpenAIServer(responder=score) as srv:
        _fill(srv, cache, 10)
        _make_read_only(cache)
        try:
            with pytest.raises(OSError):
                open(cache, "r+b")  # really read-only
            before = _sha256(cache)
            judge = Judge(config(srv, cache), progress=False)
            results = judge.run(items(20))
            judge.close()
            assert srv.call_count == 10 + 10  # the first 10 came from the cache
        finally:
            _make_writable(cache)
    assert [r.score for r in results] == EXPECTED[:20] and judge.stats.from_cache == 10
    assert _sha256(cache) == before
    (warning,) = _warnings(caplog)
    assert f"The judge cache {cache} cannot be written (attempt to write a readonly database)" in warning
    assert judge.stats.to_dict()["cache_problem"] == "not written: attempt to write a readonly database"


_FULL_DISK_RUN = textwrap.dedent("""
    import logging, resource, signal, sys
    from lm_eval_ext.judge import JudgeItem, resolve_config
    from lm_eval_ext.judge.runner import Judge
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    config = resolve_config(explicit={"base_url": sys.argv[1], "cache": sys.argv[2], "api_key_env": "LMX_TEST_JUDGE_KEY",
                                      "model": "stub-judge", "concurrency": 4})
    judge = Judge(config, progress=False)
    # no file may grow from here on: as when the disk is full
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, resource.RLIM_INFINITY))
    results = judge.run([JudgeItem(f"question {i}?", f"r{i} x", f"reference {i}") for i in range(30)])
    judge.close()
    print([r.score for r in results], judge.stats.to_dict()["cache_problem"])
""")


@pytest.mark.skipif(sys.platform == "win32", reason="needs RLIMIT_FSIZE")
def test_a_full_disk_stops_storing_with_one_warning(tmp_path):
    cache = tmp_path / "judge_cache.sqlite"
    env = {**os.environ, KEY_ENV: "sk-test-cache", "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    with StubOpenAIServer(responder=lambda request: "\\boxed{7}") as srv:
        done = subprocess.run([sys.executable, "-c", _FULL_DISK_RUN, srv.base_url, str(cache)], env=env,
                              capture_output=True, text=True, timeout=120)
        assert srv.call_count == 30
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(str([7.0] * 30))
    warnings = [line for line in done.stderr.splitlines() if line.startswith("WARNING lm_eval_ext.judge.cache")]
    assert len(warnings) == 1 and f"The judge cache {cache} cannot be written (" in warnings[0], done.stderr
    assert "Traceback" not in done.stderr


def test_a_lock_held_too_long_stops_storing_with_one_warning(tmp_path, caplog, monkeypatch):
    import lm_eval_ext.judge.cache as cache_module

    monkeypatch.setattr(cache_module, "BUSY_TIMEOUT", 0.1)
    cache = tmp_path / "judge_cache.sqlite"
    with StubOpenAIServer(responder=score) as srv:
        _fill(srv, cache, 5)
        other = sqlite3.connect(cache, isolation_level=None)
        other.execute("BEGIN EXCLUSIVE")  # another process writing, and not letting go
        try:
            judge = Judge(config(srv, cache, concurrency=4), progress=False)
            results = judge.run(items(12))
            judge.close()
            assert srv.call_count == 5 + 7
        finally:
            other.rollback()
            other.close()
    assert [r.score for r in results] == EXPECTED[:12] and judge.stats.from_cache == 5
    (warning,) = _warnings(caplog)
    assert f"The judge cache {cache} cannot be written (database is locked)" in warning
