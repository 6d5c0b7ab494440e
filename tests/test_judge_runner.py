"""The judge against a real local OpenAI-compatible server (the stub) through the real HTTP client:
concurrency, retries and faults, failures, cache and resume, dry run, spending cap, secrets."""
from __future__ import annotations

import json
import logging
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from lm_eval_ext.judge import JudgeItem, judge_many
from lm_eval_ext.judge.errors import JudgeBudgetError, JudgeRequestRejected, JudgeUnreachableError
from lm_eval_ext.judge.client import CallBudget, JudgeClient, TransientError, run
from lm_eval_ext.judge.runner import Judge
from doubles.stub_openai import StubOpenAIServer
from helpers.judge import FAKE_KEY, KEY_ENV, config, items, response_of, score_by_index



@pytest.fixture(autouse=True)
def _judge_key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, FAKE_KEY)


def test_request_is_the_papers_and_the_key_is_a_header(tmp_path):
    with StubOpenAIServer(text="ok \\boxed{8}") as srv:
        (result,) = judge_many([JudgeItem(" Q? ", " A. ", " R. ")], config(srv, tmp_path), progress=False)
        (request,) = srv.requests
    assert result.score == 8.0 and result.raw_score == 8 and result.status == "scored"
    body = request["body"]
    assert {k: v for k, v in body.items() if k != "messages"} == {
        "model": "stub-judge", "temperature": 0.6, "top_p": 0.9, "max_tokens": 1024, "seed": 2023}
    assert body["messages"][0] == {"role": "system", "content": "You are a helpful assistant."}
    assert "### Question:\nQ?\n\n### Response to evaluate:\nA.\n\n### Reference answer (score 10):\nR.\n\n" in \
        body["messages"][1]["content"]
    assert request["headers"]["authorization"] == f"Bearer {FAKE_KEY}"
    assert request["path"] == "/v1/chat/completions"


def test_placeholder_key_of_a_local_server_does_not_mangle_replies(tmp_path, monkeypatch):
    """A keyless local server is often given the key "x": redacting it would turn \\boxed{7} into \\bo***ed{7}."""
    monkeypatch.setenv(KEY_ENV, "x")
    with StubOpenAIServer(text="Feedback: exact. \\boxed{7}") as srv:
        (result,) = judge_many([JudgeItem("q", "r", "ref")], config(srv, tmp_path), progress=False)
    assert (result.status, result.score) == ("scored", 7.0)


def test_prometheus_doubles_and_sends_no_system_message(tmp_path):
    with StubOpenAIServer(text="Feedback: good. [RESULT] 4") as srv:
        (result,) = judge_many([JudgeItem("q", "r", "ref")], config(srv, tmp_path, judge="prometheus5"), progress=False)
        messages = srv.requests[0]["body"]["messages"]
    assert (result.raw_score, result.score) == (4, 8.0)
    assert [m["role"] for m in messages] == ["user"]


def test_concurrency_100_items_16_at_a_time(tmp_path):
    # Each call takes 0.2 s at the server, so the 16 workers overlap; the stub counts the requests
    # it handled at once. (Wall-clock figures: bench/judge_throughput.py.)
    with StubOpenAIServer(responder=score_by_index, delay_s=0.2) as srv:
        results = judge_many(items(100), config(srv, tmp_path, concurrency=16), progress=False)
        assert srv.call_count == 100 and srv.max_in_flight == 16
        asked = sorted(response_of(r["body"]) for r in srv.requests)
    assert asked == sorted(f"r{i}" for i in range(100))  # each item asked once
    assert [r.score for r in results] == [float(i % 10 + 1) for i in range(100)]  # results in item order
    with StubOpenAIServer(responder=score_by_index, delay_s=0.05) as srv:
        judge_many(items(10), config(srv, tmp_path / "one", concurrency=1), progress=False)
        assert srv.max_in_flight == 1
        assert [response_of(r["body"]) for r in srv.requests] == [f"r{i}" for i in range(10)]  # in order


