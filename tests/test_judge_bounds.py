"""Judge calls bounded in time and size, against the stub server's misbehaving replies.

A reply that streams forever (1 KiB every 10 ms, never ending) is cut at the call's deadline, a
reply far over the size cap at the cap; both are faults of that try, retried, then the item's judge
failure. The probe is bounded the same way. A judge that stops answering mid-run trips the circuit
breaker. The deadlines here are a fraction of a second (judge option ``timeout``): the tests assert
what happened (the failure counted, the bytes the server could send, the error paragraph), never
how long it took.
"""
from __future__ import annotations

import json
import sqlite3
import time

import pytest

from lm_eval_ext.judge import resolve_config
from lm_eval_ext.judge.client import CallBudget, JudgeClient, TransientError, run
from lm_eval_ext.judge.errors import JudgeUnreachableError
from lm_eval_ext.judge.probe import probe
from lm_eval_ext.judge.runner import Judge
from doubles.stub_openai import StubOpenAIServer
from helpers.judge import FAKE_KEY, KEY_ENV, config, items, score_by_index
from helpers.judge_toy import judge_scoring_all, results_and_samples, write_task_dir

CAP = 64 * 1024
HUGE = 32 * 2**20  # more than loopback socket buffers can hold: a client that stops reading stops the server


@pytest.fixture(autouse=True)
def _judge_key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, FAKE_KEY)


def _ended(srv, kind: str) -> list[dict]:
    """The requests that got ``kind`` (trickle, huge), once the server's handlers have noticed their end."""
    entries = [r for r in srv.requests if r["fault"] == kind]
    for _ in range(500):  # a bounded wait for the handler threads, not a timing assertion
        if all("cut" in r and (r["cut"] or r["sent"] >= HUGE) for r in entries):
            break
        time.sleep(0.01)
    return entries


def test_a_huge_reply_is_cut_at_the_cap_retried_then_a_judge_failure(tmp_path):
    # item 0 first, alone; then item 1 gets a 32 MB reply on each of its 3 tries; the others are fine
    with StubOpenAIServer(responder=score_by_index, fault_sequence=[None, "huge", "huge", "huge"],
                          huge_bytes=HUGE) as srv:
        judge = Judge(config(srv, tmp_path, concurrency=1, retries=2, max_reply_bytes=CAP), progress=False)
        results = judge.run(items(4))
        cut = _ended(srv, "huge")
    assert [r.status for r in results] == ["scored", "failed", "scored", "scored"]
    assert results[1].failure == "transport" and f"more than {CAP} bytes" in results[1].detail
    assert judge.stats.retries == {"too_large": 2} and judge.stats.failures == {"transport": 1}
    # each of the 3 tries was cut by the client: the server could not send the whole reply
    assert len(cut) == 3 and all(r["cut"] and r["sent"] < HUGE for r in cut)
    judge.close()
    with sqlite3.connect(tmp_path / "judge_cache.sqlite") as db:  # nothing of the cut replies is cached
        assert db.execute("SELECT COUNT(*) FROM judge_replies").fetchone() == (3,)


def test_a_reply_that_never_ends_is_cut_at_the_deadline_and_retried(tmp_path):
    """1 KiB every 10 ms, forever: no read ever waits long, yet the call ends at its deadline."""
    with StubOpenAIServer(responder=score_by_index, fault_sequence=[None, "trickle", "trickle"]) as srv:
        judge = Judge(config(srv, tmp_path, concurrency=1, retries=2, timeout=0.5), progress=False)
        results = judge.run(items(3))
        cut = _ended(srv, "trickle")
    assert [r.score for r in results] == [1.0, 2.0, 3.0]  # item 1 on its third try
    assert judge.stats.retries == {"timeout": 2}
    assert len(cut) == 2 and all(r["cut"] for r in cut)  # the client hung up, not the stub


def test_the_cap_counts_the_whole_body(tmp_path):
    """A reply of exactly the cap passes; with the cap one byte smaller it is cut."""
    import requests

    text = "x" * 1000 + " \\boxed{4}"
    request = {"model": "m", "messages": []}
    with StubOpenAIServer(text=text) as srv:
        size = len(requests.post(f"{srv.base_url}/chat/completions", json=request, timeout=10).content)

        def complete(cap: int):
            client = JudgeClient(config(srv, tmp_path, max_reply_bytes=cap), budget=CallBudget(None))

            async def call():
                try:
                    return await client.complete(request, tries=1)
                except TransientError as err:
                    return err
                finally:
                    await client.close()

            return run(call())

        assert complete(size) == text
        err = complete(size - 1)
    assert err.kind == "too_large" and f"more than {size - 1} bytes" in str(err)


