"""Dependent multi-turn generation with any harness model: a scripted model, the tiny hf model and APIs.

What must hold: turn k of a meeting is generated after turns 1..k-1 and its context holds exactly
that meeting's own earlier answers, in order; generation is batched across meetings (one model
call per turn, counted in the scripted model's calls log or on the stub server); single-turn
requests go to the model as usual; the plain ``lm_eval`` command runs multi-turn tasks too.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from doubles.stub_openai import StubOpenAIServer
from helpers.harness import skip_where_broken
from lm_eval_ext.conversation import Turn

# qa_dev: meeting_en_dev_001 is documents 0-16, meeting_en_dev_002 17-30, meeting_en_dev_003 from 31
FIRST_THREE_OF_THREE_MEETINGS = [0, 1, 2, 17, 18, 19, 31, 32, 33]
MEETINGS = ("meeting_en_dev_001", "meeting_en_dev_002", "meeting_en_dev_003")


def transcript_lines(data_dir: Path, meeting: str) -> list[str]:
    folder = data_dir / "elitr_bench/ELITR-minuting-corpus/elitr-minuting-corpus-en/dev" / meeting
    (path,) = sorted(folder.glob("transcript_MAN*"))
    return path.read_text(encoding="utf-8").splitlines(keepends=True)


def evaluate(task_or_tasks, model, model_args, *, samples=None, limit=None, metadata=None, chat=False, gen_kwargs=None):
    import lm_eval
    from lm_eval.tasks import TaskManager

    tasks = [task_or_tasks] if isinstance(task_or_tasks, str) else list(task_or_tasks)
    manager = TaskManager(include_defaults=False, metadata=metadata or {})
    return lm_eval.simple_evaluate(model=model, model_args=model_args, tasks=tasks, task_manager=manager,
                                   samples=samples, limit=limit, predict_only=True, apply_chat_template=chat,
                                   gen_kwargs=gen_kwargs)


def canned_model(tmp_path: Path, data_dir: Path) -> dict:
    """ext-canned-gen's arguments: it answers "m<i>-answer-<turn>" for meeting i (told apart by its
    transcript's first line; the turn is the number of "QUESTION: " markers in the prompt)."""
    rules = [{"contains": transcript_lines(data_dir, m)[0], "response": f"m{i}-answer-{{turn}}"}
             for i, m in enumerate(MEETINGS, 1)]
    responses = tmp_path / "responses.json"
    responses.write_text(json.dumps({"rules": rules, "default": "other-answer-{turn}", "turn_marker": "QUESTION: "}))
    return {"responses": str(responses), "calls_log": str(tmp_path / "calls.jsonl")}


def read_calls(tmp_path: Path) -> list[dict]:
    return [json.loads(line) for line in (tmp_path / "calls.jsonl").read_text().splitlines()]


@skip_where_broken("samples")
def test_turns_see_their_own_answers_and_are_batched_across_meetings(tmp_path, data_dir):
    out = evaluate("elitr_bench_qa_dev_mt", "ext-canned-gen", canned_model(tmp_path, data_dir),
                   samples={"elitr_bench_qa_dev_mt": FIRST_THREE_OF_THREE_MEETINGS}, metadata={"qa_markers": True})
    calls = read_calls(tmp_path)
    assert [call["n_requests"] for call in calls] == [3, 3, 3]  # turn 1 of all meetings, then turn 2, then turn 3
    for turn, call in enumerate(calls, 1):
        for i, prompt in enumerate(call["prompts"], 1):
            assert prompt.count("QUESTION: ") == turn
            # exactly this meeting's earlier answers, in order (the canned answers carry meeting and turn)
            assert re.findall(r"\w+-answer-\d+", prompt) == [f"m{i}-answer-{k}" for k in range(1, turn)]
    samples = out["samples"]["elitr_bench_qa_dev_mt"]
    assert [(s["doc"]["meeting"], s["doc"]["turn"], json.loads(s["resps"][0][0])["text"]) for s in samples] == [
        (m, t, f"m{i}-answer-{t}") for i, m in enumerate(MEETINGS, 1) for t in (1, 2, 3)]