def test_a_request_waiting_out_a_backoff_holds_no_slot(tmp_path):
    """One slot, three items: item 0 draws HTTP 500 with `Retry-After: 1`, and while it waits out that second items
    1 and 2 take the slot in turn and are answered; then item 0 is asked again. (Were the slot held through the
    backoff, item 1 would go after the retry, and item 2 after both.) A reply that is no chat completion is asked
    again at once in the same slot: see the test of malformed JSON on every try."""
    with StubOpenAIServer(responder=score_by_index, fault_sequence=["500"], error_retry_after="1") as srv:
        judge = Judge(config(srv, tmp_path, concurrency=1, retries=2), progress=False)
        results = judge.run(items(3))
        assert [(response_of(r["body"]), r["fault"]) for r in srv.requests] == [
            ("r0", "500"), ("r1", None), ("r2", None), ("r0", None)]
        assert srv.max_in_flight == 1
    assert [r.score for r in results] == [1.0, 2.0, 3.0] and judge.stats.retries == {"500": 1}


def test_faults_every_item_scored_or_counted(tmp_path):
    """30% of requests fail (429 with Retry-After, 500, timeouts, dropped connections, garbage)."""
    faults = {"429": 0.06, "500": 0.06, "timeout": 0.06, "drop": 0.06, "garbage": 0.06}
    work = items(90) + items(10, prefix="bad")
    with StubOpenAIServer(responder=score_by_index, faults=faults, seed=3, timeout_s=3.0, retry_after="0.02",
                          error_retry_after="0.02") as srv:
        # 13 tries: that an item draws a fault at every try (0.3^13, for 120 asks) would fail this test once in
        # about 50,000 runs; with 7 tries it was once in 40, more on a loaded machine (a slow reply times out).
        # A deadline of 2 s, above the client's first backoffs (0.5 s, 1 s): with 0.4 s, the 16 requests' slots all
        # waiting out a backoff or a timeout at once made "nothing back for 0.4 s", and the breaker stopped the run
        judge = Judge(config(srv, tmp_path, concurrency=16, timeout=2.0, retries=12), progress=False)
        results = judge.run(work)
        kinds = {r["fault"] for r in srv.requests}
    assert {"429", "500", "timeout", "drop", "nonjson", "noscore"} <= kinds  # every fault really happened
    for i, result in enumerate(results[:90]):
        # a score is always the right one: a fault never turns into a score
        assert result.status == "scored" and result.score == float(i % 10 + 1), (i, result)
    for result in results[90:]:
        assert result.status == "failed" and result.failure == "unparseable" and result.score is None
        assert len(result.judge_outputs) == 3  # asked 1 + 2 times
    stats = judge.stats
    assert stats.scored == 90 and dict(stats.failures) == {"unparseable": 10}
    assert {"429", "500", "timeout", "connection", "malformed"} <= set(stats.retries)
    assert stats.calls == srv.call_count


@pytest.mark.parametrize("body", [
    None,  # the stub's default: a chat completion cut off mid-body
    b"null", b"[]", b'"a string"', b"\xff\xfe not UTF-8", b'{"choices": "none"}',
    b'{"choices": [{"index": 0, "message": {"role": "assistant", "content": 5}}]}',
])
def test_malformed_json_reply_is_retried(tmp_path, body):
    """A 200 reply whose JSON body is broken or not a chat completion is retried like any bad reply."""
    extra = {} if body is None else {"badjson_body": body}
    with StubOpenAIServer(responder=score_by_index, fault_sequence=["badjson"], **extra) as srv:
        judge = Judge(config(srv, tmp_path), progress=False)
        (result,) = judge.run(items(1))
        assert srv.call_count == 2
    assert (result.status, result.score) == ("scored", 1.0)
    assert dict(judge.stats.retries) == {"malformed": 1}


def test_malformed_json_on_every_try_fails_that_item_and_the_run_goes_on(tmp_path):
    # one at a time, so the faults hit item 1's three tries (retries=2) after item 0 was scored
    faults = [None, "badjson", "badjson", "badjson"]
    with StubOpenAIServer(responder=score_by_index, fault_sequence=faults) as srv:
        judge = Judge(config(srv, tmp_path, concurrency=1, retries=2), progress=False)
        results = judge.run(items(5))
        assert srv.call_count == 1 + 3 + 3
    assert [r.status for r in results] == ["scored", "failed", "scored", "scored", "scored"]
    assert results[1].failure == "transport" and "not a chat completion" in results[1].detail
    assert [r.score for r in results if r.scored] == [1.0, 3.0, 4.0, 5.0]
    assert judge.stats.failures == {"transport": 1} and judge.stats.retries == {"malformed": 2}


def _request(text: str = "q") -> dict:
    return {"model": "stub-judge", "messages": [{"role": "user", "content": text}]}


