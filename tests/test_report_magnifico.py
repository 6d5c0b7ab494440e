"""The MAGNIFICo section: on result directories written by the real harness (scripted SQL; the expected
numbers are worked out by hand in helpers/scripted.py), and on a hand-written results file
(tests/fixtures/results/magnifico) where rel_perf is undefined for one task, and on a real run of SmolLM2-135M-Instruct
(tests/fixtures/real/mag_description_chat) whose rel_perf is undefined in a task of the paper's Table 3.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from helpers.files import FIXTURES, assert_images, read_csv

pytestmark = pytest.mark.filterwarnings("ignore")


def _results(out: Path) -> dict[str, dict]:
    """{task: results entry}, plus ``excluded_<reason>,none`` for the items the task recorded as left out when it
    loaded (``configs.<task>.metadata.excluded``: they never became documents, so no metric counts them)."""
    found = {}
    for path in out.rglob("results_*.json"):
        data = json.loads(path.read_text())
        for task, entry in data["results"].items():
            excluded = data["configs"].get(task, {}).get("metadata", {}).get("excluded", {})
            found[task] = {**entry, **{f"excluded_{reason},none": n for reason, n in excluded.items()}}
    return found


def _num(cell: str):
    return None if cell == "" else float(cell)


def test_magnifico_section_scripted_exact(magnifico_scripted, tmp_path):
    from lm_eval_ext.report.build import build_report

    out = tmp_path / "report"
    build_report([f"sql={magnifico_scripted}"], out)
    results = _results(magnifico_scripted)

    summary = {r["task"]: r for r in read_csv(out / "tables/magnifico_summary.csv") if r["source"] == "results file"}
    assert set(summary) == {t for t in results if t.startswith("magnifico_")}
    for task, row in summary.items():
        raw = {k.split(",")[0]: v for k, v in results[task].items() if "," in k}
        for column in ("rel_perf", "ex", "ex_base", "em", "interp_left_out", "rel_perf_basic", "excluded_db_missing"):
            value = raw.get(column)
            finite = isinstance(value, (int, float)) and not (isinstance(value, float) and math.isnan(value))
            assert _num(row[column]) == (value if finite else None), (task, column)
        assert _num(row["ex_stderr"]) == raw.get("ex_stderr")

    for task in ("magnifico_direct_plausible", "magnifico_direct_foreign", "magnifico_description_end_plausible",
                 "magnifico_description_start_plausible", "magnifico_fewshot_plausible", "magnifico_fewshot_foreign"):
        assert float(summary[task]["rel_perf"]) == 50.0 and summary[task]["interp_left_out"] == "0.0", task
        assert float(summary[task]["ex_base"]) == 1.0
    for task in ("magnifico_dialogue_start_plausible", "magnifico_dialogue_end_plausible", "magnifico_phrase_direct"):
        assert float(summary[task]["rel_perf"]) == 100.0 and summary[task]["interp_left_out"] == "1.0", task
    assert summary["magnifico_description_start_plausible"]["position"] == "start"
    multi = summary["magnifico_multi_direct_plausible"]
    assert (multi["scope"], float(multi["rel_perf"]), multi["interp_left_out"]) == ("multi", 50.0, "0.0")

    per = {(r["task"], r["interpretation"]): r for r in read_csv(out / "tables/magnifico_interpretations.csv")}
    assert (per[("magnifico_direct_plausible", "maximum")]["rel_perf"], per[("magnifico_direct_plausible", "average")]["rel_perf"]) == ("100.0", "0.0")
    assert per[("magnifico_direct_plausible", "average")]["ex_base"] == "1.0"
    left = per[("magnifico_dialogue_end_plausible", "average")]
    assert left["rel_perf"] == "" and left["status"] == "left out (base EX < 5%)" and left["ex_base"] == "0.0"
    assert per[("magnifico_phrase_direct", "dock_count")]["status"].startswith("left out")
    assert per[("magnifico_phrase_direct", "hire_date")]["category"] == "phrase"
    assert per[("magnifico_multi_direct_plausible", "maximum+salary_more_than")]["rel_perf"] == "100.0"
    assert per[("magnifico_multi_direct_plausible", "average+salary_more_than")]["rel_perf"] == "0.0"
    # the mean over the kept interpretations is the task's rel_perf
    for task, row in summary.items():
        kept = [float(r["rel_perf"]) for (t, _), r in per.items() if t == task and r["status"] == "kept"]
        assert math.isclose(sum(kept) / len(kept), float(row["rel_perf"])), task

    for name in ("magnifico_forms", "magnifico_interpretations", "magnifico_positions", "magnifico_multi_phrase",
                 "magnifico_table3"):
        assert_images(out / "figures" / f"{name}.png", out / "figures" / f"{name}.svg")
    page = (out / "report.html").read_text()
    assert "Interpretations left out because their base EX is under 5%" in page
    assert "sql · magnifico_dialogue_end_plausible: 1" in page
    assert "excluded before scoring" in page  # baseball_1 is not in the mirror


def test_undefined_rel_perf_is_na_with_the_reason(tmp_path):
    """magnifico_direct_plausible: both interpretations' base EX under 5%, so rel_perf is undefined."""
    from lm_eval_ext.report.build import build_report

    # the hand-written results, with 2 items of one task left out because their gold query ran over its budget
    results = json.loads(next((FIXTURES / "results" / "magnifico").glob("results_*.json")).read_text())
    results["configs"]["magnifico_dialogue_start_plausible"]["metadata"]["excluded"].update(gold_budget=2, items=102)
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "results_2030-01-01T00-00-00.000001.json").write_text(json.dumps(results))
    out = tmp_path / "report"
    report = build_report([str(tmp_path / "run")], out, published=False)
    summary = {r["task"]: r for r in read_csv(out / "tables/magnifico_summary.csv")}
    plausible = summary["magnifico_direct_plausible"]
    assert plausible["rel_perf"] == "" and plausible["interp_left_out"] == "2.0"
    assert plausible["rel_perf_note"] == ("n/a: every interpretation's base EX is under 5% (2 left out), so no "
                                          "interpretation is kept")
    foreign = summary["magnifico_direct_foreign"]
    assert foreign["rel_perf"] == "50.0" and foreign["rel_perf_note"] == ""
    page = (out / "report.html").read_text()
    assert "rel_perf is n/a (undefined) for org/tiny-sql · magnifico_direct_plausible: every interpretation" in page
    # the forms figure writes n/a where the plausible bar would be, and its caption says why
    (section,) = [s for s in report.sections if s.key == "magnifico"]
    (forms,) = [b for b in section.blocks if getattr(b, "name", None) == "magnifico_forms"]
    (ax,) = forms.figure.axes
    assert [t.get_text() for t in ax.texts] == ["n/a"]
    assert ax.get_xlim() == (-0.5, 0.5)  # the n/a slot is inside the axes
    assert "n/a: rel_perf undefined, every interpretation's base EX under 5%" in forms.caption
    # the items each task left out when it was loaded (configs.<task>.metadata.excluded), by reason
    assert ("Items excluded before scoring: org/tiny-sql · magnifico_dialogue_start_plausible: 0 (missing Spider "
            "database), 0 (gold query fails), 2 (gold query does not finish within its budget); org/tiny-sql · "
            "magnifico_direct_foreign: 3 (missing Spider database), 0 (gold query fails), 0 (gold query does not "
            "finish within its budget).") in page
    assert {task: [row[f"excluded_{reason}"] for reason in ("db_missing", "gold_error", "gold_budget")]
            for task, row in summary.items()} == {"magnifico_direct_plausible": ["0", "0", "0"],
                                                  "magnifico_direct_foreign": ["3", "0", "0"],
                                                  "magnifico_dialogue_start_plausible": ["0", "0", "2"]}