def test_a_judge_that_stops_answering_trips_the_circuit_breaker(tmp_path):
    """6 replies, then every call streams forever: the run stops when 3 calls in a row got nothing back and
    nothing came for `timeout` seconds, long before the items in flight have used their 7 tries each."""
    with StubOpenAIServer(responder=score_by_index, fault_sequence=[None] * 6, faults={"trickle": 1.0}) as srv:
        # a deadline of 1 s: the 6 replies before the hang must come within it on a loaded machine
        judge = Judge(config(srv, tmp_path, concurrency=4, timeout=1.0, retries=6), progress=False)
        with pytest.raises(JudgeUnreachableError) as err:
            judge.run(items(40))
        # 6 answered, then at most the 4 items in flight, each tried at most twice (7 times each without it)
        assert 6 + 3 <= srv.call_count <= 6 + 4 * 2 and judge.stats.calls == srv.call_count
        port = srv.port
    message = str(err.value)
    assert message.startswith(f"The judge at 127.0.0.1:{port} could not be used: no whole reply from")
    assert "3 judge calls in a row timed out or could not connect, and nothing came back from the judge for " \
           "1 s" in message and "judge_timeout" in message and "\n" not in message
    judge.close()
    with sqlite3.connect(tmp_path / "judge_cache.sqlite") as db:  # the replies before the hang are kept
        assert db.execute("SELECT COUNT(*) FROM judge_replies").fetchone() == (6,)


def test_scattered_timeouts_of_a_busy_judge_do_not_trip_the_breaker(tmp_path):
    """Two calls, 60 requests apart, stream forever; the others answer in 50 ms. While one streams until its 2 s
    deadline the other connection gets at most about 40 answers, so the second stream starts after the first was
    cut and asked again: replies come between the timeouts, the breaker (at 2 in a row) never trips, and every item
    is judged, each cut try asked again. (The deadline is 40 times the answers' 50 ms so that only the streams reach
    it on a loaded machine; a machine slower to answer only spaces the streams further apart.)"""
    with StubOpenAIServer(responder=score_by_index, delay_s=0.05, fault_sequence=(["trickle"] + [None] * 59) * 2
                          ) as srv:
        judge = Judge(config(srv, tmp_path, concurrency=2, timeout=2.0, retries=3, stop_after_timeouts=2),
                      progress=False)
        results = judge.run(items(61))
        trickled = sum(r["fault"] == "trickle" for r in srv.requests)
    assert trickled == 2 and judge.stats.retries == {"timeout": 2}, (trickled, dict(judge.stats.retries))
    assert [r.score for r in results] == [float(i % 10 + 1) for i in range(61)]


@pytest.mark.parametrize("where", ["models", "probe request"])
@pytest.mark.parametrize("fault", ["trickle", "huge"])
def test_the_probe_is_bounded_the_same_way(tmp_path, where, fault):
    stub = {"models_fault": fault} if where == "models" else {"fault_sequence": [fault], "models": ()}
    with StubOpenAIServer(text="\\boxed{5}", huge_bytes=HUGE, **stub) as srv:
        judge_config = config(srv, tmp_path, timeout=0.5, max_reply_bytes=CAP)
        if where == "models" and fault == "huge":
            probe(judge_config)  # a model list over the cap is no list: the probe request decides
            assert [r["method"] for r in srv.requests] == ["GET", "POST"]
            return
        with pytest.raises(JudgeUnreachableError) as err:
            probe(judge_config)
        cut = _ended(srv, fault)
        port = srv.port
    assert len(cut) == 1 and cut[0]["cut"] and cut[0]["sent"] < HUGE
    message = str(err.value)
    assert message.startswith(f"The judge at 127.0.0.1:{port} (model stub-judge)")
    assert ("no whole reply" in message) if fault == "trickle" else (f"more than {CAP} bytes" in message)
    assert "Nothing was generated" in message and "\n" not in message


def test_the_probe_request_gets_the_runs_deadline(tmp_path, monkeypatch):
    """The probe's judge request is a whole judge reply: it gets the run's `timeout`, not the model list's shorter
    deadline (made 1 s here), so a judge slower than that to reply, but within `timeout`, passes the probe."""
    from lm_eval_ext.judge import probe as probe_module

    monkeypatch.setattr(probe_module, "PROBE_TIMEOUT", 1.0)
    with StubOpenAIServer(text="\\boxed{5}", delay_s=1.5, models=["stub-judge"]) as srv:
        probe(config(srv, tmp_path, timeout=10.0))
        assert [r["method"] for r in srv.requests] == ["GET", "POST"]