def _complete(srv_or_url, tmp_path, request: dict, budget=None, **options):
    """One request through a new client: (the reply or the exception, the client)."""
    client = JudgeClient(config(srv_or_url, tmp_path, **options), budget=budget or CallBudget(None))

    async def call():
        try:
            return await client.complete(request)
        except Exception as exc:  # handed to the test
            return exc
        finally:
            await client.close()

    return run(call()), client


def test_server_faults_are_retried_by_the_client_and_bad_replies_asked_again_at_once(tmp_path):
    """HTTP 429 (with Retry-After), 500, 503 and a dropped connection are the openai client's retries, with its
    backoff (the stub sees its retry count); a reply that is not a chat completion is asked again at once, as a
    new request (retry count 0: no backoff)."""
    faults = ["drop", "429", "500", "503", "badjson", "empty", "nonjson", None]
    with StubOpenAIServer(text="\\boxed{5}", fault_sequence=faults, retry_after="0.01", error_retry_after="0.01") as srv:
        reply, client = _complete(srv, tmp_path, _request(), retries=10)
        counts = [r["headers"].get("x-stainless-retry-count") for r in srv.requests]
    assert reply == "\\boxed{5}" and len(counts) == len(faults)
    assert counts == ["0", "1", "2", "3", "4", "0", "0", "0"]
    assert dict(client.retries) == {"connection": 1, "429": 1, "500": 1, "503": 1, "malformed": 3}


def test_the_tries_of_a_request_count_every_retry(tmp_path):
    """retries=2: three tries in all, whether the client retried them or the judge asked again."""
    for faults, kind in ((["500", "badjson", "500", None], "500"), (["badjson", "500", "empty", None], "malformed")):
        with StubOpenAIServer(text="\\boxed{5}", fault_sequence=faults, error_retry_after="0.01") as srv:
            error, client = _complete(srv, tmp_path, _request(), retries=2)
            assert srv.call_count == 3
        assert isinstance(error, TransientError) and error.kind == kind


def test_a_probe_is_one_try_with_its_own_timeout(tmp_path):
    """complete(request, timeout=, tries=1): one request, the configured 120 s and 6 retries do not apply."""
    with StubOpenAIServer(fault_sequence=["timeout"], timeout_s=30) as srv:
        client = JudgeClient(config(srv, tmp_path, timeout=120, retries=6), budget=CallBudget(1))

        async def probe_call():
            try:
                with pytest.raises(TransientError, match=r"no reply from 127\.0\.0\.1:\d+ within 0\.3 s") as err:
                    await client.complete(_request(), timeout=0.3, tries=1)
                return err
            finally:
                await client.close()

        err = run(probe_call())
        assert err.value.kind == "timeout" and srv.call_count == 1 and not client.retries
    with StubOpenAIServer(text="ok") as srv:
        client = JudgeClient(config(srv, tmp_path), budget=CallBudget(1))

        async def ok_call():
            try:
                return await client.complete(_request(), timeout=5, tries=1)
            finally:
                await client.close()

        assert run(ok_call()) == "ok" and client.reached


def test_bad_key_stops_the_run_at_once_with_one_message(tmp_path):
    with StubOpenAIServer(fail_status=401) as srv:
        with pytest.raises(JudgeRequestRejected) as err:
            judge_many(items(40), config(srv, tmp_path, concurrency=4), progress=False)
        assert srv.call_count <= 4  # no retry, no new call after the first 401
    message = str(err.value)
    assert "HTTP 401" in message and KEY_ENV in message and FAKE_KEY not in message


def test_other_4xx_fail_the_item_without_retry(tmp_path):
    with StubOpenAIServer(fail_status=400) as srv:
        judge = Judge(config(srv, tmp_path), progress=False)
        results = judge.run(items(5))
        assert srv.call_count == 5
    assert all(r.status == "failed" and r.failure == "rejected" and "HTTP 400" in r.detail for r in results)


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_unreachable_judge_one_error(tmp_path, caplog):
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    judge = Judge(config(url, tmp_path, retries=2, concurrency=8), progress=False)
    with pytest.raises(JudgeUnreachableError, match=r"could not be used: cannot connect to 127\.0\.0\.1"):
        judge.run(items(50))
    # the run stops once an item has used its 3 tries: at most the 8 items in flight were tried, not all 50
    assert 3 <= judge.stats.calls <= 8 * 3
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]  # no flood of per-item messages


