"""Lost in the Middle's published models: Table 1 and the appendix tables of accuracy by gold position.

Liu et al. (TACL 2024) tabulate closed-book and oracle accuracy (Table 1) and multi-document QA
accuracy by 0-based gold index for 10, 20 and 30 documents (appendix G, Tables 5-7); our
``acc_pos_<index + 1>``. They are transcribed in ``tables/lost_in_the_middle.csv`` (in percent,
as printed; divided by 100 here). The key-value retrieval, query-aware and random-order results
are only plotted in the paper, so they are not here.

From a model's full row of positions we also derive, with the tasks' own definitions
(:mod:`lm_eval_ext.sweeps`), ``acc`` (the mean over the positions: every position has the same
questions), ``acc_gap`` and ``acc_middle_drop``; each says it is derived.
"""
from __future__ import annotations

from collections import defaultdict
from decimal import Decimal

from ..sweeps import gap, middle_drop_of
from .numbers import PublishedNumber, Source
from .tables import read_table

BENCHMARK = "lost_in_the_middle"
CITATION = "Liu et al. (TACL 2024)"


def numbers() -> list[PublishedNumber]:
    """The transcribed numbers, then the values derived from each model's row of positions."""
    found = []
    positions: dict[tuple[str, str], dict[int, float]] = defaultdict(dict)
    sources: dict[tuple[str, str], Source] = {}
    for row in read_table(BENCHMARK):
        value = float(Decimal(row["paper_percent"]) / 100)  # 57.2 -> 0.572 exactly as printed
        source = Source(CITATION, row["source"])
        found.append(PublishedNumber(BENCHMARK, row["model"], row["task"], row["metric"], value, source))
        if row["metric"].startswith("acc_pos_"):
            positions[(row["model"], row["task"])][int(row["metric"].rsplit("_", 1)[1])] = value
            sources[(row["model"], row["task"])] = source
    for (model, task), by_position in positions.items():
        count = len(by_position)
        derived = {"acc": (sum(by_position.values()) / count, f"mean of the {count} positions"),
                   "acc_gap": (gap(by_position), "best minus worst position"),
                   "acc_middle_drop": (middle_drop_of(by_position), "mean of the two ends minus the lowest inside")}
        for metric, (value, how) in derived.items():
            found.append(PublishedNumber(BENCHMARK, model, task, metric, value, sources[(model, task)],
                                         f"derived from the table: {how}"))
    return found
