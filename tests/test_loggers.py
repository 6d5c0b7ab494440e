"""The harness's loggers on one task of each benchmark: W&B (offline) with the per-sample tables, and the
Hugging Face Hub tracker with pushing disabled (results and samples files written locally).

The W&B logger reads each task's ``metric_list`` and then every listed metric from every sample, so
these runs fail ("Logging to W&B failed") unless the tasks declare, in YAML, metrics every document
reports.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from doubles.stub_openai import StubOpenAIServer
from helpers.harness import broken

KEY_ENV = "LMX_LOGGERS_JUDGE_KEY"
LIMIT = 3


def _sample_table(wandb_dir: Path, task: str) -> dict:
    """The offline W&B run's per-sample table of ``task`` (``<task>_eval_results_<step>_<hash>.table.json``)."""
    (path,) = wandb_dir.rglob(f"media/table/{task}_eval_results_*.table.json")
    return json.loads(path.read_text())


def _run(run_cli, tmp_path: Path, name: str, model: list[str], tasks: str, extra: list[str], env: dict):
    out, wandb_dir = tmp_path / f"{name}_out", tmp_path / f"{name}_wandb"
    wandb_dir.mkdir()
    # lm-eval-ext run: the harness's own run and loggers, its task index limited to the plugin's tasks
    proc = run_cli(["lm-eval-ext", "run", *model, "--tasks", tasks, "--limit", str(LIMIT), "--log_samples",
                    "--output_path", str(out), "--wandb_args", f"project=lmx-{name},mode=offline,dir={wandb_dir}",
                    "--hf_hub_log_args", "push_results_to_hub=False,push_samples_to_hub=False", *extra],
                   env={"WANDB_MODE": "offline", "WANDB_SILENT": "true", **env})
    assert proc.returncode == 0, proc.stderr[-3000:]
    if name == "lieder" and broken("wandb_loglikelihood"):  # the harness's own W&B table of log-likelihood tasks
        assert "Logging to W&B failed: list index out of range" in proc.stderr, proc.stderr[-3000:]
    else:
        assert "Logging to W&B failed" not in proc.stderr, proc.stderr[-3000:]
    return out, wandb_dir, proc


@pytest.mark.slow
def test_wandb_and_hub_tracker_on_every_benchmark(run_cli, data_dir, tmp_path):
    table = tmp_path / "table.json"
    table.write_text(json.dumps({"entries": [], "default": -2.0}))
    out, wandb_dir, _ = _run(run_cli, tmp_path, "lieder", ["--model", "ext-loglik-table", "--model_args",
                                                            f"table={table}"], "lieder_base", [], {})
    runs = {"lieder_base": (out, wandb_dir)}

    responses = tmp_path / "responses.json"
    responses.write_text(json.dumps({"rules": [], "default": "name FROM singer"}))

    def judge(request: dict) -> str:
        return "Fine. \\boxed{7}"

    with StubOpenAIServer(responder=judge, models=()) as srv:
        out, wandb_dir, _ = _run(
            run_cli, tmp_path, "generation", ["--model", "ext-canned-gen", "--model_args", f"responses={responses}"],
            "litm_qa_oracle,magnifico_direct_base,elitr_bench_qa_dev_st", ["--confirm_run_unsafe_code", "--metadata",
            # JSON: lm-eval 0.4.12 reads --metadata as JSON only (0.4.13 also takes key=value pairs)
            json.dumps({"judge_base_url": srv.base_url, "judge_api_key_env": KEY_ENV, "judge_cache": "none"})],
            {KEY_ENV: "sk-loggers-test-key-0123456789abcdef"})
    for task in ("litm_qa_oracle", "magnifico_direct_base", "elitr_bench_qa_dev_st"):
        runs[task] = (out, wandb_dir)

    for task, (out, wandb_dir) in runs.items():
        # the Hub tracker wrote the results and samples locally, pushing nothing
        results = json.loads(next(out.rglob("results_*.json")).read_text())
        assert task in results["results"], task
        samples = [json.loads(line) for line in next(out.rglob(f"samples_{task}_*.jsonl")).read_text().splitlines()]
        assert len(samples) == LIMIT
        # W&B: every task has its per-sample table, a row per document, with the task's listed metrics
        if task == "lieder_base" and broken("wandb_loglikelihood"):
            continue
        table = _sample_table(wandb_dir, task)
        columns, rows = table["columns"], table["data"]
        listed = [m["metric"] for m in results["configs"][task]["metric_list"]]
        assert set(listed) <= set(columns), (task, listed, columns)
        assert len(rows) == LIMIT, task
