"""ELITR-Bench metrics: per-question values and their aggregations (the harness and score-only mode share them).

The harness collects, per metric name, the per-question values and calls that metric's
aggregation on the list; :func:`aggregate` does the same outside the harness (score-only
mode), so both report the same numbers from the same answers and scores.

Per question (judge scores are on the 1-10 scale):

- ``score``: the judge's score; NaN when the judge could not score the answer (or did not run:
  a dry run), so that a task with unjudged answers has a NaN mean, never a mean over the
  survivors presented as its score (``judge_failures`` says how many; judging can be resumed);
- ``score_<type>`` (who, what, when, howmany) and ``score_<position>`` (begin, middle, end,
  several): the score, emitted only under the question's own type and answer position, so their
  means are over those questions alone;
- ``score_diff``: the score of a differentiating question (its text differs between the QA and
  Conv sets), emitted only for those;
- ``middle_pvalue``: the pair (1 if the answer is in the middle else 0, score); aggregated into the p-value of
  the one-tailed Welch t-test "middle-position questions score lower than all other questions"
  (NaN when a score is NaN);
- ``judge_failures``: 1 when the judge failed on the answer, else 0; aggregated as a count;
- ``prompts_truncated``: 1 when the prompt's transcript was shortened to fit the model, else 0; a count.

``score``, ``middle_pvalue``, ``judge_failures`` and ``prompts_truncated`` are reported by every
question (the task YAML's ``metric_list``); the others by some questions only (:data:`SUBSET_METRICS`).
"""
from __future__ import annotations

import math
import warnings
from collections import defaultdict
from collections.abc import Iterable

from lm_eval.api.metrics import mean

from ..metrics.aggregations import count
from .data import ANSWER_POSITIONS, QUESTION_TYPES

TYPE_METRICS = tuple(f"score_{t}" for t in QUESTION_TYPES)
POSITION_METRICS = tuple(f"score_{p}" for p in ANSWER_POSITIONS.values())
SUBSET_METRICS = (*TYPE_METRICS, *POSITION_METRICS, "score_diff")
MEAN_METRICS = ("score", *SUBSET_METRICS)
METRICS = (*MEAN_METRICS, "middle_pvalue", "judge_failures", "prompts_truncated")


def middle_pvalue(pairs: list[tuple[int, float]]) -> float:
    """One-tailed Welch t-test p-value of "mean score of middle-position questions < mean of all others".

    ``pairs`` are (1 if the answer is in the middle else 0, score). NaN when either group has fewer than two scores (the test
    is undefined), as scipy reports for degenerate samples.
    """
    from scipy.stats import ttest_ind

    middle = [score for is_middle, score in pairs if is_middle]
    others = [score for is_middle, score in pairs if not is_middle]
    if len(middle) < 2 or len(others) < 2 or any(math.isnan(score) for _, score in pairs):
        return math.nan
    with warnings.catch_warnings():  # identical scores (zero variance) give NaN, plus a precision warning
        warnings.simplefilter("ignore", RuntimeWarning)
        return float(ttest_ind(middle, others, equal_var=False, alternative="less").pvalue)


AGGREGATIONS = {**dict.fromkeys(MEAN_METRICS, mean), "middle_pvalue": middle_pvalue,
                "judge_failures": count, "prompts_truncated": count}


def question_metrics(doc: dict, score: float | None, failed: bool, truncated: bool | None = None) -> dict:
    """The metric values of one answered question (see the module docstring).

    ``score`` is None when the answer has no score: a judge failure (``failed``), or not judged
    at all (a dry run); either way its score values are NaN. ``truncated`` None = not known
    (score-only mode), so the counter is left out.
    """
    value = math.nan if score is None else score
    values: dict = {"score": value, f"score_{doc['question_type']}": value,
                    f"score_{ANSWER_POSITIONS[doc['answer_position']]}": value,
                    "middle_pvalue": (int(doc["answer_position"] == "M"), value), "judge_failures": int(failed)}
    if doc["differentiating"]:
        values["score_diff"] = value
    if truncated is not None:
        values["prompts_truncated"] = int(truncated)
    return values


def aggregate(per_question: Iterable[dict]) -> dict[str, float]:
    """Every metric that has values, aggregated like the harness does (metrics without values are left out)."""
    collected: dict[str, list] = defaultdict(list)
    for values in per_question:
        for name, value in values.items():
            collected[name].append(value)
    return {name: AGGREGATIONS[name](collected[name]) for name in METRICS if collected.get(name)}
