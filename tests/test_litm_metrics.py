"""Lost in the Middle metrics through the real harness with a scripted generation model.

The scripted model (ext-canned-gen) answers correctly only when the gold passage (or the
queried pair) sits at chosen positions, so every expected number below is worked out by hand
in the comments, not recomputed with the plugin's code.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from helpers.harness import assert_documents, filtered, skip_where_broken
from helpers.prompts import read_fixture_jsonl

pytestmark = pytest.mark.filterwarnings("ignore")

PARTIAL = ("lost_in_the_middle/partial_first_release_2023/ViktorTorp+lost-in-the-middle/qa_predictions/20_total_documents/"
           "gpt_reordered/nq-open-20_total_documents_gold_at_0-gpt-35-reorder-predictions-scored.jsonl.gz")
GEN = {"until": [], "max_gen_toks": 100, "do_sample": False, "temperature": 0.0}


def _records(path: Path, n: int) -> list[dict]:
    import gzip

    out = []
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        for line in handle:
            out.append(json.loads(line))
            if len(out) == n:
                return out
    return out


def evaluate(tmp_path: Path, tasks: list[str], rules: list[dict], default: str, metadata: dict, **kwargs) -> tuple[dict, list]:
    """Run the harness in-process; returns the results and the scripted model's calls."""
    import lm_eval
    from lm_eval.tasks import TaskManager

    from lm_eval_ext.paths import tasks_dir
    responses, calls = tmp_path / "responses.json", tmp_path / "calls.jsonl"
    responses.write_text(json.dumps({"rules": rules, "default": default}))
    manager = TaskManager(include_path=str(tasks_dir()), include_defaults=False, metadata=metadata)
    results = lm_eval.simple_evaluate(model="ext-canned-gen", model_args=f"responses={responses},calls_log={calls}",
                                      tasks=tasks, task_manager=manager, log_samples=True, **kwargs)
    logged = [json.loads(line) for line in calls.read_text().splitlines()] if calls.exists() else []
    return results, logged


def metrics(results: dict, task: str) -> dict:
    return {key.split(",")[0]: value for key, value in results["results"][task].items()
            if "," in key and "_stderr" not in key}


def counts(positions, skipped=None, truncated=None) -> dict:
    """The length counters every document reports: totals and per 1-based position (zero unless given)."""
    skipped, truncated = skipped or {}, truncated or {}
    out = {"prompts_skipped": sum(skipped.values()), "prompts_truncated": sum(truncated.values())}
    for p in positions:
        out |= {f"prompts_skipped_pos_{p}": skipped.get(p, 0), f"prompts_truncated_pos_{p}": truncated.get(p, 0)}
    return out


def check(got: dict, expected: dict) -> None:
    assert set(got) == set(expected), f"metrics {sorted(got)} != {sorted(expected)}"
    for name, value in expected.items():
        assert math.isclose(got[name], value, abs_tol=1e-12), f"{name}: got {got[name]}, expected {value}"


# 20 documents, questions 1-4 of the partial file at the paper's positions 0, 4, 9, 14, 19.
# Correct when the gold passage is at these positions (question indices):
QA_CORRECT = {0: {0, 1, 2, 3}, 4: {0, 1, 2}, 9: {0}, 14: {0, 1}, 19: {0, 1, 2}}
# acc_pos_1 4/4 = 1, acc_pos_5 3/4, acc_pos_10 1/4, acc_pos_15 2/4, acc_pos_20 3/4; acc 13/20;
# acc_gap 1 - 0.25 = 0.75; acc_middle_drop (1 + 0.75) / 2 - min(0.75, 0.25, 0.5) = 0.625.
QA_EXPECTED = {"acc": 13 / 20, "acc_pos_1": 1.0, "acc_pos_5": 0.75, "acc_pos_10": 0.25, "acc_pos_15": 0.5,
               "acc_pos_20": 0.75, "acc_gap": 0.75, "acc_middle_drop": 0.625, **counts((1, 5, 10, 15, 20))}


