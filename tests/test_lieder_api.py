"""LIEDER over an OpenAI-style completions server, through the plain harness's `local-completions` and the stub.

A good server gives exactly the metrics `ext-loglik-table` gives with the same log-probabilities, which are
worked out here from the stub's scripted log-prob function and the tokenizer. The two broken servers (one
ignores `echo`, one generates no token) stop the run with one paragraph naming the server.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest


pytestmark = pytest.mark.filterwarnings("ignore")

LIMIT = 4
FIRST_CONTEXT = "John owns a dog but Mark doesn't own a dog."  # the first row of the base set
WHAT_TO_DO = ("Use a server that returns the prompt's log-probabilities on /v1/completions (`echo: true` with "
              "`logprobs`) and generates the requested token (`max_tokens: 1`), e.g. vLLM's OpenAI-compatible "
              "server (docs/lieder.md has the tested command), or run the model with `--model hf` or "
              "`--model vllm`. If the run used --use_cache, delete that cache file: it holds these values.")


def _no_echo_paragraph(url: str) -> str:
    return (f"lieder_base: the completions server at {url} gave the sentence 'The dog is very cute.' after "
            f"\"{FIRST_CONTEXT}\" a log-probability of exactly 0, which no model gives a whole sentence: the "
            "prompt's log-probabilities did not arrive (a server that ignores `echo` returns only the generated "
            "token's, and the harness's local-completions adapter then sums an empty list), so every LIEDER "
            f"comparison would be a tie and every accuracy 0. {WHAT_TO_DO}")


def _no_generated_paragraph(url: str) -> str:
    return (f"lieder_base: the completions server at {url} returned the prompt's log-probabilities but no "
            f"generated token: the check request (the one-token continuation ' The' after \"{FIRST_CONTEXT}\") "
            "got a log-probability of exactly 0. The harness's local-completions adapter drops the last "
            "log-probability it gets, taking it for the generated token, so every LIEDER sentence would "
            f"silently lose its final token's log-probability. {WHAT_TO_DO}")


def _command(srv, tokenizer_dir: Path, out: Path, program=("lm_eval", "run")) -> list[str]:
    # the arguments docs/lieder.md gives for an OpenAI-compatible server
    return [*program, "--model", "local-completions", "--model_args",
            f"model=stub,base_url={srv.completions_url},tokenizer_backend=huggingface,tokenizer={tokenizer_dir},"
            "add_bos_token=True", "--batch_size", "16", "--tasks", "lieder_base", "--limit", str(LIMIT),
            "--output_path", str(out), "--log_samples"]


def _expected_logprob(tokenizer, context: str, continuation: str) -> float:
    """What the harness gets from a good server: the stub's log-prob of every continuation token, summed,
    with context and continuation tokenized together as the harness does (no BOS: this tokenizer adds none)."""
    from doubles.stub_openai import scripted_logprob

    whole = tokenizer(context + continuation, add_special_tokens=True).input_ids
    n_context = len(tokenizer(context, add_special_tokens=True).input_ids)
    assert whole[:n_context] == tokenizer(context, add_special_tokens=True).input_ids
    return sum(scripted_logprob(whole[:i], whole[i]) for i in range(n_context, len(whole)))


def _table_metrics(table: Path) -> dict:
    import lm_eval
    from lm_eval.tasks import TaskManager

    from lm_eval_ext.paths import tasks_dir
    results = lm_eval.simple_evaluate(model="ext-loglik-table", model_args=f"table={table}", tasks=["lieder_base"],
                                      task_manager=TaskManager(include_path=str(tasks_dir()), include_defaults=False),
                                      limit=LIMIT)
    return results["results"]["lieder_base"]


@pytest.mark.slow
def test_good_server_gives_the_metrics_of_the_same_logprobs(run_cli, tiny_model_dir, data_dir, tmp_path):
    from transformers import AutoTokenizer

    from doubles.stub_openai import StubOpenAIServer

    out = tmp_path / "out"
    with StubOpenAIServer(text="x") as srv:
        proc = run_cli(_command(srv, tiny_model_dir, out))
        bodies = [r["body"] for r in srv.requests if r["method"] == "POST"]
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert all(b["echo"] is True and b["max_tokens"] == 1 and b["logprobs"] == 1 for b in bodies)
    (results_file,) = out.rglob("results_*.json")
    (samples_file,) = out.rglob("samples_lieder_base_*.jsonl")
    got = json.loads(results_file.read_text())["results"]["lieder_base"]
    samples = [json.loads(line) for line in samples_file.read_text().splitlines()]
    assert len(samples) == LIMIT
    assert sum(len(b["prompt"]) for b in bodies) == LIMIT * 13  # 12 rows and the server check per document

    tokenizer = AutoTokenizer.from_pretrained(str(tiny_model_dir))
    entries = []
    for sample in samples:
        rows = sample["doc"]["rows"]
        pairs = [(a["arg_0"], a["arg_1"]) for a in sample["arguments"].values()]
        assert pairs == [(r["context"], " " + r["continuation"]) for r in rows] + [(rows[0]["context"], " The")]
        for (context, continuation), resp in zip(pairs, sample["resps"], strict=True):
            expected = _expected_logprob(tokenizer, context, continuation)
            assert float(resp[0][0]) == pytest.approx(expected, abs=1e-12) and expected < 0
        entries += [{"context": c, "continuation": k, "logprob": _expected_logprob(tokenizer, c, k)}
                    for c, k in pairs[:-1]]  # the table model gets no check request: the rows only
    table = tmp_path / "table.json"
    table.write_text(json.dumps({"entries": entries, "default": None}))
    expected = _table_metrics(table)
    assert {k: v for k, v in got.items() if k != "alias"} == {k: v for k, v in expected.items() if k != "alias"}
    assert 0 < got["acc,none"] < 1  # the log-probs decide the comparisons: not all ties


@pytest.mark.slow
@pytest.mark.parametrize(("fault", "paragraph", "program"), [
    ("no_echo", _no_echo_paragraph, ("lm_eval", "run")),
    ("no_generated", _no_generated_paragraph, ("lm-eval-ext", "run")),
], ids=["no_echo-lm_eval", "no_generated-lm-eval-ext"])
def test_broken_server_stops_the_run_with_one_paragraph(run_cli, tiny_model_dir, data_dir, tmp_path, fault, paragraph,
                                                        program):
    """Through either command, the plugin's paragraph alone (lm_eval_ext/user_errors.py), exit 2."""
    from doubles.stub_openai import StubOpenAIServer

    with StubOpenAIServer(text="x", logprobs_fault=fault) as srv:
        proc = run_cli(_command(srv, tiny_model_dir, tmp_path / "out", program=program))
        url = srv.completions_url
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert proc.stderr.rstrip().splitlines()[-1] == "lm-eval-ext: error: " + paragraph(url)
    assert not list((tmp_path / "out").rglob("results_*.json"))  # no results that look valid


def test_a_sentence_logprob_of_exactly_zero_stops_any_model(data_dir, tmp_path):
    """Without a server (no base_url), no check request is made, and a row log-prob of 0 still stops the run."""
    from lm_eval_ext.lieder.server_check import PromptLogprobsMissing

    table = tmp_path / "table.json"
    table.write_text(json.dumps({"entries": [], "default": 0.0}))
    with pytest.raises(PromptLogprobsMissing, match=r"^lieder_base: the model gave the sentence 'The dog is very cute\.'"):
        _table_metrics(table)
