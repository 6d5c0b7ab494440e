"""Deciding whether a predicted query's result equals the gold query's result.

``authors``: MAGNIFICo's rule (its ``eval_sql``), the default so that numbers match the
paper: same number of rows, and row ``i`` of one equals row ``i`` of the other as a
*set* of values (so row order matters, column order does not, and a value repeated
within a row counts once; Python equality: ``1 == 1.0``).

``testsuite``: stricter, in the style of the Spider test-suite evaluation: same number
of rows and of columns; the columns of the prediction may be a permutation of the
gold's; rows compared as a multiset unless the gold query orders its result (an ORDER
BY at its top level), then in order; floats equal when they agree to
``FLOAT_DIGITS`` significant digits.
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from typing import Sequence

FLOAT_DIGITS = 10
# bound on the column assignments tried for very wide results with many equal columns
MAX_PERMUTATIONS = 10_000


def authors_match(pred: Sequence[tuple], gold: Sequence[tuple]) -> bool:
    """MAGNIFICo's execution match (see the module docstring)."""
    if len(pred) != len(gold):
        return False
    return all(set(p) == set(g) for p, g in zip(pred, gold))


@lru_cache(maxsize=65536)
def query_orders(sql: str) -> bool:
    """Whether the query has an ORDER BY at its top level (not only inside a subquery)."""
    import sqlparse
    from sqlparse import tokens

    for statement in sqlparse.parse(sql):
        for token in _top_level(statement):
            if token.ttype is tokens.Keyword and re.sub(r"\s+", " ", token.value.upper()) == "ORDER BY":
                return True
    return False


def _top_level(statement):
    """Tokens outside parentheses; sqlparse groups WHERE clauses, whose tail may hold the ORDER BY."""
    from sqlparse import sql as groups

    for token in statement.tokens:
        if isinstance(token, groups.Parenthesis):
            continue
        if isinstance(token, groups.Where):
            yield from _top_level(token)
        else:
            yield token


def _norm(value):
    if isinstance(value, float):
        return float(f"{value:.{FLOAT_DIGITS}g}")
    return value


def testsuite_match(pred: Sequence[tuple], gold: Sequence[tuple], ordered: bool) -> bool:
    """Spider-test-suite-style match (see the module docstring); ``ordered`` = the gold query orders."""
    if len(pred) != len(gold):
        return False
    if not gold:
        return True
    width = len(gold[0])
    if any(len(row) != width for row in pred) or any(len(row) != width for row in gold):
        return False
    pred = [tuple(_norm(v) for v in row) for row in pred]
    gold = [tuple(_norm(v) for v in row) for row in gold]
    gold_columns = [Counter(row[i] for row in gold) for i in range(width)]
    pred_columns = [Counter(row[j] for row in pred) for j in range(width)]
    # candidates[i]: prediction columns holding the same multiset of values as gold column i
    candidates = [[j for j in range(width) if pred_columns[j] == gold_columns[i]] for i in range(width)]
    gold_rows = gold if ordered else Counter(gold)
    tried = 0

    def assign(i: int, chosen: list[int]) -> bool:
        nonlocal tried
        if i == width:
            tried += 1
            permuted = [tuple(row[j] for j in chosen) for row in pred]
            return (permuted if ordered else Counter(permuted)) == gold_rows
        for j in candidates[i]:
            if j not in chosen and tried < MAX_PERMUTATIONS and assign(i + 1, chosen + [j]):
                return True
        return False

    return assign(0, [])


COMPARISONS = ("authors", "testsuite")


@dataclass(frozen=True)
class Against:
    """What a sandbox worker compares a prediction's rows with, so that only the verdict leaves it.

    ``ordered``: the gold query orders its result (:func:`query_orders`; the ``testsuite`` rule only).
    """

    gold_rows: Sequence[tuple]
    comparison: str = "authors"
    ordered: bool = False


def results_match(pred: Sequence[tuple], against: Against) -> bool:
    """Whether ``pred`` equals the gold rows under ``against.comparison`` (see the module docstring)."""
    if against.comparison == "authors":
        return authors_match(pred, against.gold_rows)
    if against.comparison == "testsuite":
        return testsuite_match(pred, against.gold_rows, ordered=against.ordered)
    raise ValueError(f"unknown comparison {against.comparison!r}; known: {', '.join(COMPARISONS)}")
