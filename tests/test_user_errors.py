"""The plugin's own errors through the harness's `lm_eval run` and `simple_evaluate`: one paragraph, exit 2.

Each run is the command a user types; stderr must end with the plugin's paragraph (``lm-eval-ext: error:
...``) and hold no traceback. Advice names the flags of the command that ran: `--metadata` in its JSON
form (lm-eval-ext's `--judge-*` flags do not exist on `lm_eval`). An error of the harness's own still
shows as the harness shows it: its traceback, unchanged.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from helpers.harness import VERSION
from lm_eval_ext.errors import UserError
from lm_eval_ext.user_errors import PREFIX, plugin_error

KEY_ENV = "LMX_USER_ERRORS_KEY"
KEY = "sk-user-errors-test-key-0123456789abcdef"
JUDGED = "elitr_bench_qa_dev_st"


def _canned(tmp_path: Path) -> list[str]:
    responses = tmp_path / "responses.json"
    responses.write_text(json.dumps({"rules": [], "default": "an answer"}))
    return ["--model", "ext-canned-gen", "--model_args", f"responses={responses},calls_log={tmp_path / 'calls.jsonl'}"]


def _paragraph(proc) -> str:
    """The plugin's paragraph: the last line of stderr, after an exit status of 2 and no traceback."""
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    last = proc.stderr.rstrip().splitlines()[-1]
    assert last.startswith(PREFIX)
    return last[len(PREFIX):]


def _judged(run_cli, tmp_path: Path, metadata: dict):
    metadata = {"judge_base_url": "http://127.0.0.1:9/v1", "judge_api_key_env": KEY_ENV, "judge_cache": "none",
                **metadata}
    return run_cli(["lm_eval", "run", *_canned(tmp_path), "--tasks", JUDGED, "--limit", "2",
                    "--metadata", json.dumps(metadata)], env={KEY_ENV: KEY})


@pytest.mark.slow
def test_unknown_judge(run_cli, data_dir, tmp_path):
    """A judge option's error through `lm_eval`. Every such error comes from the same check, the task's before it
    generates; their texts are checked in tests/test_judge_parser.py and through `lm-eval-ext run` in
    tests/test_preflight.py."""
    paragraph = _paragraph(_judged(run_cli, tmp_path, {"judge": "gpt4"}))
    assert paragraph == """Unknown judge 'gpt4': use one of rubric10, prometheus5 (--metadata '{"judge": "rubric10"}')."""
    assert not (tmp_path / "calls.jsonl").exists()  # found before anything was generated


@pytest.mark.slow
def test_judge_key_advice_names_the_harness_flag(run_cli, data_dir, tmp_path):
    """The key's variable is set with --metadata under lm_eval (`--judge-api-key-env` exists on `check` only)."""
    proc = run_cli(["lm_eval", "run", *_canned(tmp_path), "--tasks", JUDGED, "--limit", "2", "--metadata",
                    json.dumps({"judge_api_key_env": KEY_ENV, "judge_cache": "none"})])
    paragraph = _paragraph(proc)
    assert """name another variable with --metadata '{"judge_api_key_env": "NAME"}'""" in paragraph
    assert "--judge-api-key-env" not in paragraph


@pytest.mark.slow
def test_missing_data_files(run_cli, tmp_path):
    empty = tmp_path / "mirror"
    empty.mkdir()
    table = tmp_path / "table.json"
    table.write_text(json.dumps({"entries": [], "default": -1.0}))
    proc = run_cli(["lm_eval", "run", "--model", "ext-loglik-table", "--model_args", f"table={table}",
                    "--tasks", "lieder_base", "--limit", "2"],
                   env={"LM_EVAL_EXT_DATA_DIR": str(empty), "LM_EVAL_EXT_OFFLINE": "1"})
    assert "Dataset 'lieder': file 'stimuli/base/base_stimuli.jsonl' was not found" in _paragraph(proc)


