"""The ELITR-Bench section: on result directories written by the real harness (canned answers, stub judge;
the judge's scores are chosen by hand in helpers/scripted.py and the expected means computed here from
that rule and the dev questions), and on a hand-written results file (tests/fixtures/results/elitr:
one seed, prompts truncated, a task whose score is undefined because the judge failed on an answer), and on a real
run of SmolLM2-135M-Instruct made as a judge dry run (tests/fixtures/real/elitr_dry_run_gguf).
"""
from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

import pytest
from matplotlib.container import BarContainer

from helpers.files import FIXTURES, assert_images, read_csv
from helpers.scripted import elitr_judge_score, elitr_questions

pytestmark = pytest.mark.filterwarnings("ignore")
POSITION_NAME = {"B": "begin", "M": "middle", "E": "end", "S": "several"}


def _expected(set_name: str, seed: int) -> dict[str, float]:
    scored = [(q, elitr_judge_score(q, seed)) for q in elitr_questions(set_name)]
    means = {"score": statistics.fmean(s for _, s in scored)}
    for q_type in ("who", "what", "when", "howmany"):
        means[f"score_{q_type}"] = statistics.fmean(s for q, s in scored if q["question-type"] == q_type)
    for code, name in POSITION_NAME.items():
        means[f"score_{name}"] = statistics.fmean(s for q, s in scored if q["answer-position"] == code)
    return means


def _results(out: Path) -> dict[int, dict]:
    found = {}
    for path in out.rglob("results_*.json"):
        data = json.loads(path.read_text())
        found[data["config"]["random_seed"]] = data
    return found


def _num(cell: str):
    return None if cell == "" else float(cell)


def test_elitr_section_scripted_exact(elitr_scripted, tmp_path):
    from lm_eval_ext.report.build import build_report

    out = tmp_path / "report"
    report = build_report([f"canned={elitr_scripted}"], out)
    results = _results(elitr_scripted)
    newest = results[2024]

    scores = {r["task"]: r for r in read_csv(out / "tables/elitr_scores.csv") if r["source"] == "results file"}
    assert list(scores) == ["elitr_bench_qa_dev_st", "elitr_bench_qa_dev_mt", "elitr_bench_conv_dev_mt"]
    for task, row in scores.items():
        raw = {k.split(",")[0]: v for k, v in newest["results"][task].items() if "," in k}
        assert row["seed"] == "2024"
        for column in ("score", "score_who", "score_middle", "score_diff", "middle_pvalue", "judge_failures",
                       "prompts_truncated"):
            value = raw.get(column)
            finite = isinstance(value, (int, float)) and not (isinstance(value, float) and math.isnan(value))
            assert _num(row[column]) == (value if finite else None), (task, column)
        assert _num(row["score_stderr"]) == raw["score_stderr"]
        expected = _expected("conv" if "conv" in task else "qa", 2024)
        for name, value in expected.items():
            assert math.isclose(float(row[name]), value), (task, name)
        assert row["judge_failures"] == "0.0"
        assert float(row["middle_pvalue"]) < 0.01  # middle questions score 3-4, the others 7-9

    seeds = {(r["task"], r["metric"]): r for r in read_csv(out / "tables/elitr_seeds.csv")}
    for task in scores:
        set_name = "conv" if "conv" in task else "qa"
        low, high = _expected(set_name, 2023)["score"], _expected(set_name, 2024)["score"]
        row = seeds[(task, "score")]
        assert row["seeds"] == "2023 2024" and row["n"] == "2"
        assert math.isclose(float(row["mean"]), (low + high) / 2)
        assert math.isclose(float(row["sd"]), math.sqrt(0.5))  # the two seeds differ by exactly 1 on every question
        assert [float(v) for v in row["values"].split()] == [
            r["results"][task]["score,judge"] for _, r in sorted(results.items())]

    judges = read_csv(out / "tables/elitr_judge.csv")
    assert {(j["judge"], j["judge_model"], j["template"]) for j in judges} == {("rubric10", "stub-judge", "judge_gpt4_rubric_en.txt")}
    recorded = newest["configs"]["elitr_bench_qa_dev_st"]["metadata"]["judge"]
    assert judges[0]["template_sha256"] == recorded["template_sha256"] and judges[0]["judge_seed"] == "2024"
    (qa,) = [j for j in judges if j["task"] == "elitr_bench_qa_dev_st"]
    assert int(qa["calls"]) == recorded["run"]["calls"] == 141  # one call per question: every first reply scores
    assert int(qa["input_tokens"]) == recorded["usage"]["prompt_tokens"] > 0  # what the judge's replies reported
    assert int(qa["output_tokens"]) == recorded["usage"]["completion_tokens"] > 0
    # at the run's prices ($2.5 / $10 per million input / output tokens)
    usage = recorded["usage"]
    assert float(qa["cost_usd"]) == usage["cost_usd"] == round(
        (usage["prompt_tokens"] * 2.5 + usage["completion_tokens"] * 10) / 1e6, 6) > 0

    for name in ("elitr_settings", "elitr_breakdown"):
        assert_images(out / "figures" / f"{name}.png", out / "figures" / f"{name}.svg")
    page = (out / "report.html").read_text()
    assert "could not score" not in page and "No score to show" not in page
    # two seeds: error bars, and the bars say "2 seeds"
    (section,) = [s for s in report.sections if s.key == "elitr_bench"]
    (settings,) = [b for b in section.blocks if getattr(b, "name", None) == "elitr_settings"]
    ax = settings.figure.axes[0]
    bars = [c for c in ax.containers if isinstance(c, BarContainer)]
    assert len(bars) == 3 and all(bar.errorbar is not None for bar in bars)
    assert {t.get_text() for t in ax.texts} == {"2 seeds"}


