"""SQL execution bounded by SQLite's instruction count, not by the clock: scores independent of machine load.

The budget (``Limits.budget``, ``--metadata budget``) counts SQLite virtual-machine instructions
through the progress handler: the same query on the same database is cut, or not, on a busy machine
as on an idle one. A gold query that exhausts its budget is run again with ``GOLD_RETRY_FACTOR`` times
the budget and, if it still does not finish, its items are left out and counted as ``gold_budget``,
apart from the gold queries that fail (``gold_error``).
"""
from __future__ import annotations

import csv
import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.harness import filtered
from lm_eval_ext.magnifico.execution import GOLD_RETRY_FACTOR, ExecutionOptions, Scorer
from lm_eval_ext.magnifico.task import split_scorable
from lm_eval_ext.sql import Limits, SandboxPool, connect_readonly, run_query

NEVER_ENDS = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c"


def _counted(limit: int) -> str:
    """A recursive count of ``limit`` rows: about 16 SQLite instructions a row."""
    return f"WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT {limit}) SELECT count(*) FROM c"


@pytest.fixture
def small_db(data_dir) -> Path:
    return data_dir / "spider" / "database" / "voter_2" / "voter_2.sqlite"


def test_an_expensive_query_is_cut_by_the_budget_every_time(small_db):
    limits = Limits(budget=1_000_000, timeout=600.0)  # a backstop that cannot decide here
    conn = connect_readonly(small_db, limits)
    for _ in range(3):
        result = run_query(conn, NEVER_ENDS, limits)
        assert not result.ok and result.out_of_budget and not result.timed_out
        assert result.error == "stopped after its budget of 1000000 SQLite instructions"
    # the same recursion, short enough, finishes within the same budget
    assert run_query(conn, _counted(1000), limits).rows == [(1000,)]


def test_the_budget_is_a_count_of_instructions(small_db):
    """A query that needs N handler calls finishes with a budget of N calls and is cut with one call fewer."""
    sql = _counted(20_000)
    conn = connect_readonly(small_db)
    calls = []
    conn.set_progress_handler(lambda: calls.append(1) and 0, 100)
    conn.execute(sql).fetchall()
    conn.set_progress_handler(None, 0)
    needed = len(calls) * 100
    assert run_query(conn, sql, Limits(budget=needed, check_every=100)).rows == [(20_000,)]
    cut = run_query(conn, sql, Limits(budget=needed - 100, check_every=100))
    assert cut.out_of_budget and not cut.ok


def test_the_pool_reports_a_budget_stop(small_db):
    with SandboxPool(workers=1, limits=Limits(budget=1_000_000)) as pool:
        cut, fine = pool.run([(str(small_db), NEVER_ENDS), (str(small_db), "SELECT 2")])
    assert cut.out_of_budget and "budget of 1000000" in cut.error and fine.rows == [(2,)]
    assert pool.replaced == 0  # the budget stops the query in its worker: nothing is killed


def _gold_queries(data_dir: Path, db: str) -> list[str]:
    """Every distinct gold query of MAGNIFICo's test files on the database ``db``."""
    root = data_dir / "magnifico" / "magnifico_data"
    found = {}
    for path in sorted(root.rglob("test.tsv")):
        with open(path, encoding="utf-8", newline="") as handle:
            for row in csv.DictReader(handle, delimiter="\t"):
                if row["Question"].split(":")[0] == db:
                    found.setdefault(row["Parse"], None)
    return list(found)


