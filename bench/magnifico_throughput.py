"""MAGNIFICo throughput: prompts built per second, and predictions scored per second in the sandbox.

Prompts: every document of the Direct, Description (end) and Few-shot single-word tasks and of
the dialogue tasks (novel and base items), built by a fresh PromptBuilder (each database's
schema prefix is built once, then reused). Scoring: every test item in the mirror
(``*/*/test.tsv``, items with a missing database left out) with its gold query as the
prediction, through the same path as the harness filter (each distinct gold query executed
once, predictions executed in parallel sandbox workers and compared there); the slowest
single query is reported. Targets: >= 4,500 prompts/s, >= 1,700 predictions/s.

    LM_EVAL_EXT_DATA_DIR=/path/to/data python bench/magnifico_throughput.py [--workers N] [--repeat 3]
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path


def bench_prompts(repeat: int) -> None:
    from lm_eval_ext.data import DataError, spider_database_path
    from lm_eval_ext.magnifico.documents import Setting, build_documents
    from lm_eval_ext.magnifico.prompts import PromptBuilder

    settings = [Setting("single", "direct", "plausible"), Setting("single", "description", "plausible", "end"),
                Setting("single", "fewshot", "plausible"), Setting("dialogue", "dialogue", "plausible", "start")]
    present: dict[str, bool] = {}

    def has_db(db_id: str) -> bool:
        if db_id not in present:
            try:
                spider_database_path(db_id)
                present[db_id] = True
            except DataError:
                present[db_id] = False
        return present[db_id]

    for setting in settings:
        docs = [d for d in build_documents(setting) if has_db(d["db_id"])]
        best = float("inf")
        for _ in range(repeat):
            builder = PromptBuilder()  # cold caches: prefixes are built inside the timed part
            started = time.perf_counter()
            for doc in docs:
                builder.build(doc)
            best = min(best, time.perf_counter() - started)
        print(f"prompts  {setting.prompt_type:<11} {len(docs):>5} docs  {len(docs) / best:>9,.0f} prompts/s")


def bench_scoring(workers: int | None, repeat: int) -> None:
    import csv

    from lm_eval_ext.data import DataError, resolve_file, spider_database_path
    from lm_eval_ext.magnifico import execution, replies
    from lm_eval_ext.magnifico.examples import parse_question

    root = resolve_file("magnifico", "interpretations.json").parent / "magnifico_data"
    items = []
    for path in sorted(root.glob("*/*/test.tsv")):
        with open(path, encoding="utf-8", newline="") as handle:
            for row in csv.DictReader(handle, delimiter="\t"):
                db_id = parse_question(row["Question"])[0]
                try:
                    items.append((str(spider_database_path(db_id)), row["Parse"]))
                except DataError:
                    pass
    for run in range(repeat):
        execution._GOLD.clear()  # each run pays for the gold queries too
        scorer = execution.Scorer(execution.ExecutionOptions(workers=workers))
        scorer.pool.run([(items[0][0], "SELECT 1")])  # start the workers outside the timed part
        started = time.perf_counter()
        golds = scorer.gold_results(items)
        kept = [(item, gold) for item, gold in zip(items, golds) if gold.ok]
        predictions = [(db, replies.prediction_sql(sql[len("select "):] if sql.lower().startswith("select ") else sql))
                       for (db, sql), _ in kept]
        # compared with the gold rows in the workers, as the harness filter does
        results = scorer.pool.run([(db, sql, scorer.against(gold, gold_sql))
                                   for (db, sql), ((_, gold_sql), gold) in zip(predictions, kept)])
        ex = [int(bool(pred.match)) for pred in results]
        elapsed = time.perf_counter() - started
        slowest = max(zip(results, predictions), key=lambda pair: pair[0].seconds)
        print(f"scoring  run {run + 1}: {len(kept):,} predictions ({len(items) - len(kept)} with failing gold left out) "
              f"in {elapsed:.2f} s = {len(kept) / elapsed:,.0f} predictions/s, {scorer.pool.size} workers; "
              f"EX of gold-as-prediction {sum(ex) / len(ex):.4f}; slowest query {slowest[0].seconds * 1000:.1f} ms "
              f"({Path(slowest[1][0]).stem}: {slowest[1][1][:70]})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, default=None, help="sandbox processes (default: min(4, CPUs))")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    bench_prompts(args.repeat)
    bench_scoring(args.workers, args.repeat)
    print("rerun: LM_EVAL_EXT_DATA_DIR=/path/to/data python bench/magnifico_throughput.py"
          + (f" --workers {args.workers}" if args.workers else "") + f" --repeat {args.repeat}")


if __name__ == "__main__":
    main()
