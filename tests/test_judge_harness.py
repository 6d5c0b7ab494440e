"""The judge inside the harness: a tiny generate_until task (written here) judged by the stub server.

The answering model is ``ext-canned-gen`` (in-process and ``lm-eval-ext run``) or the harness's
``local-chat-completions`` against the stub (plain ``lm_eval run``, which cannot see plugin models).
Expected numbers, by hand: France -> "Paris" is judged \\boxed{9}, Italy -> "Milan" \\boxed{2}, Spain ->
"no idea" gets replies without a score (a judge failure): score = NaN (judging is incomplete; never the
mean of the two others), judge_failures = 1. With a judge that scores "no idea" \\boxed{1}: score =
(9 + 2 + 1) / 3 = 4.0, judge_failures = 0.
"""
from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

from doubles.stub_openai import StubOpenAIServer
from helpers.harness import filtered
from helpers.judge import is_probe, judge_calls
from helpers.judge_toy import judge_or_answer, judge_scoring_all, results_and_samples, write_task_dir

KEY_ENV = "LMX_TEST_JUDGE_KEY"
FAKE_KEY = "sk-lmx-FAKE-3f9d0b7e66a14c21-DO-NOT-LEAK"
@pytest.fixture
def task_dir(tmp_path) -> Path:
    return write_task_dir(tmp_path)


def _evaluate(task_dir: Path, task: str, metadata: dict, **kwargs):
    import lm_eval
    from lm_eval.tasks import TaskManager
    manager = TaskManager(include_path=str(task_dir), include_defaults=False, metadata=metadata)
    return lm_eval.simple_evaluate(model="ext-canned-gen", model_args=f"responses={task_dir.parent / 'responses.json'}",
                                   tasks=[task], task_manager=manager, log_samples=True, **kwargs)


def _judge_metadata(srv, tmp_path, **extra) -> dict:
    return {"judge_base_url": srv.base_url, "judge_api_key_env": KEY_ENV,
            "judge_cache": str(tmp_path / "judge_cache.sqlite"), **extra}


def test_judged_task_in_process(task_dir, tmp_path, monkeypatch):
    monkeypatch.setenv(KEY_ENV, FAKE_KEY)
    with StubOpenAIServer(responder=judge_or_answer, models=["meta-judge"]) as srv:
        out = _evaluate(task_dir, "judged_toy", _judge_metadata(srv, tmp_path, judge_model="meta-judge"),
                        random_seed=2025, numpy_random_seed=2025, torch_random_seed=2025, fewshot_random_seed=2025)
        bodies, port = judge_calls(srv), srv.port
        # the judge was checked once before generation: its model list, then one probe
        assert [r["method"] for r in srv.requests[:2]] == ["GET", "POST"] and is_probe(srv.requests[1]["body"])
    metrics = out["results"]["judged_toy"]
    assert math.isnan(metrics["score,judge"])  # one answer could not be judged: no score for the task
    assert metrics["judge_failures,judge"] == 1
    # one batch after generation: 3 first asks + 2 re-asks for the unscorable answer
    assert len(bodies) == 5
    assert {b["model"] for b in bodies} == {"meta-judge"}  # --metadata beats the YAML's model
    assert sorted(b["seed"] for b in bodies) == [2025, 2025, 2025, 2026, 2027]  # the run's seed, +k for re-asks
    record = out["configs"]["judged_toy"]["metadata"]["judge"]
    assert {k: record[k] for k in ("judge", "model", "base_url_host", "template", "temperature", "top_p", "seed")} == {
        "judge": "rubric10", "model": "meta-judge", "base_url_host": f"127.0.0.1:{port}",
        "template": "judge_gpt4_rubric_en.txt", "temperature": 0.6, "top_p": 0.9, "seed": 2025}
    assert re.fullmatch(r"[0-9a-f]{64}", record["template_sha256"])
    samples = {s["doc"]["question"]: s for s in out["samples"]["judged_toy"]}
    france = samples["Capital of France?"]
    assert france["resps"] == [["Paris"]]
    assert json.loads(filtered(france))["score"] == 9.0 and france["score"] == 9.0
    spain = samples["Capital of Spain?"]
    spain_result = json.loads(filtered(spain))
    assert spain_result["status"] == "failed" and spain["judge_failures"] == 1
    assert math.isnan(spain["score"]) and len(spain_result["judge_outputs"]) == 3


def _stub_tokens(text: str) -> int:
    return math.ceil(len(text) / 4)  # how the stub counts (tests/doubles/stub_openai.py)


