"""ELITR-Bench prompts, byte for byte, as the model receives them through the real harness.

Expectations come from the authors' own code (tests/fixtures/elitr_prompts.jsonl: the raw
prompts of the first three questions of meeting_en_dev_002, QA set, dev, single- and multi-turn,
with and without QA markers; earlier answers are the placeholders ANSWER-1, ANSWER-2), never from
the code under test. The fixture keeps each prompt without its transcript; the registered
transcript (checksummed by the data layer) is put back in and the whole prompt checked against
the fixture's sha256. The answering model is ``ext-canned-gen`` (its calls log holds the exact
prompts it got); in multi-turn mode it answers "ANSWER-<k>" at turn k, like the examples, so the
expected multi-turn prompts are the examples themselves. Chat-template expectations are built
from the same examples with the canned model's template ("<role>: <content>\\n" per message).
"""
from __future__ import annotations

import hashlib
import json

import pytest
from helpers.harness import skip_where_broken
from helpers.prompts import read_fixture_jsonl, sha256_text

MEETING_002 = [17, 18, 19]  # documents of meeting_en_dev_002, questions 1-3 (meeting 001 has 17 questions)
TRANSCRIPT_002 = "ELITR-minuting-corpus/elitr-minuting-corpus-en/dev/meeting_en_dev_002/transcript_MAN_annot16.txt"
# The answer prompts ELITR-Bench defines (Thonet et al., COLING 2025), pinned by sha256: the shipped
# templates must not drift from them (the English one is also checked through the prompts below).
PUBLISHED_TEMPLATES = {
    "elitr_answer_en.txt": "f775e3a3a9708dd0121c91620524910b9e56f96344636c08d54c4dc70c0947df",
    "elitr_answer_cs.txt": "6f5b7aa283340241a703a2827d88b0e55287355a368917219636a95002217913",
}


pytestmark = pytest.mark.xdist_group("elitr_prompts")  # one worker builds `examples`

@pytest.fixture(scope="module")
def examples(data_dir) -> dict:
    """The authors' prompts by (mode, qa_markers, question index), transcript put back in."""
    from lm_eval_ext.data import resolve_file

    transcript = resolve_file("elitr_bench", TRANSCRIPT_002).read_text(encoding="utf-8")
    rows = {}
    for row in read_fixture_jsonl("elitr_prompts.jsonl"):
        assert row["transcript_sha256"] == sha256_text(transcript)
        prompt = row.pop("before_transcript") + transcript + row.pop("after_transcript")
        assert sha256_text(prompt) == row["prompt_sha256"]
        rows[row["mode"], row["qa_markers"], row["question_index"]] = {**row, "prompt": prompt}
    return rows


def asked_questions(examples, qa_markers: bool) -> list[str]:
    """The three questions as the prompts show them (with markers if any): what follows the four newlines."""
    return [examples["st", qa_markers, i]["prompt"].rsplit("\n\n\n\n", 1)[1] for i in range(3)]


def run(tmp_path, task, *, qa_markers=False, chat=False, system=None, rules=None):
    """Evaluate ``task`` on meeting_en_dev_002's first three questions (answers only); (output, calls)."""
    import lm_eval
    from lm_eval.tasks import TaskManager

    from lm_eval_ext.paths import tasks_dir
    responses, calls = tmp_path / "responses.json", tmp_path / "calls.jsonl"
    responses.write_text(json.dumps({"rules": rules or [], "default": "an answer"}), encoding="utf-8")
    model_args = {"responses": str(responses), "calls_log": str(calls)}
    manager = TaskManager(include_path=str(tasks_dir()), include_defaults=False,
                          metadata={"qa_markers": qa_markers})
    out = lm_eval.simple_evaluate(
        model="ext-canned-gen", model_args=model_args, tasks=[task],
        task_manager=manager, samples={task: MEETING_002}, predict_only=True, apply_chat_template=chat,
        system_instruction=system)
    return out, [json.loads(line) for line in calls.read_text(encoding="utf-8").splitlines()]


def answer_rules(examples, qa_markers):
    """Turn k's prompt holds questions 1..k, so matching the latest question first answers "ANSWER-<k>"."""
    questions = asked_questions(examples, qa_markers)
    return [{"contains": questions[k], "response": f"ANSWER-{k + 1}"} for k in (2, 1, 0)]


def test_answer_templates_are_byte_copies_of_the_published_prompts():
    from lm_eval_ext.paths import templates_dir

    for name, sha256 in PUBLISHED_TEMPLATES.items():
        assert hashlib.sha256((templates_dir() / name).read_bytes()).hexdigest() == sha256, name


def test_question_formatting_by_hand():
    from lm_eval_ext.elitr.prompts import format_question

    assert format_question("  Who came?\n") == "Who came?"
    assert format_question(" Who came? ", qa_markers=True) == "QUESTION: Who came? ANSWER:"


