"""MAGNIFICo metrics through the real harness with a scripted model whose answers are chosen per item.

The model answers an item with its gold query (so the prediction executes to the gold
result) or with a wrong query; which items get which is decided from the TSV files read
here with the csv module, and every expected number is worked out by hand below.
"""
from __future__ import annotations

import csv
import json
import sqlite3
from pathlib import Path

import pytest

from helpers.harness import filtered

pytestmark = pytest.mark.filterwarnings("ignore")

WRONG = "'not the answer'"


def _rows(data_dir: Path, relpath: str) -> list[dict]:
    with open(data_dir / "magnifico" / "magnifico_data" / relpath, encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle, delimiter="\t"))


def _text(question: str) -> str:
    # the authors' data format: the question text lies between "<db_id>:" and the first " | "
    return question.split(" | ")[0].split(":", 1)[1].strip()


def _answer(gold: str) -> str:
    # the prompt ends with "SELECT"; the prediction is "SELECT " + the generation
    assert gold.startswith("select ")
    return gold[len("select "):]


def evaluate(responses: Path, tasks: list[str], metadata: dict) -> dict:
    import lm_eval
    from lm_eval.tasks import TaskManager

    from lm_eval_ext.paths import tasks_dir
    from lm_eval_ext.results.load import by_task_name  # a group's tasks as lm-eval 0.4 names them
    manager = TaskManager(include_path=str(tasks_dir()), include_defaults=False, metadata=metadata)
    return by_task_name(lm_eval.simple_evaluate(model="ext-canned-gen", model_args=f"responses={responses}",
                                                tasks=tasks, task_manager=manager, log_samples=True,
                                                confirm_run_unsafe_code=True))[0]


def metrics(results: dict, task: str) -> dict:
    return {key.split(",")[0]: value for key, value in results["results"][task].items()
            if key.endswith(",sandbox") and "_stderr" not in key}


# How many items of each file the model gets right (the first N rows), and what follows:
#   course_prereq_id (column, 20 items): novel 10/20 = 0.5, base 20/20 = 1.0 -> rel 0.5 -> 50
#   credit_4 (value, 24 items):          novel 12/24 = 0.5, base 6/24 = 0.25 -> 2.0, capped -> 100
#   yellow_card (value, 25 items):       novel 25/25 = 1.0, base 1/25 = 0.04 < 5% -> left out
# rel_perf = (50 + 100) / 2 = 75; interp_left_out = 1; rel_perf_column = 50; rel_perf_value = 100
# ex = (10 + 12 + 25) / 69 = 47/69; ex_base = (20 + 6 + 1) / 69 = 27/69
# em = 0: the gold queries are lowercase "select ...", the prediction starts with "SELECT" and
#   the authors' exact match is case-sensitive.
CORRECT = {
    "course_prereq_id": {"plausible": 10, "baseline": 20},
    "credit_4": {"plausible": 12, "baseline": 6},
    "yellow_card": {"plausible": 25, "baseline": 1},
}


