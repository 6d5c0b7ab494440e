"""The harness's own ``vllm`` model runs every request shape the plugin's tasks make.

``lm_eval run --model vllm`` (lm_eval/models/vllm_causallms.py, unchanged) on: log-likelihoods (LIEDER),
generations without and with the chat template (Lost in the Middle, MAGNIFICo, ELITR-Bench single-turn)
and dependent multi-turn conversations (ELITR-Bench multi-turn, one ``generate_until`` per turn), with the
context length given as vLLM's ``max_model_len`` (prompts too long for it are skipped or cut by the tasks).

Backends: ``stand-in``, the scripted stand-in for the ``vllm`` package in tests/stand_ins (on PYTHONPATH of
these runs only; always run), whose answers give exact expected numbers; ``vllm``, the real package on a GPU
(skipped here): the same runs, checked for what holds for any model.
"""
from __future__ import annotations

import importlib.util
import json
import math
import re
from pathlib import Path

import pytest

from helpers.harness import skip_where_broken
from helpers.runs import Run, lm_eval_run
from helpers.scripted import MAGNIFICO_GOLDS, elitr_meeting_rules, litm_kv4_rules, write_lieder_table

STAND_INS = Path(__file__).resolve().parent / "stand_ins"
MAX_MODEL_LEN = 2000
MEETINGS = ("meeting_en_dev_001", "meeting_en_dev_002", "meeting_en_dev_003")
ELITR_MT = [0, 1, 2, 17, 18, 31]  # meetings 1 and 3 (turns 1-3, 1), meeting 2 (turns 1-2)
ELITR_ST = [0, 17, 31]
SAMPLES = {"magnifico_direct_plausible": list(range(8)), "elitr_bench_qa_dev_st": ELITR_ST,
           "elitr_bench_qa_dev_mt": ELITR_MT}
GENERATION_TASKS = ("litm_kv_generated", "magnifico_direct_plausible", "elitr_bench_qa_dev_st", "elitr_bench_qa_dev_mt")


def _real_vllm_reason() -> str | None:
    if importlib.util.find_spec("vllm") is None:
        return "vllm is not installed (it needs a CUDA build of torch); the stand-in variant runs instead"
    import torch

    return None if torch.cuda.is_available() else "vllm is installed but no GPU is visible"


BACKENDS = [pytest.param("stand-in", id="stand-in"),
            pytest.param("vllm", id="real-vllm", marks=pytest.mark.skipif(_real_vllm_reason() is not None,
                                                                          reason=_real_vllm_reason() or ""))]
pytestmark = [pytest.mark.vllm, pytest.mark.xdist_group("vllm"),  # one worker builds `vllm_runs`
              skip_where_broken("samples")]  # the runs select documents


def judge_score(question: str) -> int:
    """The stub judge's score of an answer to ``question``."""
    return 1 + len(question) % 10


def write_script(folder: Path, data_dir: Path, chat: bool) -> dict:
    """The stand-in's script: LIEDER's log-likelihood table (tests/helpers/scripted.py), the LitM, MAGNIFICo and
    ELITR generation rules (tests/helpers/scripted.py), a calls log; and the LitM key-value file."""
    folder.mkdir(parents=True)
    table = json.loads(write_lieder_table(data_dir, folder / "table.json").read_text())
    # LitM: example 1 does not fit 2000 tokens, its 4 prompts are skipped; MAGNIFICo: the gold queries, then a stop
    # string (after the prompt's SELECT on the completion path, a whole query, as chat models answer, with a chat
    # template); ELITR: "<meeting>-answer-<turn>"
    rules = litm_kv4_rules(folder / "kv4.jsonl")
    # (the chat prompt ends with the question and the instruction, the completion prompt with the question and SELECT)
    rules += [{"contains": f"-- {text}\n", "response": f"{'SELECT ' if chat else ''}{body};\n\nSELECT 1"}
              for text, body in MAGNIFICO_GOLDS.items()]
    meeting_rules, firsts = elitr_meeting_rules(MEETINGS)
    rules += meeting_rules
    script = {"entries": table["entries"], "default_logprob": table["default"], "rules": rules,
              "default": "no_such_column FROM no_such_table", "turn_marker": "QUESTION: ",
              "calls_log": str(folder / "calls.jsonl")}
    (folder / "script.json").write_text(json.dumps(script))
    return {"script": folder / "script.json", "calls": folder / "calls.jsonl", "kv": folder / "kv4.jsonl",
            "first_lines": firsts}


