"""What LIEDER's sample logs give beyond the results file: the human-baseline comparison and the novelty test.

Both the report and the leaderboard export call these functions, so that the two always
agree.

Human baseline (``human/human_accuracy.csv``, read through the data layer): one 0/1 judgement
per noun x family x comparison for two of the three sentence families (affirmative/negation,
managed/failed) of the base set. A comparison's human accuracy is the mean over its rows; a
property's (or the overall one) the mean over the rows of the informative comparisons tagged
with it (the two controls never count). The model is compared on the same two families, from
its per-group sample log (:func:`family_mean`).

Novelty test (Experiment 1 vs 2): ``lieder_diff`` differs from ``lieder_base`` only in its
pos_pos contexts ("a different dog"), so only the 7 informative comparisons with a pos_pos
side (:data:`POS_POS`) can change. Units are the noun x family groups present in both sets
(48). For each of the 7 comparisons a group's outcome is 0/1 and the test is McNemar's exact
test over groups; for the 7 together a group's outcome is its accuracy over them and the test
is the exact sign test over groups (McNemar's test generalised to scores). p-values are
two-sided and one-sided for "diff > base" (:func:`lm_eval_ext.results.stats.paired_exact_test`).
"""
from __future__ import annotations

import csv
from dataclasses import dataclass

from ..data import resolve_file
from ..lieder.comparisons import CONTROLS, INFORMATIVE, PROPERTIES, Comparison
from .stats import PairedTest, paired_exact_test

HUMAN_FILE = "human/human_accuracy.csv"
# The informative comparisons that the diff set can change: those with a pos_pos side.
POS_POS = tuple(c for c in INFORMATIVE if "pos_pos" in (c.left[0], c.right[0]))
# "all" = the headline accuracy acc, then one scope per property
SCOPES = ("all", *PROPERTIES)
ALL_POS_POS = f"pos_pos ({len(POS_POS)} comparisons)"


def comparison_metric(c: Comparison, relative: bool = False) -> str:
    """The task's metric name of one comparison (``ctrl_`` for the controls, ``acc_rel`` for the relative metric)."""
    return f"{'ctrl_' if c.control else ''}acc{'_rel' if relative else ''}_{c.name}"


def scope_metric(scope: str, relative: bool = False) -> str:
    """``acc`` for scope "all", else ``acc_<property>`` (``acc_rel...`` for the relative metric)."""
    base = "acc_rel" if relative else "acc"
    return base if scope == "all" else f"{base}_{scope}"


def scope_comparisons(scope: str) -> tuple[Comparison, ...]:
    """The informative comparisons behind ``acc`` (scope "all") or ``acc_<property>``."""
    return INFORMATIVE if scope == "all" else tuple(c for c in INFORMATIVE if scope in c.properties)


@dataclass
class HumanBaseline:
    """Human judgements per comparison: {comparison name: (number correct, number of judgements)}."""

    families: tuple[str, ...]
    counts: dict[str, tuple[int, int]]

    def accuracy(self, comparisons: tuple[Comparison, ...]) -> float | None:
        """Mean over the judgements of ``comparisons`` (None when there are none)."""
        correct = sum(self.counts[c.name][0] for c in comparisons if c.name in self.counts)
        total = sum(self.counts[c.name][1] for c in comparisons if c.name in self.counts)
        return correct / total if total else None

    def scopes(self) -> dict[str, float | None]:
        """Human accuracy per scope: ``acc`` and ``acc_<property>``."""
        return {scope_metric(scope): self.accuracy(scope_comparisons(scope)) for scope in SCOPES}


def read_human_baseline() -> HumanBaseline:
    """Read ``human/human_accuracy.csv`` (authors' comparison notation) through the data layer.

    Raises :class:`lm_eval_ext.data.DataError` when the file is not available.
    """
    by_code = {c.code: c for c in INFORMATIVE + CONTROLS}
    counts: dict[str, list[int]] = {}
    families: dict[str, None] = {}
    with open(resolve_file("lieder", HUMAN_FILE), encoding="utf-8", newline="") as handle:
        for row in csv.DictReader(handle):
            name = by_code[row["type"]].name
            tally = counts.setdefault(name, [0, 0])
            tally[0] += int(row["correct"])
            tally[1] += 1
            families[row["sent_type"]] = None
    return HumanBaseline(tuple(families), {name: (c, n) for name, (c, n) in counts.items()})


def family_mean(samples: list[dict] | None, metric: str, families: tuple[str, ...]) -> float | None:
    """Mean of a per-group metric over the logged groups of ``families`` (None without sample logs)."""
    if samples is None:
        return None
    values = [s[metric] for s in samples if s["doc"]["family"] in families and metric in s]
    return sum(values) / len(values) if values else None


@dataclass(frozen=True)
class NoveltyTest:
    """One base vs diff test: a metric (``acc`` or ``acc_rel``) over one scope of pos_pos comparisons."""

    metric: str
    scope: str  # ALL_POS_POS or a comparison name
    base_acc: float
    diff_acc: float
    test: PairedTest


def novelty_tests(base_samples: list[dict], diff_samples: list[dict]) -> list[NoveltyTest]:
    """The base vs diff tests of one model from its two sample logs: for ``acc`` and (when logged)
    ``acc_rel``, the 7 pos_pos comparisons together, then each alone. Empty when no group is in both."""
    base = {s["doc"]["group"]: s for s in base_samples}
    diff = {s["doc"]["group"]: s for s in diff_samples}
    groups = [g for g in base if g in diff]
    found = []
    for relative in (False, True):
        names = [comparison_metric(c, relative) for c in POS_POS]
        if not groups or not all(name in base[g] and name in diff[g] for g in groups for name in names):
            continue
        scopes = [(ALL_POS_POS, names)] + [(c.name, [name]) for c, name in zip(POS_POS, names)]
        for scope, scope_names in scopes:
            def score(sample: dict, scope_names=scope_names) -> float:
                return sum(sample[name] for name in scope_names) / len(scope_names)

            before, after = [score(base[g]) for g in groups], [score(diff[g]) for g in groups]
            found.append(NoveltyTest("acc_rel" if relative else "acc", scope, sum(before) / len(before),
                                     sum(after) / len(after), paired_exact_test(before, after)))
    return found
