"""Nothing generated is lost: answers are saved before judging, and `lm-eval-ext resume` finishes the judging.

The answering model is scripted (ext-canned-gen, with a calls log: resuming must not call it); the
judge is the stub server, which scores an answer "A<n>" with n. Every judge verdict is cached in a
SQLite file (keyed by endpoint: one stub serves the run and its resumption), so resuming must send the
judge only what was not judged before.
"""
from __future__ import annotations

import json
import math
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from doubles import LM_EVAL, LM_EVAL_EXT
from doubles.stub_openai import StubOpenAIServer
from helpers.judge import answering_the_probe, is_probe, judge_calls
from helpers.runs import harness_env

pytestmark = pytest.mark.slow

KEY_ENV = "LMX_RESUME_KEY"
KEY = "sk-resume-test-key-0123456789abcdef"
TASK = "elitr_bench_qa_dev_st"
N = 6  # questions: the first six of the dev set


def _answer_of(request: dict) -> str:
    return re.search(r"### Response to evaluate:\n(.*?)\n\n###", request["messages"][-1]["content"], re.S).group(1)


def scores(request: dict) -> str:
    """A judge that scores "A<n>" with n (and a probe with 10)."""
    return f"Fine. \\boxed{{{_answer_of(request)[1:]}}}"


def _setup(tmp_path: Path) -> tuple[list[str], Path]:
    """The run's flags (without the judge URL) and its answers directory."""
    questions = tmp_path / "responses.json"
    # question k (1-based, in document order) is answered "A<k+2>": scores 3..8, mean 5.5
    from lm_eval_ext.elitr.data import build_documents

    docs, _ = build_documents("qa", "dev", "en")
    rules = [{"contains": doc["question"].strip(), "response": f"A{k + 3}"} for k, doc in enumerate(docs[:N])]
    questions.write_text(json.dumps({"rules": rules[::-1], "default": None}))
    answers = tmp_path / "answers"
    flags = ["--model", "ext-canned-gen", "--model_args", f"responses={questions},calls_log={tmp_path / 'calls.jsonl'}",
             "--tasks", TASK, "--limit", str(N), "--output_path", str(tmp_path / "out"), "--log_samples"]
    return flags, answers


def _metadata(srv, tmp_path: Path, answers: Path, **extra) -> list[str]:
    return ["--metadata", f"judge_base_url={srv.base_url}", f"judge_api_key_env={KEY_ENV}",
            f"judge_cache={tmp_path / 'verdicts.sqlite'}", f"answers_dir={answers}", "judge_concurrency=1",
            *(f"{k}={v}" for k, v in extra.items())]


def _results(out: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(out.rglob("results_*.json"))]


def _generations(tmp_path: Path) -> int:
    log = tmp_path / "calls.jsonl"
    return sum(call["n_requests"] for call in map(json.loads, log.read_text().splitlines())) if log.exists() else 0