def test_a_judge_that_hangs_mid_run_stops_the_run_after_one_items_tries(tmp_path):
    """After 6 replies every request hangs: the run stops once an item has used its tries with no reply
    anywhere meanwhile, instead of failing the remaining items one by one (each after all its tries)."""
    with StubOpenAIServer(responder=score_by_index, fault_sequence=[None] * 6, faults={"timeout": 1.0},
                          timeout_s=30) as srv:
        # the circuit breaker off: this is the per-item rule (test_judge_bounds.py has the breaker)
        judge = Judge(config(srv, tmp_path, concurrency=2, timeout=0.2, retries=1, stop_after_timeouts=0),
                      progress=False)
        with pytest.raises(JudgeUnreachableError) as err:
            judge.run(items(40))
        # 6 answered; then the 4 items in progress (twice the concurrency: an item waiting out the client's backoff
        # leaves its slot to another), and at most one more (an item first tried before the last reply arrived
        # fails alone), 2 tries each: 6 + 5 x 2 at most, where failing every item took 6 + 34 x 2
        assert 6 + 2 <= srv.call_count <= 6 + 5 * 2 and judge.stats.calls == srv.call_count
    message = str(err.value)
    assert "no reply from 127.0.0.1" in message and "tried 2 times" in message
    assert "no judge call has succeeded since this one was first tried" in message and "\n" not in message
    judge.close()
    with sqlite3.connect(tmp_path / "judge_cache.sqlite") as db:  # the replies before the hang are kept
        assert db.execute("SELECT COUNT(*) FROM judge_replies").fetchone() == (6,)


def test_a_request_first_sent_after_the_last_reply_that_brings_nothing_stops_the_run(tmp_path):
    """Item 1 waits for the one slot while item 0 is answered, then is sent and hangs: no reply came while it was
    tried, so the run stops at its timeout (however long it waited for the slot), without trying item 2."""
    with StubOpenAIServer(responder=score_by_index, fault_sequence=[None], faults={"timeout": 1.0},
                          timeout_s=30) as srv:
        judge = Judge(config(srv, tmp_path, concurrency=1, timeout=0.2, retries=0, stop_after_timeouts=0),
                      progress=False)
        with pytest.raises(JudgeUnreachableError, match="no judge call has succeeded since this one was first tried"):
            judge.run(items(3))
        assert [response_of(r["body"]) for r in srv.requests] == ["r0", "r1"]
    judge.close()


def test_cache_rerun_makes_no_call(tmp_path):
    work = items(20) + items(3, prefix="bad")
    with StubOpenAIServer(responder=score_by_index) as srv:
        first = judge_many(work, config(srv, tmp_path), progress=False)
        calls = srv.call_count
        assert calls == 20 + 3 * 3
        again = judge_many(work, config(srv, tmp_path), progress=False)
        assert srv.call_count == calls  # zero new calls, failures included (their replies are cached)
    assert again == [r.__class__(**{**r.__dict__, "calls": 0, "usage": None}) for r in first]
    # another sampling setting is another request: not served from the cache
    with StubOpenAIServer(responder=score_by_index) as srv:
        judge_many(work[:2], config(srv, tmp_path, temperature=0.0), progress=False)
        assert srv.call_count == 2


def test_identical_prompts_are_judged_once(tmp_path):
    with StubOpenAIServer(text="\\boxed{6}") as srv:
        results = judge_many([JudgeItem("q", "same", "ref")] * 5, config(srv, tmp_path), progress=False)
        assert srv.call_count == 1
    assert [r.score for r in results] == [6.0] * 5


def test_reasks_vary_the_seed_and_out_of_range_is_a_parse_failure(tmp_path):
    replies = {2023: "no score at all", 2024: "\\boxed{11}", 2025: "\\boxed{4}"}
    with StubOpenAIServer(responder=lambda req: replies[req["seed"]]) as srv:
        (result,) = judge_many([JudgeItem("q", "r", "ref")], config(srv, tmp_path), progress=False)
        assert [r["body"]["seed"] for r in srv.requests] == [2023, 2024, 2025]
    assert result.score == 4.0 and result.judge_outputs == ["no score at all", "\\boxed{11}", "\\boxed{4}"]
    with StubOpenAIServer(responder=lambda req: replies[req["seed"]]) as srv:
        (result,) = judge_many([JudgeItem("q", "r", "ref")], config(srv, tmp_path / "b", reasks=1), progress=False)
    assert result.status == "failed" and result.failure == "unparseable" and result.score is None
    assert "outside 1..10" in result.detail