@pytest.fixture(scope="module", params=BACKENDS)
def vllm_runs(request, tmp_path_factory, data_dir, tiny_model_dir) -> dict:
    """Two runs of ``--model vllm`` on the tiny model: without chat template (LIEDER too), and with it."""
    from doubles.stub_openai import StubOpenAIServer

    from helpers.judge import answering_the_probe

    backend = request.param
    root = tmp_path_factory.mktemp(f"vllm_{backend}")
    out = {"backend": backend}

    def judge(body: dict) -> str:
        question = re.search(r"### Question:\n(.*?)\n\n### Response to evaluate:", body["messages"][-1]["content"], re.S)[1]
        return f"Feedback: fine.\n\\boxed{{{judge_score(question.strip())}}}"

    with StubOpenAIServer(responder=answering_the_probe(judge), model="stub-judge") as server:
        for chat in (False, True):
            folder = root / ("chat" if chat else "plain")
            inputs = write_script(folder / "inputs", data_dir, chat)
            env = {"OPENAI_API_KEY": "sk-test-not-a-secret"}
            if backend == "stand-in":
                env |= {"PYTHONPATH": str(STAND_INS), "VLLM_STAND_IN_SCRIPT": str(inputs["script"])}
            metadata = {"litm_kv_pairs": 4, "litm_kv_file": str(inputs["kv"]), "litm_positions": "all",
                        "qa_markers": True, "overflow": "truncate", "judge_base_url": server.base_url,
                        "judge_model": "stub-judge", "judge_cache": "none"}
            tasks = GENERATION_TASKS if chat else ("lieder_base", *GENERATION_TASKS)
            args = ["--model", "vllm", "--model_args",
                    f"pretrained={tiny_model_dir},max_model_len={MAX_MODEL_LEN},dtype=float32,seed=1234",
                    "--tasks", ",".join(tasks), "--batch_size", "auto", "--confirm_run_unsafe_code",
                    "--metadata", json.dumps(metadata), "--samples", json.dumps(SAMPLES),
                    *(["--apply_chat_template"] if chat else [])]
            # a process of its own: the harness's vllm model imports the `vllm` package (the stand-in, from PYTHONPATH);
            # lm-eval-ext run: the harness's run, its task index limited to the plugin's tasks
            run = Run.load(lm_eval_run(args, folder, env=env, process=True, program="lm-eval-ext"))
            calls = inputs["calls"]
            out["chat" if chat else "plain"] = {
                "run": run, "first_lines": inputs["first_lines"],
                "calls": [json.loads(line) for line in calls.read_text().splitlines()] if calls.exists() else None}
    return out


def _numbers(run: Run, task: str) -> dict:
    return {key.split(",")[0]: value for key, value in run.results["results"][task].items() if "," in key}


def test_loglikelihood_requests(vllm_runs):
    run = vllm_runs["plain"]["run"]
    samples = run.samples["lieder_base"]
    assert len(samples) == 48
    for sample in samples:  # one (log-probability, is greedy) per row, written as text by the harness
        assert all(len(r) == 1 and float(r[0][0]) <= 0 and r[0][1] in ("True", "False") for r in sample["resps"])
    if vllm_runs["backend"] == "stand-in":
        lieder = _numbers(run, "lieder_base")
        # the scripted table (tests/helpers/scripted.py derives these numbers)
        assert math.isclose(lieder["acc"], 496 / 720, rel_tol=1e-12)
        assert math.isclose(lieder["acc_rel"], 272 / 720, rel_tol=1e-12)
        assert math.isclose(lieder["acc_existence"], 7 / 9, rel_tol=1e-12)
        assert {r[0][0] for s in samples for r in s["resps"]} == {"-10.0", "-15.0", "-20.0", "-30.0"}


