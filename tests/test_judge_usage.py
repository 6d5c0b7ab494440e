"""What judging costs: usage from every reply, summed per item and per batch, priced, and the cost limit.

The stub counts ~4 characters per token (tests/doubles/stub_openai.py), so every expected
figure here is computed from the requests the stub received and the replies it gave.
"""
from __future__ import annotations

import json
import math
import re
import sqlite3

import pytest

from lm_eval_ext.judge import JudgeItem, resolve_config
from lm_eval_ext.judge.errors import JudgeConfigError
from lm_eval_ext.judge.runner import Judge
from lm_eval_ext.judge.usage import METER, JudgeCostLimitError, add_up
from doubles.stub_openai import StubOpenAIServer
from helpers.judge import scoring_the_answer, write_elitr_answers

KEY_ENV = "LMX_TEST_JUDGE_KEY"
REPLY = "Fine. \\boxed{7}"
PRICES = {"price_input": 3.0, "price_output": 15.0}


@pytest.fixture(autouse=True)
def _judge_key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, "sk-lmx-usage-test-key-0123456789")
    monkeypatch.setattr(METER, "spent", 0.0)  # the process's meter: each test starts from nothing


def config(srv, tmp_path, **options):
    return resolve_config(explicit={"base_url": srv.base_url, "api_key_env": KEY_ENV, "model": "stub-judge",
                                    "cache": str(tmp_path / "cache.sqlite"), "concurrency": 1,
                                    **options}, environ={})


def items(n: int) -> list[JudgeItem]:
    return [JudgeItem(f"question {i}?", f"answer {i}", f"reference {i}") for i in range(n)]


def tokens(text: str) -> int:
    return math.ceil(len(text) / 4)


def sent(srv) -> list[int]:
    return [tokens(" ".join(m["content"] for m in r["body"]["messages"])) for r in srv.requests]


def test_usage_is_summed_per_item_and_priced(tmp_path):
    with StubOpenAIServer(text=REPLY) as srv:
        judge = Judge(config(srv, tmp_path, **PRICES), progress=False)
        results = judge.run(items(4) + items(1))  # the repeated prompt is judged (and paid) once
        prompts = sent(srv)
    assert len(prompts) == 4
    for result, prompt in zip(results, prompts):
        cost = (prompt * 3.0 + tokens(REPLY) * 15.0) / 1e6
        assert result.usage == {"requests": 1, "prompt_tokens": prompt, "completion_tokens": tokens(REPLY),
                                "cost_usd": pytest.approx(cost)}
    assert results[4].usage is None and results[4].calls == 0 and results[4].score == 7.0
    assert [r.calls for r in results] == [1, 1, 1, 1, 0] and judge.stats.calls == 4
    total_cost = (sum(prompts) * 3.0 + 4 * tokens(REPLY) * 15.0) / 1e6
    assert judge.stats.usage == {"requests": 4, "prompt_tokens": sum(prompts), "completion_tokens": 4 * tokens(REPLY),
                                 "from_cache": 0, "cost_usd": round(total_cost, 6)}
    # without prices: tokens, no dollars
    with StubOpenAIServer(text=REPLY) as srv:
        judge = Judge(config(srv, tmp_path / "b"), progress=False)
        judge.run(items(2))
    assert "cost_usd" not in judge.stats.usage and judge.stats.usage["requests"] == 2


def test_reasks_are_paid_and_cache_hits_are_free(tmp_path):
    replies = iter(["no score", "\\boxed{3}"])
    with StubOpenAIServer(responder=lambda _req: next(replies)) as srv:
        judge = Judge(config(srv, tmp_path, **PRICES), progress=False)
        (result,) = judge.run(items(1))
        prompts = sent(srv)
        again = Judge(config(srv, tmp_path, **PRICES), progress=False)  # the cache is keyed by endpoint
        (cached,) = again.run(items(1))
        assert srv.call_count == 2
    assert result.usage["requests"] == 2 and result.usage["prompt_tokens"] == sum(prompts)
    assert result.usage["completion_tokens"] == tokens("no score") + tokens("\\boxed{3}")
    assert cached.usage is None and cached.score == 3.0
    assert again.stats.usage == {"requests": 0, "prompt_tokens": 0, "completion_tokens": 0, "from_cache": 1,
                                 "cost_usd": 0.0}