def test_dry_run_counts_calls_after_the_cache(tmp_path):
    with StubOpenAIServer(responder=score_by_index) as srv:
        judge_many(items(4), config(srv, tmp_path), progress=False)
        judge = Judge(config(srv, tmp_path, dry_run=True), progress=False)
        results = judge.run(items(10))
        assert srv.call_count == 4
    assert judge.stats.dry_run_calls_needed == 6
    assert [r.status for r in results] == ["scored"] * 4 + ["not_judged"] * 6


def test_dry_run_needs_no_key(tmp_path, monkeypatch):
    monkeypatch.delenv(KEY_ENV)
    judge = Judge(config("http://127.0.0.1:9/v1", tmp_path, dry_run=True), progress=False)
    judge.run(items(3))
    assert judge.stats.dry_run_calls_needed == 3


def test_spending_cap(tmp_path):
    with StubOpenAIServer(responder=score_by_index) as srv:
        with pytest.raises(JudgeBudgetError, match="at least 10 judge calls .* cap of 5"):
            judge_many(items(10), config(srv, tmp_path, max_calls=5), progress=False)
        assert srv.call_count == 0
        # re-asks may exceed the cap during the run: then the items left fail as call_cap
        judge = Judge(config(srv, tmp_path, max_calls=12, concurrency=2), progress=False)
        results = judge.run(items(10, prefix="bad"))
        assert srv.call_count == 12
    assert all(r.status == "failed" for r in results)
    assert {r.failure for r in results} <= {"unparseable", "call_cap"} and judge.stats.failures["call_cap"] >= 1


_KILLED_RUN = textwrap.dedent("""
    import sys
    from lm_eval_ext.judge import JudgeItem, judge_many, resolve_config
    config = resolve_config(explicit={"base_url": sys.argv[1], "cache": sys.argv[2], "api_key_env": "%s",
                                      "model": "stub-judge", "concurrency": 4})
    judge_many([JudgeItem(f"question {i}?", f"r{i}", f"reference {i}") for i in range(100)], config, progress=False)
""" % KEY_ENV)


def test_killed_run_resumes_without_repeating_finished_calls(tmp_path):
    cache = tmp_path / "judge_cache.sqlite"
    env = {**os.environ, KEY_ENV: FAKE_KEY, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    # The cache key names the endpoint (host and port), so the rerun talks to the same server.
    with StubOpenAIServer(responder=score_by_index, delay_s=0.05) as srv:
        proc = subprocess.Popen([sys.executable, "-c", _KILLED_RUN, srv.base_url, str(cache)], env=env)
        try:
            deadline = time.time() + 60
            while srv.call_count < 30 and time.time() < deadline and proc.poll() is None:
                time.sleep(0.02)
            os.kill(proc.pid, signal.SIGKILL)
        finally:
            proc.wait(timeout=30)
        assert proc.returncode == -signal.SIGKILL  # really killed mid-run, not finished
        with sqlite3.connect(cache) as db:
            done = db.execute("SELECT COUNT(*) FROM judge_replies").fetchone()[0]
        assert 20 <= done < 100
        before = srv.call_count
        results = judge_many(items(100), config(srv, tmp_path), progress=False)
        assert srv.call_count - before == 100 - done  # every reply stored before the kill is reused
    assert [r.score for r in results] == [float(i % 10 + 1) for i in range(100)]


def test_key_is_written_nowhere(tmp_path, caplog, capsys):
    caplog.set_level(logging.DEBUG)  # every logger, those of the HTTP client (openai, httpx2, asyncio) included
    faults = {"429": 0.2, "500": 0.1, "noscore": 0.1}
    with StubOpenAIServer(responder=score_by_index, faults=faults, seed=1) as srv:
        judge = Judge(config(srv, tmp_path), progress=True)
        judge.run(items(20) + items(2, prefix="bad"))
        judge.close()
    with StubOpenAIServer(fail_status=401) as srv, pytest.raises(JudgeRequestRejected) as err:
        judge_many(items(2), config(srv, tmp_path / "x"), progress=True)
    captured = capsys.readouterr()
    assert "judge" in captured.err  # the progress and summary lines were captured
    texts = [caplog.text, captured.out, captured.err, str(err.value), json.dumps(judge.record.to_dict()),
             json.dumps(judge.stats.to_dict())]
    assert all(FAKE_KEY not in text for text in texts)
    # the debug logs were really captured: the event loop's, the openai client's and the judge's retries
    assert {r.name.split(".")[0] for r in caplog.records} >= {"asyncio", "openai", "lm_eval_ext"}
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert FAKE_KEY.encode() not in path.read_bytes(), path
