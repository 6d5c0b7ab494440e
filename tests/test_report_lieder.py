"""The LIEDER section of the report on result directories written by the real harness.

Expected numbers are derived by hand in helpers/scripted.py (the scripted table) and here (the
human baseline); the CSVs must hold exactly the results file's numbers. Rows of the published
models (source column) are checked in test_report_published.py.
"""
from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path

import pytest

from helpers.files import assert_images, read_csv, results_json

pytestmark = pytest.mark.filterwarnings("ignore")


def _build(tmp_path: Path, *sources: str) -> Path:
    from lm_eval_ext.report.build import build_report

    out = tmp_path / "report"
    build_report(list(sources), out)
    return out


def _human(data_dir: Path) -> dict[str, float]:
    """Human accuracy per authors' comparison code, straight from the CSV."""
    tally = defaultdict(list)
    for row in read_csv(Path(data_dir) / "lieder/human/human_accuracy.csv"):
        tally[row["type"]].append(int(row["correct"]))
    return {code: sum(v) / len(v) for code, v in tally.items()}


def _num(cell: str) -> float | None:
    return None if cell == "" else float(cell)


def _own(path: Path) -> list[dict]:
    """The rows of a table made from the results files (not the published models')."""
    return [row for row in read_csv(path) if row["source"] == "results file"]


def _close(a, b) -> bool:
    return a is not None and b is not None and math.isclose(a, b, abs_tol=1e-12)


def _check_csvs_equal_results(out: Path, results: dict) -> None:
    res = results["results"]
    rows = read_csv(out / "tables/lieder_metrics.csv")
    assert rows
    for row in rows:
        assert float(row["value"]) == res[row["task"]][f"{row['metric']},none"]
        stderr = res[row["task"]].get(f"{row['metric']}_stderr,none")
        assert _num(row["stderr"]) == (stderr if isinstance(stderr, float) else None)
    assert {(r["task"], r["metric"]) for r in rows} == {
        (task, key.split(",")[0]) for task, metrics in res.items() if task.startswith("lieder")
        for key, value in metrics.items() if key.endswith(",none") and "_stderr" not in key and isinstance(value, float)}
    for row in _own(out / "tables/lieder_properties.csv"):
        metric = "acc" if row["property"] == "all" else f"acc_{row['property']}"
        assert float(row["acc"]) == res[row["task"]][f"{metric},none"]
        assert float(row["acc_stderr"]) == res[row["task"]][f"{metric}_stderr,none"]
        rel = res[row["task"]].get(metric.replace("acc", "acc_rel", 1) + ",none")
        assert _num(row["acc_rel"]) == rel
    for row in _own(out / "tables/lieder_comparisons.csv"):
        prefix = "ctrl_" if row["control"] == "True" else ""
        assert float(row["acc"]) == res[row["task"]][f"{prefix}acc_{row['comparison']},none"]
        assert _num(row["acc_rel"]) == res[row["task"]].get(f"{prefix}acc_rel_{row['comparison']},none")


def test_lieder_section_scripted_exact(lieder_scripted, data_dir, tmp_path):
    out = _build(tmp_path, f"scripted={lieder_scripted}")
    results = results_json(lieder_scripted)
    _check_csvs_equal_results(out, results)
    human = _human(data_dir)

    props = {(r["task"], r["property"]): r for r in _own(out / "tables/lieder_properties.csv")}
    assert set(t for t, _ in props) == {"lieder_base", "lieder_diff", "lieder_two", "lieder"}
    base_all = props[("lieder_base", "all")]
    assert _close(float(base_all["acc"]), 496 / 720)
    assert _close(float(base_all["acc_rel"]), 272 / 720)
    assert _close(float(base_all["acc_human_families"]), 8 / 15)
    assert _close(float(props[("lieder_diff", "all")]["acc"]), 524 / 720)
    assert _close(float(props[("lieder_diff", "all")]["acc_human_families"]), 23 / 30)
    assert _close(float(props[("lieder_base", "existence")]["acc"]), 7 / 9)
    assert _close(float(props[("lieder_base", "uniqueness")]["acc"]), 1 / 3)
    assert _close(float(props[("lieder_base", "plurality")]["acc"]), 7 / 9)
    # the group is the plain mean of base and diff (equal sizes)
    assert _close(float(props[("lieder", "all")]["acc"]), (496 + 524) / 1440)
    assert props[("lieder", "all")]["acc_human_families"] == ""
    # human: the 15 informative comparisons (controls excluded), 32 judgements each
    informative = [code for code in human if code not in ("neg_pos_s>pos_neg_s", "neg_pos_p>pos_neg_p")]
    assert len(informative) == 15
    assert _close(float(base_all["human_acc"]), sum(human[c] for c in informative) / 15)
    novelty_codes = ["pos_neg_s>pos_pos_s", "neg_pos_s>pos_pos_s", "pos_pos_p>pos_pos_s"]
    assert _close(float(props[("lieder_base", "novelty")]["human_acc"]), sum(human[c] for c in novelty_codes) / 3)
    assert props[("lieder_diff", "all")]["human_acc"] == ""  # humans judged the base set only

    comps = {(r["task"], r["comparison"]): r for r in _own(out / "tables/lieder_comparisons.csv")}
    assert len([k for k in comps if k[0] == "lieder_base"]) == 17
    assert len([k for k in comps if k[0] == "lieder_two"]) == 33
    row = comps[("lieder_base", "sg_pos_neg_gt_sg_pos_pos")]
    assert (row["notation"], row["properties"], row["control"]) == ("pos_neg_s>pos_pos_s", "uniqueness+novelty", "False")
    assert _close(float(row["acc"]), 1 / 3) and _close(float(row["acc_human_families"]), 0.0)
    assert _close(float(row["human_acc"]), human["pos_neg_s>pos_pos_s"])
    control = comps[("lieder_base", "sg_neg_pos_gt_sg_pos_neg")]
    assert control["control"] == "True" and float(control["acc"]) == 0.0
    assert _close(float(control["human_acc"]), human["neg_pos_s>pos_neg_s"])
    assert comps[("lieder_two", "sg_pos_neg_gt_sg_two_neg")]["human_acc"] == ""

    p_greater = sum(math.comb(28, k) for k in range(16, 29)) / 2 ** 28
    tests = {(r["metric"], r["scope"]): r for r in read_csv(out / "tables/lieder_novelty_test.csv")}
    assert len(tests) == 2 * 8
    for scope in ("pos_pos (7 comparisons)", "sg_pos_neg_gt_sg_pos_pos", "pl_pos_pos_gt_sg_neg_neg"):
        row = tests[("acc", scope)]
        assert (row["n_groups"], row["groups_up"], row["groups_down"], row["groups_tied"]) == ("48", "16", "12", "20")
        assert _close(float(row["base_acc"]), 16 / 48) and _close(float(row["diff_acc"]), 20 / 48)
        assert _close(float(row["p_diff_gt_base"]), p_greater)
        assert _close(float(row["p_two_sided"]), 2 * p_greater)
    lost = tests[("acc_rel", "pl_pos_pos_gt_sg_neg_neg")]
    assert (lost["groups_up"], lost["groups_down"], lost["groups_tied"], lost["p_two_sided"]) == ("0", "0", "48", "1.0")
    rel_all = tests[("acc_rel", "pos_pos (7 comparisons)")]
    assert (rel_all["groups_up"], rel_all["groups_down"]) == ("16", "12")
    assert _close(float(rel_all["base_acc"]), 16 * 5 / 7 / 48)

    for name in ("lieder_properties", "lieder_comparisons", "lieder_published", "lieder_novelty"):
        assert_images(out / "figures" / f"{name}.png", out / "figures" / f"{name}.svg")
    page = (out / "report.html").read_text()
    assert page.count("data:image/png;base64,") == 4
    assert "Implicit vs explicit novelty" in page and f"{2 * p_greater:.3g}" in page