def test_cost_limit_stops_before_it_would_be_passed_and_a_rerun_finishes(tmp_path):
    with StubOpenAIServer(text=REPLY) as srv:
        probe = Judge(config(srv, tmp_path / "probe", **PRICES), progress=False)
        probe.run(items(1))
        per_call = probe.stats.usage["cost_usd"]
        # a request reserves its prompt and max_tokens of reply; with max_tokens = the reply's length the
        # reservation is the exact price, so the limit allows exactly 3 calls
        limit = 3.5 * per_call
        options = {**PRICES, "max_tokens": tokens(REPLY), "cost_limit": limit}
        srv.requests.clear()
        METER.spent = 0.0  # the run starts here
        judge = Judge(config(srv, tmp_path, **options), progress=False)
        with pytest.raises(JudgeCostLimitError) as stopped:
            judge.run(items(6))
        assert srv.call_count == 3
        message = str(stopped.value)
        # the Python API sets judge options through --metadata (the --judge-* flags are lm-eval-ext check's)
        assert "\n" not in message and f"${limit:,.2f}" in message
        assert """Raise the limit (--metadata '{"judge_cost_limit": "DOLLARS"}')""" in message
        assert METER.spent <= limit
        with sqlite3.connect(tmp_path / "cache.sqlite") as db:  # what was judged is kept
            assert db.execute("SELECT COUNT(*) FROM judge_replies").fetchone() == (3,)
        METER.spent = 0.0  # a new run
        srv.requests.clear()
        results = Judge(config(srv, tmp_path, **{**options, "cost_limit": 10.0}), progress=False).run(items(6))
        assert srv.call_count == 3  # only what the stopped run had not judged
    assert [r.score for r in results] == [7.0] * 6


def test_cost_limit_needs_prices():
    with pytest.raises(JudgeConfigError, match="cost limit .* needs the judge model's prices"):
        resolve_config(explicit={"cost_limit": 5}, environ={})


def test_run_total_adds_up_tasks():
    a = {"requests": 2, "prompt_tokens": 10, "completion_tokens": 4, "from_cache": 1, "cost_usd": 0.5}
    b = {"requests": 1, "prompt_tokens": 5, "completion_tokens": 2, "from_cache": 0, "cost_usd": 0.25}
    assert add_up([a, b]) == {"requests": 3, "prompt_tokens": 15, "completion_tokens": 6, "from_cache": 1,
                              "cost_usd": 0.75}
    assert "cost_usd" not in add_up([a, {k: v for k, v in b.items() if k != "cost_usd"}])
    assert add_up([]) is None


def test_per_thousand_items_scales_the_runs_usage():
    """judge validate's figures: tokens and dollars of 1,000 items from a run's, and the time through the batch API."""
    from lm_eval_ext.judge.usage import per_thousand, per_thousand_text

    usage = {"requests": 250, "prompt_tokens": 500_000, "completion_tokens": 50_000, "from_cache": 10}
    batch = resolve_config(explicit={"batch": True, **PRICES}, environ={})
    figures = per_thousand(batch, usage, items=250, seconds=90.0)
    # 4x the run's: 2M input tokens at $3/M and 200k output tokens at $15/M = $9, half with the batch discount
    assert figures == {"items": 250, "concurrency": 8, "batch": True, "seconds_total": 90.0, "prompt_tokens": 2_000_000,
                       "completion_tokens": 200_000, "seconds": 360.0, "cost_usd": 9.0, "batch_cost_usd": 4.5}
    assert per_thousand_text(figures) == ("per 1,000 items: 2,000,000 input / 200,000 output tokens, $9.00 at the "
                                          "given prices ($4.50 with batch discount), 360.0 s through the batch API")


# A rubric reply of the usual length (a feedback paragraph, then the score): what the estimate assumes.
FEEDBACK = ("Feedback: the response is compared with the reference answer on the facts the question asks for. "
            * 8)


def _feedback_judge(request: dict) -> str:
    return scoring_the_answer(request, feedback=FEEDBACK)


@pytest.mark.slow
def test_preflight_estimate_is_within_ten_percent_of_what_the_run_spent(run_cli, data_dir, tmp_path):
    n, task = 8, "elitr_bench_qa_dev_st"
    write_elitr_answers(tmp_path / "responses.json", n)
    with StubOpenAIServer(responder=_feedback_judge, models=()) as srv:
        proc = run_cli(["lm-eval-ext", "run", "--model", "ext-canned-gen", "--model_args",
                        f"responses={tmp_path / 'responses.json'}", "--tasks", task, "--limit", str(n),
                        "--output_path", str(tmp_path / "out"), "--metadata",
                        json.dumps({"judge_base_url": srv.base_url, "judge_api_key_env": KEY_ENV,
                                    "judge_cache": str(tmp_path / "cache.sqlite"),
                                    "answers_dir": str(tmp_path / "answers"),
                                    "judge_price_input": 30, "judge_price_output": 60})],
                       env={KEY_ENV: "sk-lmx-usage-test-key-0123456789"}, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    note = re.search(r"the judge: about (\d+) judge calls, ~(\d+\.\d)k input tokens, ~\$(\d+\.\d\d) at the given "
                     r"prices, \$(\d+\.\d\d) with batch", proc.stderr)
    assert note, proc.stderr[-3000:]
    calls, prompt_k, cost, batch_cost = int(note[1]), float(note[2]), float(note[3]), float(note[4])
    (results,) = [json.loads(p.read_text()) for p in (tmp_path / "out").rglob("results_*.json")]
    usage = results["configs"][task]["metadata"]["judge"]["usage"]
    assert calls == usage["requests"] == n
    assert abs(prompt_k * 1000 - usage["prompt_tokens"]) <= 0.1 * usage["prompt_tokens"]
    assert abs(cost - usage["cost_usd"]) <= 0.1 * usage["cost_usd"]
    assert batch_cost == pytest.approx(cost / 2, abs=0.01)