def test_first_message_has_four_newlines_before_the_question():
    from lm_eval_ext.elitr.prompts import answer_template, first_message

    message = first_message(answer_template("en"), "(PERSON1) Hi.\n", "Who?")
    assert message.text.endswith("(PERSON1) Hi.\n\n\nAs a professional conversational assistant, your task is to "
                                 "answer questions about the meeting by making inferences from the provided "
                                 "transcript.\n\n\n\nWho?")
    assert message.transcript == "(PERSON1) Hi.\n"


@skip_where_broken("samples")
@pytest.mark.parametrize("qa_markers", [False, True])
def test_single_turn_raw_prompts_are_the_authors(examples, data_dir, tmp_path, qa_markers):
    out, calls = run(tmp_path, "elitr_bench_qa_dev_st", qa_markers=qa_markers)
    assert len(calls) == 1
    assert calls[0]["prompts"] == [examples["st", qa_markers, i]["prompt"] for i in range(3)]
    assert calls[0]["gen_kwargs"][0] == {"until": [], "max_gen_toks": 512, "do_sample": False, "temperature": 0.0}
    samples = out["samples"]["elitr_bench_qa_dev_st"]
    assert [s["arguments"][0][0] for s in samples] == calls[0]["prompts"]
    assert [s["doc"]["turn"] for s in samples] == [1, 2, 3]


@skip_where_broken("samples")
@pytest.mark.parametrize("qa_markers", [False, True])
def test_multi_turn_raw_prompts_are_the_authors(examples, data_dir, tmp_path, qa_markers):
    out, calls = run(tmp_path, "elitr_bench_qa_dev_mt", qa_markers=qa_markers,
                     rules=answer_rules(examples, qa_markers))
    # one model call per turn; turn k's prompt holds the model's own answers to turns 1..k-1
    assert [call["prompts"] for call in calls] == [[examples["mt", qa_markers, i]["prompt"]] for i in range(3)]
    assert examples["mt", qa_markers, 2]["earlier_answers"] == ["ANSWER-1", "ANSWER-2"]
    samples = out["samples"]["elitr_bench_qa_dev_mt"]
    assert [json.loads(s["resps"][0][0])["text"] for s in samples] == ["ANSWER-1", "ANSWER-2", "ANSWER-3"]
    assert [s["doc"]["turn"] for s in samples] == [1, 2, 3]


def expected_messages(examples, qa_markers: bool, turn: int, system: str | None = None) -> list[dict]:
    """Turn ``turn``'s messages, from the examples: the first user message is the single-turn prompt of question 1."""
    first = examples["st", qa_markers, 0]["prompt"]
    later = asked_questions(examples, qa_markers)[1:]
    messages = [{"role": "system", "content": system}] if system else []
    messages.append({"role": "user", "content": first})
    for k in range(1, turn):
        messages += [{"role": "assistant", "content": f"ANSWER-{k}"}, {"role": "user", "content": later[k - 1]}]
    return messages


def canned_chat(messages: list[dict]) -> str:
    """The canned model's chat template, written out: one "<role>: <content>\\n" line per message."""
    return "".join(f"{m['role']}: {m['content']}\n" for m in messages)


@skip_where_broken("samples")
@pytest.mark.parametrize("qa_markers", [False, True])
def test_single_turn_chat_template(examples, data_dir, tmp_path, qa_markers):
    _, calls = run(tmp_path, "elitr_bench_qa_dev_st", qa_markers=qa_markers, chat=True)
    assert calls[0]["prompts"] == [f"user: {examples['st', qa_markers, i]['prompt']}\n" for i in range(3)]


@skip_where_broken("samples")
@pytest.mark.parametrize("qa_markers", [False, True])
def test_multi_turn_chat_template_messages(examples, data_dir, tmp_path, qa_markers):
    out, calls = run(tmp_path, "elitr_bench_qa_dev_mt", qa_markers=qa_markers, chat=True,
                     rules=answer_rules(examples, qa_markers))
    assert [call["prompts"] for call in calls] == [
        [canned_chat(expected_messages(examples, qa_markers, turn))] for turn in (1, 2, 3)]
    samples = out["samples"]["elitr_bench_qa_dev_mt"]
    # the sample log carries the conversation each answer was generated from
    assert [json.loads(s["resps"][0][0])["messages"] for s in samples] == [expected_messages(examples, qa_markers, t) for t in (1, 2, 3)]


@skip_where_broken("samples")
def test_system_instruction_leads_the_conversation(examples, data_dir, tmp_path):
    system = "You are a meeting assistant."
    _, calls = run(tmp_path, "elitr_bench_qa_dev_mt", chat=True, system=system,
                   rules=answer_rules(examples, False))
    assert calls[1]["prompts"] == [canned_chat(expected_messages(examples, False, 2, system))]
    (tmp_path / "raw").mkdir()
    _, calls = run(tmp_path / "raw", "elitr_bench_qa_dev_st", system=system)
    assert calls[0]["prompts"][0] == system + examples["st", False, 0]["prompt"]  # the harness's raw system rendering