def test_qa_position_metrics_exact(data_dir, tmp_path):
    records = _records(Path(data_dir) / PARTIAL, 4)
    rules = []
    for position, correct in QA_CORRECT.items():
        for q in sorted(correct):
            gold = next(c for c in records[q]["ctxs"] if c["isgold"])
            # the gold passage as it is written when it is document number position + 1
            rules.append({"contains": f"Document [{position + 1}](Title: {gold['title']}) {gold['text']}",
                          "response": f" {records[q]['answers'][0]}\nmore text"})
    # Wrong answers carry the right answer on their second line: only the first line may count.
    rules += [{"contains": f"Question: {r['question']}\nAnswer:", "response": f"not sure\n{r['answers'][0]}"} for r in records]
    assert all("sure" not in a.lower() for r in records for a in r["answers"])
    results, calls = evaluate(tmp_path, ["litm_qa_20docs"], rules, "unused", {"litm_qa_file": str(Path(data_dir) / PARTIAL)},
                              limit=20)
    check(metrics(results, "litm_qa_20docs"), QA_EXPECTED)
    assert "acc,first_line" in results["results"]["litm_qa_20docs"]  # QA is scored on the first line
    assert results["results"]["litm_qa_20docs"]["acc_gap_stderr,first_line"] == "N/A"
    assert sum(call["n_requests"] for call in calls) == 20
    samples = results["samples"]["litm_qa_20docs"]
    by_key = {s["doc"]["doc_key"]: s for s in samples}
    s = by_key["2@4"]  # question 3, gold at index 4 (5th document): correct
    assert (s["doc"]["k"], s["doc"]["gold_index"], s["doc"]["gold_position"]) == (20, 4, 5)
    assert filtered(s) == records[2]["answers"][0] and s["acc"] == 1.0 and s["acc_pos_5"] == 1.0
    s = by_key["2@9"]  # wrong: the scored first line is "not sure"
    assert filtered(s) == "not sure" and s["acc"] == 0.0 and "acc_pos_5" not in s
    assert s["arguments"][0][1] == GEN


# 75 pairs, records 1-3 of the published file at positions 0, 24, 49, 74.
KV_CORRECT = {0: {0, 1, 2}, 24: {1}, 49: set(), 74: {0, 2}}
# acc_pos_1 3/3, acc_pos_25 1/3, acc_pos_50 0/3, acc_pos_75 2/3; acc 6/12 = 0.5; gap 1 - 0 = 1;
# middle drop (1 + 2/3) / 2 - 0 = 5/6.
KV_EXPECTED = {"acc": 0.5, "acc_pos_1": 1.0, "acc_pos_25": 1 / 3, "acc_pos_50": 0.0, "acc_pos_75": 2 / 3,
               "acc_gap": 1.0, "acc_middle_drop": 5 / 6, **counts((1, 25, 50, 75))}


def test_kv_position_metrics_exact(data_dir, tmp_path):
    records = _records(Path(data_dir) / "lost_in_the_middle/kv_retrieval_data/kv-retrieval-75_keys.jsonl.gz", 3)
    rules = []
    for position, correct in KV_CORRECT.items():
        for n in sorted(correct):
            r = records[n]
            others = [p for p in r["ordered_kv_records"] if p[0] != r["key"]]
            line = f'"{r["key"]}": "{r["value"]}"'
            # the queried pair's line with what precedes it at that position ("{" first, else the previous pair)
            before = "{" if position == 0 else f'"{others[position - 1][0]}": "{others[position - 1][1]}",\n '
            rules.append({"contains": before + line, "response": f"Let me see.\n{r['value'].upper()}"})
    results, calls = evaluate(tmp_path, ["litm_kv_75keys"], rules, "I cannot tell.", {}, limit=12)
    check(metrics(results, "litm_kv_75keys"), KV_EXPECTED)  # the value counts anywhere, any case


def test_two_positions_have_a_gap_but_no_middle_drop_on_generated_data(tmp_path):
    from lm_eval_ext.litm.kv_generator import generate_kv_records

    records = generate_kv_records(6, 2, seed=5)
    # record 1 correct at both ends, record 2 only at the first: acc_pos_1 1, acc_pos_6 1/2, gap 1/2
    rules = [{"contains": "{" + f'"{records[0]["key"]}"', "response": records[0]["value"]},
             {"contains": f'"{records[0]["key"]}": "{records[0]["value"]}"' + "}", "response": records[0]["value"]},
             {"contains": "{" + f'"{records[1]["key"]}"', "response": records[1]["value"]}]
    results, _ = evaluate(tmp_path, ["litm_kv_generated"], rules, "no",
                          {"litm_kv_pairs": 6, "litm_kv_examples": 2, "litm_kv_seed": 5, "litm_positions": [0, 5]})
    check(metrics(results, "litm_kv_generated"), {"acc": 0.75, "acc_pos_1": 1.0, "acc_pos_6": 0.5, "acc_gap": 0.5,
                                                  **counts((1, 6))})
    assert results["n-samples"]["litm_kv_generated"]["original"] == 4
    assert_documents(results, "litm_kv_generated", 4)


