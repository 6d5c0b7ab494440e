"""Score-only mode: ``lm-eval-ext elitr score`` on the published responses, on our own files, on harness samples.

The expected numbers are computed here from the raw files (read with zipfile and json, plain
Python means, scipy's Welch test), never with the code under test.
"""
from __future__ import annotations

import json
import re
import statistics
import zipfile

import pytest
from scipy import stats

from doubles.stub_openai import StubOpenAIServer

KEY_ENV = "LMX_ELITR_SCORE_KEY"
KEY = "sk-elitr-score-key-0123456789abcdef"
POSITIONS = {"B": "begin", "M": "middle", "E": "end", "S": "several"}


def cli(capsys, *argv) -> tuple[int, str, str]:
    from lm_eval_ext.cli import main

    with pytest.raises(SystemExit) as exit_info:
        main(list(argv))
    captured = capsys.readouterr()
    return exit_info.value.code, captured.out, captured.err


def read_json_member(data_dir, archive: str, member: str) -> dict:
    with zipfile.ZipFile(data_dir / "elitr_bench" / archive) as zf:
        return json.loads(zf.read(member, pwd=b"utter"))


def expected_from_published(data_dir, setting: str, split: str) -> dict[str, dict]:
    """Per model: the means of the stored GPT-4 scores, overall and per slice, and the middle p-value."""
    published = read_json_member(data_dir, "generated-responses.zip", f"generated-responses/elitr-bench-{setting}_gpt-4-eval.json")
    qa = read_json_member(data_dir, "data.zip", f"data/elitr-bench-qa_{split}.json")
    conv = read_json_member(data_dir, "data.zip", f"data/elitr-bench-conv_{split}.json")
    conv_text = {(m["id"], q["id"]): q["question"] for m in conv["meetings"] for q in m["questions"]}
    differing = {(m["id"], q["id"]) for m in qa["meetings"] for q in m["questions"] if conv_text[m["id"], q["id"]] != q["question"]}
    rows: dict[str, list] = {}
    for meeting in published["meetings"]:
        for question in meeting["questions"]:
            for answer in question["generated-responses"]:
                rows.setdefault(answer["model"], []).append((question["question-type"], question["answer-position"],
                                                             (meeting["id"], question["id"]) in differing,
                                                             float(answer["gpt-4-eval_score"])))
    expected = {}
    for model, items in rows.items():
        scores = {"score": statistics.fmean(s for *_, s in items)}
        for kind in ("who", "what", "when", "howmany"):
            scores[f"score_{kind}"] = statistics.fmean(s for t, _, _, s in items if t == kind)
        for code, name in POSITIONS.items():
            scores[f"score_{name}"] = statistics.fmean(s for _, p, _, s in items if p == code)
        scores["score_diff"] = statistics.fmean(s for _, _, d, s in items if d)
        scores["middle_pvalue"] = stats.ttest_ind([s for _, p, _, s in items if p == "M"],
                                                  [s for _, p, _, s in items if p != "M"],
                                                  equal_var=False, alternative="less").pvalue
        expected[model] = scores
    return expected


@pytest.mark.parametrize("setting,split", [("qa_dev_st", "dev"), ("conv_test2_mt", "test2")])
def test_published_scores_reproduce_per_model_means(capsys, data_dir, setting, split):
    code, out, _ = cli(capsys, "elitr", "score", f"generated-responses.zip:elitr-bench-{setting}_gpt-4-eval.json",
                       "--from-file", "--json")
    assert code == 0
    report = json.loads(out)
    expected = expected_from_published(data_dir, setting, split)
    assert list(report["models"]) == list(expected)
    for model, metrics in report["models"].items():
        assert metrics["judge_failures"] == 0
        assert metrics["n_answers"] == metrics["n_scored"] == (141 if split == "dev" else 130)
        for name, value in expected[model].items():
            assert metrics[name] == pytest.approx(value, rel=1e-12), (model, name)
    assert report["scores"] == "file:gpt-4-eval_score"


def test_published_table_and_other_score_fields(capsys, data_dir):
    code, out, _ = cli(capsys, "elitr", "score", "generated-responses.zip:elitr-bench-qa_test2_st_all-eval.json",
                       "--from-file", "--score-field", "gold-human-eval_score")
    assert code == 0
    published = read_json_member(data_dir, "generated-responses.zip", "generated-responses/elitr-bench-qa_test2_st_all-eval.json")
    gpt4 = [float(a["gold-human-eval_score"]) for m in published["meetings"] for q in m["questions"]
            for a in q["generated-responses"] if a["model"] == "GPT-4"]
    (row,) = [line for line in out.splitlines() if line.startswith("GPT-4 ")]
    assert row.split()[1] == f"{statistics.fmean(gpt4):.2f}"
    assert out.splitlines()[1].split()[:3] == ["model", "score", "who"]


def answers_file(tmp_path) -> str:
    """Two models' answers to two dev questions, in the published format (stored scores are ignored when judging)."""
    questions = [{"id": "1", "question-type": "who", "answer-position": "S", "question": "Who came?",
                  "groundtruth-answer": "A and B",
                  "generated-responses": [{"model": "m1", "generated-response": "A and B", "gpt-4-eval_score": "3"},
                                          {"model": "m2", "generated-response": "nobody", "gpt-4-eval_score": "3"}]},
                 {"id": "4", "question-type": "what", "answer-position": "M", "question": "Which one?",
                  "groundtruth-answer": "plan B",
                  "generated-responses": [{"model": "m1", "generated-response": "plan B", "gpt-4-eval_score": "3"},
                                          {"model": "m2", "generated-response": "plan A", "gpt-4-eval_score": "3"}]}]
    path = tmp_path / "answers.json"
    path.write_text(json.dumps({"split": "dev", "meetings": [{"id": "meeting_en_dev_002", "questions": questions}]}))
    return str(path)


