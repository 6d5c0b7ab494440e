"""LIEDER on SmolLM2-135M-Instruct: the whole group, above chance, and the same numbers on every engine.

Three runs of the group `lieder` (both experiments, 1,152 log-likelihood requests): plain `lm_eval run --model hf`
on the wheel's GGUF file itself (`--model_args pretrained=DIR,gguf_file=NAME`, dequantized to fp32 as it loads),
`simple_evaluate` with the harness's `vllm` model on the fp32 folder made from that file, and plain `lm_eval run
--model local-completions` against `vllm serve` of that folder (log-probabilities of the echoed prompt). The engines
compute in different code (transformers, vLLM's CPU kernels) on the same fp32 weights: every comparison of the group
comes out the same, so every metric is equal.
"""
from __future__ import annotations

import contextlib

import pytest

from helpers import real

pytestmark = pytest.mark.xdist_group("real_server")  # the server's runs live on one test process
TASKS = ("lieder", "lieder_base", "lieder_diff")


def numbers(results: dict) -> dict:
    """Every number the group's results report, by (task, metric)."""
    return {(task, key): value for task in TASKS for key, value in results["results"][task].items()
            if isinstance(value, (int, float))}


@pytest.fixture(scope="module")
def runs(request, real_model_dir, tmp_path_factory) -> dict:
    tmp = tmp_path_factory.mktemp("lieder")
    gguf = real.gguf_file()
    server = request.getfixturevalue("vllm_server")  # (started by an earlier test, or starting now)
    # both commands compute in processes of their own while this one drives vLLM
    with contextlib.ExitStack() as stack:
        hf = stack.enter_context(real.LmEvalRun(
            ["--model", "hf", "--model_args", f"pretrained={gguf.parent},gguf_file={gguf.name},dtype=float32",
             "--device", "cpu", "--batch_size", real.HF_BATCH, "--tasks", "lieder"], tmp / "hf"))
        vllm_lm = request.getfixturevalue("vllm_lm")
        served = stack.enter_context(real.LmEvalRun(
            ["--model", "local-completions", "--model_args", real.model_args(
                {"model": real.SERVED_NAME, "base_url": f"{server.url()}/completions", "tokenizer": real_model_dir,
                 "tokenizer_backend": "huggingface", "num_concurrent": 4}), "--tasks", "lieder"], tmp / "server"))
        vllm = real.evaluate(vllm_lm, ["lieder"])
        return {"hf": hf.results(), "vllm": vllm, "server": served.results()}


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
