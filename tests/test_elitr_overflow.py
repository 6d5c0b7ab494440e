"""Over-long prompts: a clear stop by default, a visible and counted middle cut on request, never a silent cut.

The tiny hf model is given a 1024-token context (``max_length=1024``); every ELITR-Bench prompt is
far longer (a transcript is tens of thousands of its tokens).
"""
from __future__ import annotations

import json
import logging
import re

import pytest

from helpers.harness import skip_where_broken

from doubles.stub_openai import StubOpenAIServer

KEY_ENV = "LMX_ELITR_OVERFLOW_KEY"
MAX_LENGTH, MAX_GEN = 1024, 8


def test_shorten_middle_by_hand():
    from lm_eval_ext.prompt_length import PromptTooLongError, shorten_middle

    text = "".join(f"{i}\n" for i in range(10))
    # fits when at most 6 lines remain: 4 lines go, from the middle (3, 4, 5, 6)
    assert shorten_middle(text, lambda t: t.count("\n") <= 6) == ("0\n1\n2\n7\n8\n9\n", 4)
    assert shorten_middle(text, lambda t: t.count("\n") <= 5) == ("0\n1\n2\n8\n9\n", 5)
    assert shorten_middle(text, lambda t: True) == (text, 0)
    with pytest.raises(PromptTooLongError, match="even with the text to shorten left out"):
        shorten_middle(text, lambda t: False)


@pytest.fixture
def recorded(tmp_path):
    """The log of every context the hf model is asked to continue (``ext-recording-hf``, the harness's hf model)."""
    return tmp_path / "calls.jsonl"


def contexts(log) -> list[list[str]]:
    """The contexts of each generate_until call, call by call."""
    from doubles.recording import read_calls

    return [[context for context, _ in call] for call in read_calls(log)]


def evaluate(tiny_model_dir, task, samples, *, overflow=None, judge_url=None, calls_log=None):
    import lm_eval
    from lm_eval.tasks import TaskManager

    from lm_eval_ext.paths import tasks_dir
    model_args = {"pretrained": str(tiny_model_dir), "dtype": "float32", "device": "cpu", "max_length": MAX_LENGTH}
    # the CLI passes the model arguments to the tasks as metadata; an in-process TaskManager needs them given
    metadata = {**model_args, **({"overflow": overflow} if overflow else {})}
    if judge_url:
        metadata |= {"judge_base_url": judge_url, "judge_api_key_env": KEY_ENV, "judge_cache": "none"}
    manager = TaskManager(include_path=str(tasks_dir()), include_defaults=False, metadata=metadata)
    return lm_eval.simple_evaluate(
        model="ext-recording-hf", model_args={**model_args, "calls_log": str(calls_log)},
        tasks=[task], task_manager=manager, samples={task: samples}, predict_only=judge_url is None,
        gen_kwargs={"max_gen_toks": MAX_GEN, "suppress_tokens": [0, 1, 2, 3]})


def prompt_tokens(tiny_model_dir, prompt: str) -> int:
    from transformers import AutoTokenizer

    return len(AutoTokenizer.from_pretrained(tiny_model_dir)(prompt)["input_ids"])


def test_single_turn_stops_before_generating(tiny_model_dir, data_dir, recorded):
    from lm_eval_ext.prompt_length import PromptTooLongError

    with pytest.raises(PromptTooLongError, match=re.escape("""--metadata '{"overflow": "truncate"}'""")) as info:
        evaluate(tiny_model_dir, "elitr_bench_qa_dev_st", [17], calls_log=recorded)
    assert "meeting_en_dev_002 question 1" in str(info.value) and "context length 1024" in str(info.value)
    assert contexts(recorded) == []


