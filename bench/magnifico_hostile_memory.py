"""MAGNIFICo scoring against hostile predictions: peak memory (RSS) of the scoring process and its sandbox workers.

Every item of one MAGNIFICo task (default: ``magnifico_phrase_direct``, items whose database is
missing left out) gets a hostile prediction, in turn one of the queries below, each built to
produce as large a result as the sandbox's limits let through (100,000 rows, 64 MB of values,
8 MB per value), and the items are scored through the harness filter's path
(``Scorer.score``: gold queries, predictions in the sandbox workers, comparison). A thread
samples the resident memory of this process and of every process under it (the forkserver and
the workers) every 20 ms, from /proc (Linux).

    LM_EVAL_EXT_DATA_DIR=/path/to/data python bench/magnifico_hostile_memory.py [--items N] [--workers 2]
"""
from __future__ import annotations

import argparse
import os
import threading
import time

_ROWS = "(WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {n}) SELECT i FROM n)"
# The generation that follows the prompt's final "SELECT" (the prediction is "SELECT " + generation).
HOSTILE = {
    "7 x 8 MB hex strings": "hex(zeroblob(4000000)) FROM " + _ROWS.format(n=7),
    "70 x 800 kB hex strings": "hex(zeroblob(400000)) FROM " + _ROWS.format(n=70),
    "20k rows x 200 empty strings": ", ".join(["''"] * 200) + " FROM " + _ROWS.format(n=20_000),
    "doubling string (CTE), 2 B to 8 MB": "x FROM (WITH RECURSIVE s(x, i) AS (SELECT 'ab', 1 UNION ALL "
                                           "SELECT x || x, i + 1 FROM s WHERE i < 22) SELECT x FROM s)",
    "50k rows x 20 integers": ", ".join(["i"] * 20) + " FROM " + _ROWS.format(n=50_000),
}


def _tree(root: int) -> list[int]:
    """``root`` and every process under it."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as handle:
                    ppid = int(handle.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, []))
    return found


def _rss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as handle:
            for line in handle:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


class PeakMemory(threading.Thread):
    """Samples the RSS of this process and of the whole process tree until stopped."""

    def __init__(self, every: float = 0.02) -> None:
        super().__init__(daemon=True)
        self.every = every
        self.peak_parent = self.peak_total = self.peak_worker = 0
        self._stop_event = threading.Event()

    def run(self) -> None:
        me = os.getpid()
        while not self._stop_event.wait(self.every):
            sizes = {pid: _rss(pid) for pid in _tree(me)}
            parent = sizes.pop(me)
            self.peak_parent = max(self.peak_parent, parent)
            self.peak_worker = max([self.peak_worker, *sizes.values()])
            self.peak_total = max(self.peak_total, parent + sum(sizes.values()))

    def stop(self) -> None:
        self._stop_event.set()
        self.join()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scope", default="phrase", help="the task's setting (default: magnifico_phrase_direct)")
    parser.add_argument("--prompt-type", default="direct")
    parser.add_argument("--form", default="plausible")
    parser.add_argument("--items", type=int, default=None, help="only the first N items")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()

    from lm_eval_ext.magnifico.documents import Setting, build_documents
    from lm_eval_ext.magnifico.execution import ExecutionOptions, Scorer
    from lm_eval_ext.magnifico.task import database_path, split_scorable

    scorer = Scorer(ExecutionOptions(workers=args.workers))
    # the items the task scores (as when it is loaded: the gold queries run here, once)
    kept, excluded, _ = split_scorable(build_documents(Setting(args.scope, args.prompt_type, args.form)), scorer)
    docs = [(database_path(doc["db_id"]), doc["gold"]) for doc in kept][:args.items]
    kinds = list(HOSTILE)
    generations = [HOSTILE[kinds[i % len(kinds)]] for i in range(len(docs))]
    scorer.pool.run([(docs[0][0], "SELECT 1")])  # workers started: their start is not counted below

    monitor = PeakMemory()
    baseline = _rss(os.getpid())
    monitor.start()
    started = time.perf_counter()
    records = scorer.score([db for db, _ in docs], [gold for _, gold in docs], generations)
    elapsed = time.perf_counter() - started
    monitor.stop()
    scorer.pool.close()

    mb = 2**20
    print(f"{len(docs)} items of the {args.scope}/{args.prompt_type}/{args.form} task ({excluded} excluded), hostile "
          f"predictions "
          f"({len(kinds)} kinds in turn), {args.workers} workers: {elapsed:.1f} s")
    for kind in kinds:
        done = [r for r, g in zip(records, generations) if g == HOSTILE[kind]]
        errors = {r["error"] for r in done if not r["executed"]}
        print(f"  {kind:<34} {len(done):>4} items, {sum(r['executed'] for r in done):>4} executed, "
              f"ex {sum(r['ex'] for r in done)}" + (f"; refused: {sorted(errors)}" if errors else ""))
    print(f"peak RSS: scoring process {monitor.peak_parent / mb:,.0f} MB (before scoring {baseline / mb:,.0f} MB), "
          f"largest worker {monitor.peak_worker / mb:,.0f} MB, process tree {monitor.peak_total / mb:,.0f} MB")
    print("rerun: LM_EVAL_EXT_DATA_DIR=/path/to/data python bench/magnifico_hostile_memory.py"
          + (f" --items {args.items}" if args.items else "") + f" --workers {args.workers}")


if __name__ == "__main__":
    main()