def test_ex_ex_base_and_rel_perf_with_cap_and_threshold(data_dir, tmp_path):
    rules = []
    for name, counts in CORRECT.items():
        for form, n_correct in counts.items():
            for i, row in enumerate(_rows(data_dir, f"{name}/{form}/test.tsv")):
                answer = _answer(row["Parse"]) if i < n_correct else WRONG
                rules.append({"contains": f"\n-- {_text(row['Question'])}\nSELECT", "response": answer})
    assert len({r["contains"] for r in rules}) == len(rules) == 2 * (20 + 24 + 25)
    responses = tmp_path / "responses.json"
    responses.write_text(json.dumps({"rules": rules, "default": None}))

    results = evaluate(responses, ["magnifico_direct_plausible"], {"interpretations": ",".join(CORRECT)})
    got = metrics(results, "magnifico_direct_plausible")
    assert got["rel_perf"] == pytest.approx(75.0)
    assert got["interp_left_out"] == 1
    assert got["rel_perf_column"] == pytest.approx(50.0)
    assert got["rel_perf_value"] == pytest.approx(100.0)
    assert "rel_perf_basic" not in got  # no basic interpretation in this run
    assert got["ex"] == pytest.approx(47 / 69)
    assert got["ex_base"] == pytest.approx(27 / 69)
    assert got["em"] == 0 and got["prompts_truncated"] == 0
    excluded = results["configs"]["magnifico_direct_plausible"]["metadata"]["excluded"]
    assert excluded == {"db_missing": 0, "gold_error": 0, "gold_budget": 0, "items": 138, "missing_databases": {}}

    samples = results["samples"]["magnifico_direct_plausible"]
    assert len(samples) == 2 * 69
    # documents keep the interpretations' order (interpretations.json: credit_4 before course_prereq_id)
    sample = next(s for s in samples if s["doc"]["interpretation"] == "course_prereq_id")
    for field in ("interpretation", "category", "form", "prompt_type", "position", "db_id", "role"):
        assert field in sample["doc"]
    assert sample["doc"]["interpretation"] == "course_prereq_id" and sample["doc"]["role"] == "novel"
    record = json.loads(filtered(sample))
    assert record["executed"] is True and record["error"] is None and record["ex"] == 1
    assert record["prediction"] == "SELECT " + _answer(_rows(data_dir, "course_prereq_id/plausible/test.tsv")[0]["Parse"])
    wrong = next(s for s in samples if s["doc"]["interpretation"] == "course_prereq_id" and s["doc"]["role"] == "novel"
                 and json.loads(filtered(s))["ex"] == 0)
    assert json.loads(filtered(wrong))["prediction"] == f"SELECT {WRONG}"


def _gold_fails(db: Path, sql: str) -> bool:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        conn.execute(sql).fetchall()
        return False
    except sqlite3.Error:
        return True
    finally:
        conn.close()


def test_items_with_failing_gold_or_missing_database_are_excluded_and_counted(data_dir, tmp_path, caplog):
    responses = tmp_path / "responses.json"
    responses.write_text(json.dumps({"rules": [], "default": WRONG}))
    spider = data_dir / "spider" / "database"

    # Expected exclusions, found independently: run every gold query with plain sqlite3, and
    # count the items whose database folder is absent from the mirror.
    failing = 0
    for name in ("dock_count", "not_intern"):
        for form in ("plausible", "baseline"):
            for row in _rows(data_dir, f"{name}/{form}/test.tsv"):
                db = row["Question"].split(":")[0]
                failing += _gold_fails(spider / db / f"{db}.sqlite", row["Parse"])
    missing = sum(not (spider / row["Question"].split(":")[0]).is_dir()
                  for row in _rows(data_dir, "maximum/baseline/test.tsv"))
    assert failing > 0 and missing > 0  # the mirror has both cases (dock_count/not_intern baseline; baseball_1)

    with caplog.at_level("INFO"):
        phrase = evaluate(responses, ["magnifico_phrase_direct"], {"interpretations": "dock_count,not_intern"})
        base = evaluate(responses, ["magnifico_direct_base"], {"interpretations": "maximum"})
    # the exclusions are facts of the data, recorded with the task's results (the same on every rank)
    excluded = phrase["configs"]["magnifico_phrase_direct"]["metadata"]["excluded"]
    assert (excluded["gold_error"], excluded["gold_budget"], excluded["db_missing"], excluded["items"]) == \
        (failing, 0, 0, 2 * (15 + 20))
    assert len(phrase["samples"]["magnifico_phrase_direct"]) == 2 * (15 + 20) - failing
    excluded = base["configs"]["magnifico_direct_base"]["metadata"]["excluded"]
    assert excluded == {"db_missing": missing, "gold_error": 0, "gold_budget": 0, "items": 113,
                        "missing_databases": {"baseball_1": missing}}
    assert len(base["samples"]["magnifico_direct_base"]) == 113 - missing
    got = metrics(base, "magnifico_direct_base")
    assert "ex_base" not in got and "rel_perf" not in got  # a base task has no base to compare with
    summaries = [r.getMessage() for r in caplog.records if "left out" in r.getMessage()]
    assert any(f"left out {missing} whose Spider database is missing (baseball_1 x{missing})" in m for m in summaries)
    assert any(f", {failing} whose gold query does not execute and 0 whose gold query does not finish" in m
               for m in summaries)


