"""Ctrl-C and SIGTERM while judging: one paragraph naming the saved answers and the resume command, exit 130 / 143.

The answering model is scripted (ext-canned-gen); the judge is the stub server, whose replies to judge
calls wait until the test opens a gate: the run is certainly judging (the stub has seen a judge
call) when the signal comes, and the call in flight never ends by itself. The run has two tasks, and the
signal comes while the first is judged: the second's answers, generated already, are saved too. The resume
command from the paragraph then finishes the run.
"""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from doubles import LM_EVAL, LM_EVAL_EXT
from doubles.stub_openai import StubOpenAIServer
from helpers.judge import answering_the_probe, judge_calls
from helpers.files import subprocess_env

KEY_ENV = "LMX_INTERRUPT_KEY"
KEY = "sk-interrupt-test-key-0123456789abcdef"
TASKS = ("elitr_bench_qa_dev_st", "elitr_bench_qa_dev_mt")  # scored in this order
N = 4
HANG_GUARD = 300  # seconds: only ends a test that would otherwise hang; never decides a result


def _answer(request: dict) -> str:
    return re.search(r"### Response to evaluate:\n(.*?)\n\n###", request["messages"][-1]["content"], re.S).group(1)


def _gated_judge(gate: threading.Event):
    """A judge that scores "A<n>" with n once ``gate`` is open (the probe is answered at once)."""
    def respond(request: dict) -> str:
        gate.wait()
        return f"Fine. \\boxed{{{_answer(request)[1:]}}}"
    return answering_the_probe(respond)


def _command(tmp_path: Path, program: list[str], srv) -> list[str]:
    from lm_eval_ext.elitr.data import build_documents

    docs, _ = build_documents("qa", "dev", "en")
    # question k is answered "A<k+3>": scores 3..6, mean 4.5
    rules = [{"contains": doc["question"].strip(), "response": f"A{k + 3}"} for k, doc in enumerate(docs[:N])]
    responses = tmp_path / "responses.json"
    responses.write_text(json.dumps({"rules": rules[::-1], "default": None}))
    metadata = {"judge_base_url": srv.base_url, "judge_api_key_env": KEY_ENV, "judge_concurrency": 1,
                "judge_cache": str(tmp_path / "verdicts.sqlite"), "answers_dir": str(tmp_path / "answers")}
    return [*program, "--model", "ext-canned-gen", "--model_args", f"responses={responses}", "--tasks", ",".join(TASKS),
            "--limit", str(N), "--output_path", str(tmp_path / "out"), "--log_samples", "--metadata", json.dumps(metadata)]


def _ctrl_c_as_at_a_terminal() -> None:
    """In the child, before it starts: SIGINT's default action, as a command typed at a terminal has it. A test
    run started in the background (``pytest ... &``) ignores SIGINT, and a child would inherit that."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _interrupted(tmp_path: Path, program: list[str], signum: int, srv) -> tuple[int, str]:
    """Run ``program`` until the stub has seen a judge call, send ``signum``; the exit status and stderr."""
    env = subprocess_env({KEY_ENV: KEY})
    log = tmp_path / "stderr.txt"
    with log.open("w") as stderr:
        # a process of its own: the signal ends it
        proc = subprocess.Popen(_command(tmp_path, program, srv), env=env, cwd=tmp_path, stdout=subprocess.DEVNULL,
                                stderr=stderr, preexec_fn=_ctrl_c_as_at_a_terminal)
        deadline = time.monotonic() + HANG_GUARD
        while not judge_calls(srv) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert proc.poll() is None and judge_calls(srv), log.read_text()[-3000:]
        proc.send_signal(signum)
        code = proc.wait(timeout=HANG_GUARD)
    return code, log.read_text()


def _paragraph(stderr: str, run: Path, what: str) -> None:
    assert "Traceback" not in stderr, stderr[-3000:]
    assert stderr.rstrip().splitlines()[-1] == (
        f"lm-eval-ext: Stopped by {what}; the answers of {', '.join(TASKS)} are saved in {run}: `lm-eval-ext resume {run}` "
        "scores them and writes the run's results (judge verdicts already given come from the judge's cache; "
        "tasks not answered yet must be run again).")


def _resumed(run_cli, tmp_path: Path, run: Path) -> dict:
    proc = run_cli(["lm-eval-ext", "resume", str(run)], env={KEY_ENV: KEY})
    assert proc.returncode == 0, proc.stderr[-3000:]
    (results,) = [json.loads(p.read_text()) for p in (tmp_path / "out").rglob("results_*.json")]
    return results["results"]


@pytest.mark.slow
@pytest.mark.parametrize("program,signum,status,what", [
    ([*LM_EVAL, "run"], signal.SIGINT, 130, "Ctrl-C (SIGINT)"),
    ([*LM_EVAL_EXT, "run"], signal.SIGTERM, 143, "SIGTERM"),
], ids=["lm_eval", "lm-eval-ext"])
def test_a_signal_while_judging_names_the_resume_command(run_cli, data_dir, tmp_path, program, signum, status, what):
    gate = threading.Event()
    with StubOpenAIServer(responder=_gated_judge(gate), models=()) as srv:
        try:
            code, stderr = _interrupted(tmp_path, program, signum, srv)
        finally:
            gate.set()
        assert code == status, stderr[-3000:]
        (run,) = (tmp_path / "answers").iterdir()
        _paragraph(stderr, run, what)
        assert sorted(path.name for path in run.iterdir()) == sorted(f"{task}.jsonl" for task in TASKS)
        assert not list((tmp_path / "out").rglob("results_*.json"))
        results = _resumed(run_cli, tmp_path, run)
    for task in TASKS:
        assert results[task]["score,judge"] == 4.5 and results[task]["judge_failures,judge"] == 0, task


SLOW_CLEANUP = """
import signal, sys, threading
from lm_eval_ext import interrupts
{setup}
try:
    with interrupts.during_scoring():
        print("ready", flush=True)
        threading.Event().wait()