@skip_where_broken("samples")
def test_a_later_turn_alone_still_gets_its_earlier_turns(tmp_path, data_dir):
    out = evaluate("elitr_bench_qa_dev_mt", "ext-canned-gen", canned_model(tmp_path, data_dir),
                   samples={"elitr_bench_qa_dev_mt": [2]}, metadata={"qa_markers": True})
    calls = read_calls(tmp_path)
    assert [call["n_requests"] for call in calls] == [1, 1, 1]  # turns 1 and 2 are generated, not reported
    (sample,) = out["samples"]["elitr_bench_qa_dev_mt"]
    assert sample["doc"]["turn"] == 3 and json.loads(sample["resps"][0][0])["text"] == "m1-answer-3"
    assert [m["content"] for m in json.loads(sample["resps"][0][0])["messages"] if m["role"] == "assistant"] == [
        "m1-answer-1", "m1-answer-2"]


@skip_where_broken("samples")  # --predict_only logs the samples
def test_single_turn_requests_go_to_the_model_in_one_call(tmp_path, data_dir):
    evaluate(["elitr_bench_qa_dev_st", "elitr_bench_qa_dev_mt"], "ext-canned-gen", canned_model(tmp_path, data_dir),
             samples={"elitr_bench_qa_dev_st": [0, 17, 31], "elitr_bench_qa_dev_mt": [0, 1]},
             metadata={"qa_markers": True})
    calls = read_calls(tmp_path)
    # the three single-turn prompts in one plain call, then the two turns of the conversation
    assert [call["n_requests"] for call in calls] == [3, 1, 1]
    assert [re.findall(r"\w+-answer-\d+", p) for p in calls[0]["prompts"]] == [[], [], []]
    assert re.findall(r"\w+-answer-\d+", calls[2]["prompts"][0]) == ["m1-answer-1"]


def test_turns_of_one_conversation_must_agree():
    from lm_eval_ext.boundary import new_instance
    from lm_eval_ext.conversation import ConversationError, Turn, run_conversations

    turns = [Turn("c", 1, ("hello",)), Turn("c", 2, ("bonjour", "next"))]
    requests = [new_instance("ext_conversation", {}, (t.to_request(), {}), 0, task_name="t", doc_id=i)
                for i, t in enumerate(turns)]
    generated = []
    with pytest.raises(ConversationError, match="disagree"):
        run_conversations(requests, generated.append, None)
    assert generated == []  # refused before anything was generated


def test_one_progress_bar_counts_every_turn_and_the_model_shows_none(capsys):
    """Two conversations of 3 and 1 turns: one bar over the 4 turns (not one per turn batch), ending with both
    conversations done; the model's generate_until is asked to show no bar of its own."""
    from lm_eval.api.model import LM

    from lm_eval_ext.boundary import install_request_types, new_instance

    class Model(LM):
        quiet = []

        def generate_until(self, requests, disable_tqdm: bool = False):
            self.quiet.append(disable_tqdm)
            return [f"answer {len(r.args[0])}" for r in requests]

        def loglikelihood(self, requests):
            raise NotImplementedError

        def loglikelihood_rolling(self, requests):
            raise NotImplementedError

    install_request_types()
    turns = [Turn("a", 3, ("q1", "q2", "q3")), Turn("b", 1, ("p1",))]
    requests = [new_instance("ext_conversation", {}, (t.to_request(), {}), 0, task_name="t", doc_id=i)
                for i, t in enumerate(turns)]
    Model().ext_conversation(requests)
    assert Model.quiet == [True, True, True]  # one model call per turn, each without its own bar
    bars = capsys.readouterr().err.replace("\r", "\n")
    assert bars.count("Conversation turns") >= 1
    assert "Conversation turns: 100%" in bars and "4/4" in bars and "2 of 2 conversations done" in bars
    assert "2/4" in bars and "1 of 2 conversations done" in bars  # after turn 1: both first turns, b done


