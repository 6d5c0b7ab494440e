"""Lost in the Middle end to end through both command lines with the tiny hf model.

The tiny model answers at random; these runs check the pipeline (data layer -> prompts ->
harness -> scoring -> results and sample logs), the long-prompt policy, and user errors.
Exact metric values are tested with scripted models in test_litm_metrics.py.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers.harness import filtered


PARTIAL = ("lost_in_the_middle/partial_first_release_2023/ViktorTorp+lost-in-the-middle/qa_predictions/20_total_documents/"
           "gpt_reordered/nq-open-20_total_documents_gold_at_0-gpt-35-reorder-predictions-scored.jsonl.gz")
# Fast generation for tests: few new tokens, special tokens suppressed (tiny_model.py).
GEN_KWARGS = '{"max_gen_toks": 8, "suppress_tokens": [0, 1, 2, 3]}'  # JSON: read whole by every harness


def _outputs(out: Path) -> tuple[dict, dict[str, list[dict]]]:
    (results_file,) = out.rglob("results_*.json")
    samples = {}
    for path in out.rglob("samples_*.jsonl"):
        task = path.name[len("samples_"):].rsplit("_", 1)[0]
        samples[task] = [json.loads(line) for line in path.read_text().splitlines()]
    return json.loads(results_file.read_text()), samples


def _hf(tiny_model_dir, max_length: int) -> list[str]:
    return ["--model", "hf", "--model_args", f"pretrained={tiny_model_dir},dtype=float32,max_length={max_length}",
            "--device", "cpu", "--batch_size", "2", "--gen_kwargs", GEN_KWARGS]


@pytest.mark.slow
def test_oracle_closedbook_kv_and_generated_kv(run_cli, tiny_model_dir, data_dir, tmp_path):
    out = tmp_path / "out"
    tasks = "litm_qa_oracle,litm_qa_closedbook,litm_kv_75keys,litm_kv_140keys,litm_kv_generated"
    proc = run_cli(["lm-eval-ext", "run", *_hf(tiny_model_dir, 12000), "--tasks", tasks, "--limit", "5",
                    "--metadata", json.dumps({"litm_kv_pairs": 12, "litm_kv_examples": 3}), "--output_path", str(out), "--log_samples"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    results, samples = _outputs(out)
    for task, key in (("litm_qa_oracle", "acc,first_line"), ("litm_qa_closedbook", "acc,first_line"),
                      ("litm_kv_75keys", "acc,none"), ("litm_kv_140keys", "acc,none"), ("litm_kv_generated", "acc,none")):
        assert 0.0 <= results["results"][task][key] <= 1.0, task
        assert results["results"][task][key.replace("acc", "prompts_skipped")] == 0, task  # all fit 12,000 tokens
        assert len(samples[task]) == 5
    # KV: --limit 5 takes record 1 at its 4 (75) or 5 (140) positions first
    assert [s["doc"]["gold_index"] for s in samples["litm_kv_75keys"]] == [0, 24, 49, 74, 0]
    assert [s["doc"]["gold_position"] for s in samples["litm_kv_140keys"]] == [1, 35, 70, 105, 140]
    generated = samples["litm_kv_generated"]
    assert [(s["doc"]["k"], s["doc"]["gold_index"]) for s in generated] == [(12, 0), (12, 2), (12, 5), (12, 8), (12, 11)]
    for sample in samples["litm_kv_140keys"]:
        prompt, value = sample["arguments"]["gen_args_0"]["arg_0"], sample["doc"]["value"]
        assert prompt.count(f'"{sample["doc"]["key"]}": "{value}"') == 1
        assert sample["acc"] == float(value in filtered(sample).lower())
    for sample in samples["litm_qa_oracle"]:
        assert {"question", "answers", "k"} <= set(sample["doc"]) and sample["doc"]["k"] == 1
        assert filtered(sample) == sample["resps"][0][0].split("\n")[0].strip()  # the scored first line


@pytest.mark.slow
def test_partial_20_document_file_at_every_position(run_cli, tiny_model_dir, data_dir, tmp_path):
    out = tmp_path / "out"
    proc = run_cli(["lm-eval-ext", "run", *_hf(tiny_model_dir, 8192), "--tasks", "litm_qa_20docs", "--limit", "20",
                    "--metadata", json.dumps({"litm_qa_file": str(Path(data_dir) / PARTIAL), "litm_positions": "all"}),
                    "--output_path", str(out), "--log_samples"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    results, samples = _outputs(out)
    metrics = results["results"]["litm_qa_20docs"]
    for n in range(1, 21):
        assert 0.0 <= metrics[f"acc_pos_{n},first_line"] <= 1.0 and metrics[f"prompts_skipped_pos_{n},first_line"] == 0
    assert metrics["acc_gap_stderr,first_line"] == "N/A" and "acc_middle_drop,first_line" in metrics
    logged = samples["litm_qa_20docs"]
    assert [s["doc"]["gold_index"] for s in logged] == list(range(20))
    for sample in logged:
        prompt, n = sample["arguments"]["gen_args_0"]["arg_0"], sample["doc"]["gold_position"]
        # the gold passage of question 1 is document number n
        assert f"Document [{n}](Title: List of Nobel laureates in Physics) The first Nobel Prize in Physics" in prompt
        assert prompt.count("Document [") == 20 and prompt.endswith("Question: who got the first nobel prize in physics\nAnswer:")
        assert sample["acc"] in (0.0, 1.0) and sample[f"acc_pos_{n}"] == sample["acc"]


def _tokens(tiny_model_dir, prompt: str) -> int:
    from transformers import AutoTokenizer

    return len(AutoTokenizer.from_pretrained(tiny_model_dir)(prompt)["input_ids"])


@pytest.mark.slow
@pytest.mark.parametrize("policy", ["skip", "truncate"])
def test_small_context_window_policy(run_cli, tiny_model_dir, data_dir, tmp_path, policy):
    """max_length=600 in --model_args: the hf adapter's window and the task's check agree.

    Plain `lm_eval` for the default (skip), `lm-eval-ext run` for truncation. A prompt fits when
    its tokens + 8 (max_gen_toks from --gen_kwargs) <= 600.
    """
    out = tmp_path / "out"
    if policy == "skip":
        command, extra = ["lm_eval", "run"], []
    else:
        command, extra = ["lm-eval-ext", "run"], ["--metadata", json.dumps({"litm_too_long": "truncate"})]
    proc = run_cli([*command, *_hf(tiny_model_dir, 600), "--tasks", "litm_qa_oracle", "--limit", "12", *extra,
                    "--output_path", str(out), "--log_samples"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    results, samples = _outputs(out)
    logged = samples["litm_qa_oracle"]
    long_ = {s["doc_id"]: _tokens(tiny_model_dir, s["arguments"]["gen_args_0"]["arg_0"]) + 8 > 600 for s in logged}
    assert 0 < sum(long_.values()) < len(logged)  # this window splits the first 12 oracle prompts
    metrics = results["results"]["litm_qa_oracle"]
    if policy == "skip":
        assert metrics["prompts_skipped,first_line"] == sum(long_.values())
        for s in logged:
            assert s["prompts_skipped"] == int(long_[s["doc_id"]])
            # a withheld prompt has no response (the harness writes None as text)
            assert (s["resps"] == [["None"]] and "acc" not in s) if long_[s["doc_id"]] else ("acc" in s and s["resps"][0][0] != "None")
        assert "Left truncation applied" not in proc.stderr  # nothing reached the adapter too long
    else:
        assert metrics["prompts_truncated,first_line"] == sum(long_.values())
        assert all("acc" in s and s["prompts_truncated"] == int(long_[s["doc_id"]]) for s in logged)
        assert "Left truncation applied" in proc.stderr  # the adapter cut them, as asked, and we counted them


@pytest.mark.slow
def test_tasks_are_listed_by_the_plain_harness(plain_task_listing_with_tasks_dir):
    proc = plain_task_listing_with_tasks_dir  # lm_eval ls tasks --include_path "$(lm-eval-ext tasks-dir)"
    assert proc.returncode == 0, proc.stderr
    listed = proc.stdout.replace(" ", "")
    for name in ("lost_in_the_middle", "litm_qa_10docs", "litm_qa_30docs_qac", "litm_qa_20docs_random_order",
                 "litm_qa_closedbook", "litm_qa_oracle", "litm_kv_300keys_qac", "litm_kv_generated"):
        assert f"|{name}|" in listed, f"{name} not listed"


def test_missing_multi_document_file_is_one_clear_paragraph(run_cli, data_dir, tmp_path):
    responses = tmp_path / "r.json"
    responses.write_text(json.dumps({"rules": [], "default": "x"}))
    env = {"LM_EVAL_EXT_CACHE_DIR": str(tmp_path / "cache"), "LM_EVAL_EXT_OFFLINE": "1"}
    proc = run_cli(["lm-eval-ext", "run", "--model", "ext-canned-gen", "--model_args", f"responses={responses}",
                    "--tasks", "litm_qa_30docs"], env=env)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "nq-open-30_total_documents_gold_at_0.jsonl.gz" in proc.stderr and "lm-eval-ext data fetch" in proc.stderr


def test_bad_positions_are_one_clear_paragraph(run_cli, data_dir, tmp_path):
    responses = tmp_path / "r.json"
    responses.write_text(json.dumps({"rules": [], "default": "x"}))
    proc = run_cli(["lm-eval-ext", "run", "--model", "ext-canned-gen", "--model_args", f"responses={responses}",
                    "--tasks", "litm_kv_75keys", "--metadata", json.dumps({"litm_positions": [0, 75]})])
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "gold positions [75] are outside 0..74" in proc.stderr


@pytest.mark.slow
def test_openai_compatible_server_with_a_perfect_responder(run_cli, tiny_model_dir, data_dir, tmp_path):
    """local-chat-completions over real HTTP (stub server); the context length comes from max_length in
    --model_args and the tokenizer from --metadata, as for any API model."""
    import re

    from doubles.stub_openai import StubOpenAIServer

    def lookup(request: dict) -> str:  # answers every key-value question right
        prompt = request["messages"][-1]["content"]
        key = re.search(r'Key: "([^"]+)"\nCorresponding value:$', prompt).group(1)
        return "The value is " + re.search(f'"{key}": "([^"]+)"', prompt).group(1)

    out = tmp_path / "out"
    with StubOpenAIServer(responder=lookup) as srv:
        proc = run_cli(["lm-eval-ext", "run", "--model", "local-chat-completions",
                        "--model_args", f"base_url={srv.chat_url},model=stub,tokenizer_backend=none,max_length=8000",
                        "--apply_chat_template", "--tasks", "litm_kv_75keys_qac", "--limit", "8",
                        "--metadata", json.dumps({"tokenizer": str(tiny_model_dir)}), "--output_path", str(out)])
        bodies = [r["body"] for r in srv.requests if r["method"] == "POST"]  # (the check before the run is a GET)
    assert proc.returncode == 0, proc.stderr[-3000:]
    metrics = json.loads(next(out.rglob("results_*.json")).read_text())["results"]["litm_kv_75keys_qac"]
    # 2 records x 4 positions, all answered right: every accuracy 1, a flat curve, nothing skipped
    assert metrics["acc,none"] == 1.0 and metrics["acc_pos_50,none"] == 1.0
    assert metrics["acc_gap,none"] == 0.0 and metrics["acc_middle_drop,none"] == 0.0
    assert metrics["prompts_skipped,none"] == 0
    assert len(bodies) == 8 and all(b["max_tokens"] == 100 and b["temperature"] == 0.0 for b in bodies)
    assert bodies[0]["messages"][-1]["content"].startswith("Extract the value corresponding to the specified key")