@skip_where_broken("samples")
def test_single_turn_truncation_is_visible_and_counted(tiny_model_dir, data_dir, recorded, monkeypatch, caplog):
    monkeypatch.setenv(KEY_ENV, "sk-overflow-test-key-0123456789abcdef")
    with StubOpenAIServer(text="\\boxed{5}", models=()) as srv, \
            caplog.at_level(logging.WARNING, logger="lm_eval_ext.elitr.task"):
        out = evaluate(tiny_model_dir, "elitr_bench_qa_dev_st", [17, 18], overflow="truncate", judge_url=srv.base_url,
                       calls_log=recorded)
    assert out["results"]["elitr_bench_qa_dev_st"]["prompts_truncated,judge"] == 2
    transcript = (data_dir / "elitr_bench/ELITR-minuting-corpus/elitr-minuting-corpus-en/dev/meeting_en_dev_002/"
                  "transcript_MAN_annot16.txt").read_text().splitlines(keepends=True)
    (prompts,) = contexts(recorded)
    lost = []
    for prompt, sample in zip(prompts, out["samples"]["elitr_bench_qa_dev_st"]):
        assert prompt_tokens(tiny_model_dir, prompt) + MAX_GEN <= MAX_LENGTH
        assert sample["prompts_truncated"] == 1 and sample["arguments"][0][0] == prompt  # the log shows what was sent
        # instructions, start and end of the meeting kept; the fewest lines of the middle gone
        kept = max(k for k in range(len(transcript))
                   if "".join(transcript[: (k + 1) // 2]) + "".join(transcript[len(transcript) - k // 2:]) in prompt)
        assert 0 < kept < len(transcript)
        lost.append(len(transcript) - kept)
        assert prompt.startswith("The following is the transcript of a meeting")
        assert prompt.endswith("provided transcript.\n\n\n\n" + sample["doc"]["question"])
    # one warning for the task, with the range of lines the transcripts lost
    lines = f"{min(lost)}" if min(lost) == max(lost) else f"{min(lost)} to {max(lost)}"
    assert [r.getMessage() for r in caplog.records if r.name == "lm_eval_ext.elitr.task"] == [
        f"elitr_bench_qa_dev_st: 2 of 2 prompts did not fit the context length {MAX_LENGTH} (max_length={MAX_LENGTH}), "
        f"tokens counted with {tiny_model_dir}; their transcripts lost {lines} lines from the middle, each counted in "
        "prompts_truncated"]


def test_multi_turn_stops_before_generating(tiny_model_dir, data_dir, recorded):
    from lm_eval_ext.prompt_length import PromptTooLongError

    with pytest.raises(PromptTooLongError, match=r"2 prompt\(s\) of turn 1 do not fit .* at most 1016 prompt tokens"):
        evaluate(tiny_model_dir, "elitr_bench_qa_dev_mt", [0, 17], calls_log=recorded)
    assert contexts(recorded) == []


@skip_where_broken("samples")
def test_multi_turn_truncation_per_turn(tiny_model_dir, data_dir, recorded, caplog):
    with caplog.at_level(logging.WARNING, logger="lm_eval_ext.conversation"):
        out = evaluate(tiny_model_dir, "elitr_bench_qa_dev_mt", [0, 1, 17, 18], overflow="truncate",
                       calls_log=recorded)
    calls = contexts(recorded)
    assert [len(call) for call in calls] == [2, 2]
    for prompt in (p for call in calls for p in call):
        assert prompt_tokens(tiny_model_dir, prompt) + MAX_GEN <= MAX_LENGTH
    samples = out["samples"]["elitr_bench_qa_dev_mt"]
    assert all(json.loads(s["resps"][0][0])["truncated_lines"] > 0 for s in samples)
    # turn 2's context: the (shortened) first message, the model's own answer, the second question
    turn2 = json.loads(samples[1]["resps"][0][0])["messages"]
    assert [m["role"] for m in turn2] == ["user", "assistant", "user"]
    assert calls[1][0] == "".join(m["content"] for m in turn2)
    assert re.search(r"transcript\.\n\n\n\nWho were the participants of the meeting\?$", turn2[0]["content"])
    assert json.dumps(turn2)  # the logged conversation is plain JSON
    # one warning per turn (not per conversation), with the range of lines each transcript lost
    lost = {(s["doc"]["meeting"], json.loads(s["resps"][0][0])["turn"]): json.loads(s["resps"][0][0])["truncated_lines"]
            for s in samples}
    warnings = [r.getMessage() for r in caplog.records if r.name == "lm_eval_ext.conversation"]
    assert len(warnings) == 2
    for t, message in enumerate(warnings, start=1):
        by_meeting = sorted((n, meeting) for (meeting, turn), n in lost.items() if turn == t)
        assert message == (
            f"Turn {t}: 2 of 2 conversation(s) did not fit the context length {MAX_LENGTH} (max_length={MAX_LENGTH}), "
            f"tokens counted with {tiny_model_dir}; their transcripts lost {by_meeting[0][0]} to {by_meeting[1][0]} "
            f"lines from the middle (the most: elitr_bench_qa_dev_mt/{by_meeting[1][1]}), each counted in "
            "prompts_truncated")
