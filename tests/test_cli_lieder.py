"""LIEDER end to end through both command lines, the installed layout, and user errors."""
from __future__ import annotations

import json
import math
import zipfile
from pathlib import Path

import pytest

from helpers.harness import assert_documents
from helpers.runs import Run


TASK_NAMES = ("lieder_base", "lieder_diff", "lieder_two", "lieder")


def _tasks_dir(run_cli) -> Path:
    proc = run_cli(["lm-eval-ext", "tasks-dir"])
    assert proc.returncode == 0, proc.stderr
    return Path(proc.stdout.strip())


def test_version_and_help(run_cli):
    from lm_eval_ext import __version__

    proc = run_cli(["lm-eval-ext", "--version"])
    assert proc.returncode == 0 and proc.stdout.strip() == f"lm-eval-ext {__version__}"
    proc = run_cli(["lm-eval-ext", "--help"])
    assert proc.returncode == 0
    for word in ("run", "tasks-dir", "data"):
        assert word in proc.stdout
    proc = run_cli(["lm-eval-ext", "run", "--help"])
    assert proc.returncode == 0
    for flag in ("--model_args", "--include_path", "--log_samples", "--metadata", "--gen_kwargs"):
        assert flag in proc.stdout, f"harness flag {flag} missing from `lm-eval-ext run --help`"


def test_tasks_dir_is_listed_by_plain_harness(run_cli, plain_task_listing_with_tasks_dir):
    tasks = _tasks_dir(run_cli)
    assert sorted(p.name for p in (tasks / "lieder").glob("lieder*.yaml")) == [
        "lieder.yaml", "lieder_base.yaml", "lieder_diff.yaml", "lieder_two.yaml"]
    proc = plain_task_listing_with_tasks_dir  # lm_eval ls tasks --include_path <that directory>
    assert proc.args[-1] == str(tasks)
    assert proc.returncode == 0, proc.stderr
    for name in TASK_NAMES:
        assert f" {name} " in proc.stdout or f"|{name}|" in proc.stdout.replace(" ", ""), f"{name} not listed"


def test_wheel_ships_tasks_and_templates(plugin_wheel):
    """A non-editable install gets tasks/ and templates/ inside the package."""
    wheel = plugin_wheel  # pip wheel of the checkout, built once per test run
    names = set(zipfile.ZipFile(wheel).namelist())
    for required in ("lm_eval_ext/tasks/lieder/lieder_base.yaml", "lm_eval_ext/tasks/lieder/_lieder_template.yaml",
                     "lm_eval_ext/tasks/lieder/README.md", "lm_eval_ext/templates/README.md",
                     "lm_eval_ext/data/manifest.json", "lm_eval_ext/lieder/task.py"):
        assert required in names, f"{required} missing from the wheel"
    assert not any(name.startswith(("tests/", "tasks/")) for name in names)


def _check_outputs(out: Path, task: str, n_docs: int = 48) -> dict:
    from lm_eval_ext.results.load import read_run

    (results_file,) = out.rglob("results_*.json")
    run = read_run(results_file)  # a group's tasks as lm-eval 0.4 names them
    results = run.data
    metrics = results["results"][task]
    for name in ("acc,none", "acc_rel,none", "acc_existence,none", "acc_sg_pos_neg_gt_sg_pos_pos,none"):
        assert 0.0 <= metrics[name] <= 1.0, name
    samples = [json.loads(line) for line in run.samples_path(task).read_text().splitlines()]
    assert len(samples) == n_docs
    for sample in samples:
        assert len(sample["resps"]) == len(sample["doc"]["rows"]) == 12
        assert all(math.isfinite(float(resp[0][0])) and float(resp[0][0]) < 0 for resp in sample["resps"])
    return results


@pytest.mark.slow
def test_lm_eval_ext_run_with_tiny_hf_model(lieder_tiny):
    # the session's run: `lm-eval-ext run --model hf --model_args pretrained=<tiny model>,dtype=float32 --tasks lieder
    # --batch_size 32 --device cpu --output_path DIR --log_samples` (it exited with 0)
    assert "lieder_base" in (lieder_tiny.parent / "stdout.txt").read_text()
    _check_outputs(lieder_tiny, "lieder_base")
    _check_outputs(lieder_tiny, "lieder_diff")


