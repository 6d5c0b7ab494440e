"""Group scores through the harness's own group aggregation (``Group.aggregate``), with numbers computed by hand.

The harness weights each member task of a ``weight_by_size`` group by the task's largest per-metric document
count, and warns for every task whose metrics were scored on different numbers of documents. The plugin's
tasks report some metrics on a subset of their documents (``ExtTask.subset_metrics``, skipped prompts), so
the plugin's size-weighted groups must aggregate only metrics that every document reports; then the group
score is the mean over every document, and the harness's warning is not true for them (and is not shown).
"""
from __future__ import annotations

import logging
from pathlib import Path

import pytest
import yaml
from lm_eval.api.group import Group
from lm_eval.api.task import ConfigurableTask

from lm_eval_ext import boundary

TASKS = Path(__file__).resolve().parents[1] / "tasks"


class _Leaf(ConfigurableTask):
    """A member task of a group: only its name (Group.aggregate reads the metrics from its argument)."""

    def __init__(self, name: str) -> None:
        self._leaf = name

    @property
    def task_name(self) -> str:
        return self._leaf

    @property
    def _qualified_name(self) -> str:  # what lm-eval 0.5's Group.add keys a member by (its config's, on a real task)
        return self._leaf


def _group(yaml_file: str, members: dict[str, dict]) -> dict:
    """The plugin group's aggregated metrics over ``members`` (task -> its aggregated metrics, as the harness has
    them: ``<metric>,<filter>`` values and ``sample_len``, the task's largest per-metric count)."""
    config = yaml.safe_load((TASKS / yaml_file).read_text())
    group = Group.from_config({k: v for k, v in config.items() if k != "task"})
    for name in members:
        group.add(_Leaf(name))
    return group.aggregate(members)


def test_elitr_group_score_is_the_mean_over_every_answer():
    # task A: three questions scored 2, 4, 9 (one "who" question: score_who on 1 document); task B: one scored 8
    a = {"score,judge": 5.0, "score_who,judge": 2.0, "sample_len": 3}
    b = {"score,judge": 8.0, "sample_len": 1}
    result = _group("elitr_bench/elitr_bench.yaml", {"elitr_bench_qa_dev_st": a, "elitr_bench_qa_dev_mt": b})
    assert result["score,judge"] == (2 + 4 + 9 + 8) / 4  # 5.75: every answer counts once
    assert result["sample_count"] == {"score,judge": 4}


def test_magnifico_group_is_the_plain_mean_of_its_settings():
    # ex is over the novel items only: A has 2 (1, 0) of 5 documents, B 3 (1, 1, 1) of 3
    a = {"ex,none": 0.5, "ex_base,none": 1.0, "rel_perf,none": 0.5, "sample_len": 5}
    b = {"ex,none": 1.0, "ex_base,none": 1.0, "rel_perf,none": 1.0, "sample_len": 3}
    result = _group("magnifico/magnifico.yaml", {"magnifico_direct_plausible": a, "magnifico_fewshot_plausible": b})
    assert result["ex,none"] == 0.75 and result["rel_perf,none"] == 0.75  # each setting counts once


def test_lieder_group_weights_two_sets_of_equal_size_equally():
    a = {"acc,none": 0.25, "sample_len": 48}
    b = {"acc,none": 0.75, "sample_len": 48}
    assert _group("lieder/lieder.yaml", {"lieder_base": a, "lieder_diff": b})["acc,none"] == 0.5


def test_size_weighted_groups_aggregate_only_metrics_every_document_reports():
    index = boundary.task_index(include_defaults=False)
    tasks, weighted = boundary.plugin_groups_weighting()
    assert weighted  # lieder and elitr_bench weight by size
    for task, metrics in weighted.items():
        every_document = {m["metric"] for m in index[task].config.get("metric_list") or []}
        assert metrics <= every_document, (task, metrics - every_document)


def _warning(task: str, counts: str) -> logging.LogRecord:
    message = (f"[{task}] Metrics were not scored on the same number of documents ({counts}). Each metric was "
               "aggregated over only the documents that produced it; ...")
    return logging.LogRecord("lm_eval.evaluator_utils", logging.WARNING, __file__, 1, message, None, None)


@pytest.mark.parametrize(("task", "counts", "shown"), [
    # subset metrics of plugin tasks: no plugin group weights them
    ("elitr_bench_qa_dev_st", "score,judge=6, score_who,judge=2, score_diff,judge=1", False),
    ("litm_qa_20docs", "acc,none=3, acc_pos_0,none=1, prompts_skipped,none=3", False),
    ("magnifico_direct_plausible", "ex,none=4, ex_base,none=4, rel_perf,none=8", False),
    # a metric the elitr_bench group weights by size, scored on fewer documents: over-weighted, so shown
    ("elitr_bench_qa_dev_st", "score,judge=4, judge_failures,judge=6", True),
    # not a plugin task: the harness's warning as it is
    ("arc_easy", "acc,none=3, acc_norm,none=2", True),
])
def test_the_unequal_counts_warning_is_shown_only_where_true(task, counts, shown):
    boundary.install_log_filter()
    logger = logging.getLogger("lm_eval.evaluator_utils")
    assert bool(logger.filter(_warning(task, counts))) is shown
    assert logger.filter(logging.LogRecord("lm_eval.evaluator_utils", logging.WARNING, __file__, 1, "other", None,
                                           None))
