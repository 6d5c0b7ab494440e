"""Aggregations shared by the plugin's task YAMLs (``aggregation: !function lm_eval_ext.metrics.aggregations.<name>``)."""
from __future__ import annotations


def count(values: list) -> int:
    """The number of documents a 0/1 counter marks (prompts skipped or truncated, judge failures): a sum.

    The harness gives no standard error for it, as it should not (a count, not an estimate).
    """
    return int(sum(values))