@pytest.mark.slow
def test_plain_lm_eval_with_include_path(run_cli, tiny_model_dir, data_dir, tmp_path):
    out = tmp_path / "out"
    proc = run_cli(["lm_eval", "run", "--include_path", str(_tasks_dir(run_cli)), "--model", "hf",
                    "--model_args", f"pretrained={tiny_model_dir},dtype=float32", "--tasks", "lieder_base",
                    "--batch_size", "32", "--device", "cpu", "--output_path", str(out), "--log_samples"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    _check_outputs(out, "lieder_base")


@pytest.mark.slow
def test_chat_template_and_system_instruction_leave_lieder_as_it_is_and_say_so(run_cli, tiny_model_dir, data_dir,
                                                                              tmp_path):
    """LIEDER scores raw sentences: with --apply_chat_template and --system_instruction each request is still a
    stimulus row's context and continuation as they are, and the run says that the flags were not applied."""
    proc = run_cli(["lm-eval-ext", "run", "--model", "hf", "--model_args",
                    f"pretrained={tiny_model_dir},dtype=float32", "--device", "cpu", "--tasks", "lieder_base",
                    "--limit", "2", "--apply_chat_template", "--system_instruction", "Answer briefly.",
                    "--output_path", str(tmp_path / "out"), "--log_samples"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stderr.count("lieder_base: --apply_chat_template and --system_instruction not applied: LIEDER compares "
                             "the log-probabilities of raw sentences, as its authors did, so its numbers are those of a "
                             "run without.") == 1, proc.stderr[-3000:]
    run = Run.load(tmp_path / "out")
    assert run.results["configs"]["lieder_base"]["metadata"]["flags_not_applied"] == [
        "--apply_chat_template", "--system_instruction"]
    assert run.results["chat_template"] and run.results["system_instruction"] == "Answer briefly."  # as given
    samples = run.samples["lieder_base"]
    assert len(samples) == 2
    for sample in samples:
        requests = [(request["arg_0"], request["arg_1"]) for request in sample["arguments"].values()]
        assert requests == [(row["context"], " " + row["continuation"]) for row in sample["doc"]["rows"]]


def test_missing_data_offline_is_one_clear_paragraph(run_cli, tmp_path):
    table = tmp_path / "table.json"
    table.write_text(json.dumps({"entries": [], "default": -1.0}))
    env = {"LM_EVAL_EXT_DATA_DIR": str(tmp_path / "no-mirror"), "LM_EVAL_EXT_CACHE_DIR": str(tmp_path / "cache"),
           "LM_EVAL_EXT_OFFLINE": "1"}
    proc = run_cli(["lm-eval-ext", "run", "--model", "ext-loglik-table", "--model_args", f"table={table}",
                    "--tasks", "lieder_base"], env=env)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert "lieder" in proc.stderr and "lm-eval-ext data fetch" in proc.stderr
    assert not (tmp_path / "cache" / "lieder" / "stimuli" / "base" / "base_stimuli.jsonl").exists()


def test_explicit_stimuli_file(run_cli, data_dir, tmp_path):
    """`--metadata '{"stimuli_file": ...}'` replaces the published set (here: its first two groups)."""
    lines = (Path(data_dir) / "lieder/stimuli/base/base_stimuli.jsonl").read_text().splitlines()[:24]
    stimuli = tmp_path / "mine.jsonl"
    stimuli.write_text("\n".join(lines) + "\n")
    table = tmp_path / "table.json"
    table.write_text(json.dumps({"entries": [], "default": -1.0}))
    out = tmp_path / "out"
    proc = run_cli(["lm-eval-ext", "run", "--model", "ext-loglik-table", "--model_args", f"table={table}",
                    "--tasks", "lieder_base", "--metadata", json.dumps({"stimuli_file": str(stimuli)}),
                    "--output_path", str(out), "--log_samples"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads(next(out.rglob("results_*.json")).read_text())
    assert_documents(results, "lieder_base", 2)
    assert results["results"]["lieder_base"]["acc,none"] == 0.0  # every comparison a tie