def _instructions(db: Path, sql: str) -> int:
    """Instructions a query needs, counted with plain sqlite3 (in steps of 1000, as the sandbox counts)."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    calls = []
    conn.set_progress_handler(lambda: calls.append(1) and 0, 1000)
    try:
        conn.execute(sql).fetchall()
    finally:
        conn.close()
    return len(calls) * 1000


@pytest.mark.parametrize("budget", [300_000, 50_000])
def test_a_gold_query_over_budget_is_retried_then_counted_apart_from_gold_errors(data_dir, budget):
    db = data_dir / "spider" / "database" / "flight_4" / "flight_4.sqlite"
    golds = _gold_queries(data_dir, "flight_4")
    broken = "select no_such_column from airlines"
    needed = [_instructions(db, sql) for sql in golds]
    over = sum(n > budget * GOLD_RETRY_FACTOR for n in needed)
    retried = sum(budget < n <= budget * GOLD_RETRY_FACTOR for n in needed)
    assert retried > 0 and (over > 0) == (budget == 50_000)  # each case really happens
    docs = [{"db_id": "flight_4", "gold": sql} for sql in golds + [broken]]
    kept, excluded, missing = split_scorable(docs, Scorer(ExecutionOptions(budget=budget)))
    assert excluded == {"db_missing": 0, "gold_error": 1, "gold_budget": over}
    assert len(kept) == len(golds) - over and not missing


BUDGET = 1_000_000  # SQLite instructions per query in the task runs below


def _task_rules(data_dir: Path) -> tuple[list[dict], dict[str, bool]]:
    """Answers for magnifico_direct_base (maximum): the gold rows behind a recursive count of 50,000 rows
    (0.8 million instructions: with the gold query, at most 0.1 million on this task, 80-90% of the budget of
    1 million below, so a clock set by an idle machine's speed would cut them on a loaded one) or 75,000
    (1.2 million: over the budget), alternately; which one each item got."""
    rules, heavy = [], {}
    path = data_dir / "magnifico" / "magnifico_data" / "maximum" / "baseline" / "test.tsv"
    with open(path, encoding="utf-8", newline="") as handle:
        for i, row in enumerate(csv.DictReader(handle, delimiter="\t")):
            text = row["Question"].split(" | ")[0].split(":", 1)[1].strip()
            if text in heavy:  # a question asked twice: the first rule answers both
                continue
            rows = 75_000 if i % 2 else 50_000
            gold = row["Parse"].strip().rstrip(";")  # a few gold queries end with ';', not allowed in a subquery
            answer = f"* FROM ({gold}) WHERE ({_counted(rows)}) = {rows}"
            rules.append({"contains": f"\n-- {text}\nSELECT", "response": answer})
            heavy[text] = rows == 75_000
    return rules, heavy


def _run_task(run_cli, tmp_path: Path, name: str, responses: Path) -> list[dict]:
    out = tmp_path / name
    proc = run_cli(["lm-eval-ext", "run", "--model", "ext-canned-gen", "--model_args", f"responses={responses}",
                    "--tasks", "magnifico_direct_base", "--confirm_run_unsafe_code", "--metadata",
                    json.dumps({"interpretations": "maximum", "budget": BUDGET}), "--output_path", str(out),
                    "--log_samples"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    (samples_file,) = out.rglob("samples_magnifico_direct_base_*.jsonl")
    return [json.loads(line) for line in samples_file.read_text().splitlines()]


@pytest.mark.slow
def test_the_same_task_scores_the_same_on_an_idle_and_a_loaded_machine(run_cli, data_dir, tmp_path):
    rules, heavy = _task_rules(data_dir)
    responses = tmp_path / "responses.json"
    responses.write_text(json.dumps({"rules": rules, "default": None}))
    idle = _run_task(run_cli, tmp_path, "idle", responses)
    # busy loops on every core and more, for the whole second run (ended below, whatever happens)
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(3)]
    try:
        loaded = _run_task(run_cli, tmp_path, "loaded", responses)
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()

    def per_item(samples):
        return {s["doc_id"]: (s["doc"]["text"], json.loads(filtered(s))["ex"],
                              json.loads(filtered(s))["error"]) for s in samples}

    assert len(idle) == len(loaded) and per_item(idle) == per_item(loaded)
    # both outcomes occur: the light answers finish (EX 1), the heavy ones are cut by the budget (EX 0)
    outcomes = {(heavy[s["doc"]["text"]], json.loads(filtered(s))["ex"]) for s in idle}
    assert outcomes == {(False, 1), (True, 0)}
    assert all(f"budget of {BUDGET}" in json.loads(filtered(s))["error"]
               for s in idle if heavy[s["doc"]["text"]])

