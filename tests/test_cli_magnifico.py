"""MAGNIFICo end to end with the tiny hf model, through `lm-eval-ext run` and the plain harness."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers.harness import filtered


GEN_KWARGS = '{"max_gen_toks": 8, "suppress_tokens": [0, 1, 2, 3]}'  # JSON: read whole by every harness


def _results(out: Path) -> dict:
    (path,) = out.rglob("results_*.json")
    return json.loads(path.read_text())


@pytest.mark.slow
def test_limited_run_with_the_tiny_model(run_cli, tiny_model_dir, data_dir, tmp_path):
    out = tmp_path / "out"
    proc = run_cli(["lm-eval-ext", "run", "--model", "hf", "--model_args", f"pretrained={tiny_model_dir},dtype=float32",
                    "--tasks", "magnifico_description_mid_foreign", "--limit", "4", "--device", "cpu",
                    "--gen_kwargs", GEN_KWARGS, "--confirm_run_unsafe_code", "--metadata", json.dumps({"interpretations": "maximum average"}),
                    "--output_path", str(out), "--log_samples"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = _results(out)["results"]["magnifico_description_mid_foreign"]
    for metric in ("ex", "em", "ex_base", "rel_perf", "interp_left_out", "prompts_truncated"):
        assert f"{metric},sandbox" in results, metric
    excluded = _results(out)["configs"]["magnifico_description_mid_foreign"]["metadata"]["excluded"]
    assert excluded["db_missing"] == sum(excluded["missing_databases"].values()) and excluded["gold_error"] == 0
    assert 0 <= results["ex,sandbox"] <= 1
    (samples_file,) = out.rglob("samples_magnifico_description_mid_foreign_*.jsonl")
    samples = [json.loads(line) for line in samples_file.read_text().splitlines()]
    assert len(samples) == 4
    # documents alternate novel and base items of the same interpretation
    assert [s["doc"]["role"] for s in samples] == ["novel", "base", "novel", "base"]
    for sample in samples:
        record = json.loads(filtered(sample))  # the sandbox filter's record, as JSON
        generation = sample["resps"][0][0]
        assert record["prediction"] == "SELECT " + generation.strip()
        assert isinstance(record["executed"], bool) and (record["error"] is None) == record["executed"]
        assert sample["doc"]["db_id"] and sample["doc"]["interpretation"] == "maximum"
    assert samples[0]["arguments"]["gen_args_0"]["arg_0"].endswith("\nSELECT")


@pytest.mark.slow
def test_plain_harness_requires_confirming_unsafe_code(run_cli, tiny_model_dir, data_dir, tmp_path):
    proc = run_cli(["lm_eval", "run", "--model", "hf", "--model_args", f"pretrained={tiny_model_dir},dtype=float32",
                    "--tasks", "magnifico_direct_base", "--limit", "1", "--device", "cpu",
                    "--metadata", json.dumps({"interpretations": "sum"})])
    assert proc.returncode != 0
    assert "unsafe" in (proc.stderr + proc.stdout).lower()