def test_undefined_rel_perf_is_na_beside_the_papers_table_3(tmp_path):
    """A real run (SmolLM2-135M-Instruct, magnifico_description_plausible, --limit 4, chat template): its one
    interpretation's base EX is 0, so rel_perf is undefined; the Table 3 figure writes n/a in the model's slot, beside
    the paper's two bars, and its caption says why."""
    from lm_eval_ext.report.build import build_report

    report = build_report([str(FIXTURES / "real" / "mag_description_chat")], tmp_path / "report")
    (section,) = [s for s in report.sections if s.key == "magnifico"]
    (table3,) = [b for b in section.blocks if getattr(b, "name", None) == "magnifico_table3"]
    (ax,) = table3.figure.axes
    bars = [(patch.get_x() + patch.get_width() / 2, patch.get_height()) for patch in ax.patches]
    assert [round(height, 2) for _, height in bars[:2]] == [79.4, 91.46]  # StarCoder, GPT-3.5-Turbo (Table 3)
    assert math.isnan(bars[2][1])  # the model's bar: rel_perf undefined
    (text,) = ax.texts
    assert text.get_text() == "n/a" and text.get_position()[0] == pytest.approx(bars[2][0])
    assert "n/a: rel_perf undefined, every interpretation's base EX under 5% (none kept)." in table3.caption