def test_human_baseline_missing_is_a_note_not_a_failure(lieder_scripted, tmp_path, monkeypatch):
    monkeypatch.setenv("LM_EVAL_EXT_DATA_DIR", str(tmp_path / "no-mirror"))
    monkeypatch.setenv("LM_EVAL_EXT_CACHE_DIR", str(tmp_path / "no-cache"))
    monkeypatch.setenv("LM_EVAL_EXT_OFFLINE", "1")
    out = _build(tmp_path, str(lieder_scripted))
    page = (out / "report.html").read_text()
    assert "Human baseline not shown" in page
    # the published models' released files are not there either: said, not fatal
    assert "LIEDER: the published results are not shown, because their released files could not be read" in page
    assert "Published models not shown: their released files could not be read (each section says why)." in page
    rows = read_csv(out / "tables/lieder_properties.csv")
    assert rows and all(row["human_acc"] == "" and row["source"] == "results file" for row in rows)


def test_without_sample_logs_the_novelty_test_says_what_it_needs(lieder_scripted, tmp_path):
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(lieder_scripted, copy)
    for samples in copy.rglob("samples_*lieder_diff_*.jsonl"):  # lm-eval 0.5 names it samples_lieder::lieder_diff_...
        samples.unlink()
    out = _build(tmp_path, str(copy))
    page = (out / "report.html").read_text()
    assert "needs lieder_base and lieder_diff with --log_samples" in page
    assert not (out / "tables/lieder_novelty_test.csv").exists()
    diff_rows = [r for r in _own(out / "tables/lieder_properties.csv") if r["task"] == "lieder_diff"]
    assert diff_rows and all(r["acc_human_families"] == "" and r["acc"] != "" for r in diff_rows)


@pytest.mark.slow
def test_report_cli_two_models_side_by_side(lieder_scripted, lieder_tiny, tiny_model_dir, run_cli, tmp_path):
    """`lm-eval-ext report` on two models: the tiny hf model and the scripted one."""
    out = tmp_path / "report"
    proc = run_cli(["lm-eval-ext", "report", str(lieder_tiny), f"scripted={lieder_scripted}", "-o", str(out)])
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "report.html" in proc.stdout
    props = _own(out / "tables/lieder_properties.csv")
    tiny_label = Path(tiny_model_dir).name  # a local path is named by its last part
    labels = list(dict.fromkeys(r["model"] for r in props))
    assert labels == [tiny_label, "scripted"]
    tiny = results_json(lieder_tiny)["results"]
    for row in props:
        if row["model"] == tiny_label and row["property"] == "all":
            assert float(row["acc"]) == tiny[row["task"]]["acc,none"]
    tests = read_csv(out / "tables/lieder_novelty_test.csv")
    assert {r["model"] for r in tests} == {tiny_label, "scripted"}
    tiny_all = next(r for r in tests if r["model"] == tiny_label and r["metric"] == "acc" and r["scope"].startswith("pos_pos"))
    assert int(tiny_all["groups_up"]) + int(tiny_all["groups_down"]) + int(tiny_all["groups_tied"]) == 48
    for name in ("lieder_properties", "lieder_comparisons", "lieder_published", "lieder_novelty"):
        assert_images(out / "figures" / f"{name}.png", out / "figures" / f"{name}.svg")
    runs = read_csv(out / "tables/runs.csv")
    assert [r["model"] for r in runs] == [tiny_label, "scripted"]
    assert runs[0]["tasks_with_samples"].split() == ["lieder_base", "lieder_diff"]
