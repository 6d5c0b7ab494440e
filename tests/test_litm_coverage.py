"""`--limit` and `--samples` on a position sweep: how many documents each gold position got, said and recorded.

The real case: SmolLM2-135M-Instruct on `litm_qa_10docs` (positions 1, 5, 10) with `--limit 7`
(tests/fixtures/real/litm_sweep7, made before the tasks recorded the count): 3, 2 and 2 documents, and
nothing said so. The run-time behaviour (the log line, the record in the results) is checked on runs of the
scripted model (`ext-canned-gen`), through `lm-eval-ext run` and `simple_evaluate`.
"""
from __future__ import annotations

import gzip
import json
import logging
from pathlib import Path

import pytest

from helpers.files import FIXTURES, read_csv
from helpers.harness import skip_where_broken
from helpers.prompts import read_fixture_jsonl

pytestmark = pytest.mark.filterwarnings("ignore")

TASK = "litm_qa_10docs"
REAL = FIXTURES / "real" / "litm_sweep7"
PARTIAL = ("lost_in_the_middle/partial_first_release_2023/ViktorTorp+lost-in-the-middle/qa_predictions/20_total_documents/"
           "gpt_reordered/nq-open-20_total_documents_gold_at_0-gpt-35-reorder-predictions-scored.jsonl.gz")
UNEVEN = "position 1: 3, position 5: 2, position 10: 2 documents"


def test_the_first_documents_of_a_sweep_by_position():
    from lm_eval_ext import sweeps

    assert sweeps.prefix_coverage(7, [0, 4, 9]) == {"1": 3, "5": 2, "10": 2}
    assert sweeps.prefix_coverage(6, [9, 0, 4]) == {"1": 2, "5": 2, "10": 2}
    assert sweeps.prefix_coverage(2, [0, 4, 9, 14, 19]) == {"1": 1, "5": 1, "10": 0, "15": 0, "20": 0}
    assert sweeps.coverage_of([0, 4, 4, 0, 4], [0, 4, 9]) == {"1": 2, "5": 3, "10": 0}
    assert sweeps.uneven({"1": 3, "5": 2, "10": 2}) and not sweeps.uneven({"1": 2, "5": 2, "10": 2})
    assert sweeps.coverage_text({"1": 3, "5": 2, "10": 2}) == UNEVEN


# -- the real run -------------------------------------------------------------------------------------

def test_real_limit_7_covered_positions_3_2_2():
    """The real run's samples: the first 7 documents, example by example."""
    docs = [record["doc"] for record in read_fixture_jsonl("real/litm_sweep7_documents.jsonl")]
    assert [(d["example"], d["gold_position"]) for d in docs] == [(0, 1), (0, 5), (0, 10), (1, 1), (1, 5), (1, 10),
                                                                  (2, 1)]


def test_real_results_say_positions_were_covered_unevenly():
    from lm_eval_ext.results.load import find_results, read_run
    from lm_eval_ext.results.status import documents_by_position, run_status

    (path,) = find_results(REAL)
    run = read_run(path)
    assert "documents_by_position" not in run.task_config(TASK)["metadata"]  # written before it was recorded
    assert documents_by_position(run, TASK) == {"1": 3, "5": 2, "10": 2}  # from --limit 7, example by example
    status = run_status(run)
    assert status.label == "partial"
    assert [flag.text() for flag in status.flags] == [f"{TASK}: 7 of 1323 documents scored (--limit 7)",
                                                      f"{TASK}: gold positions covered unevenly: {UNEVEN}"]


def test_real_results_in_the_report(tmp_path):
    from lm_eval_ext.report.build import build_report

    out = tmp_path / "report"
    build_report([str(REAL)], out, published=False)
    positions = {r["position"]: r for r in read_csv(out / "tables/litm_positions.csv")}
    assert {p: (r["documents"], r["acc"]) for p, r in positions.items()} == {
        "1": ("3", "0.0"), "5": ("2", "0.0"), "10": ("2", "0.5")}
    (row,) = read_csv(out / "tables/runs.csv")
    assert row["status"] == "partial"
    assert row["status_reasons"] == (f"{TASK}: 7 of 1323 documents scored (--limit 7); "
                                     f"{TASK}: gold positions covered unevenly: {UNEVEN}")
    page = (out / "report.html").read_text()
    assert f"Gold positions covered unevenly: SmolLM2-135M-Instruct · {TASK}: {UNEVEN}. " in page


