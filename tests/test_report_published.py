"""The published models beside the user's in the report (on by default, --no-published to hide), labelled with
their source. Runs: the hand-written results files of tests/fixtures/results. The published numbers themselves
are checked in test_published_numbers.py.
"""
from __future__ import annotations

import math

import pytest

from helpers.files import FIXTURES, read_csv

RESULTS = FIXTURES / "results"
SOURCES = [str(RESULTS / name) for name in ("lieder_limit", "litm", "magnifico", "elitr")]
TABLES = ("lieder_properties", "lieder_comparisons", "litm_summary", "litm_positions", "magnifico_summary", "elitr_scores")

pytestmark = [pytest.mark.filterwarnings("ignore"), pytest.mark.xdist_group("report_published")]  # one report build


@pytest.fixture(scope="module")
def with_published(tmp_path_factory, data_dir):
    from lm_eval_ext.report.build import build_report

    out = tmp_path_factory.mktemp("published") / "report"
    return build_report(SOURCES, out), out


def _published_rows(out, table: str) -> list[dict]:
    return [r for r in read_csv(out / "tables" / f"{table}.csv") if r["model"].endswith(" (published)")]


def _figure(report, name):
    return next(b for s in report.sections for b in s.blocks if getattr(b, "name", None) == name)


def test_lieder_published_models_beside_yours(with_published):
    from lm_eval_ext.published import load_published

    report, out = with_published
    published = load_published(["lieder"])
    rows = {(r["model"], r["task"], r["property"]): r for r in _published_rows(out, "lieder_properties")}
    models = {model for model, _, _ in rows}
    assert len(models) == 10 and "gpt2 (published)" in models and "Human participants (published)" not in models
    gpt2 = rows[("gpt2 (published)", "lieder_base", "all")]
    assert float(gpt2["acc"]) == published.value("gpt2", "lieder_base", "acc")
    assert math.isclose(float(gpt2["acc"]), 551 / 720)
    assert float(gpt2["acc_rel"]) == published.value("gpt2", "lieder_base", "acc_rel")
    assert gpt2["source"] == "Zhu & Frank (ACL 2024), results/base/base_gpt2_accuracy_ref.csv"
    assert gpt2["acc_stderr"] == "" and gpt2["human_acc"] == ""
    assert rows[("llama3_70B (published)", "lieder_two", "novelty")]["acc_rel"] == ""  # no nonref table for two
    comparisons = _published_rows(out, "lieder_comparisons")
    assert len([r for r in comparisons if r["model"] == "gpt2 (published)"]) == 17 + 17 + 33
    figure = _figure(report, "lieder_published")
    labels = [t.get_text() for t in figure.figure.axes[0].get_yticklabels()]
    assert "gpt2 (published)" in labels and "org/tiny-lieder" in labels and "human (base, 2 families)" in labels
    assert "Zhu & Frank (ACL 2024): results/base/... (20 files), results/diff/... (20 files), results/two/... (10 files)" \
        in figure.caption
    assert "Grey boxes: lowest to highest accuracy of the 10 published models on lieder_base" in \
        _figure(report, "lieder_properties").caption
    assert "Published models drawn beside them (grey). Generated " in (out / "report.html").read_text()


def test_the_subtitle_says_when_some_published_files_could_not_be_read():
    from lm_eval_ext.published import Published, PublishedNumber, Source
    from lm_eval_ext.report.build import _published_note

    lieder = PublishedNumber("lieder", "gpt2", "lieder_base", "acc", 0.77, Source("Zhu & Frank (ACL 2024)", "Table 1"))
    some = Published([lieder], ["ELITR-Bench: the published results are not shown, ..."])
    assert _published_note(some) == ("Published models drawn beside them (grey) where their released files could be "
                                     "read (the other sections say why not).")
    assert _published_note(None) == "Published models not shown."