def test_judging_killed_midway_is_finished_by_resume(run_cli, data_dir, tmp_path):
    flags, answers = _setup(tmp_path)
    env = harness_env({KEY_ENV: KEY})
    with StubOpenAIServer(responder=answering_the_probe(scores), models=(), delay_s=0.5) as srv:
        proc = subprocess.Popen([*LM_EVAL_EXT, "run", *flags, *_metadata(srv, tmp_path, answers)], env=env, cwd=tmp_path,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 300
        while len(judge_calls(srv)) < 3 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        time.sleep(0.2)
        proc.send_signal(signal.SIGKILL)  # kill -9 while the judge works
        proc.wait()
        before = len(judge_calls(srv))
        assert 3 <= before < N and _generations(tmp_path) == N
        assert not _results(tmp_path / "out")  # the run died before writing anything
        (run,) = answers.iterdir()
        import sqlite3

        cached = sqlite3.connect(tmp_path / "verdicts.sqlite").execute("SELECT COUNT(*) FROM judge_replies").fetchone()[0]
        assert cached >= 2  # what the judge answered before the kill was kept

        srv.delay_s = 0
        proc = run_cli(["lm-eval-ext", "resume", str(run)], env={KEY_ENV: KEY}, timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
        after = judge_calls(srv)[before:]
    assert len(after) == N - cached  # 0 repeated judge calls for the items judged before the kill
    assert _generations(tmp_path) == N  # nothing generated again
    (results,) = _results(tmp_path / "out")
    metrics = results["results"][TASK]
    assert metrics["score,judge"] == 5.5 and metrics["judge_failures,judge"] == 0
    assert results["config"]["model"] == "ext-canned-gen"  # the original model, as a full run records it
    assert results["config"]["resumed_from"] == str(run)
    assert not run.exists()  # removed once the results were written


def test_a_judge_that_fails_some_answers_is_finished_by_resume(run_cli, data_dir, tmp_path):
    flags, answers = _setup(tmp_path)
    # one at a time, in order: the probe, then A3, A4, A5 (a server error), A6, A7, A8
    sequence = [None, None, None, "500"]
    with StubOpenAIServer(responder=answering_the_probe(scores), models=(), fault_sequence=sequence) as srv:
        proc = run_cli([*LM_EVAL, "run", *flags, *_metadata(srv, tmp_path, answers, judge_retries=0)],
                       env={KEY_ENV: KEY}, timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
        (results,) = _results(tmp_path / "out")
        assert math.isnan(results["results"][TASK]["score,judge"])  # never the mean of the five others
        assert results["results"][TASK]["judge_failures,judge"] == 1
        (run,) = answers.iterdir()
        assert f"could not score 1 of {N} answers (1 transport)" in proc.stderr
        assert f"`lm-eval-ext resume {run}` judges them again" in proc.stderr

        before = len(judge_calls(srv))
        proc = run_cli(["lm-eval-ext", "resume", str(run)], env={KEY_ENV: KEY}, timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert [_answer_of(body) for body in judge_calls(srv)[before:]] == ["A5"]  # only the failed answer
    latest = _results(tmp_path / "out")[-1]["results"][TASK]
    assert latest["score,judge"] == 5.5 and latest["judge_failures,judge"] == 0
    assert _generations(tmp_path) == N


def test_a_judge_lost_during_the_run_names_the_command_that_finishes(run_cli, data_dir, tmp_path):
    flags, answers = _setup(tmp_path)
    # the probe and two verdicts come through; then the judge drops every connection
    sequence = [None, None, None] + ["drop"] * 40
    with StubOpenAIServer(responder=answering_the_probe(scores), models=(), fault_sequence=sequence) as srv:
        proc = run_cli([*LM_EVAL_EXT, "run", *flags, *_metadata(srv, tmp_path, answers, judge_retries=1,
                                                                   judge_retry_wait=0.01)],
                       env={KEY_ENV: KEY}, timeout=600)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr
        (run,) = answers.iterdir()
        error = proc.stderr[proc.stderr.index("lm-eval-ext: error:"):]
        assert "The answers were saved before judging" in error and f"`lm-eval-ext resume {run}`" in error
        srv.fault_sequence.clear()
        before = len([r for r in srv.requests if r["method"] == "POST" and r["fault"] is None and not is_probe(r["body"])])
        proc = run_cli(["lm-eval-ext", "resume", str(run)], env={KEY_ENV: KEY}, timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
        answered = [r for r in srv.requests if r["method"] == "POST" and r["fault"] is None and not is_probe(r["body"])]
        assert before == 2 and len(answered) - before == N - 2  # the two verdicts given before came from the cache
    assert _results(tmp_path / "out")[-1]["results"][TASK]["score,judge"] == 5.5


def test_results_that_cannot_be_written_fail_the_run_and_resume_writes_them(run_cli, data_dir, tmp_path):
    """A full disk while the harness writes the results: exit 2, the cut file set aside, resume writes them whole."""
    table = tmp_path / "table.json"
    table.write_text(json.dumps({"entries": [], "default": -3.0}))
    answers = tmp_path / "answers"
    flags = ["--model", "ext-loglik-table", "--model_args", f"table={table}", "--tasks", "lieder_base", "--limit", "4",
             "--metadata", json.dumps({"answers_dir": str(answers)})]
    # RLIMIT_FSIZE makes every file stop growing at 16 kB (Python ignores SIGXFSZ: the write fails with EFBIG),
    # as a full disk does: the answers fit, the results file (larger) is cut short
    full_disk = ("import os, resource, sys; resource.setrlimit(resource.RLIMIT_FSIZE, (16384, 16384)); "
                 "os.execvp(sys.argv[1], sys.argv[1:])")
    proc = run_cli([sys.executable, "-c", full_disk, *LM_EVAL_EXT, "run", *flags, "--output_path", tmp_path / "out"])
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    (cut,) = (tmp_path / "out").rglob("results_*.json.incomplete")
    assert cut.stat().st_size == 16384 and not list((tmp_path / "out").rglob("results_*.json"))
    (saved,) = answers.iterdir()
    assert (f"lm-eval-ext: error: The run finished but the results file was cut short (set aside as {cut}) (a full "
            f"disk or a read-only directory?). The answers are saved in {saved}: `lm-eval-ext resume {saved} "
            "--output_path DIR` scores them again and writes the results to a writable DIR.") in proc.stderr

    resumed = run_cli(["lm-eval-ext", "resume", saved, "--output_path", tmp_path / "again"])
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    (written,) = _results(tmp_path / "again")
    direct = run_cli([*LM_EVAL_EXT, "run", *flags, "--output_path", tmp_path / "direct"])
    assert direct.returncode == 0, direct.stderr[-3000:]
    (expected,) = _results(tmp_path / "direct")
    assert written["results"] == expected["results"] and written["n-samples"] == expected["n-samples"]
    assert not saved.exists()  # resume removes the answers once the results are written
