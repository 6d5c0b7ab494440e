"""Position sweeps: move the one relevant item of a context through it and report accuracy by position.

Any task whose input is a list of context items with exactly one relevant item can be swept
(Lost in the Middle's gold passage and queried key-value pair; MAGNIFICo's description
position; ELITR-Bench's answer position). This module holds the parts that do not depend on
the benchmark:

- building the context: :func:`insert_at` (the relevant item into the other items at an index)
  and :func:`move_to_index` (an item already in the list, the others keeping their order);
- naming: positions are 0-based indices in code and data, **1-based in metric names and
  reports** (``acc_pos_1`` is the first item), as in the Lost in the Middle paper;
- per-document metric values (:func:`sweep_metrics`) and the harness aggregations of the
  metrics that need every position at once (:func:`position_gap`, :func:`middle_drop`).

How the harness aggregates, and why the values look the way they do: the harness collects, per
metric name, the list of per-document values and calls that metric's aggregation function on
it. ``acc`` and ``acc_pos_<n>`` are plain 0/1 values averaged with the harness's ``mean`` (so
they get its standard error); a document at position p emits ``acc_pos_<p+1>`` only, so each
position's accuracy is computed over that position's documents alone and no sentinel value is
ever written. ``acc_gap`` and ``acc_middle_drop`` need the accuracy at every position at once:
each document emits ``(position, correct)`` under ``acc_gap`` and ``(position, correct, first, last)``
under ``acc_middle_drop`` (the sweep's two end positions, which the aggregation cannot otherwise
know), and the aggregation functions below regroup them by position. They are functions of
per-position means, not means of per-document values, so the harness reports no standard error for
them ("N/A"). When the positions they need have no scored document (the gap: two positions; the middle
drop: both ends of the sweep and one position between them), they are NaN: undefined, not an error
after the generation. A ``--limit`` below the number of positions, or every prompt of a position skipped
as too long, leaves positions without one.

Coverage: a sweep's documents go example by example (every position of one example, then the next
example's), so that the harness's ``--limit N`` (its first N documents) takes whole examples when N is
a multiple of the number of positions, and otherwise gives the first positions one document more than
the others (``--limit 7`` over 3 positions: 3, 2, 2; :func:`prefix_coverage`); ``--samples`` may pick
any documents. Each position's accuracy is then over other questions. A task counts the documents it
took at each position (:func:`coverage_of`), records them in its results metadata as
``documents_by_position`` and warns when they differ (:func:`uneven`, :func:`coverage_text`).

Using it from another task (``process_results`` of a ConfigurableTask subclass, or a YAML
``process_results: !function``)::

    from lm_eval_ext import sweeps
    metrics = sweeps.sweep_metrics(position=doc["position"], correct=score, positions=POSITIONS)
    # aggregation: sweeps.aggregations(POSITIONS); higher_is_better: sweeps.higher_is_better(POSITIONS)

or, in a task YAML ``metric_list``: ``{metric: acc_gap, aggregation: !function lm_eval_ext.sweeps.position_gap,
higher_is_better: false}``.
"""
from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar

from lm_eval.api.metrics import mean

T = TypeVar("T")


def insert_at(others: Sequence[T], item: T, index: int) -> list[T]:
    """``others`` (in order) with ``item`` inserted so that it sits at ``index`` (0-based).

    Valid indices are ``0 .. len(others)``; anything else is a ValueError (Python's
    ``list.insert`` would silently clamp it).
    """
    if not 0 <= index <= len(others):
        raise ValueError(f"position {index} is outside 0..{len(others)} for a list of {len(others) + 1} items")
    result = list(others)
    result.insert(index, item)
    return result


def move_to_index(items: Sequence[T], current: int, index: int) -> list[T]:
    """``items`` with the item at ``current`` moved to ``index``; the others keep their relative order."""
    if not 0 <= current < len(items):
        raise ValueError(f"item index {current} is outside 0..{len(items) - 1}")
    others = [item for i, item in enumerate(items) if i != current]
    return insert_at(others, items[current], index)


def position_name(index: int) -> str:
    """Metric-name fragment for a 0-based position: ``pos_<index + 1>``."""
    return f"pos_{index + 1}"


def accuracy_by_position(pairs: Iterable[Sequence]) -> dict[int, float]:
    """Mean correctness per 0-based position, from ``(position, correct, ...)`` values, sorted by position."""
    totals: dict[int, list[float]] = defaultdict(list)
    for position, correct, *_ in pairs:
        totals[int(position)].append(float(correct))
    return {position: sum(values) / len(values) for position, values in sorted(totals.items())}


def gap(by_position: dict[int, float]) -> float:
    """Best position's accuracy minus the worst's (0 for a flat curve; needs two positions)."""
    if len(by_position) < 2:
        raise ValueError(f"a gap needs at least two positions, got {sorted(by_position)}")
    return max(by_position.values()) - min(by_position.values())