@pytest.mark.parametrize("chat", [False, True], ids=["plain", "chat"])
def test_generation_requests(vllm_runs, chat):
    run = vllm_runs["chat" if chat else "plain"]["run"]
    litm = _numbers(run, "litm_kv_generated")
    # the length check read vLLM's max_model_len: example 1 (4 prompts, one per position) does not fit
    assert litm["prompts_skipped"] == 4 and [litm[f"prompts_skipped_pos_{p}"] for p in (1, 2, 3, 4)] == [1, 1, 1, 1]
    assert run.results["configs"]["litm_kv_generated"]["metadata"]["prompt_length"].startswith(
        f"context length {MAX_MODEL_LEN} (max_model_len={MAX_MODEL_LEN})")
    for task in GENERATION_TASKS:
        assert len(run.samples[task]) == len(SAMPLES.get(task, range(12))), task
    if vllm_runs["backend"] != "stand-in":
        return
    assert (litm["acc"], litm["acc_pos_1"], litm["acc_pos_2"]) == (0.25, 1.0, 0.0)
    magnifico = _numbers(run, "magnifico_direct_plausible")
    assert (magnifico["ex"], magnifico["ex_base"], magnifico["rel_perf"]) == (0.5, 1.0, 50.0)
    answers = [s["resps"][0][0] for s in run.samples["magnifico_direct_plausible"]]
    if chat:
        # no stop strings on the chat path: the raw replies are kept, and the six with a second statement normalised
        assert answers[0] == "SELECT date from weather where max_temperature_f > 85;\n\nSELECT 1"
        assert magnifico["replies_normalized"] == 6
    else:
        # the stop strings ended the answers: "date from weather ...;\n\nSELECT 1" came back without ";..."
        assert answers[0] == "date from weather where max_temperature_f > 85" and not any(";" in a for a in answers)
        assert magnifico["replies_normalized"] == 0
    for task in ("elitr_bench_qa_dev_st", "elitr_bench_qa_dev_mt"):
        elitr = _numbers(run, task)
        scores = [judge_score(s["doc"]["question"]) for s in run.samples[task]]
        assert math.isclose(elitr["score"], sum(scores) / len(scores), rel_tol=1e-12)
        assert elitr["judge_failures"] == 0 and elitr["prompts_truncated"] == len(scores)  # cut to fit 2000 tokens
    single = [s["resps"][0][0] for s in run.samples["elitr_bench_qa_dev_st"]]
    assert single == [f"{m}-answer-1" for m in MEETINGS]
    # MAGNIFICo's prompts are longer than 2000 tokens: counted, and cut on the left by the harness's vllm model
    assert magnifico["prompts_truncated"] == 8
    (call,) = [c for c in vllm_runs["chat" if chat else "plain"]["calls"] if any("-key-" in p for p in c["prompts"])]
    cue = "the complete query for the last question above, starting with SELECT." if chat else "\nSELECT"
    sql = [p for p in call["prompts"] if cue in p[-200:]]
    assert len(sql) == 8 and not any(p.startswith(("user: ", "/*")) for p in sql)
    others = [p for p in call["prompts"] if p not in sql]
    assert len(others) == 8 + 3  # LitM's 8 prompts that fit and ELITR's 3 single-turn prompts, in one call
    # with the chat template, the tokenizer's "role: content" lines
    assert all(p.startswith("user: ") == chat and p.endswith("\nassistant: ") == chat for p in call["prompts"] if p in others)


@pytest.mark.parametrize("chat", [False, True], ids=["plain", "chat"])
def test_multi_turn_conversations(vllm_runs, chat):
    run = vllm_runs["chat" if chat else "plain"]["run"]
    samples = {(s["doc"]["meeting"], s["doc"]["turn"]): json.loads(s["resps"][0][0])
               for s in run.samples["elitr_bench_qa_dev_mt"]}
    assert sorted(samples) == [(MEETINGS[0], 1), (MEETINGS[0], 2), (MEETINGS[0], 3), (MEETINGS[1], 1),
                               (MEETINGS[1], 2), (MEETINGS[2], 1)]
    for (meeting, turn), record in samples.items():  # each turn holds the model's own earlier answers
        assistant = [m["content"] for m in record["messages"] if m["role"] == "assistant"]
        assert assistant == [samples[meeting, k]["text"].strip() for k in range(1, turn)]
    if vllm_runs["backend"] != "stand-in":
        return
    assert {key: record["text"] for key, record in samples.items()} == {
        (meeting, turn): f"{meeting}-answer-{turn}" for meeting, turn in samples}
    # one generate call per turn, batched across meetings (the single-turn prompts went with the other tasks')
    calls = [c for c in vllm_runs["chat" if chat else "plain"]["calls"] if all("QUESTION: " in p for p in c["prompts"])]
    assert [[p.count("QUESTION: ") for p in call["prompts"]] for call in calls] == [[1, 1, 1], [2, 2], [3]]
    firsts = vllm_runs["chat" if chat else "plain"]["first_lines"]
    for call in calls:
        for prompt in call["prompts"]:
            meeting = next(m for m, first in firsts.items() if first in prompt)
            turn = prompt.count("QUESTION: ")
            assert re.findall(r"meeting_en_dev_\d+-answer-\d+", prompt) == [f"{meeting}-answer-{k}" for k in range(1, turn)]
            assert prompt.endswith("\nassistant: ") == chat