def test_litm_published_panel_and_rows(with_published):
    report, out = with_published
    summary = {(r["model"], r["task"]): r for r in _published_rows(out, "litm_summary")}
    # the report's model ran 20-document QA and closed-book: those published tasks, and oracle, no 10/30 documents
    assert {task for _, task in summary} == {"litm_qa_20docs", "litm_qa_closedbook", "litm_qa_oracle"}
    gpt = summary[("GPT-3.5-Turbo (published)", "litm_qa_20docs")]
    assert math.isclose(float(gpt["acc"]), (0.758 + 0.572 + 0.538 + 0.554 + 0.632) / 5)
    assert math.isclose(float(gpt["acc_gap"]), 0.758 - 0.538) and math.isclose(float(gpt["acc_middle_drop"]), 0.157)
    assert gpt["source"].startswith("Liu et al. (TACL 2024), Table 6 (appendix G) (derived from the table: mean of")
    closed = summary[("LongChat-13B (16K) (published)", "litm_qa_closedbook")]
    assert (float(closed["acc"]), closed["source"]) == (0.35, "Liu et al. (TACL 2024), Table 1")
    positions = [r for r in _published_rows(out, "litm_positions") if r["model"] == "GPT-3.5-Turbo (published)"]
    assert [(r["position"], r["acc"]) for r in positions] == [("1", "0.758"), ("5", "0.572"), ("10", "0.538"),
                                                               ("15", "0.554"), ("20", "0.632")]
    axes = [ax for ax in _figure(report, "litm_qa_curves").figure.axes if ax.get_visible()]
    assert [ax.get_title() for ax in axes] == ["org/tiny-litm",
                                               "published, 20 docs (Liu et al. (TACL 2024): Table 6 (appendix G))"]
    assert [line.get_label() for line in axes[1].get_lines()][:2] == ["Claude-1.3", "Claude-1.3 (100K)"]


def test_magnifico_table3_beside_yours(with_published):
    report, out = with_published
    rows = {(r["model"], r["task"]): r for r in _published_rows(out, "magnifico_summary")}
    assert set(rows) == {("StarCoder (published)", "magnifico_dialogue_start_plausible"),
                         ("GPT-3.5-Turbo (published)", "magnifico_dialogue_start_plausible")}
    assert rows[("StarCoder (published)", "magnifico_dialogue_start_plausible")]["rel_perf"] == "68.91"
    assert rows[("GPT-3.5-Turbo (published)", "magnifico_dialogue_start_plausible")]["source"] == \
        "Patel et al. (EMNLP 2023), Table 3"
    figure = _figure(report, "magnifico_table3")
    bars = [(c.get_label(), [p.get_height() for p in c.patches]) for c in figure.figure.axes[0].containers]
    assert bars == [("StarCoder (published)", [68.91]), ("GPT-3.5-Turbo (published)", [84.87]), ("org/tiny-sql", [70.0])]


def test_elitr_published_markers_and_rows(with_published):
    report, out = with_published
    rows = {(r["model"], r["task"]): r for r in _published_rows(out, "elitr_scores")}
    assert round(float(rows[("GPT-4 (published)", "elitr_bench_qa_dev_st")]["score"]), 2) == 8.21
    assert round(float(rows[("GPT-4 (published)", "elitr_bench_qa_dev_mt")]["score"]), 2) == 8.52
    assert ("GPT-3.5 (published)", "elitr_bench_qa_dev_mt") not in rows  # GPT-3.5 was run single-turn only
    assert rows[("GPT-4 (published)", "elitr_bench_qa_dev_st")]["source"].startswith(
        "Thonet et al. (COLING 2025), generated-responses.zip:generated-responses/elitr-bench-qa_dev_st_gpt-4-eval.json")
    ax = _figure(report, "elitr_settings").figure.axes[0]
    markers = {line.get_label(): list(line.get_ydata()) for line in ax.get_lines()}
    assert round(markers["GPT-4 (published)"][0], 2) == 8.21 and len(markers) == 9


def test_no_published(tmp_path, run_cli, data_dir):
    out = tmp_path / "report"
    proc = run_cli(["lm-eval-ext", "report", *SOURCES, "--no-published", "-o", str(out)])
    assert proc.returncode == 0, proc.stderr[-2000:]
    for table in TABLES:
        rows = read_csv(out / "tables" / f"{table}.csv")
        assert rows and all(r["source"] == "results file" for r in rows), table
    assert not (out / "figures/lieder_published.png").exists() and not (out / "figures/magnifico_table3.png").exists()
    page = (out / "report.html").read_text()
    assert "Published models not shown." in page and "(published)</td>" not in page
    # one banner per partial run, on the terminal too
    assert proc.stdout.count("PARTIAL run: ") == 4 and page.count('class="banner partial"') == 4