def middle_drop_of(by_position: dict[int, float]) -> float:
    """Mean accuracy at the two ends of the sweep minus the lowest accuracy strictly inside it.

    The ends are the smallest and largest swept positions (the first and last item for the
    paper's sweeps). Positive means a U-shaped dip in the middle; needs three positions.
    """
    if len(by_position) < 3:
        raise ValueError(f"a middle drop needs at least three positions, got {sorted(by_position)}")
    positions = sorted(by_position)
    ends = (by_position[positions[0]] + by_position[positions[-1]]) / 2
    return ends - min(by_position[p] for p in positions[1:-1])


def position_gap(items: Sequence[tuple[int, float]]) -> float:
    """Harness aggregation of ``acc_gap``: per-document ``(position, correct)`` -> best minus worst position;
    NaN (undefined) when fewer than two positions have a scored document."""
    by_position = accuracy_by_position(items)
    return gap(by_position) if len(by_position) >= 2 else math.nan


def middle_drop(items: Sequence[tuple[int, float, int, int]]) -> float:
    """Harness aggregation of ``acc_middle_drop``: per-document ``(position, correct, first, last)`` -> mean of the
    sweep's two ends minus the lowest position between them; NaN (undefined) when an end of the sweep or every
    position between them has no scored document (then the lowest and highest scored positions are not the ends
    the metric is defined by)."""
    if not items:
        return math.nan
    by_position = accuracy_by_position(items)
    _, _, first, last = items[0]  # every document of a task names the same two ends
    covered = first in by_position and last in by_position and len(by_position) >= 3
    return middle_drop_of(by_position) if covered else math.nan


def sweep_metrics(position: int, correct: float, positions: Sequence[int], prefix: str = "acc") -> dict:
    """Per-document values of one swept document at 0-based ``position``.

    ``acc``, ``acc_pos_<position+1>``, ``acc_gap``'s ``(position, correct)`` (when the task sweeps two
    positions or more) and ``acc_middle_drop``'s ``(position, correct, first, last)`` (three or more).
    ``prefix`` renames the family (e.g. ``exec_acc``).
    """
    correct = float(correct)
    values: dict = {prefix: correct, f"{prefix}_{position_name(position)}": correct}
    if len(positions) >= 2:
        values[f"{prefix}_gap"] = (position, correct)
    if len(positions) >= 3:
        values[f"{prefix}_middle_drop"] = (position, correct, min(positions), max(positions))
    return values


def metric_names(positions: Sequence[int], prefix: str = "acc") -> list[str]:
    """Every metric :func:`sweep_metrics` can emit for a sweep over ``positions``."""
    names = [prefix] + [f"{prefix}_{position_name(p)}" for p in positions]
    if len(positions) >= 2:
        names.append(f"{prefix}_gap")
    if len(positions) >= 3:
        names.append(f"{prefix}_middle_drop")
    return names


def aggregations(positions: Sequence[int], prefix: str = "acc") -> dict[str, Callable]:
    """The harness aggregation function of each metric of :func:`metric_names`."""
    special = {f"{prefix}_gap": position_gap, f"{prefix}_middle_drop": middle_drop}
    return {name: special.get(name, mean) for name in metric_names(positions, prefix)}


def higher_is_better(positions: Sequence[int], prefix: str = "acc") -> dict[str, bool]:
    """Accuracies are better high; the gap and the middle drop are better low (a flat curve)."""
    lower = {f"{prefix}_gap", f"{prefix}_middle_drop"}
    return {name: name not in lower for name in metric_names(positions, prefix)}


def coverage_of(positions: Iterable[int], swept: Sequence[int]) -> dict[str, int]:
    """How many documents are at each swept position: ``positions`` are the 0-based positions of the documents
    a run took, ``swept`` the task's; keyed by the 1-based position (as in metric names), in sweep order."""
    counts: dict[int, int] = defaultdict(int)
    for position in positions:
        counts[int(position)] += 1
    return {str(p + 1): counts[p] for p in sorted(swept)}


def prefix_coverage(n: int, swept: Sequence[int]) -> dict[str, int]:
    """:func:`coverage_of` the first ``n`` documents of a sweep ordered example by example (module docstring)."""
    size = len(swept)
    return {str(p + 1): n // size + (i < n % size) for i, p in enumerate(sorted(swept))}


def uneven(coverage: dict[str, int]) -> bool:
    """True when the positions of a sweep do not all have the same number of documents."""
    return len(set(coverage.values())) > 1


def coverage_text(coverage: dict[str, int]) -> str:
    """``position 1: 3, position 5: 2, position 10: 2 documents``."""
    return ", ".join(f"position {p}: {n}" for p, n in coverage.items()) + " documents"
