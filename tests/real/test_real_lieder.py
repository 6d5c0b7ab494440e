"""LIEDER on SmolLM2-135M-Instruct: the whole group, above chance, and the same numbers on every engine.

Three runs of the group `lieder` (both experiments, 1,152 log-likelihood requests): plain `lm_eval run --model hf`,
`simple_evaluate` with the harness's `vllm` model, and plain `lm_eval run --model local-completions` against `vllm
serve` (log-probabilities of the echoed prompt). The engines compute in different code (transformers, vLLM's CPU
kernels) on the same fp32 weights: every comparison of the group comes out the same, so every metric is equal.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers import real

pytestmark = pytest.mark.xdist_group("real_server")  # the server's runs live on one test process
TASKS = ("lieder", "lieder_base", "lieder_diff")


def lm_eval_cli(args: list, out: Path) -> dict:
    """Plain ``lm_eval run ARGS`` in a process of its own (:class:`helpers.real.LmEvalRun`); its results file."""
    with real.LmEvalRun(args, out) as run:
        return run.results()


def numbers(results: dict) -> dict:
    """Every number the group's results report, by (task, metric)."""
    return {(task, key): value for task in TASKS for key, value in results["results"][task].items()
            if isinstance(value, (int, float))}


def samples(out: Path, task: str) -> dict[int, dict]:
    """The samples of ``task`` in a results folder, by doc_id."""
    (path,) = out.rglob(f"samples_{task}_*.jsonl")
    return {sample["doc_id"]: sample for sample in map(json.loads, path.read_text().splitlines())}


@pytest.fixture(scope="module")
def runs(real_model_dir, vllm_lm, vllm_server, tmp_path_factory) -> dict:
    tmp = tmp_path_factory.mktemp("lieder")
    # hf computes in its own process while this one drives vLLM, then the server
    with real.LmEvalRun(["--model", "hf", "--model_args", f"pretrained={real_model_dir},dtype=float32", "--device",
                         "cpu", "--batch_size", real.HF_BATCH, "--tasks", "lieder"], tmp / "hf") as hf_run:
        vllm = real.evaluate(vllm_lm, ["lieder"])
        server = lm_eval_cli(["--model", "local-completions", "--model_args", real.model_args(
            {"model": real.SERVED_NAME, "base_url": f"{vllm_server.base_url}/completions", "tokenizer": real_model_dir,
             "tokenizer_backend": "huggingface", "num_concurrent": 4}), "--tasks", "lieder"], tmp / "server")
        hf = hf_run.results()
    return {"hf": hf, "vllm": vllm, "server": server, "hf_out": tmp / "hf"}


def test_the_group_is_above_chance_on_every_engine(runs):
    for engine in ("hf", "vllm", "server"):
        for task in TASKS:
            accuracy = runs[engine]["results"][task]["acc,none"]
            assert accuracy > 0.6, (engine, task, accuracy)  # chance is 0.5


def test_every_metric_is_the_same_on_hf_vllm_and_the_server(runs):
    hf = numbers(runs["hf"])
    assert len(hf) > 100  # the group, its two tasks, each comparison type and its relative version
    for engine in ("vllm", "server"):
        assert numbers(runs[engine]) == hf, engine


def test_hf_loads_the_gguf_file_itself(runs, tmp_path):
    """`--model_args pretrained=DIR,gguf_file=NAME` dequantizes the wheel's file as the tier's folder was made from
    it: the same log-likelihoods for the first documents of lieder_base (to the last digits a batch of another size
    may move), the same verdicts."""
    gguf = real.gguf_file()
    lm_eval_cli(["--model", "hf", "--model_args", f"pretrained={gguf.parent},gguf_file={gguf.name},dtype=float32",
                 "--device", "cpu", "--tasks", "lieder_base", "--limit", "4"], tmp_path)
    from_gguf, from_folder = samples(tmp_path, "lieder_base"), samples(runs["hf_out"], "lieder_base")
    assert sorted(from_gguf) == [0, 1, 2, 3]
    for doc_id, sample in from_gguf.items():
        mine, theirs = sample["resps"], from_folder[doc_id]["resps"]
        # each request's log-likelihood (the samples file writes it as text)
        assert [float(r[0][0]) for r in mine] == pytest.approx([float(r[0][0]) for r in theirs], abs=1e-4), doc_id
        assert sample["acc"] == from_folder[doc_id]["acc"], doc_id
