"""Several runs of one model and task: the report shows the most complete (most documents scored; the newest of
equals) and lists every run of the task, the shown one marked. Runs: copies of the hand-written
tests/fixtures/results/lieder_limit (lieder_base on 4 of 48 documents, acc 0.75), one made complete."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

from helpers.files import FIXTURES, read_csv

LIEDER = FIXTURES / "results" / "lieder_limit" / "results_2030-01-01T00-00-00.000001.json"


def _run(directory: Path, date: str, complete: bool) -> Path:
    """A copy of the lieder_limit run dated ``date``; ``complete``: all 48 documents scored, without --limit, acc 0.5."""
    data = json.loads(LIEDER.read_text())
    if complete:
        data["config"]["limit"] = None
        data["n-samples"]["lieder_base"]["effective"] = 48
        data["results"]["lieder_base"]["acc,none"] = 0.5
    directory.mkdir(parents=True)
    path = directory / f"results_{date}.json"
    path.write_text(json.dumps(data))
    return path


def _shown_acc(out: Path) -> float:
    rows = [r for r in read_csv(out / "tables/lieder_properties.csv") if r["source"] == "results file" and r["property"] == "all"]
    assert len(rows) == 1
    return float(rows[0]["acc"])


def test_the_most_complete_run_is_shown_and_the_others_listed(tmp_path):
    from lm_eval_ext.report.build import build_report

    runs = tmp_path / "runs"
    complete = _run(runs / "first", "2030-01-01T00-00-00.000001", complete=True)
    limited = _run(runs / "second", "2030-01-02T00-00-00.000001", complete=False)  # newer, 4 documents
    build_report([f"tiny={runs}"], tmp_path / "report", published=False)
    assert _shown_acc(tmp_path / "report") == 0.5
    assert [(r["results_file"], r["date"], r["documents_scored"], r["shown"])
            for r in read_csv(tmp_path / "report/tables/task_runs.csv")] == [
        (str(complete), "2030-01-01T00-00-00.000001", "48", "True"),
        (str(limited), "2030-01-02T00-00-00.000001", "4", "False"),
    ]
    assert "Tasks run more than once" in (tmp_path / "report/report.html").read_text()


def test_of_equally_complete_runs_the_newest_is_shown(tmp_path):
    from lm_eval_ext.report.build import build_report

    runs = tmp_path / "runs"
    _run(runs / "first", "2030-01-01T00-00-00.000001", complete=True)
    newer = _run(runs / "second", "2030-01-02T00-00-00.000001", complete=True)
    data = json.loads(newer.read_text())
    data["results"]["lieder_base"]["acc,none"] = 0.625
    newer.write_text(json.dumps(data))
    build_report([f"tiny={runs}"], tmp_path / "report", published=False)
    assert _shown_acc(tmp_path / "report") == 0.625
    assert [r["shown"] for r in read_csv(tmp_path / "report/tables/task_runs.csv")] == ["False", "True"]


def test_one_run_per_task_lists_no_repeated_runs(tmp_path):
    from lm_eval_ext.report.build import build_report

    shutil.copytree(LIEDER.parent, tmp_path / "runs")
    build_report([str(tmp_path / "runs")], tmp_path / "report", published=False)
    assert not (tmp_path / "report/tables/task_runs.csv").exists()


REAL = FIXTURES / "real"


def test_a_limited_magnifico_run_counts_the_documents_it_scored(tmp_path):
    """Real runs (tests/fixtures/real): magnifico_direct_plausible with --limit 10, whose task left out 42 items
    when it was loaded (their database is missing), and the same as a --limit 6 run made later (derived from it).
    Each counts the documents it scored (10 and 6, never the 42 exclusions subtracted: -32), and the 10-document
    run is the one shown although the other is newer."""
    from lm_eval_ext.report.build import build_report
    from lm_eval_ext.results.load import load_models
    from lm_eval_ext.results.status import documents_scored, run_status, shown_run

    larger, smaller = REAL / "mag_limit10", REAL / "mag_limit6"
    (model,) = load_models([str(smaller), str(larger)])
    task = "magnifico_direct_plausible"
    assert [(run.date_id, documents_scored(run, task)) for run in model.runs] == [
        ("2026-11-28T21-52-32.164243", 10), ("2026-11-28T22-30-00.000001", 6)]
    assert shown_run(model, task) is model.runs[0]
    # the exclusions still make each run partial, as they should
    assert [f.reason for f in run_status(model.runs[0]).flags] == [
        "10 of 2078 documents scored (--limit 10)", "42 item(s) excluded: their Spider database is missing"]

    build_report([str(larger), str(smaller)], tmp_path / "report", published=False)
    (larger_file,), (smaller_file,) = larger.rglob("results_*.json"), smaller.rglob("results_*.json")
    assert [(r["model"], r["task"], r["results_file"], r["documents_scored"], r["shown"])
            for r in read_csv(tmp_path / "report/tables/task_runs.csv")] == [
        ("SmolLM2-135M-Instruct", task, str(larger_file), "10", "True"),
        ("SmolLM2-135M-Instruct", task, str(smaller_file), "6", "False"),
    ]