def test_a_probe_that_times_out_says_the_run_would_and_how_to_give_more_time(tmp_path):
    with StubOpenAIServer(text="\\boxed{5}", fault_sequence=["timeout"], timeout_s=5, models=["stub-judge"]) as srv:
        with pytest.raises(JudgeUnreachableError) as err:
            probe(config(srv, tmp_path, timeout=0.5))
        port = srv.port
    where = f"127.0.0.1:{port}"
    assert str(err.value) == (
        f"The judge at {where} (model stub-judge) gave no usable answer to a one-line probe in one try of at most "
        f"0.5 s (no reply from {where} within 0.5 s). Nothing was generated. Each call of the run gets the same "
        "0.5 s, so every answer would time out too. If the judge is slow rather than stuck (a reply may be up to "
        "1024 tokens long), give it more time: --metadata '{\"judge_timeout\": 300}'.")


def test_the_options_are_checked():
    from lm_eval_ext.judge.errors import JudgeConfigError

    for bad in ({"max_reply_bytes": 0}, {"stop_after_timeouts": -1}, {"timeout": 0}, {"retries": -1}):
        with pytest.raises(JudgeConfigError, match=next(iter(bad))):
            resolve_config(explicit=bad, environ={})


@pytest.mark.parametrize("name", ["retry_wait", "retry_max_wait", "retry_budget"])
def test_a_removed_option_is_an_error_that_says_what_to_do(name):
    """Given from any source, an option the judge no longer reads stops with what to do instead."""
    from lm_eval_ext.judge.errors import JudgeConfigError

    advice = ("is no longer an option: the openai client waits between retries itself (0.5 s doubling up to 8 s, "
              "or what the server's Retry-After says), and asks again at once after a reply that is not a chat "
              "completion; remove it (the number of retries is 'retries').")
    sources = {f"judge_{name}' (from --metadata)": {"metadata": {f"judge_{name}": 1}},
               f"LM_EVAL_EXT_JUDGE_{name.upper()}' (from the environment)": {"environ": {f"LM_EVAL_EXT_JUDGE_{name.upper()}": "1"}},
               f"--judge-{name.replace('_', '-')}' (from the command line)": {"explicit": {name: 1}},
               f"{name}' (from the task YAML)": {"task_defaults": {name: 1}}}
    for given, source in sources.items():
        with pytest.raises(JudgeConfigError) as err:
            resolve_config(**{"environ": {}, **source})
        assert str(err.value) == f"The judge option '{given} {advice}"


@pytest.mark.slow
def test_a_judge_that_hangs_after_the_probe_stops_the_run_and_resume_finishes_it(tmp_path, run_cli):
    """`lm-eval-ext run`: the judge answers the probe, then every call streams forever. The breaker stops the
    run with one paragraph naming the saved answers; `lm-eval-ext resume` with a working judge finishes it."""
    import re

    folder = write_task_dir(tmp_path)
    out, cache = tmp_path / "out", tmp_path / "judge_cache.sqlite"
    with StubOpenAIServer(responder=judge_scoring_all, fault_sequence=[None], faults={"trickle": 1.0},
                          models=()) as srv:
        proc = run_cli(["lm-eval-ext", "run", "--model", "ext-canned-gen",
                        "--model_args", f"responses={tmp_path / 'responses.json'}", "--tasks", "judged_toy",
                        "--include_path", str(folder), "--output_path", str(out), "--log_samples",
                        "--metadata", json.dumps({"judge_base_url": srv.base_url, "judge_api_key_env": KEY_ENV,
                                                  "judge_cache": str(cache), "judge_timeout": 0.5})],
                       env={KEY_ENV: FAKE_KEY}, timeout=300)
        judge_posts = len([r for r in srv.requests if r["method"] == "POST"]) - 1
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr and not list(out.rglob("results_*.json"))
    assert 3 <= judge_posts <= 3 * 2  # 3 answers in flight at once (concurrency 8), each tried at most twice
    (line,) = [line for line in proc.stderr.splitlines() if "could not be used" in line]
    assert "3 judge calls in a row timed out or could not connect" in line
    saved = re.search(r"`lm-eval-ext resume (\S+)` finishes the judging", line).group(1)
    with StubOpenAIServer(responder=judge_scoring_all, models=()) as srv:
        proc = run_cli(["lm-eval-ext", "resume", saved, "--metadata",
                        json.dumps({"judge_base_url": srv.base_url, "judge_api_key_env": KEY_ENV,
                                    "judge_cache": str(cache)})],
                       env={KEY_ENV: FAKE_KEY}, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    results, samples = results_and_samples(out, "judged_toy")
    assert results["results"]["judged_toy"]["score,judge"] == 4.0  # (9 + 2 + 1) / 3
    assert results["results"]["judged_toy"]["judge_failures,judge"] == 0 and len(samples) == 3