@skip_where_broken("samples")
@pytest.mark.parametrize("api_model", ["local-chat-completions", "openai-chat-completions"])
def test_chat_completion_apis_get_message_lists_turn_by_turn(data_dir, monkeypatch, api_model):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-multiturn-test-key-0123456789abcdef")

    def answer(request: dict) -> str:
        messages = request["messages"]
        meeting = next(i for i, m in enumerate(MEETINGS, 1)
                       if transcript_lines(data_dir, m)[0] in messages[0]["content"])
        return f"  m{meeting}-answer-{sum(m['role'] == 'user' for m in messages)}\n"

    with StubOpenAIServer(responder=answer) as srv:
        out = evaluate("elitr_bench_qa_dev_mt", api_model,
                       {"base_url": srv.chat_url, "model": "stub", "tokenizer_backend": "none"},
                       samples={"elitr_bench_qa_dev_mt": FIRST_THREE_OF_THREE_MEETINGS}, chat=True)
        bodies = [r["body"] for r in srv.requests if r["method"] == "POST"]
    turns = [sum(m["role"] == "user" for m in body["messages"]) for body in bodies]
    assert turns == [1, 1, 1, 2, 2, 2, 3, 3, 3]  # every turn-1 request before any turn-2 request
    for body, turn in zip(bodies, turns):
        messages = body["messages"]
        assert [m["role"] for m in messages] == ["user", "assistant"] * (turn - 1) + ["user"]
        meeting = next(i for i, m in enumerate(MEETINGS, 1) if transcript_lines(data_dir, m)[0] in messages[0]["content"])
        # the model's own answers, stripped, in order
        assert [m["content"] for m in messages if m["role"] == "assistant"] == [
            f"m{meeting}-answer-{k}" for k in range(1, turn)]
        assert body.get("max_tokens", body.get("max_completion_tokens")) == 512 and body["temperature"] == 0.0
    samples = out["samples"]["elitr_bench_qa_dev_mt"]
    assert [json.loads(s["resps"][0][0])["text"].strip() for s in samples] == [f"m{i}-answer-{t}" for i in (1, 2, 3) for t in (1, 2, 3)]


@pytest.fixture
def short_corpus(tmp_path, data_dir) -> Path:
    """A user corpus directory (official layout) with the first 12 lines of each dev transcript."""
    root = tmp_path / "corpus"
    for meeting in sorted(p.name for p in (data_dir / "elitr_bench/ELITR-minuting-corpus/elitr-minuting-corpus-en/dev").iterdir()):
        folder = root / "elitr-minuting-corpus-en" / "dev" / meeting
        folder.mkdir(parents=True)
        (folder / "transcript_MAN_short.txt").write_text("".join(transcript_lines(data_dir, meeting)[:12]))
    return root


