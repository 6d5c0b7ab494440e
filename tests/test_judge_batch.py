"""Batch judging (lm_eval_ext/judge/batch.py) against the stub's Files and Batches API: batches that finish,
fail some items, expire, are split, detached, and killed mid-poll then collected; no request paid twice."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from lm_eval_ext.judge import JudgeItem, resolve_config
from lm_eval_ext.judge.batch import JudgeBatchDetached, read_output, request_lines, split
from lm_eval_ext.judge.runner import Judge
from doubles import LM_EVAL_EXT
from doubles.stub_openai import StubOpenAIServer
from helpers.files import subprocess_env

KEY_ENV = "LMX_TEST_JUDGE_KEY"
KEY = "sk-lmx-batch-test-key-0123456789"


@pytest.fixture(autouse=True)
def _judge_key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY)


def config(srv, tmp_path, **options):
    return resolve_config(explicit={"base_url": srv.base_url, "api_key_env": KEY_ENV, "model": "stub-judge",
                                    "cache": str(tmp_path / "cache.sqlite"), "batch": True,
                                    "batch_poll": 0.01, **options}, environ={})


def items(n: int) -> list[JudgeItem]:
    return [JudgeItem(f"question {i}?", f"r{i}", f"reference {i}") for i in range(n)]


def score(request: dict) -> str:
    """r<i> gets \\boxed{i + 1}."""
    answer = re.search(r"### Response to evaluate:\n(.*?)\n\n###", request["messages"][-1]["content"], re.S).group(1)
    return f"Fine. \\boxed{{{int(answer[1:]) + 1}}}"


def live_calls(srv) -> list[dict]:
    return [r["body"] for r in srv.requests if r["path"].endswith("/chat/completions")]


def judge(srv, tmp_path, n, **options):
    runner = Judge(config(srv, tmp_path, **options), progress=False, batch_dir=tmp_path / "state")
    try:
        return runner, runner.run(items(n))
    finally:
        runner.close()


def test_a_batch_that_finishes_judges_everything_and_a_rerun_sends_nothing(tmp_path):
    with StubOpenAIServer(responder=score) as srv:
        runner, results = judge(srv, tmp_path, 6, price_input=2.0, price_output=8.0)
        assert srv.batch_api.creations == 1 and live_calls(srv) == []
        assert [r.score for r in results] == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
        assert sorted(srv.batch_api.answered) == sorted(set(srv.batch_api.answered)) and len(srv.batch_api.answered) == 6
        (record,) = [json.loads(p.read_text()) for p in (tmp_path / "state" / "judge_batches").glob("batch-*.json")]
        request_file = tmp_path / "state" / "judge_batches" / record["request_file"]
        import hashlib

        assert record["id"] == "batch-1" and record["sha256"] == hashlib.sha256(request_file.read_bytes()).hexdigest()
        assert record["collected"] == "completed"
        # batch requests cost batch_discount less
        usage = runner.stats.usage
        assert usage["cost_usd"] == round((usage["prompt_tokens"] * 2.0 + usage["completion_tokens"] * 8.0) / 1e6 * 0.5, 6)
        again, _ = judge(srv, tmp_path, 6)
        assert srv.batch_api.creations == 1 and live_calls(srv) == [] and again.stats.from_cache == 6


def test_failed_and_expired_items_are_sent_again_live(tmp_path):
    with StubOpenAIServer(responder=score, batch={"fail": lambda key, body: "r2" in body["messages"][-1]["content"]
                                                 or "r4" in body["messages"][-1]["content"]}) as srv:
        _, results = judge(srv, tmp_path, 6)
        assert srv.batch_api.creations == 1 and len(live_calls(srv)) == 2
    assert [r.score for r in results] == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    with StubOpenAIServer(responder=score, batch={"expire": True}) as srv:
        _, results = judge(srv, tmp_path / "expired", 6)
        assert len(srv.batch_api.answered) == 3 and len(live_calls(srv)) == 3
    assert [r.score for r in results] == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    # still failing live: a judge failure
    with StubOpenAIServer(responder=score, batch={"expire": True}, fail_status=500) as srv:
        _, results = judge(srv, tmp_path / "down", 2, retries=0)
    assert results[0].scored and results[1].failure == "transport" and "batch_expired" not in results[1].detail


def test_unscorable_replies_are_asked_again_in_the_next_batch(tmp_path):
    replies = iter(["no score"] + ["\\boxed{5}"] * 10)
    with StubOpenAIServer(responder=lambda _req: next(replies)) as srv:
        _, results = judge(srv, tmp_path, 1)
        assert srv.batch_api.creations == 2 and live_calls(srv) == []
    assert results[0].score == 5.0 and results[0].judge_outputs == ["no score", "\\boxed{5}"]


def test_large_runs_are_split_within_the_limits():
    requests = {f"k{i}": {"messages": [{"role": "user", "content": "x" * 50}]} for i in range(7)}
    lines = request_lines(requests)
    assert [len(c) for c in split(lines, 3, 10**6)] == [3, 3, 1]
    assert [len(c) for c in split(lines, 100, 2 * len(lines[0]))] == [2, 2, 2, 1]


def test_detach_then_collect_pays_nothing_twice(tmp_path):
    with StubOpenAIServer(responder=score, batch={"polls_to_finish": 3}) as srv:
        with pytest.raises(JudgeBatchDetached, match=r"batch-1: in_progress not finished yet"):
            judge(srv, tmp_path, 4, batch_detach=True)
        assert srv.batch_api.creations == 1
        _, results = judge(srv, tmp_path, 4)
        assert srv.batch_api.creations == 1 and live_calls(srv) == []
        assert sorted(srv.batch_api.answered) == sorted(set(srv.batch_api.answered))
    assert [r.score for r in results] == [1.0, 2.0, 3.0, 4.0]


_KILLED = textwrap.dedent("""
    import sys
    from pathlib import Path
    from lm_eval_ext.judge import JudgeItem, resolve_config
    from lm_eval_ext.judge.runner import Judge
    config = resolve_config(explicit={"base_url": sys.argv[1], "cache": sys.argv[2], "api_key_env": "%s",
                                      "model": "stub-judge", "batch": True, "batch_poll": 0.01})
    Judge(config, progress=False, batch_dir=Path(sys.argv[3])).run(
        [JudgeItem(f"question {i}?", f"r{i}", f"reference {i}") for i in range(5)])
