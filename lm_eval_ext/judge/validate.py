"""Judge validation statistics: how a judge's scores relate to the human ones (judge.md).

For every scorer (the judge under test, the published judges of the file, the silver human
scores) the report has its mean score overall and per answering model; Pearson, Spearman and
Kendall (tau-b) correlations with the gold and with the silver human scores (with p-values),
over the items both scored; and its mean with a 95% confidence interval (Student t) for each
gold-human score bin 1..10. Judge failures are left out (and counted), never scored.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

from scipy import stats

from .records import JudgeRecord
from .usage import per_thousand_text
from .validation_data import GOLD, SILVER, ValidationRow

JUDGE_UNDER_TEST = "judge"
KINDS = {JUDGE_UNDER_TEST: "judge under test", SILVER: "human (mean of 10 crowd workers)", GOLD: "human (expert)"}


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def correlations(xs: Sequence[float | None], ys: Sequence[float | None]) -> dict:
    """Pearson, Spearman and Kendall tau-b over the pairs where both are scored (``n``); a coefficient
    is left out when it is undefined (fewer than 3 pairs, or a constant side)."""
    pairs = [(x, y) for x, y in zip(xs, ys, strict=True) if x is not None and y is not None]
    result: dict = {"n": len(pairs)}
    if len(pairs) < 3 or len({x for x, _ in pairs}) < 2 or len({y for _, y in pairs}) < 2:
        return result
    a, b = [x for x, _ in pairs], [y for _, y in pairs]
    for name, test in (("pearson", stats.pearsonr), ("spearman", stats.spearmanr), ("kendall", stats.kendalltau)):
        outcome = test(a, b)
        result[name] = float(outcome.statistic)
        result[f"{name}_p"] = float(outcome.pvalue)
    return result


def mean_ci95(values: Sequence[float]) -> dict:
    """``n`` and ``mean``, and with 2+ values a 95% Student-t interval ``ci95_low``/``ci95_high``."""
    out: dict = {"n": len(values), "mean": _mean(values)}
    if len(values) >= 2:
        sd = math.sqrt(sum((v - out["mean"]) ** 2 for v in values) / (len(values) - 1))
        half = float(stats.t.ppf(0.975, len(values) - 1)) * sd / math.sqrt(len(values))
        out["ci95_low"], out["ci95_high"] = out["mean"] - half, out["mean"] + half
    return out


def _scorer(name: str, scores: list[float | None], rows: Sequence[ValidationRow], models: list[str]) -> dict:
    gold = [row.scores[GOLD] for row in rows]
    scored = [s for s in scores if s is not None]
    entry: dict = {
        "kind": KINDS.get(name, "published judge"),
        "n_scored": len(scored),
        "n_failures": len(scores) - len(scored),
        "mean": _mean(scored),
        "mean_by_model": {
            model: _mean([s for s, row in zip(scores, rows) if s is not None and row.model == model]) for model in models
        },
    }
    if name != GOLD:
        entry["vs_gold"] = correlations(scores, gold)
        if name != SILVER:
            entry["vs_silver"] = correlations(scores, [row.scores[SILVER] for row in rows])
        entry["by_gold_bin"] = {
            str(level): mean_ci95([s for s, g in zip(scores, gold) if s is not None and g == level])
            for level in range(1, 11)
            if any(s is not None and g == level for s, g in zip(scores, gold))
        }
    return entry


def validation_report(rows: Sequence[ValidationRow], judge_scores: list[float | None] | None = None, *,
                      source: str, judge_record: JudgeRecord | None = None, per_1000_items: dict | None = None) -> dict:
    """The full report (the JSON of ``lm-eval-ext judge validate --json``; keys in docs/judge.md).

    ``judge_scores`` are the scores of the judge under test, one per row (None = judge failure);
    without them only the file's own scorers are reported (``--from-file``). ``per_1000_items`` is what
    judging 1,000 items took (:func:`lm_eval_ext.judge.usage.per_thousand`).
    """
    models = list(dict.fromkeys(row.model for row in rows))
    published = list(dict.fromkeys(name for row in rows for name in row.scores if name not in (GOLD, SILVER)))
    columns: dict[str, list[float | None]] = {}
    if judge_scores is not None:
        columns[JUDGE_UNDER_TEST] = list(judge_scores)
    for name in (*published, SILVER, GOLD):
        columns[name] = [row.scores.get(name) for row in rows]
    report: dict = {
        "source": source,
        "n_items": len(rows),
        "models": models,
        "scorers": {name: _scorer(name, scores, rows, models) for name, scores in columns.items()},
    }
    if judge_record is not None:
        report["judge"] = judge_record.to_dict()
    if per_1000_items is not None:
        report["per_1000_items"] = per_1000_items
    return report


def _fmt(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def summary_lines(report: dict) -> list[str]:
    """A terminal table: means per model, then correlations with gold and silver."""
    models = report["models"]
    scorers = report["scorers"]
    width = max(len(name) for name in scorers) + 2
    lines = [f"Judge validation on {report['n_items']} responses ({report['source']})", ""]
    head = f"{'scorer':<{width}}" + "".join(f"{m[:16]:>18}" for m in models) + f"{'all':>8}{'failures':>10}"
    lines += ["Mean score (1-10) per answering model", head]
    for name, entry in scorers.items():
        lines.append(f"{name:<{width}}" + "".join(f"{_fmt(entry['mean_by_model'][m]):>18}" for m in models)
                     + f"{_fmt(entry['mean']):>8}{entry['n_failures']:>10}")
    lines += ["", "Correlation with human scores (n = items both scored)",
              f"{'scorer':<{width}}{'gold r':>9}{'rho':>7}{'tau':>7}{'silver r':>10}{'rho':>7}{'tau':>7}{'n':>6}"]
    for name, entry in scorers.items():
        if "vs_gold" not in entry:
            continue
        gold, silver = entry["vs_gold"], entry.get("vs_silver", {})
        lines.append(f"{name:<{width}}{_fmt(gold.get('pearson'), 3):>9}{_fmt(gold.get('spearman'), 3):>7}"
                     f"{_fmt(gold.get('kendall'), 3):>7}{_fmt(silver.get('pearson'), 3):>10}"
                     f"{_fmt(silver.get('spearman'), 3):>7}{_fmt(silver.get('kendall'), 3):>7}{gold['n']:>6}")
    if "judge" in report:
        judge = JudgeRecord.from_dict(report["judge"])
        lines += ["", f"judge under test: {judge.judge} = {judge.model} at {judge.base_url_host} "
                      f"(template {judge.template}, temperature {judge.temperature}, top-p {judge.top_p}, "
                      f"seed {judge.seed})"]
    if "per_1000_items" in report:
        lines.append(per_thousand_text(report["per_1000_items"]))
    return lines
