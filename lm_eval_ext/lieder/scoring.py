"""Scoring one LIEDER group: comparison outcomes and the per-document metric values.

Each metric value of a document is a mean over that group's comparisons; every group
of a set has the same comparisons, so the harness's mean over documents equals the
mean over all comparisons of all groups (the paper's accuracy).
"""
from __future__ import annotations

from .comparisons import PROPERTIES, Comparison, comparisons_for


class MissingItemError(ValueError):
    """A group lacks an item that one of its comparisons needs."""


def comparison_outcomes(
    logprobs: dict[tuple[str, str], float], comparisons: tuple[Comparison, ...]
) -> dict[str, int]:
    """Direct metric: 1 when log p(left) > log p(right) strictly; a tie is wrong."""
    return {c.name: int(_get(logprobs, c.left) > _get(logprobs, c.right)) for c in comparisons}


def relative_outcomes(
    logprobs: dict[tuple[str, str], float], comparisons: tuple[Comparison, ...]
) -> dict[str, int]:
    """Relative ("nonref") metric: r(x|c) = p(x|c) / (p(x|c) + p(nonref|c)).

    r is a monotone function of the log-odds log p(x|c) - log p(nonref|c), so the
    comparison is made on log-odds: identical to comparing r, without the underflow
    that exponentiating sentence log-probabilities would risk.
    """

    def log_odds(side: tuple[str, str]) -> float:
        return _get(logprobs, side) - _get(logprobs, (side[0], "nonref"))

    return {c.name: int(log_odds(c.left) > log_odds(c.right)) for c in comparisons}


def _get(logprobs: dict[tuple[str, str], float], key: tuple[str, str]) -> float:
    try:
        return logprobs[key]
    except KeyError:
        raise MissingItemError(f"no '{key[1]}' continuation for context type '{key[0]}' in this group") from None


def _summaries(prefix: str, outcomes: dict[str, int], comparisons: tuple[Comparison, ...], family: str) -> dict[str, float]:
    informative = [c for c in comparisons if not c.control]
    metrics: dict[str, float] = {prefix: _mean(outcomes[c.name] for c in informative)}
    for prop in PROPERTIES:
        tagged = [outcomes[c.name] for c in informative if prop in c.properties]
        if tagged:
            metrics[f"{prefix}_{prop}"] = _mean(tagged)
    metrics[f"{prefix}_family_{family}"] = metrics[prefix]
    for c in comparisons:
        metrics[f"{'ctrl_' if c.control else ''}{prefix}_{c.name}"] = float(outcomes[c.name])
    return metrics


def _mean(values) -> float:
    values = list(values)
    return sum(values) / len(values)


def score_group(doc: dict, logprobs: list[float], stimulus_set: str) -> dict[str, float]:
    """Metric values of one document given the log-probabilities of its rows (in row order).

    Returns ``acc``, ``acc_<property>``, ``acc_family_<family>`` (only this group's
    family), ``acc_<comparison>`` and ``ctrl_acc_<control>``; and the same with
    ``acc_rel`` when the group has non-referring rows (``base`` and ``diff``).
    """
    by_item = {(row["context_type"], row["kind"]): lp for row, lp in zip(doc["rows"], logprobs, strict=True)}
    comparisons = comparisons_for(stimulus_set)
    metrics = _summaries("acc", comparison_outcomes(by_item, comparisons), comparisons, doc["family"])
    if any(kind == "nonref" for _, kind in by_item):
        metrics |= _summaries("acc_rel", relative_outcomes(by_item, comparisons), comparisons, doc["family"])
    return metrics


def required_items(stimulus_set: str, relative: bool) -> set[tuple[str, str]]:
    """The (context type, continuation kind) rows a group needs for every comparison of ``stimulus_set``; with
    ``relative``, also each context's non-referring row (``acc_rel``)."""
    items = {side for c in comparisons_for(stimulus_set) for side in (c.left, c.right)}
    return items | {(context, "nonref") for context, _ in items} if relative else items


def metric_names(stimulus_set: str, relative: bool) -> list[str]:
    """The metrics every document of a task over ``stimulus_set`` reports (its YAML ``metric_list``).

    Derived by scoring a placeholder group, so the list can never drift from ``score_group``;
    the per-family metrics (:func:`family_metric_names`) are left out.
    """
    items = required_items(stimulus_set, relative)
    placeholder = {"family": "", "rows": [{"context_type": c, "kind": k} for c, k in sorted(items)]}
    return [name for name in score_group(placeholder, [0.0] * len(items), stimulus_set) if "_family_" not in name]


def family_metric_names(families: tuple[str, ...], relative: bool) -> list[str]:
    """``acc_family_<family>`` (and ``acc_rel_family_<family>``) for each family: one family's documents only."""
    prefixes = ("acc", "acc_rel") if relative else ("acc",)
    return [f"{prefix}_family_{family}" for prefix in prefixes for family in families]
