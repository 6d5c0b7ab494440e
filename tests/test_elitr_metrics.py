"""ELITR-Bench metrics from scripted answers and a stub judge whose scores are chosen here.

The 14 questions of meeting_en_dev_002 (QA set, dev: documents 17-30) are answered "R<id>" by the
scripted model; the stub judge gives each answer the score below. Question types, answer positions
and the differentiating flag (the question's text differs in the Conv set) are from the data file:

    id type    pos diff score      id type    pos diff score
     1 who     S   -    8           8 who     M   -    5
     2 what    S   -    6           9 who     S   -    6
     3 howmany S   yes  4          10 who     M   -    4
     4 what    M   yes  2          11 when    E   -    10
     5 who     B   -    9          12 what    M   yes  1
     6 who     S   -    7          13 what    B   -    7
     7 who     M   -    3          14 what    E   -    9

By hand: score = 81/14; who = (8+9+7+3+5+6+4)/7 = 6; what = (6+2+1+7+9)/5 = 5; when = 10;
howmany = 4; begin = (9+7)/2 = 8; middle = (2+3+5+4+1)/5 = 3; end = (10+9)/2 = 9.5; several =
(8+6+4+7+6)/5 = 6.2; diff = (4+2+1)/3 = 7/3; judge_failures = 0. middle_pvalue is computed below
with scipy from the two groups written out by hand.

When the judge never writes a score for R9 (a judge failure), every mean R9 belongs to (score,
who, several) and the p-value are NaN: judging is incomplete, and no mean over the other answers
stands in for the task's score; the others keep their values and judge_failures = 1.
"""
from __future__ import annotations

import json
import math
import re

import pytest
from scipy import stats

from helpers.harness import skip_where_broken
from helpers.judge import answering_the_probe
from doubles.stub_openai import StubOpenAIServer

KEY_ENV = "LMX_ELITR_TEST_KEY"
SCORES = {1: 8, 2: 6, 3: 4, 4: 2, 5: 9, 6: 7, 7: 3, 8: 5, 9: 6, 10: 4, 11: 10, 12: 1, 13: 7, 14: 9}
MEETING_002 = list(range(17, 31))
MIDDLE = [2, 3, 5, 4, 1]  # questions 4, 7, 8, 10, 12
OTHERS = [8, 6, 4, 9, 7, 6, 10, 7, 9]  # questions 1, 2, 3, 5, 6, 9, 11, 13, 14
EXPECTED = {
    "score": 81 / 14, "score_who": 6.0, "score_what": 5.0, "score_when": 10.0, "score_howmany": 4.0,
    "score_begin": 8.0, "score_middle": 3.0, "score_end": 9.5, "score_several": 6.2, "score_diff": 7 / 3,
    "judge_failures": 0, "prompts_truncated": 0,
}
UNDEFINED_WITH_A_FAILURE = ("score", "score_who", "score_several", "middle_pvalue")


def judge(request: dict, failing: int | None = None) -> str:
    prompt = request["messages"][-1]["content"]
    answer = re.search(r"### Response to evaluate:\n(.*?)\n\n###", prompt, re.S).group(1)
    qid = int(answer.removeprefix("R"))
    return "I cannot grade this." if qid == failing else f"Feedback. \\boxed{{{SCORES[qid]}}}"


def questions_of_meeting_002(data_dir) -> list[str]:
    from lm_eval_ext.data import read_zip_member

    data = json.loads(read_zip_member("elitr_bench", "data.zip", "data/elitr-bench-qa_dev.json", password=b"utter"))
    (meeting,) = [m for m in data["meetings"] if m["id"] == "meeting_en_dev_002"]
    return [q["question"] for q in meeting["questions"]]


def evaluate(tmp_path, data_dir, task, model, failing=None, **model_args):
    import lm_eval
    from lm_eval.tasks import TaskManager

    from lm_eval_ext.paths import tasks_dir
    questions = questions_of_meeting_002(data_dir)
    # latest question first: a multi-turn prompt holds every earlier question too
    rules = [{"contains": q.strip(), "response": f"R{i}"} for i, q in reversed(list(enumerate(questions, 1)))]
    responses = tmp_path / "responses.json"
    responses.write_text(json.dumps({"rules": rules, "default": None}))
    with StubOpenAIServer(responder=answering_the_probe(lambda request: judge(request, failing)), models=()) as srv:
        manager = TaskManager(include_path=str(tasks_dir()), include_defaults=False, metadata={
            "judge_base_url": srv.base_url, "judge_api_key_env": KEY_ENV,
            "judge_cache": str(tmp_path / "judge.sqlite")})
        return lm_eval.simple_evaluate(model=model, model_args={**model_args, "responses": str(responses)},
                                       tasks=[task], task_manager=manager, samples={task: MEETING_002})


