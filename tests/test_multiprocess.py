"""Several processes give the numbers of one: the harness's own document split and gather, on CPU.

One ``lm_eval run`` command (a task of each benchmark) runs once in one process and once under
``torchrun --standalone --nproc_per_node 2 -m lm_eval run`` with the ``ext-scripted-dist`` test
double, which joins a gloo process group, so the harness splits the documents (every other
document to each process; whole ELITR meetings) and gathers results and samples itself. What
must hold: the same samples and numbers (means summed in another order aside), counts summed over
the processes (each process has skipped and truncated prompts of its own), each meeting's turns
in order on one process, metrics that only some documents report (LitM positions, MAGNIFICo base
items, ELITR question types) reported once each, and no padding of other tasks' generations.
"""
from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

from helpers.harness import assert_documents, skip_where_broken
from helpers.runs import UNCOUNTED, Run, assert_same_run, lm_eval_run, summation_order_difference
from helpers.scripted import MAGNIFICO_GOLDS, elitr_meeting_rules, litm_kv4_rules, write_lieder_table

pytestmark = [pytest.mark.multiprocess, pytest.mark.xdist_group("multiprocess"),  # one worker builds `runs`
              skip_where_broken("samples")]  # the runs select documents

TASKS = ("lieder_base", "litm_kv_generated", "magnifico_direct_plausible", "elitr_bench_qa_dev_mt")
# ELITR dev qa: meeting 1 is documents 0-16, meeting 2 17-30, meeting 3 from 31. Process 0 takes meetings 1 and
# 3 (turns 1-4 and 1-3), process 1 meeting 2 (turns 1, 3 and 4: turn 2 is generated because turn 3 needs it).
# Every question type, answer position and the differentiating questions have two questions or more, but only
# process 0 has answers at the beginning (documents 32, 33): one of them is reported by process 1.
ELITR_SAMPLES = [0, 1, 2, 3, 17, 19, 20, 31, 32, 33]
MEETINGS = ("meeting_en_dev_001", "meeting_en_dev_002", "meeting_en_dev_003")
MAGNIFICO_SAMPLES = list(range(8))  # items 0-3 of `maximum`: novel, base, novel, base, ... (novel on process 0)


def judge_score(question: str) -> int:
    """The stub judge's score of an answer to ``question``."""
    return 1 + len(question) % 10


def write_inputs(folder: Path, data_dir: Path, tiny_model_dir: Path) -> dict:
    """The scripted model's table and responses, the LitM key-value file, and the run's --metadata."""
    folder.mkdir()
    table = write_lieder_table(data_dir, folder / "table.json")
    # LitM: example 1 does not fit max_length=3000 with the tiny tokenizer, so its 4 documents (4-7: two on each
    # process) are skipped; MAGNIFICo: the gold queries; ELITR: "<meeting>-answer-<turn>"
    rules = litm_kv4_rules(folder / "kv4.jsonl")
    rules += [{"contains": f"-- {text}\nSELECT", "response": body} for text, body in MAGNIFICO_GOLDS.items()]
    meeting_rules, firsts = elitr_meeting_rules(MEETINGS)
    rules += meeting_rules
    responses = folder / "responses.json"
    responses.write_text(json.dumps({"rules": rules, "default": "no_such_column FROM no_such_table",
                                     "turn_marker": "QUESTION: "}))
    metadata = {"max_length": 3000, "tokenizer": str(tiny_model_dir), "litm_kv_pairs": 4,
                "litm_kv_file": str(folder / "kv4.jsonl"), "litm_positions": "all", "qa_markers": True,
                "overflow": "truncate", "judge_model": "stub-judge", "judge_cache": "none"}
    return {"table": table, "responses": responses, "metadata": metadata, "first_lines": firsts}