def test_results_that_cannot_say_say_nothing():
    """A --samples run written before the count was recorded (any documents may have been taken), and a task
    that is no sweep: no count."""
    from lm_eval_ext.results.load import find_results, read_run
    from lm_eval_ext.results.status import documents_by_position

    (path,) = find_results(REAL)
    run = read_run(path)
    run.data["config"]["limit"] = None  # 7 of 1323 documents without --limit: --samples
    assert documents_by_position(run, TASK) is None
    run.data["configs"][TASK]["dataset_kwargs"] = {"setting": "closedbook"}
    run.data["config"]["limit"] = 7.0
    assert documents_by_position(run, TASK) is None


# -- runs of the scripted model -----------------------------------------------------------------------

def _qa_file(data_dir, tmp_path: Path, n: int) -> Path:
    with gzip.open(Path(data_dir) / PARTIAL, "rt", encoding="utf-8") as handle:
        records = [line for _, line in zip(range(n), handle)]
    path = tmp_path / "qa.jsonl"
    path.write_text("".join(records))
    return path


def _responses(tmp_path: Path) -> Path:
    path = tmp_path / "responses.json"
    path.write_text(json.dumps({"rules": [], "default": "no idea"}))
    return path


@pytest.mark.slow
def test_a_limited_sweep_logs_and_records_its_coverage(run_cli, data_dir, tmp_path):
    """`lm-eval-ext run --limit 7` on the 3 positions of litm_qa_10docs: the log says 3/2/2, the results record
    it, and the report shows it."""
    from lm_eval_ext.report.build import build_report

    out = tmp_path / "out"
    proc = run_cli(["lm-eval-ext", "run", "--model", "ext-canned-gen", "--model_args", f"responses={_responses(tmp_path)}",
                    "--tasks", TASK, "--limit", "7", "--metadata", json.dumps({"litm_qa_file": str(_qa_file(data_dir, tmp_path, 3))}),
                    "--output_path", str(out), "--log_samples"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (f"{TASK}: the gold positions are covered unevenly: {UNEVEN}. Documents go example by example and "
            "--limit N takes the first N") in proc.stderr
    assert "a --limit that is a multiple of 3 (the number of positions) takes whole examples" in proc.stderr
    (results_file,) = out.rglob("results_*.json")
    results = json.loads(results_file.read_text())
    assert results["configs"][TASK]["metadata"]["documents_by_position"] == {"1": 3, "5": 2, "10": 2}
    (samples_file,) = out.rglob(f"samples_{TASK}_*.jsonl")
    logged = [json.loads(line)["doc"]["gold_position"] for line in samples_file.read_text().splitlines()]
    assert sorted(logged) == [1, 1, 1, 5, 5, 10, 10]  # what was recorded is what was scored

    report = tmp_path / "report"
    build_report([str(out)], report, published=False)
    (row,) = read_csv(report / "tables/runs.csv")
    assert row["status_reasons"] == (f"{TASK}: 7 of 9 documents scored (--limit 7); "
                                     f"{TASK}: gold positions covered unevenly: {UNEVEN}")
    assert [r["documents"] for r in read_csv(report / "tables/litm_positions.csv")] == ["3", "2", "2"]


def _evaluate(data_dir, tmp_path: Path, task: str = TASK, **kwargs) -> dict:
    import lm_eval
    from lm_eval.tasks import TaskManager

    from lm_eval_ext.paths import tasks_dir
    manager = TaskManager(include_path=str(tasks_dir()), include_defaults=False,
                          metadata={"litm_qa_file": str(_qa_file(data_dir, tmp_path, 3))})
    return lm_eval.simple_evaluate(model="ext-canned-gen", model_args=f"responses={_responses(tmp_path)}", tasks=[task],
                                   task_manager=manager, **kwargs)


@pytest.mark.parametrize(("kwargs", "coverage", "uneven"), [
    ({"limit": 6}, {"1": 2, "5": 2, "10": 2}, None),  # a multiple of the 3 positions: whole examples
    ({}, {"1": 3, "5": 3, "10": 3}, None),  # the whole task
    pytest.param({"samples": {TASK: [0, 1, 4]}}, {"1": 1, "5": 2, "10": 0},  # --samples: the documents it names
                 "position 1: 1, position 5: 2, position 10: 0 documents", marks=skip_where_broken("samples")),
])
def test_coverage_is_recorded_and_only_uneven_coverage_is_a_warning(data_dir, tmp_path, caplog, kwargs, coverage,
                                                                    uneven):
    with caplog.at_level(logging.WARNING):
        results = _evaluate(data_dir, tmp_path, **kwargs)
    assert results["configs"][TASK]["metadata"]["documents_by_position"] == coverage
    warned = [r.getMessage() for r in caplog.records if "covered unevenly" in r.getMessage()]
    assert warned == ([f"{TASK}: the gold positions are covered unevenly: {uneven}. Documents go example by example "
                       "and --limit N takes the first N (--samples the ones it names), so the positions' accuracies "
                       "are over different questions; a --limit that is a multiple of 3 (the number of positions) "
                       "takes whole examples. Recorded as documents_by_position in the task's results metadata."]
                      if uneven else [])


def test_too_few_positions_for_the_gap_or_the_middle_drop_leave_them_undefined(data_dir, tmp_path):
    """`--limit 2` on 3 positions: positions 1 and 5 only. The middle drop (3 positions needed) is NaN and the run
    completes, instead of failing in the aggregation after every answer was generated."""
    import math

    from lm_eval_ext import sweeps

    assert math.isnan(sweeps.position_gap([(0, 1.0), (0, 0.0)]))
    assert math.isnan(sweeps.middle_drop([(0, 1.0, 0, 9), (4, 0.0, 0, 9)]))
    results = _evaluate(data_dir, tmp_path, limit=2)
    metrics = results["results"][TASK]
    assert results["configs"][TASK]["metadata"]["documents_by_position"] == {"1": 1, "5": 1, "10": 0}
    assert metrics["acc_gap,first_line"] == 0.0 and math.isnan(metrics["acc_middle_drop,first_line"])
    assert "acc_pos_10,first_line" not in metrics


def test_real_run_without_the_last_position_has_no_middle_drop():
    """The real case: SmolLM2-135M-Instruct on `litm_kv_75keys` (positions 1, 25, 50, 75) with `--limit 3`
    (tests/fixtures/real/litm_kv_limit3, made before the fix): positions 1, 25 and 50 were scored, and the results
    gave a middle drop of 0.0 with position 50 as the sweep's last end. Its documents, scored again: undefined."""
    import math

    from lm_eval_ext import sweeps

    real = FIXTURES / "real" / "litm_kv_limit3"
    (results_file,) = real.rglob("results_*.json")
    results = json.loads(results_file.read_text())
    assert results["results"]["litm_kv_75keys"]["acc_middle_drop,none"] == 0.0  # what the run said
    assert results["configs"]["litm_kv_75keys"]["metadata"]["documents_by_position"] == {"1": 1, "25": 1, "50": 1,
                                                                                         "75": 0}
    (samples_file,) = real.rglob("samples_litm_kv_75keys_*.jsonl")
    samples = [json.loads(line) for line in samples_file.read_text().splitlines()]
    values = [sweeps.sweep_metrics(s["doc"]["gold_index"], s["acc"], [0, 24, 49, 74]) for s in samples]
    assert [v["acc_middle_drop"] for v in values] == [(0, 0.0, 0, 74), (24, 0.0, 0, 74), (49, 0.0, 0, 74)]
    assert math.isnan(sweeps.middle_drop([v["acc_middle_drop"] for v in values]))
    assert sweeps.position_gap([v["acc_gap"] for v in values]) == 0.0  # best minus worst of the scored positions


@pytest.mark.parametrize(("limit", "coverage"), [(4, {"1": 1, "5": 1, "10": 1, "15": 1, "20": 0}),
                                                 (5, {"1": 1, "5": 1, "10": 1, "15": 1, "20": 1})])
def test_the_middle_drop_needs_both_ends_of_the_sweep(data_dir, tmp_path, limit, coverage):
    """`litm_qa_20docs` (positions 1, 5, 10, 15, 20): `--limit 4` scores no document at position 20, so there is no
    middle drop (not one with position 15 as an end); `--limit 5` scores every position."""
    import math

    results = _evaluate(data_dir, tmp_path, task="litm_qa_20docs", limit=limit)
    assert results["configs"]["litm_qa_20docs"]["metadata"]["documents_by_position"] == coverage
    metrics = results["results"]["litm_qa_20docs"]
    assert metrics["acc_gap,first_line"] == 0.0
    drop = metrics["acc_middle_drop,first_line"]
    assert math.isnan(drop) if limit == 4 else drop == 0.0