@skip_where_broken("samples")
@pytest.mark.parametrize("task", ["elitr_bench_qa_dev_st", "elitr_bench_qa_dev_mt"])
def test_metrics_equal_hand_computed_values(tmp_path, data_dir, monkeypatch, task):
    monkeypatch.setenv(KEY_ENV, "sk-elitr-test-key-0123456789abcdef")
    out = evaluate(tmp_path, data_dir, task, "ext-canned-gen")
    metrics = out["results"][task]
    for name, value in EXPECTED.items():
        assert metrics[f"{name},judge"] == pytest.approx(value, rel=1e-12), name
    expected_p = stats.ttest_ind(MIDDLE, OTHERS, equal_var=False, alternative="less").pvalue
    assert metrics["middle_pvalue,judge"] == pytest.approx(expected_p, rel=1e-12)
    assert 0 < expected_p < 0.01  # middle questions clearly score lower here
    samples = {s["doc"]["question_id"]: s for s in out["samples"][task]}
    assert samples["4"]["score_diff"] == 2.0 and "score_diff" not in samples["1"]
    assert samples["12"]["doc"]["differentiating"] is True


@skip_where_broken("samples")
def test_a_judge_failure_leaves_the_means_it_belongs_to_undefined(tmp_path, data_dir, monkeypatch):
    monkeypatch.setenv(KEY_ENV, "sk-elitr-test-key-0123456789abcdef")
    task = "elitr_bench_qa_dev_st"
    metrics = evaluate(tmp_path, data_dir, task, "ext-canned-gen", failing=9)["results"][task]
    for name, value in EXPECTED.items():
        if name in UNDEFINED_WITH_A_FAILURE:
            assert math.isnan(metrics[f"{name},judge"]), name
        elif name != "judge_failures":
            assert metrics[f"{name},judge"] == pytest.approx(value, rel=1e-12), name
    assert math.isnan(metrics["middle_pvalue,judge"]) and metrics["judge_failures,judge"] == 1


def test_metric_helpers_by_hand():
    from lm_eval_ext.elitr.metrics import aggregate, question_metrics

    docs = [{"question_type": "who", "answer_position": "M", "differentiating": True},
            {"question_type": "who", "answer_position": "B", "differentiating": False},
            {"question_type": "when", "answer_position": "M", "differentiating": False}]
    values = [question_metrics(docs[0], 4.0, False, truncated=True), question_metrics(docs[2], 8.0, False)]
    result = aggregate(values)
    assert result["score"] == 6.0 and result["score_who"] == 4.0 and result["score_middle"] == 6.0
    assert result["score_diff"] == 4.0 and result["judge_failures"] == 0 and result["prompts_truncated"] == 1
    assert "score_begin" not in result and "score_end" not in result
    assert math.isnan(result["middle_pvalue"])  # no non-middle score: the test is undefined
    failed = question_metrics(docs[1], None, True)
    assert math.isnan(failed["score"]) and math.isnan(failed["score_begin"]) and failed["judge_failures"] == 1
    result = aggregate([*values, failed])  # a failure is no score: the means it belongs to are undefined
    assert math.isnan(result["score"]) and math.isnan(result["score_who"]) and math.isnan(result["score_begin"])
    assert result["score_when"] == 8.0 and result["judge_failures"] == 1


@pytest.mark.slow
@skip_where_broken("samples")
def test_plain_lm_eval_single_turn_through_an_api(run_cli, data_dir, tmp_path):
    """Single-turn tasks run under plain `lm_eval`; the stub is both the answering model and the judge."""
    questions = questions_of_meeting_002(data_dir)

    def both(request: dict) -> str:
        prompt = request["messages"][-1]["content"]
        if prompt.startswith("### Task description:"):
            return judge(request)
        return next(f"R{i}" for i, q in reversed(list(enumerate(questions, 1))) if q.strip() in prompt)

    out = tmp_path / "out"
    with StubOpenAIServer(responder=answering_the_probe(both), models=()) as srv:
        proc = run_cli(["lm_eval", "run", "--model", "local-chat-completions",
                        "--model_args", f"base_url={srv.chat_url},model=stub,tokenizer_backend=none",
                        "--apply_chat_template", "--tasks", "elitr_bench_qa_dev_st",
                        "--samples", json.dumps({"elitr_bench_qa_dev_st": MEETING_002}),
                        "--metadata", json.dumps({"judge_base_url": srv.base_url, "judge_api_key_env": KEY_ENV,
                                                 "judge_cache": "none"}),
                        "--output_path", str(out)], env={KEY_ENV: "sk-elitr-test-key-0123456789abcdef"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    metrics = json.loads(next(out.rglob("results_*.json")).read_text())["results"]["elitr_bench_qa_dev_st"]
    assert metrics["score,judge"] == pytest.approx(81 / 14) and metrics["judge_failures,judge"] == 0