def test_a_task_whose_prompts_are_all_too_long_stops_before_the_model_is_called(data_dir, tmp_path, tiny_model_dir):
    # The tiny model's window (2048, from its config through `pretrained`) is far below any 20-document
    # prompt with its 1,000-token vocabulary: every prompt would be held back, so nothing could be scored, and
    # the task stops with one paragraph before the model is called (test_length_policy_on_mixed_lengths counts
    # the skipped prompts of a task that has some left).
    from lm_eval_ext.prompt_length import NothingToScoreError

    with pytest.raises(NothingToScoreError) as stopped:
        evaluate(tmp_path, ["litm_qa_20docs"], [], "unused",
                 {"litm_qa_file": str(Path(data_dir) / PARTIAL), "pretrained": str(tiny_model_dir)}, limit=10)
    assert str(stopped.value).startswith("Task litm_qa_20docs: none of its 10 prompts fits the model's context "
                                         f"length 2048 (the model config of {tiny_model_dir})")
    assert not (tmp_path / "calls.jsonl").exists()  # the model was never called


def _oracle_examples() -> list[dict]:
    """Oracle questions 41-45 (indices 40-44) with the prompts the authors' code made for them."""
    return [e for e in read_fixture_jsonl("litm_prompts.jsonl") if e["task"] == "litm_qa_oracle"]


@skip_where_broken("samples")
@pytest.mark.parametrize("policy", ["skip", "truncate"])
def test_length_policy_on_mixed_lengths(data_dir, tmp_path, tiny_model_dir, policy):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    examples = _oracle_examples()
    # fits when prompt tokens + 100 generated tokens <= 500 (the adapters keep max_length - max_gen_toks tokens)
    too_long = [len(tokenizer(e["prompt"])["input_ids"]) + 100 > 500 for e in examples]
    assert 0 < sum(too_long) < len(too_long)  # the window was chosen to split them
    rules = [{"contains": e["question"], "response": "Answer: none"} for e in examples]
    results, calls = evaluate(tmp_path, ["litm_qa_oracle"], rules, "unused",
                              {"max_length": 500, "tokenizer": str(tiny_model_dir), "litm_too_long": policy},
                              samples={"litm_qa_oracle": [40, 41, 42, 43, 44]})
    got = metrics(results, "litm_qa_oracle")
    sent = [p for call in calls for p in call["prompts"]]
    if policy == "skip":
        assert got["prompts_skipped"] == sum(too_long) and got["prompts_truncated"] == 0
        assert sent == [e["prompt"] for e, long_ in zip(examples, too_long) if not long_]
    else:
        assert got["prompts_truncated"] == sum(too_long) and got["prompts_skipped"] == 0
        assert sent == [e["prompt"] for e in examples]  # all sent; the adapter cuts the long ones
    assert got["acc"] == 0.0
    counter = "prompts_skipped" if policy == "skip" else "prompts_truncated"
    flags = {s["doc"]["question"]: s[counter] for s in results["samples"]["litm_qa_oracle"]}
    assert flags == {e["question"]: int(long_) for e, long_ in zip(examples, too_long)}


@pytest.mark.requires_data  # the task reads the oracle file before checking its arguments
def test_bad_length_arguments_are_user_errors(tmp_path):
    from lm_eval_ext.errors import UserError

    with pytest.raises(UserError, match="max_length='lots' is not a positive number"):
        evaluate(tmp_path, ["litm_qa_closedbook"], [], "x", {"max_length": "lots", "tokenizer": "t"})
    with pytest.raises(UserError, match="no tokenizer is named"):
        evaluate(tmp_path, ["litm_qa_closedbook"], [], "x", {"max_length": 100})


@pytest.mark.requires_data
def test_chat_template_wraps_the_prompt_and_is_what_gets_measured(tmp_path, tiny_model_dir):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    raw = "Question: who got the first nobel prize in physics\nAnswer:"
    templated = f"user: {raw}\n"  # ext-canned-gen renders chat messages as "<role>: <content>\n" lines
    n_raw, n_templated = (len(tokenizer(p)["input_ids"]) for p in (raw, templated))
    assert n_raw < n_templated
    # a window where the bare prompt fits (with 100 generated tokens) and the templated one does not
    window = n_templated + 100 - 1
    from lm_eval_ext.prompt_length import NothingToScoreError

    with pytest.raises(NothingToScoreError, match=f"none of its 1 prompts fits the model's context length {window} "):
        evaluate(tmp_path, ["litm_qa_closedbook"], [], "unused",
                 {"max_length": window, "tokenizer": str(tiny_model_dir)}, limit=1, apply_chat_template=True)
    assert not (tmp_path / "calls.jsonl").exists()  # measured with the template: too long, never sent
    results, calls = evaluate(tmp_path, ["litm_qa_closedbook"], [], "unused",
                              {"max_length": window + 1, "tokenizer": str(tiny_model_dir)}, limit=1, apply_chat_template=True)
    assert calls[0]["prompts"] == [templated]
