"""Score-only mode: the ELITR-Bench metrics of answers generated elsewhere, per answering model.

Each answer is judged (the judge of :mod:`lm_eval_ext.judge`, concurrent and cached) or, with
``from_file``, keeps the score stored beside it; then the same per-question values and
aggregations as the harness tasks (:mod:`lm_eval_ext.elitr.metrics`) give each model's metrics.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

from ..errors import UserError
from ..judge.records import JudgeRecord
from .metrics import METRICS, aggregate, question_metrics
from .responses import Answer

TABLE_COLUMNS = (("score", "score"), ("who", "score_who"), ("what", "score_what"), ("when", "score_when"),
                 ("howmany", "score_howmany"), ("begin", "score_begin"), ("middle", "score_middle"),
                 ("end", "score_end"), ("several", "score_several"), ("diff", "score_diff"),
                 ("p_middle", "middle_pvalue"), ("failures", "judge_failures"))


class NoStoredScoresError(UserError):
    """``--from-file`` was asked for, but the file has no scores."""


@dataclass
class ModelScores:
    """One answering model's metrics (metric name -> value; undefined ones left out) and answer counts."""

    model: str
    n_answers: int
    n_scored: int
    metrics: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict:
        """The counts and the metrics, as printed with ``--json``."""
        return {"n_answers": self.n_answers, "n_scored": self.n_scored, **self.metrics}


def stored_verdicts(answers: list[Answer], score_field: str) -> list[tuple[float | None, bool]]:
    """(score, failed) per answer from the scores stored in the file."""
    if not any(a.stored_score is not None or a.stored_failure for a in answers):
        raise NoStoredScoresError(f"--from-file: the file has no stored scores (field {score_field!r} for the "
                                  "published format, the `score` metric for a samples file); drop --from-file "
                                  "to judge the answers.")
    return [(a.stored_score, a.stored_failure) for a in answers]


def judged_verdicts(answers: list[Answer], config) -> tuple[list[tuple[float | None, bool]] | None, JudgeRecord]:
    """(score, failed) per answer from the judge, and the judge's record; None for a dry run."""
    from ..judge import JudgeItem
    from ..judge.runner import Judge

    judge = Judge(config)
    try:
        results = judge.run([JudgeItem(a.question, a.response, a.reference) for a in answers], label="score-only")
        record = dataclasses.replace(judge.record, run=judge.stats.to_dict())
    finally:
        judge.close()
    if config.dry_run:
        return None, record
    return [(r.score if r.scored else None, r.failed) for r in results], record


def scores_by_model(answers: list[Answer], verdicts: list[tuple[float | None, bool]]) -> list[ModelScores]:
    """Each model's metrics, models in order of first appearance."""
    per_model: dict[str, list[dict]] = {}
    for answer, (score, failed) in zip(answers, verdicts, strict=True):
        per_model.setdefault(answer.model, []).append(question_metrics(answer.doc, score, failed))
    report = []
    for model, values in per_model.items():
        metrics = {k: v for k, v in aggregate(values).items() if not (isinstance(v, float) and math.isnan(v))}
        report.append(ModelScores(model, n_answers=len(values), n_scored=sum(not math.isnan(v["score"]) for v in values),
                                  metrics={k: metrics[k] for k in METRICS if k in metrics}))
    return report


def format_table(report: list[ModelScores]) -> str:
    """A fixed-width table: one row per model, the metrics in columns (``-`` = undefined)."""
    headers = ["model", *(name for name, _ in TABLE_COLUMNS), "n"]
    rows = []
    for scores in report:
        cells = [scores.model]
        for _, metric in TABLE_COLUMNS:
            value = scores.metrics.get(metric)
            cells.append("-" if value is None else str(value) if metric == "judge_failures"
                         else f"{value:.3f}" if metric == "middle_pvalue" else f"{value:.2f}")
        cells.append(str(scores.n_answers))
        rows.append(cells)
    widths = [max(len(row[i]) for row in [headers, *rows]) for i in range(len(headers))]
    lines = ["  ".join(cell.ljust(w) if i == 0 else cell.rjust(w) for i, (cell, w) in enumerate(zip(row, widths)))
             for row in [headers, *rows]]
    return "\n".join(lines)