@skip_where_broken("samples")
@pytest.mark.parametrize("chat", [False, True])
def test_tiny_hf_model_turns_hold_its_own_answers(tiny_model_dir, short_corpus, tmp_path, chat):
    from transformers import AutoTokenizer

    from doubles.recording import read_calls as recorded_calls

    # ext-recording-hf: the harness's hf model, logging the (context, generation) of each request
    out = evaluate("elitr_bench_qa_dev_mt", "ext-recording-hf",
                   {"pretrained": str(tiny_model_dir), "dtype": "float32", "device": "cpu", "batch_size": 8,
                    "calls_log": str(tmp_path / "calls.jsonl")},
                   samples={"elitr_bench_qa_dev_mt": FIRST_THREE_OF_THREE_MEETINGS},
                   metadata={"elitr_corpus": str(short_corpus)}, chat=chat,
                   gen_kwargs={"max_gen_toks": 6, "suppress_tokens": [0, 1, 2, 3]})
    calls = recorded_calls(tmp_path / "calls.jsonl")
    assert [len(call) for call in calls] == [3, 3, 3]  # batched across the three meetings, turn by turn
    samples = {(s["doc"]["meeting"], s["doc"]["turn"]): s for s in out["samples"]["elitr_bench_qa_dev_mt"]}
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    for i, meeting in enumerate(MEETINGS):
        contexts = [call[i][0] for call in calls]
        answers = [call[i][1].strip() for call in calls]
        assert all(answers), "suppress_tokens should give non-empty answers"
        questions = [samples[meeting, t]["doc"]["question"] for t in (1, 2, 3)]
        for t in (2, 3):
            conversation = json.loads(samples[meeting, t]["resps"][0][0])["messages"]
            assert [m["content"] for m in conversation if m["role"] == "assistant"] == answers[: t - 1]
            assert [m["content"] for m in conversation if m["role"] == "user"][1:] == questions[1:t]
            if chat:
                assert contexts[t - 1] == tokenizer.apply_chat_template(conversation, tokenize=False,
                                                                        add_generation_prompt=True)
            else:  # raw: the previous context, then the model's own answer, then the next question
                assert contexts[t - 1] == contexts[t - 2] + answers[t - 2] + questions[t - 1]
        assert json.loads(samples[meeting, 1]["resps"][0][0])["text"] == calls[0][i][1]


@pytest.mark.slow
@pytest.mark.parametrize("command", [["lm_eval", "run"], ["lm-eval-ext", "run"]], ids=["lm_eval", "lm-eval-ext"])
def test_both_commands_run_multi_turn_with_a_plain_model(run_cli, data_dir, tmp_path, command):
    model = canned_model(tmp_path, data_dir)
    out = tmp_path / "out"
    proc = run_cli([*command, "--model", "ext-canned-gen", "--model_args",
                    f"responses={model['responses']},calls_log={model['calls_log']}", "--tasks", "elitr_bench_qa_dev_mt",
                    "--limit", "2", "--metadata", json.dumps({"qa_markers": True}), "--predict_only", "--log_samples",
                    "--output_path", str(out)])
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert [call["n_requests"] for call in read_calls(tmp_path)] == [1, 1]
    (samples_file,) = out.rglob("samples_elitr_bench_qa_dev_mt_*.jsonl")
    samples = [json.loads(line) for line in samples_file.read_text().splitlines()]
    assert [s["doc"]["turn"] for s in samples] == [1, 2]
    assert json.loads(samples[1]["resps"][0][0])["messages"][1] == {"role": "assistant", "content": "m1-answer-1"}
    results = json.loads(next(out.rglob("results_*.json")).read_text())
    assert results["config"]["model"] == "ext-canned-gen"


def test_use_cache_rerun_makes_no_call_and_keeps_the_conversation(tmp_path, data_dir):
    import lm_eval
    from lm_eval.tasks import TaskManager

    model = canned_model(tmp_path, data_dir)
    outputs = []
    for _ in range(2):
        (tmp_path / "calls.jsonl").unlink(missing_ok=True)
        manager = TaskManager(include_defaults=False, metadata={"qa_markers": True})
        outputs.append(lm_eval.simple_evaluate(model="ext-canned-gen", model_args=model, tasks=["elitr_bench_qa_dev_mt"],
                                               task_manager=manager, limit=2, predict_only=True,
                                               use_cache=str(tmp_path / "cache")))
        if len(outputs) == 1:
            assert (tmp_path / "calls.jsonl").exists()
    assert not (tmp_path / "calls.jsonl").exists()  # the second run was answered by the harness's cache
    first, second = (out["samples"]["elitr_bench_qa_dev_mt"] for out in outputs)
    assert [s["resps"] for s in second] == [s["resps"] for s in first]
    assert [json.loads(s["resps"][0][0])["text"] for s in first] == ["m1-answer-1", "m1-answer-2"]
    assert json.loads(second[1]["resps"][0][0])["messages"][1] == {"role": "assistant", "content": "m1-answer-1"}