except KeyboardInterrupt:
    print("cleaning up", flush=True)
    threading.Event().wait()  # a clean-up that never ends
"""


@pytest.mark.parametrize("setup", ["", "interrupts.handle_signals()"], ids=["lm_eval", "lm-eval-ext run"])
def test_a_second_ctrl_c_stops_at_once(tmp_path, setup):
    # a process of its own: Ctrl-C ends it
    proc = subprocess.Popen([sys.executable, "-c", SLOW_CLEANUP.format(setup=setup)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, preexec_fn=_ctrl_c_as_at_a_terminal,
                            env={**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [
                                str(Path(__file__).resolve().parents[1]), os.environ.get("PYTHONPATH")]))})
    try:
        assert proc.stdout.readline() == "ready\n"
        proc.send_signal(signal.SIGINT)
        assert proc.stdout.readline() == "cleaning up\n"  # the first Ctrl-C raised KeyboardInterrupt
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=HANG_GUARD) == -signal.SIGINT  # the second one ended the process
    finally:
        proc.kill()
        proc.wait()
    assert "Traceback" not in proc.stderr.read()


def test_scoring_leaves_a_script_s_own_handlers_and_restores_the_defaults():
    from lm_eval_ext import interrupts

    mine = lambda signum, frame: None  # noqa: E731
    previous = signal.signal(signal.SIGTERM, mine), signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with interrupts.during_scoring():
            assert signal.getsignal(signal.SIGTERM) is mine
            assert signal.getsignal(signal.SIGINT) is not signal.default_int_handler
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
        assert signal.getsignal(signal.SIGTERM) is mine
    finally:
        signal.signal(signal.SIGTERM, previous[0])
        signal.signal(signal.SIGINT, previous[1])


def test_nothing_saved_yet_is_said(monkeypatch, tmp_path):
    from lm_eval_ext import answers, interrupts

    monkeypatch.setattr(answers, "_SAVED", {})
    assert interrupts.paragraph(KeyboardInterrupt()) == (
        "Stopped by Ctrl-C (SIGINT) before any model answer was saved: there is nothing to resume; run the command "
        "again (with --use_cache PATH the harness keeps each answer as the model gives it, so a rerun with the same "
        "PATH asks the model only for the rest).")
    gone = tmp_path / "removed once the results were written"
    monkeypatch.setattr(answers, "_SAVED", {gone: [TASKS[0]]})
    assert interrupts.paragraph(interrupts.Terminated()).startswith("Stopped by SIGTERM before any model answer")
    assert interrupts.exit_code(KeyboardInterrupt()) == 130 and interrupts.exit_code(interrupts.Terminated()) == 143


def test_the_paragraph_starts_a_line_of_its_own(monkeypatch, capsys):
    """A signal mostly lands while the harness draws a progress bar, whose line stays open: the harness closes its
    bars only after their loop ends (seen with Ctrl-C in `lm-eval-ext run` of a real model's generations)."""
    from lm_eval_ext import answers, interrupts

    monkeypatch.setattr(answers, "_SAVED", {})
    monkeypatch.setattr(sys, "ps1", ">>> ", raising=False)  # an interactive session: stop() prints and returns
    print("Running generate_until requests:   3%|▎         | 9/300 [00:24<13:06,  2.70s/it]", end="", file=sys.stderr)
    interrupts.stop(KeyboardInterrupt())
    assert capsys.readouterr().err.splitlines()[-1] == (
        "lm-eval-ext: Stopped by Ctrl-C (SIGINT) before any model answer was saved: there is nothing to resume; run "
        "the command again (with --use_cache PATH the harness keeps each answer as the model gives it, so a rerun "
        "with the same PATH asks the model only for the rest).")


def test_a_task_left_unscored_by_an_earlier_run_is_not_saved_with_the_next_runs_answers(data_dir, tmp_path):
    """In a script, a run that stopped after generation (another task's scoring failed) leaves a plugin task with
    answers it never saved; the next run in the process saves its own tasks' answers only."""
    import lm_eval
    from lm_eval.tasks import TaskManager

    from lm_eval_ext.paths import tasks_dir

    table = tmp_path / "table.json"
    table.write_text(json.dumps({"entries": [], "default": -1.0}))
    manager = TaskManager(include_path=str(tasks_dir()), include_defaults=False,
                          metadata={"answers_dir": str(tmp_path / "answers")})
    left = manager.load("lieder_diff")["tasks"]["lieder_diff"]
    left.build_all_requests(limit=2)
    for instance in left.instances:
        instance.resps.append((-1.0, False))  # generated, never scored
    lm_eval.simple_evaluate(model="ext-loglik-table", model_args=f"table={table}", tasks=["lieder_base"],
                            task_manager=manager, limit=2)
    (run,) = (tmp_path / "answers").iterdir()
    assert [path.name for path in run.iterdir()] == ["lieder_base.jsonl"]