def test_testsuite_comparison_option(data_dir, tmp_path):
    """The --metadata option comparison "testsuite" accepts reordered rows and columns when the gold query does not order."""
    rows = _rows(data_dir, "yellow_card/plausible/test.tsv")
    # item 13: gold "select min(t2.hs) , t1.ppos ... group by t1.ppos" (no ORDER BY) gives
    #   [(1600, 'goalie'), (600, 'mid')]; the answer below gives [('mid', 600), ('goalie', 1600)]:
    #   row 1 {'mid', 600} != {1600, 'goalie'} for the authors' rule (0), the same multiset of
    #   rows up to a column permutation for the test-suite rule (1).
    # item 14: the gold query itself (1 under both). Every other item, and every base item: wrong.
    assert rows[13]["Parse"].startswith("select min(t2.hs) , t1.ppos from tryout") and "order by" not in rows[13]["Parse"]
    reordered = ("t1.ppos , min(t2.hs) from tryout as t1 join player as t2 on t1.pid = t2.pid "
                 "where ycard = 'yes' group by t1.ppos order by t1.ppos desc")
    rules = [{"contains": f"\n-- {_text(rows[13]['Question'])}\nSELECT", "response": reordered},
             {"contains": f"\n-- {_text(rows[14]['Question'])}\nSELECT", "response": _answer(rows[14]["Parse"])}]
    responses = tmp_path / "responses.json"
    responses.write_text(json.dumps({"rules": rules, "default": WRONG}))
    task = "magnifico_direct_plausible"
    authors = metrics(evaluate(responses, [task], {"interpretations": "yellow_card"}), task)
    suite = metrics(evaluate(responses, [task], {"interpretations": "yellow_card", "comparison": "testsuite"}), task)
    assert authors["ex"] == pytest.approx(1 / 25)
    assert suite["ex"] == pytest.approx(2 / 25)


def test_headline_group_averages_its_settings(data_dir, tmp_path):
    # Interpretation `sum` in the six settings of the `magnifico` group: 50 items per form, of which 4
    # are on baseball_1 (missing from the mirror), so 46 are scored.
    # Correct: every base item, every plausible and adversarial item, the first 23 scored foreign items.
    #   description/fewshot x plausible, adversarial: 46/46 / 1.0 -> rel_perf 100
    #   description/fewshot x foreign: 23/46 / 1.0 -> rel_perf 50
    #   group rel_perf = (100 + 50 + 100 + 100 + 50 + 100) / 6 = 83.33...; group ex = (1 + .5 + 1) * 2 / 6 = 5/6
    spider = data_dir / "spider" / "database"
    rules = []
    for form, n_correct in (("baseline", 46), ("plausible", 46), ("adversarial", 46), ("nonsense", 23)):
        scored = [row for row in _rows(data_dir, f"sum/{form}/test.tsv")
                  if (spider / row["Question"].split(":")[0]).is_dir()]
        assert len(scored) == 46
        for i, row in enumerate(scored):
            rules.append({"contains": f"\n-- {_text(row['Question'])}\nSELECT",
                          "response": _answer(row["Parse"]) if i < n_correct else WRONG})
    responses = tmp_path / "responses.json"
    responses.write_text(json.dumps({"rules": rules, "default": None}))
    results = evaluate(responses, ["magnifico"], {"interpretations": "sum"})
    group = {key.split(",")[0]: value for key, value in results["groups"]["magnifico"].items() if key.endswith(",sandbox")}
    assert group["rel_perf"] == pytest.approx(500 / 6)
    assert group["ex"] == pytest.approx(5 / 6)
    assert group["ex_base"] == pytest.approx(1.0)
    assert group["rel_perf_basic"] == pytest.approx(500 / 6)
    assert metrics(results, "magnifico_fewshot_foreign")["rel_perf"] == pytest.approx(50.0)