def test_one_seed_no_error_bar_and_undefined_score(tmp_path):
    from lm_eval_ext.report.build import build_report

    out = tmp_path / "report"
    report = build_report([str(FIXTURES / "results" / "elitr")], out, published=False)
    scores = {r["task"]: r for r in read_csv(out / "tables/elitr_scores.csv")}
    single, multi = scores["elitr_bench_qa_dev_st"], scores["elitr_bench_qa_dev_mt"]
    assert (single["score"], single["prompts_truncated"]) == ("6.5", "2.0")
    assert (multi["score"], multi["judge_failures"]) == ("", "1.0")
    (section,) = [s for s in report.sections if s.key == "elitr_bench"]
    (settings,) = [b for b in section.blocks if getattr(b, "name", None) == "elitr_settings"]
    ax = settings.figure.axes[0]
    (bar,) = ax.containers  # the single-turn task only: the multi-turn one has no score to draw
    assert bar.errorbar is None  # one seed: no error bar
    assert sorted(t.get_text() for t in ax.texts) == ["1 seed", "n/a"]
    page = (out / "report.html").read_text()
    assert "No score to show (n/a) for org/tiny-chat · elitr_bench_qa_dev_mt: the judge failed on some answers" in page
    assert ("Answers the judge could not score (score is n/a until judging is resumed): org/tiny-chat · "
            "elitr_bench_qa_dev_mt: 1.") in page
    assert "Prompts whose transcript was shortened to fit the model: org/tiny-chat · elitr_bench_qa_dev_st: 2." in page
    assert '<p class="banner partial"><strong>partial run</strong>org/tiny-chat · ' in page


def test_a_judge_dry_run_says_its_answers_were_not_judged(tmp_path):
    """A real judge dry run (`--metadata '{"judge_dry_run": true, ...}'`, SmolLM2-135M-Instruct on its GGUF file,
    2 answers): no answer was judged, none failed. The run is partial for that reason, it scored no document, and
    the report says the scores are n/a because of the dry run, not because the judge failed."""
    from lm_eval_ext.report.build import build_report
    from lm_eval_ext.results.load import load_models
    from lm_eval_ext.results.status import documents_scored, run_status

    fixture = FIXTURES / "real" / "elitr_dry_run_gguf"
    ((run,),) = [m.runs for m in load_models([str(fixture)])]
    task = "elitr_bench_qa_dev_st"
    assert run.metrics(task)["not_judged"] == 2 and run.metrics(task)["judge_failures"] == 0
    assert documents_scored(run, task) == 0
    assert f"{task}: 2 answer(s) not judged (a judge dry run: no judge was called)" in run_status(run).summary()
    build_report([str(fixture)], tmp_path / "report", published=False)
    page = (tmp_path / "report" / "report.html").read_text()
    assert ("No score to show (n/a) for answers a judge dry run (judge_dry_run) did not judge: "
            f"SmolLM2-135M-Instruct.Q4_1.gguf (chat template, gen_kwargs max_gen_toks=32) · {task}: 2.") in page
    assert "· elitr_bench_qa_dev_st: the judge failed on some answers" not in page