@pytest.fixture(scope="module")
def runs(tmp_path_factory, data_dir, tiny_model_dir) -> dict:
    """The same command in one process and in two; calls logs per process."""
    from doubles.stub_openai import StubOpenAIServer

    from helpers.judge import answering_the_probe, judge_calls

    root = tmp_path_factory.mktemp("multiprocess")
    inputs = write_inputs(root / "inputs", data_dir, tiny_model_dir)

    def judge(request: dict) -> str:
        question = re.search(r"### Question:\n(.*?)\n\n### Response to evaluate:", request["messages"][-1]["content"], re.S)[1]
        return f"Feedback: fine.\n\\boxed{{{judge_score(question.strip())}}}"

    out = {}
    with StubOpenAIServer(responder=answering_the_probe(judge), model="stub-judge") as server:
        metadata = json.dumps({**inputs["metadata"], "judge_base_url": server.base_url})
        args = ["--model", "ext-scripted-dist", "--model_args",
                f"table={inputs['table']},responses={inputs['responses']},calls_log=calls.jsonl",
                "--tasks", ",".join(TASKS), "--confirm_run_unsafe_code", "--metadata", metadata,
                "--samples", json.dumps({"magnifico_direct_plausible": MAGNIFICO_SAMPLES,
                                         "elitr_bench_qa_dev_mt": ELITR_SAMPLES})]
        for processes in (1, 2):
            folder = root / f"processes_{processes}"
            out[processes] = Run.load(lm_eval_run(args, folder, processes, env={"OPENAI_API_KEY": "sk-test-not-a-secret"}))
            logs = sorted(folder.glob("calls.jsonl*"))
            out[f"calls_{processes}"] = [[json.loads(line) for line in log.read_text().splitlines()] for log in logs]
        out["judge_calls"] = len(judge_calls(server))  # the probe left out
    out["first_lines"] = inputs["first_lines"]
    return out


@pytest.mark.slow
def test_lm_eval_ext_run_in_two_processes(tmp_path, data_dir):
    """`lm-eval-ext run` under torchrun: the first process writes the results (and checks them), the other does
    not fail for writing none."""
    table = write_lieder_table(data_dir, tmp_path / "table.json")
    out = lm_eval_run(["--model", "ext-scripted-dist", "--model_args", f"table={table}", "--tasks", "lieder_base",
                       "--limit", "8"], tmp_path / "run", processes=2, program="lm-eval-ext")
    (results_file,) = out.rglob("results_*.json")
    results = json.loads(results_file.read_text())
    assert_documents(results, "lieder_base", 8)


# The harness's padding (several processes make as many model calls): process 1 has 3 ELITR requests, process 0
# seven; its last one (meeting 2, turn 4) is repeated four times more, answered without generating.
PADDED = {"elitr_bench_qa_dev_mt": {20: ("resps",)}}


def test_two_processes_report_what_one_reports(runs):
    assert_same_run(runs[1], runs[2], ignore_sample_fields=PADDED)
    (padded,) = [s for s in runs[2].samples["elitr_bench_qa_dev_mt"] if s["doc_id"] == 20]
    (single,) = [s for s in runs[1].samples["elitr_bench_qa_dev_mt"] if s["doc_id"] == 20]
    assert padded["resps"] == [single["resps"][0] * 5]
    # the means that differ are the same values summed in another order (LIEDER's 48 groups: k/15, k/6 values)
    differing = [(task, key) for task, numbers in runs[1].results["results"].items() for key, value in numbers.items()
                 if value != runs[2].results["results"][task][key] and value == value and key not in UNCOUNTED]
    assert all(summation_order_difference(task, key, runs[1], runs[2]) in ("mean", "mean_stderr")
               for task, key in differing)


def test_exact_numbers(runs):
    for run in (runs[1], runs[2]):
        lieder, litm = run.results["results"]["lieder_base"], run.results["results"]["litm_kv_generated"]
        # tests/helpers/scripted.py derives the LIEDER numbers of this table
        assert math.isclose(lieder["acc,none"], 496 / 720, rel_tol=1e-12)
        assert math.isclose(lieder["acc_rel,none"], 272 / 720, rel_tol=1e-12)
        assert litm["acc,none"] == 0.25 and litm["acc_pos_1,none"] == 1.0
        assert [litm[f"acc_pos_{p},none"] for p in (2, 3, 4)] == [0.0, 0.0, 0.0]
        magnifico = run.results["results"]["magnifico_direct_plausible"]
        assert (magnifico["ex,sandbox"], magnifico["ex_base,sandbox"], magnifico["rel_perf,sandbox"]) == (0.5, 1.0, 50.0)
        elitr = run.results["results"]["elitr_bench_qa_dev_mt"]
        scores = [judge_score(s["doc"]["question"]) for s in run.samples["elitr_bench_qa_dev_mt"]]
        assert math.isclose(elitr["score,judge"], sum(scores) / len(scores), rel_tol=1e-12)
        assert elitr["judge_failures,judge"] == 0
    assert runs["judge_calls"] == 2 * len(ELITR_SAMPLES)  # each answer judged once per run


