"""Per-document metric values of a MAGNIFICo task.

- ``ex`` / ``em``: execution accuracy and exact match on the task's own items (novel
  items; for a base task, its base items); ``ex_base``: execution accuracy on the base
  items a novel task holds.
- ``rel_perf``: per interpretation (or pair), ``min(EX_novel / EX_base, 1) x 100``,
  interpretations with ``EX_base`` < 5% left out, then the mean over those kept
  (:mod:`lm_eval_ext.metrics.relative`); ``rel_perf_<category>`` the same over one
  category (single-word tasks); ``interp_left_out`` how many were left out.

Every document reports ``rel_perf`` and ``interp_left_out`` in a novel task, ``ex`` and ``em``
in a base task (the task YAMLs' ``metric_list``); ``ex``, ``em``, ``ex_base`` and
``rel_perf_<category>`` of a novel task are reported by some documents only (the task's
``subset_metrics``).
"""
from __future__ import annotations

from .documents import BASE, NOVEL


def metric_values(doc: dict, record: dict, with_base: bool, per_category: bool) -> dict:
    """The metric values of one scored document, given its execution record."""
    values: dict = {}
    if doc["role"] == NOVEL or not with_base:
        values["ex"] = record["ex"]
        values["em"] = record["em"]
    else:
        values["ex_base"] = record["ex"]
    if with_base:
        item = {"key": doc["interpretation"], "side": NOVEL if doc["role"] == NOVEL else BASE, "score": record["ex"]}
        values["rel_perf"] = item
        values["interp_left_out"] = item
        if per_category:
            values[f"rel_perf_{doc['category']}"] = item
    return values