VERDICTS = {"A and B": "\\boxed{10}", "nobody": "\\boxed{1}", "plan B": "\\boxed{9}", "plan A": "no score here"}


def judge(request: dict) -> str:
    prompt = request["messages"][-1]["content"]
    return VERDICTS[re.search(r"### Response to evaluate:\n(.*?)\n\n###", prompt, re.S).group(1)]


def test_judging_a_file_of_answers(capsys, data_dir, tmp_path, monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY)
    path = answers_file(tmp_path)
    with StubOpenAIServer(responder=judge) as srv:
        args = ["elitr", "score", path, "--json", "--judge-base-url", srv.base_url, "--judge-api-key-env", KEY_ENV,
                "--judge-cache", str(tmp_path / "cache.sqlite")]
        code, out, _ = cli(capsys, *args)
        calls = srv.call_count
        assert cli(capsys, *args)[0] == 0 and srv.call_count == calls  # a rerun is answered by the cache
    assert code == 0
    models = json.loads(out)["models"]
    # m1: 10 (who, several) and 9 (what, middle; question 4 of meeting 002 is differentiating)
    assert models["m1"] == {"n_answers": 2, "n_scored": 2, "score": 9.5, "score_who": 10.0, "score_what": 9.0,
                            "score_middle": 9.0, "score_several": 10.0, "score_diff": 9.0, "judge_failures": 0}
    # m2: 1 (who, several), and a judge failure on "plan A" (what, middle): the means "plan A" belongs to
    # (score, what, middle, diff) are undefined and left out; who and several keep their value
    assert models["m2"] == {"n_answers": 2, "n_scored": 1, "score_who": 1.0, "score_several": 1.0, "judge_failures": 1}


def test_dry_run_calls_nothing(capsys, data_dir, tmp_path, monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY)
    with StubOpenAIServer(responder=judge) as srv:
        code, out, err = cli(capsys, "elitr", "score", answers_file(tmp_path), "--dry-run", "--judge-base-url",
                             srv.base_url, "--judge-api-key-env", KEY_ENV, "--judge-cache", "none")
        assert srv.call_count == 0
    assert code == 0 and "4 need a judge call" in err and out == ""


def test_user_errors_are_one_paragraph(capsys, tmp_path):
    code, _, err = cli(capsys, "elitr", "score", str(tmp_path / "missing.json"), "--from-file")
    assert code == 2 and "Cannot read the responses file" in err and "Traceback" not in err
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"doc": {"question": "q"}}\n')
    code, _, err = cli(capsys, "elitr", "score", str(bad), "--from-file")
    assert code == 2 and "not a sample of an ELITR-Bench task" in err
    latin1 = tmp_path / "latin1.json"
    latin1.write_bytes('{"a": "café"}\n'.encode("latin-1"))
    code, _, err = cli(capsys, "elitr", "score", str(latin1), "--from-file")
    assert code == 2 and "Traceback" not in err
    assert "latin1.json is not UTF-8 text (byte 10 cannot be decoded)" in err


@pytest.mark.slow
def test_samples_file_round_trip(run_cli, data_dir, tmp_path):
    """A run's samples file, scored with --from-file, gives the run's own metrics; re-judged, the new judge's."""
    responses = tmp_path / "responses.json"
    responses.write_text(json.dumps({"rules": [{"contains": "purpose", "response": "plan B"}], "default": "A and B"}))
    judge_env = {KEY_ENV: KEY}
    with StubOpenAIServer(text="\\boxed{7}", models=()) as first, StubOpenAIServer(text="\\boxed{3}") as second:
        out = tmp_path / "out"
        proc = run_cli(["lm-eval-ext", "run", "--model", "ext-canned-gen", "--model_args", f"responses={responses}",
                        "--tasks", "elitr_bench_qa_dev_st", "--limit", "4", "--log_samples", "--output_path", str(out),
                        "--metadata", json.dumps({"judge_base_url": first.base_url, "judge_api_key_env": KEY_ENV,
                                                 "judge_cache": "none"})],
                       env=judge_env)
        assert proc.returncode == 0, proc.stderr[-3000:]
        (samples,) = out.rglob("samples_elitr_bench_qa_dev_st_*.jsonl")
        stored = run_cli(["lm-eval-ext", "elitr", "score", str(samples), "--from-file", "--json", "--model-name", "mine"])
        rejudged = run_cli(["lm-eval-ext", "elitr", "score", str(samples), "--json", "--judge-base-url", second.base_url,
                            "--judge-api-key-env", KEY_ENV, "--judge-cache", "none"], env=judge_env)
    assert stored.returncode == 0, stored.stderr
    run_metrics = json.loads(next(out.rglob("results_*.json")).read_text())["results"]["elitr_bench_qa_dev_st"]
    mine = json.loads(stored.stdout)["models"]["mine"]
    assert mine["score"] == run_metrics["score,judge"] == 7.0 and mine["n_answers"] == 4
    assert rejudged.returncode == 0, rejudged.stderr
    (model,) = json.loads(rejudged.stdout)["models"].values()  # named after the folder the harness wrote
    assert model["score"] == 3.0 and model["judge_failures"] == 0