def test_counts_are_summed_over_processes(runs):
    litm, elitr = (runs[2].results["results"][t] for t in ("litm_kv_generated", "elitr_bench_qa_dev_mt"))
    assert litm["prompts_skipped,none"] == 4
    assert [litm[f"prompts_skipped_pos_{p},none"] for p in (1, 2, 3, 4)] == [1, 1, 1, 1]
    assert elitr["prompts_truncated,judge"] == len(ELITR_SAMPLES)  # every transcript is cut to fit 3000 tokens
    assert runs[1].results["results"]["litm_kv_generated"]["prompts_skipped,none"] == 4
    # each process skipped two LitM prompts: 4 of its 6 LitM prompts and its 4 MAGNIFICo prompts reach the model,
    # in one call, with no padding copies (ELITR's imbalance pads ELITR's own requests)
    for calls in runs["calls_2"]:
        (plain,) = [call for call in calls if not any("QUESTION: " in p for p in call["prompts"])]
        sql = [p for p in plain["prompts"] if p.endswith("\nSELECT")]
        kv = [p for p in plain["prompts"] if "-value" in p]
        assert (len(plain["prompts"]), len(sql), len(kv)) == (8, 4, 4)
        assert not any("k" * 4000 in p for p in kv)


def test_each_meeting_stays_on_one_process_with_its_turns_in_order(runs):
    seen = {}
    for rank, calls in enumerate(runs["calls_2"]):
        for call in calls:
            for prompt in call["prompts"]:
                if "QUESTION: " not in prompt:
                    continue
                meeting = next(m for m, first in runs["first_lines"].items() if first in prompt)
                turn = prompt.count("QUESTION: ")
                # exactly this meeting's own earlier answers, in order
                assert re.findall(r"meeting_en_dev_\d+-answer-\d+", prompt) == [f"{meeting}-answer-{k}" for k in range(1, turn)]
                seen.setdefault(meeting, []).append((rank, turn))
    assert seen == {MEETINGS[0]: [(0, 1), (0, 2), (0, 3), (0, 4)], MEETINGS[2]: [(0, 1), (0, 2), (0, 3)],
                    MEETINGS[1]: [(1, 1), (1, 2), (1, 3), (1, 4)]}


# -- the plan that makes every process report every metric (lm_eval_ext.task_base.plan_moves) ------------------


def _names(*metrics: str) -> list:
    return [(metric, "none") for metric in ("acc", *metrics)]


def test_processes_that_report_the_same_metrics_keep_their_documents():
    from lm_eval_ext.task_base import plan_moves

    assert plan_moves([{0: _names("acc_pos_1"), 2: _names("acc_pos_2")}, {1: _names("acc_pos_2"), 3: _names("acc_pos_1")}]) == {}


def test_a_missing_metric_arrives_with_a_document_its_process_can_spare():
    from lm_eval_ext.task_base import plan_moves

    # process 1 has no position-1 document; process 0 has two and gives the first
    reported = [{0: _names("acc_pos_1"), 2: _names("acc_pos_1"), 4: _names("acc_pos_2")},
                {1: _names("acc_pos_2"), 3: _names("acc_pos_2"), 5: _names("acc_pos_2")}]
    assert plan_moves(reported) == {0: (0, 1)}


def test_a_metric_of_fewer_documents_than_processes_is_refused():
    from lm_eval_ext.task_base import UnreportableMetric, plan_moves

    with pytest.raises(UnreportableMetric) as err:
        plan_moves([{0: _names("score_diff"), 2: _names()}, {1: _names(), 3: _names()}])
    assert (err.value.metric, err.value.documents) == ("score_diff", 1)


@pytest.mark.requires_data
def test_elitr_multi_turn_refuses_more_processes_than_meetings():
    from lm_eval.tasks import TaskManager

    from lm_eval_ext.elitr.task import ElitrOptionError

    (task,) = TaskManager(include_defaults=False).load(["elitr_bench_qa_dev_mt"])["tasks"].values()
    with pytest.raises(ElitrOptionError, match="come from 2 meeting.*3 processes.*at most 2 processes"):
        list(task.rank_documents(rank=0, world_size=3, samples=[0, 1, 17]))
    assert [doc_id for doc_id, _ in task.rank_documents(rank=1, world_size=2, samples=[0, 1, 17])] == [2]