@pytest.mark.slow
def test_multi_turn_prompt_too_long(run_cli, tiny_model_dir, data_dir, tmp_path):
    proc = run_cli(["lm_eval", "run", "--model", "hf", "--model_args",
                    f"pretrained={tiny_model_dir},dtype=float32,max_length=1024", "--device", "cpu",
                    "--tasks", "elitr_bench_qa_dev_mt", "--samples", json.dumps({"elitr_bench_qa_dev_mt": [0, 17]}),
                    "--predict_only", "--output_path", str(tmp_path / "out"), "--gen_kwargs", "max_gen_toks=8"])
    paragraph = _paragraph(proc)
    assert "2 prompt(s) of turn 1 do not fit" in paragraph and "at most 1016 prompt tokens" in paragraph
    assert """--metadata '{"overflow": "truncate"}'""" in paragraph


@pytest.mark.slow
def test_simple_evaluate_in_a_script(run_cli, data_dir, tmp_path):
    responses = tmp_path / "responses.json"
    responses.write_text(json.dumps({"rules": [], "default": "an answer"}))
    script = (
        "import doubles, lm_eval\n"
        "from lm_eval.tasks import TaskManager\n"
        "doubles.register()  # the scripted model, as a script of the user's would use a model of its own\n"
        f"metadata = {{'judge': 'gpt4', 'judge_api_key_env': {KEY_ENV!r}}}\n"
        f"lm_eval.simple_evaluate(model='ext-canned-gen', model_args={{'responses': {str(responses)!r}}},\n"
        f"                       tasks=[{JUDGED!r}], limit=2,\n"
        "                       task_manager=TaskManager(include_defaults=False, metadata=metadata))\n"
        "print('not reached')\n")
    # a process of its own: a script's uncaught error ends its interpreter through the plugin's exception hook
    proc = run_cli([sys.executable, "-c", script], env={KEY_ENV: KEY}, timeout=600)
    paragraph = _paragraph(proc)
    assert paragraph == """Unknown judge 'gpt4': use one of rubric10, prometheus5 (--metadata '{"judge": "rubric10"}')."""
    assert "not reached" not in proc.stdout


def test_plugin_error_finds_the_plugin_s_error_in_a_wrapped_one():
    mine = UserError("what, where, what to do")
    try:
        try:
            raise mine
        except UserError as err:
            raise RuntimeError("building the task failed") from err
    except RuntimeError as wrapped:
        assert plugin_error(wrapped) is mine
    try:
        try:
            raise mine
        except UserError:
            raise KeyError("while handling it")  # noqa: B904 (the implicit context is what is tested)
    except KeyError as wrapped:
        assert plugin_error(wrapped) is mine
    try:
        try:
            raise mine
        except UserError:
            raise ValueError("another error, its context dropped") from None
    except ValueError as other:
        assert plugin_error(other) is None
    assert plugin_error(ValueError("the harness's own")) is None


def _harness_traceback(proc) -> str:
    """The harness's own report of an error: exit status 1 and Python's traceback, nothing of the plugin's."""
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "lm-eval-ext: error" not in proc.stderr
    return proc.stderr[proc.stderr.index("Traceback (most recent call last):"):]


@pytest.mark.slow
def test_an_unknown_task_name_is_the_harness_business(run_cli, tmp_path):
    proc = run_cli(["lm_eval", "run", *_canned(tmp_path), "--tasks", "lieder_base,no_such_task"])
    traceback = _harness_traceback(proc)
    harness_error = ("ValueError: Tasks not found: no_such_task" if VERSION.startswith("0.4.")
                     else """KeyError: "Spec 'no_such_task' is not a registered task/group/tag name""")  # 0.5
    assert traceback.rstrip().splitlines()[-1].startswith(harness_error)


@pytest.mark.slow
def test_an_error_of_the_harness_inside_a_plugin_task_is_shown_unchanged(run_cli, data_dir, tmp_path):
    """--limit 0: the plugin's task is built (so its hook is in place), then the harness stops the run itself."""
    table = tmp_path / "table.json"
    table.write_text(json.dumps({"entries": [], "default": -1.0}))
    proc = run_cli(["lm_eval", "run", "--model", "ext-loglik-table", "--model_args", f"table={table}", "--tasks",
                    "lieder_base", "--limit", "0"])
    traceback = _harness_traceback(proc)
    assert "lm_eval_ext/task_base.py" in traceback  # raised through the plugin's task: its hook was installed
    assert traceback.rstrip().splitlines()[-1] == "ValueError: task.build_requests() did not find any docs!"