def test_a_fully_judged_task_has_its_mean_score_and_its_cost(task_dir, tmp_path, monkeypatch):
    monkeypatch.setenv(KEY_ENV, FAKE_KEY)
    prices = {"judge_price_input": "2.5", "judge_price_output": "10"}
    with StubOpenAIServer(responder=judge_scoring_all, models=["yaml-judge-model"]) as srv:
        out = _evaluate(task_dir, "judged_toy", _judge_metadata(srv, tmp_path, **prices))
        bodies = judge_calls(srv)
        # a rerun (same endpoint) takes every verdict from the cache: nothing spent, three verdicts counted as cached
        again = _evaluate(task_dir, "judged_toy", _judge_metadata(srv, tmp_path, judge_check="false", **prices))
        assert judge_calls(srv) == bodies
    assert out["results"]["judged_toy"]["score,judge"] == 4.0
    assert out["results"]["judged_toy"]["judge_failures,judge"] == 0
    prompt = sum(_stub_tokens(" ".join(m["content"] for m in b["messages"])) for b in bodies)
    completion = sum(_stub_tokens(judge_scoring_all(b)) for b in bodies)
    usage = out["configs"]["judged_toy"]["metadata"]["judge"]["usage"]
    assert len(bodies) == 3 and prompt > 3 * 100
    assert usage == {"requests": 3, "prompt_tokens": prompt, "completion_tokens": completion, "from_cache": 0,
                     "cost_usd": round((prompt * 2.5 + completion * 10) / 1e6, 6)}
    assert again["configs"]["judged_toy"]["metadata"]["judge"]["usage"] == {
        "requests": 0, "prompt_tokens": 0, "completion_tokens": 0, "from_cache": 3, "cost_usd": 0.0}
    # the record counts the judge calls the stub received
    assert out["configs"]["judged_toy"]["metadata"]["judge"]["run"] == {"answers": 3, "scored": 3, "from_cache": 0,
                                                                        "calls": len(bodies)}
    assert again["configs"]["judged_toy"]["metadata"]["judge"]["run"] == {"answers": 3, "scored": 3, "from_cache": 3,
                                                                          "calls": 0}


def test_judge_filter_outside_a_judged_task_is_an_error(task_dir, tmp_path, monkeypatch):
    """No silent defaults: without JudgedTask the filter would miss the run's --metadata judge options."""
    from lm_eval_ext.errors import UserError

    monkeypatch.setenv(KEY_ENV, FAKE_KEY)
    with StubOpenAIServer(responder=judge_or_answer) as srv:
        monkeypatch.setenv("LM_EVAL_EXT_JUDGE_BASE_URL", srv.base_url)
        with pytest.raises(UserError, match="JudgedTask"):
            _evaluate(task_dir, "judged_toy_plain", {})
        assert not judge_calls(srv)


def test_dry_run_through_metadata(task_dir, tmp_path, monkeypatch, caplog):
    with StubOpenAIServer(responder=judge_or_answer) as srv:
        with caplog.at_level("INFO", logger="lm_eval_ext.judge.harness"):
            out = _evaluate(task_dir, "judged_toy", _judge_metadata(srv, tmp_path, judge_dry_run=True))
        assert srv.call_count == 0
    assert math.isnan(out["results"]["judged_toy"]["score,judge"])  # nothing judged
    assert out["results"]["judged_toy"]["judge_failures,judge"] == 0
    assert "'dry_run_calls_needed': 3" in caplog.text


def _assert_no_key(paths: list[Path], *texts: str) -> None:
    files = [p for root in paths for p in ([root] if root.is_file() else root.rglob("*")) if p.is_file()]
    assert files
    for path in files:
        assert FAKE_KEY.encode() not in path.read_bytes(), path
    for text in texts:
        assert FAKE_KEY not in text


@pytest.mark.slow
def test_lm_eval_ext_run_and_secrets(task_dir, tmp_path, run_cli):
    out = tmp_path / "out"
    # the probe (first POST) gets a clean reply; the judging that follows, rate limits and server errors
    with StubOpenAIServer(responder=judge_or_answer, faults={"429": 0.2, "500": 0.1}, retry_after="0.01",
                          fault_sequence=[None], models=()) as srv:
        proc = run_cli(["lm-eval-ext", "run", "--model", "ext-canned-gen",
                        "--model_args", f"responses={tmp_path / 'responses.json'}", "--tasks", "judged_toy",
                        "--include_path", str(task_dir), "--output_path", str(out), "--log_samples",
                        "--verbosity", "DEBUG",
                        "--metadata", json.dumps({"judge_base_url": srv.base_url, "judge_api_key_env": KEY_ENV,
                                                  "judge_cache": str(tmp_path / "judge_cache.sqlite")})],
                       env={KEY_ENV: FAKE_KEY, "OPENAI_LOG": "debug"})
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert all(r["headers"]["authorization"] == f"Bearer {FAKE_KEY}" for r in srv.requests)
    results, samples = results_and_samples(out, "judged_toy")
    assert math.isnan(results["results"]["judged_toy"]["score,judge"])
    assert results["results"]["judged_toy"]["judge_failures,judge"] == 1
    assert len(samples) == 3 and "judge judged_toy" in proc.stderr
    _assert_no_key([out, tmp_path / "judge_cache.sqlite", task_dir], proc.stdout, proc.stderr)