""" % KEY_ENV)


def test_a_run_killed_while_polling_is_collected_by_the_next(tmp_path):
    with StubOpenAIServer(responder=score, batch={"polls_to_finish": 10**9}) as srv:
        proc = subprocess.Popen([sys.executable, "-c", _KILLED, srv.base_url, str(tmp_path / "cache.sqlite"),
                                 str(tmp_path / "state")], env={**os.environ, KEY_ENV: KEY})
        deadline = time.monotonic() + 120
        while srv.batch_api.retrievals < 3 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert srv.batch_api.creations == 1 and srv.batch_api.answered == []
        srv.batch_api.polls_to_finish = 1
        _, results = judge(srv, tmp_path, 5)
        assert srv.batch_api.creations == 1 and live_calls(srv) == []
        assert len(srv.batch_api.answered) == 5 == len(set(srv.batch_api.answered))
    assert [r.score for r in results] == [1.0, 2.0, 3.0, 4.0, 5.0]


def test_output_file_lines_are_read():
    ok = {"custom_id": "a", "response": {"status_code": 200, "body": {"choices": [{"message": {"content": "x"}}]}}}
    bad = {"custom_id": "b", "response": None, "error": {"code": "batch_expired", "message": "too late"}}
    replies, failures = read_output("\n".join(json.dumps(r) for r in (ok, bad)))
    assert list(replies) == ["a"] and failures == {"b": "too late"}


def test_dry_run_writes_the_request_file_and_collect_reads_an_offline_runners_output(tmp_path, capsys, monkeypatch):
    from lm_eval_ext.cli import main

    monkeypatch.setenv("LM_EVAL_EXT_CACHE_DIR", str(tmp_path / "user_cache"))
    with StubOpenAIServer(responder=score) as srv:
        runner, _ = judge(srv, tmp_path, 3, dry_run=True)
        assert srv.requests == []  # nothing sent
        # beside the judge's cache, not in the run's answers folder (removed when the run ends)
        (request_file,) = (tmp_path / "user_cache" / "judge" / "judge_batches").glob("requests-*.jsonl")
        lines = [json.loads(line) for line in request_file.read_text().splitlines()]
        assert [line["url"] for line in lines] == ["/v1/chat/completions"] * 3
        # what vLLM's run_batch writes for it: one line per request, the reply under response.body
        output = tmp_path / "out.jsonl"
        output.write_text("".join(json.dumps({"id": f"vllm-{i}", "custom_id": line["custom_id"], "response": {
            "status_code": 200, "request_id": f"vllm-{i}", "body": srv._completion("/v1/chat/completions", line["body"],
                                                                               score)}, "error": None}) + "\n"
                                  for i, line in enumerate(lines)))
        with pytest.raises(SystemExit) as ended:
            main(["judge", "collect", str(output), "--judge-cache", str(tmp_path / "cache.sqlite")])
        assert ended.value.code == 0
        assert "3 replies stored" in capsys.readouterr().out
        again, results = judge(srv, tmp_path, 3)
        assert srv.requests == [] and again.stats.from_cache == 3
    assert [r.score for r in results] == [1.0, 2.0, 3.0]


@pytest.mark.slow
def test_a_run_killed_mid_poll_is_finished_by_resume_paying_nothing_twice(run_cli, data_dir, tmp_path):
    from helpers.judge import is_probe, scoring_the_answer, write_elitr_answers

    n, task = 4, "elitr_bench_qa_dev_st"
    write_elitr_answers(tmp_path / "responses.json", n)
    answers = tmp_path / "answers"
    with StubOpenAIServer(responder=scoring_the_answer, models=(), batch={"polls_to_finish": 10**9}) as srv:
        flags = ["--model", "ext-canned-gen", "--model_args", f"responses={tmp_path / 'responses.json'}",
                 "--tasks", task, "--limit", str(n), "--output_path", str(tmp_path / "out"), "--metadata",
                 json.dumps({"judge_base_url": srv.base_url, "judge_api_key_env": KEY_ENV,
                             "judge_cache": str(tmp_path / "cache.sqlite"), "answers_dir": str(answers),
                             "judge_batch": True, "judge_batch_poll": 0.01})]
        # a process of its own: it is killed (SIGKILL)
        proc = subprocess.Popen([*LM_EVAL_EXT, "run", *flags], env=subprocess_env({KEY_ENV: KEY}),
                                cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 600
        while srv.batch_api.retrievals < 3 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)  # kill -9 while the run polls its batch
        proc.wait()
        assert srv.batch_api.creations == 1 and srv.batch_api.answered == []
        (run,) = answers.iterdir()
        (record,) = (run / "judge_batches").glob("batch-*.json")
        assert json.loads(record.read_text())["id"] == "batch-1"  # saved before the first poll
        srv.batch_api.polls_to_finish = 1
        resumed = run_cli(["lm-eval-ext", "resume", str(run)], env={KEY_ENV: KEY})
        assert resumed.returncode == 0, resumed.stderr[-3000:]
        assert srv.batch_api.creations == 1  # collected, not submitted again
        assert len(srv.batch_api.answered) == n == len(set(srv.batch_api.answered))
        assert [r for r in srv.requests if r["path"].endswith("/chat/completions") and not is_probe(r["body"])] == []
    (results,) = [json.loads(p.read_text()) for p in (tmp_path / "out").rglob("results_*.json")]
    assert results["results"][task]["score,judge"] == 4.5  # (3 + 4 + 5 + 6) / 4
    assert results["configs"][task]["metadata"]["judge"]["usage"]["requests"] == n
