"""The Lost in the Middle section: on result directories written by the real harness (scripted runs;
expected numbers worked out by hand in helpers/scripted.py) and on hand-written results files
(tests/fixtures/results/litm: prompts skipped, every prompt of a task skipped, two context lengths), and on real runs
of SmolLM2-135M-Instruct (tests/fixtures/real).
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from helpers.files import FIXTURES, assert_images, read_csv

pytestmark = pytest.mark.filterwarnings("ignore")


def _results(out: Path) -> dict[tuple[str, int | None], dict]:
    """{(task, k): results entry} over every run under out (k: the run's litm_kv_pairs, else the task's k),
    without the length counts of a run that did not check lengths."""
    found = {}
    for path in out.rglob("results_*.json"):
        data = json.loads(path.read_text())
        for task, entry in data["results"].items():
            config = data["configs"].get(task, {})
            k = config.get("metadata", {}).get("litm_kv_pairs") or config.get("dataset_kwargs", {}).get("k")
            unchecked = str(config.get("metadata", {}).get("prompt_length", "")).startswith("not checked")
            # a run that knew no context length reports 0 prompts skipped: the report shows no count
            found[(task, k)] = {key: v for key, v in entry.items() if not (unchecked and key.startswith("prompts_"))}
    return found


def _value(entry: dict, metric: str):
    """The metric under whichever filter the task used (QA: first_line, KV: none)."""
    (value,) = [v for key, v in entry.items() if key.split(",")[0] == metric and "," in key]
    return value


def _num(cell: str):
    return None if cell == "" else float(cell)


def test_litm_section_scripted_exact(litm_scripted, tmp_path):
    from lm_eval_ext.report.build import build_report

    out = tmp_path / "report"
    build_report([f"litm={litm_scripted}"], out)
    results = _results(litm_scripted)

    summary = {(r["task"], int(r["k"]) if r["k"] else None): r for r in read_csv(out / "tables/litm_summary.csv")
               if r["source"] == "results file"}
    assert set(summary) == {("litm_qa_closedbook", None), ("litm_qa_oracle", None), ("litm_qa_10docs", 10),
                            ("litm_qa_10docs_qac", 10), ("litm_qa_20docs", 20), ("litm_kv_75keys", 75),
                            ("litm_kv_generated", 4), ("litm_kv_generated", 8)}
    for (task, k), row in summary.items():
        entry = results[(task, k)]
        for column in ("acc", "acc_stderr", "acc_gap", "acc_middle_drop", "prompts_skipped"):
            present = [key for key in entry if key.split(",")[0] == column]
            expected = _value(entry, column) if present else None
            assert _num(row[column]) == (expected if isinstance(expected, (int, float)) else None), (task, k, column)

    expected = {  # (acc, gap, middle drop), by hand
        ("litm_qa_closedbook", None): (0.0, None, None), ("litm_qa_oracle", None): (1.0, None, None),
        ("litm_qa_10docs", 10): (3 / 6, 1.0, 3 / 4), ("litm_qa_10docs_qac", 10): (3 / 6, 1.0, 3 / 4),
        ("litm_qa_20docs", 20): (3 / 10, 1.0, 1 / 2), ("litm_kv_75keys", 75): (3 / 8, 1.0, 3 / 4),
        ("litm_kv_generated", 4): (1 / 2, 1.0, 1.0), ("litm_kv_generated", 8): (2 / 8, 1.0, 1.0),
    }
    for key, (acc, gap, drop) in expected.items():
        row = summary[key]
        assert math.isclose(float(row["acc"]), acc), key
        assert _num(row["acc_gap"]) == gap and (drop is None) == (row["acc_middle_drop"] == ""), key
        if drop is not None:
            assert math.isclose(float(row["acc_middle_drop"]), drop), key
    assert summary[("litm_qa_10docs_qac", 10)]["variant"] == "query-aware"
    assert summary[("litm_kv_generated", 8)]["prompts_skipped"] == "8.0"
    assert summary[("litm_kv_generated", 4)]["prompts_skipped"] == ""  # no context length: not checked

    positions = [r for r in read_csv(out / "tables/litm_positions.csv") if r["source"] == "results file"]
    by = {(r["task"], int(r["k"]), int(r["position"])): r for r in positions}
    assert [by[("litm_qa_20docs", 20, p)]["acc"] for p in (1, 5, 10, 15, 20)] == ["1.0", "0.0", "0.5", "0.0", "0.0"]
    assert [by[("litm_kv_75keys", 75, p)]["acc"] for p in (1, 25, 50, 75)] == ["1.0", "0.0", "0.0", "0.5"]
    assert math.isclose(float(by[("litm_kv_75keys", 75, 25)]["depth"]), 24 / 74)
    assert [by[("litm_kv_generated", 8, p)]["prompts_skipped"] for p in range(1, 9)] == ["1.0"] * 8
    assert [by[("litm_kv_generated", 4, p)]["acc"] for p in range(1, 5)] == ["1.0", "0.0", "0.0", "1.0"]
    for row in positions:
        entry = results[(row["task"], int(row["k"]))]
        assert _num(row["acc"]) == _value(entry, f"acc_pos_{row['position']}")

    for name in ("litm_qa_curves", "litm_kv_curves", "litm_kv_heatmap"):
        assert_images(out / "figures" / f"{name}.png", out / "figures" / f"{name}.svg")
    page = (out / "report.html").read_text()
    assert "were skipped (not sent to the model, not scored): litm · litm_kv_generated (8 pairs): 8" in page
    assert "Prompt lengths were not checked for" in page and "litm · litm_kv_75keys" in page
    assert "Data files given by the user" in page


def test_no_heatmap_with_a_single_length(litm_scripted, tmp_path):
    from lm_eval_ext.report.build import build_report

    out = tmp_path / "report"
    build_report([str(litm_scripted / "qa"), str(litm_scripted / "kv4")], out)
    assert (out / "figures/litm_qa_curves.png").exists() and (out / "figures/litm_kv_curves.png").exists()
    assert not (out / "figures/litm_kv_heatmap.png").exists()


def test_a_panel_of_closed_book_and_oracle_alone_spans_the_swept_positions(tmp_path):
    """Real runs: closed-book and oracle with the chat template (litm_chat), and a 20-document sweep without it
    (litm_sweep20docs). The chat template's panel has only the two horizontal lines: its x axis spans the 20
    positions the other panels sweep; alone in a report (nothing swept), it has no position axis at all."""
    from lm_eval_ext.report.build import build_report

    real = FIXTURES / "real"
    report = build_report([str(real / "litm_sweep20docs"), str(real / "litm_chat")], tmp_path / "both")
    (section,) = [s for s in report.sections if s.key == "lost_in_the_middle"]
    (curves,) = [b for b in section.blocks if getattr(b, "name", None) == "litm_qa_curves"]
    swept, lines_only = curves.figure.axes[:2]
    assert swept.get_title() == "SmolLM2-135M-Instruct" and len(swept.lines) == 1
    assert lines_only.get_title() == "SmolLM2-135M-Instruct (chat template)" and len(lines_only.lines) == 2
    assert lines_only.get_xlim() == (0.5, 20.5) and swept.get_xlim()[1] < 21

    report = build_report([str(real / "litm_chat")], tmp_path / "alone", published=False)
    (section,) = [s for s in report.sections if s.key == "lost_in_the_middle"]
    (curves,) = [b for b in section.blocks if getattr(b, "name", None) == "litm_qa_curves"]
    (alone,) = [ax for ax in curves.figure.axes if ax.get_visible()]
    assert list(alone.get_xticks()) == [] and alone.get_xlabel() == "(no position sweep)"


RESULTS = FIXTURES / "results" / "litm"


def test_litm_section_hand_written(tmp_path):
    """Two runs of one model (max_length 512 and 1024): 20-document QA with 2 prompts skipped at position 20,
    closed-book, and a generated KV task whose every prompt was skipped."""
    from lm_eval_ext.report.build import build_report

    out = tmp_path / "report"
    report = build_report([str(RESULTS)], out, published=False)
    assert [m.label for m in report.models] == ["org/tiny-litm"]  # one model, whatever its max_length
    summary = {r["task"]: r for r in read_csv(out / "tables/litm_summary.csv")}
    assert list(summary) == ["litm_kv_generated", "litm_qa_20docs", "litm_qa_closedbook"]
    qa = summary["litm_qa_20docs"]
    assert (float(qa["acc"]), float(qa["acc_gap"]), qa["prompts_skipped"], qa["prompts_truncated"]) == (28 / 48, 0.4, "2.0", "0.0")
    assert summary["litm_kv_generated"]["acc"] == "" and summary["litm_kv_generated"]["prompts_skipped"] == "8.0"
    positions = {(r["task"], r["position"]): r for r in read_csv(out / "tables/litm_positions.csv")}
    assert positions[("litm_qa_20docs", "20")]["prompts_skipped"] == "2.0"
    assert positions[("litm_qa_20docs", "20")]["acc"] == "0.75"
    assert [positions[("litm_kv_generated", str(p))]["acc"] for p in range(1, 5)] == [""] * 4

    page = (out / "report.html").read_text()
    # no empty axes: the KV task with nothing to draw is a sentence, and no KV figure is made
    assert ("Key-value retrieval: nothing to draw for org/tiny-litm · litm_kv_generated (4 pairs): every prompt was "
            "skipped as too long (8 skipped).") in page
    assert not (out / "figures/litm_kv_curves.png").exists() and not (out / "figures/litm_kv_heatmap.png").exists()
    assert_images(out / "figures/litm_qa_curves.png", out / "figures/litm_qa_curves.svg")
    assert ("Prompts longer than the model&#39;s context were skipped (not sent to the model, not scored): "
            "org/tiny-litm · litm_kv_generated (4 pairs): 8; org/tiny-litm · litm_qa_20docs: 2.") in page
    # the two runs' differences are listed, one row per model everywhere
    assert "org/tiny-litm: config.batch_size = 1, 8; max_length = 512, 1024" in page
    # the run with skipped prompts is partial, the other complete
    runs = {r["results_file"].rsplit("/", 2)[-2]: r for r in read_csv(out / "tables/runs.csv")}
    assert runs["max512"]["status"] == "partial" and runs["max1024"]["status"] == "complete"
    assert runs["max512"]["status_reasons"] == ("litm_kv_generated: 8 prompt(s) skipped as too long for the model; "
                                                "litm_qa_20docs: 2 prompt(s) skipped as too long for the model")
    assert page.count('<p class="banner partial">') == 1
