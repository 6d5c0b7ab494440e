"""MAGNIFICo prompts, byte for byte, against prompts produced by the authors' own code.

The expectations are tests/fixtures/magnifico_prompts.jsonl (60 prompts: every prompt type and
position, one and two interpretations, phrases, and databases with and without `.sql` schema
files; long prompts as their sha256), never strings built by the code under test.
"""
from __future__ import annotations

import json

from helpers.prompts import prompt_mismatch, read_fixture_jsonl

PHRASES = {"len_less_than", "outlier_range", "below_average", "hire_date", "not_intern", "dock_count"}
NO_SQL_FILES = {"chinook_1", "flight_4", "icfp_1", "small_bank_1"}


def _examples() -> list[dict]:
    return read_fixture_jsonl("magnifico_prompts.jsonl")


def _setting(example: dict):
    from lm_eval_ext.magnifico.documents import Setting

    kind = example["prompt_type"]
    if example.get("multi"):
        scope = "multi"
    elif kind == "dialogue":
        scope = "dialogue"
    elif example["interpretation"] in PHRASES:
        scope = "phrase"
    else:
        scope = "single"
    position = example["position"] if kind in ("description", "dialogue") else None
    return Setting(scope, kind, example["form"], position)


def _prompt_for(example: dict, builder) -> str:
    from lm_eval_ext.magnifico.documents import build_documents

    setting = _setting(example)
    role = "base" if example["form"] == "base" else "novel"
    docs = [d for d in build_documents(setting, selected={example["interpretation"]})
            if d["role"] == role and d["item_id"] == str(example["id"]) and d["question"] == example["question"]]
    assert len(docs) == 1, f"{len(docs)} documents match {example['interpretation']} {example['id']}"
    return builder.build(docs[0])


def test_examples_cover_every_kind_of_prompt():
    examples = _examples()
    assert len(examples) == 60
    kinds = {(e["prompt_type"], e["position"]) for e in examples}
    assert {("description", p) for p in ("start", "mid", "end")} <= kinds
    assert {("dialogue", p) for p in ("start", "mid", "end")} <= kinds
    assert {("direct", "end"), ("fewshot", "end")} <= kinds
    assert {e["db_id"] for e in examples} & NO_SQL_FILES == NO_SQL_FILES
    assert any(e.get("multi") for e in examples) and any(e["interpretation"] in PHRASES for e in examples)


def test_all_60_prompts_match_the_authors_code(data_dir):
    from lm_eval_ext.magnifico.prompts import PromptBuilder

    builder = PromptBuilder()
    mismatches = []
    for number, example in enumerate(_examples()):
        problem = prompt_mismatch(_prompt_for(example, builder), example)
        if problem:
            mismatches.append(f"#{number} {example['interpretation']} {example['form']} {example['prompt_type']} "
                              f"{example['position']} {example['db_id']}: {problem}")
    assert not mismatches, "\n".join(mismatches)


def test_the_model_receives_exactly_these_prompts_through_the_harness(data_dir, tmp_path):
    """The harness adds nothing: the prompts a scripted model receives include the authors' prompts verbatim."""
    import lm_eval
    from lm_eval.tasks import TaskManager

    from lm_eval_ext.paths import tasks_dir

    chosen = {  # (task, interpretation) -> example index in the jsonl
        ("magnifico_description_mid_foreign", "end_start_date"): 8,
        ("magnifico_dialogue_mid_foreign", "lname_fname"): 22,
        ("magnifico_multi_fewshot_foreign", "not_in+salary_more_than"): 41,
        ("magnifico_direct_plausible", "average"): 52,  # flight_4: no .sql file
    }
    examples = _examples()
    responses = tmp_path / "responses.json"
    responses.write_text(json.dumps({"rules": [], "default": "1"}))
    for (task, interpretation), index in chosen.items():
        example = examples[index]
        assert example["interpretation"] == interpretation
        calls = tmp_path / f"{task}.jsonl"
        manager = TaskManager(include_path=str(tasks_dir()), include_defaults=False,
                              metadata={"interpretations": interpretation})
        lm_eval.simple_evaluate(model="ext-canned-gen", model_args=f"responses={responses},calls_log={calls}",
                                tasks=[task], task_manager=manager, confirm_run_unsafe_code=True)
        prompts = [p for line in calls.read_text().splitlines() for p in json.loads(line)["prompts"]]
        assert any(prompt_mismatch(p, example) is None for p in prompts), \
            f"{task}: the authors' prompt for item {example['id']} was not sent"
        gen_kwargs = json.loads(calls.read_text().splitlines()[0])["gen_kwargs"][0]
        assert gen_kwargs["until"] == [";", "\n\n", "--", "#"] and gen_kwargs["max_gen_toks"] == 128