@pytest.mark.slow
def test_plain_lm_eval_run_with_api_model(task_dir, tmp_path, run_cli):
    """Plain harness, no plugin import: `!function` paths, --metadata judge options, an API answering model."""
    out = tmp_path / "out"
    with StubOpenAIServer(responder=judge_or_answer, models=()) as srv:
        proc = run_cli(["lm_eval", "run", "--model", "local-chat-completions",
                        "--model_args", f"base_url={srv.chat_url},model=stub-answerer,tokenizer_backend=None",
                        "--apply_chat_template", "--tasks", "judged_toy", "--include_path", str(task_dir),
                        "--output_path", str(out), "--log_samples",
                        "--metadata", json.dumps({"judge_base_url": srv.base_url, "judge_api_key_env": KEY_ENV,
                                                  "judge_cache": str(tmp_path / "judge_cache.sqlite"),
                                                  "judge_model": "cli-judge"})],
                       env={KEY_ENV: FAKE_KEY})
        assert proc.returncode == 0, proc.stderr[-3000:]
        judge_models = {b["model"] for b in judge_calls(srv) if b["messages"][-1]["content"].startswith("###")}
    assert judge_models == {"cli-judge"}
    results, _ = results_and_samples(out, "judged_toy")
    assert math.isnan(results["results"]["judged_toy"]["score,judge"])
    assert results["results"]["judged_toy"]["judge_failures,judge"] == 1
    assert results["configs"]["judged_toy"]["metadata"]["judge"]["model"] == "cli-judge"
    _assert_no_key([out, tmp_path / "judge_cache.sqlite"], proc.stdout, proc.stderr)


@pytest.mark.slow
def test_unreachable_judge_in_a_run_is_one_paragraph(task_dir, tmp_path, run_cli):
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = run_cli(["lm-eval-ext", "run", "--model", "ext-canned-gen",
                    "--model_args", f"responses={tmp_path / 'responses.json'}", "--tasks", "judged_toy",
                    "--include_path", str(task_dir),
                    "--metadata", json.dumps({"judge_base_url": f"http://127.0.0.1:{port}/v1", "judge_api_key_env": KEY_ENV,
                                              "judge_cache": str(tmp_path / "c.sqlite"), "judge_retries": 1})],
                   env={KEY_ENV: FAKE_KEY})
    assert proc.returncode == 2
    assert "check(s) failed before the model was loaded" in proc.stderr, proc.stderr[-2000:]
    assert f"judged_toy: The judge at 127.0.0.1:{port}" in proc.stderr and "cannot be reached" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_filter_keeps_the_response_shape_and_takes_field_functions(tmp_path, monkeypatch):
    """A list of responses (repeats) stays a list of results; fields may be functions of the document."""
    from lm_eval_ext.judge.harness import JudgeFilter
    from lm_eval_ext.task_base import RunContext

    monkeypatch.setenv(KEY_ENV, FAKE_KEY)
    docs = [{"q": "Capital of France?", "a": "Paris"}, {"q": "Capital of Italy?", "a": "Rome"}]
    with StubOpenAIServer(responder=judge_or_answer) as srv:
        judge_filter = JudgeFilter(question_field="q", reference_field=lambda doc: doc["a"].upper(),
                                   base_url=srv.base_url, api_key_env=KEY_ENV, cache=str(tmp_path / "c.sqlite"),
                                   run=RunContext(task="toy"))
        out = judge_filter.apply([["Paris", "Milan"], "Milan"], docs)
        prompts = [r["body"]["messages"][-1]["content"] for r in srv.requests]
    assert [json.loads(r)["score"] for r in out[0]] == [9.0, 2.0] and json.loads(out[1])["score"] == 2.0
    assert len(prompts) == 3 and all("### Reference answer (score 10):\nPARIS\n" in p or "ROME" in p for p in prompts)
