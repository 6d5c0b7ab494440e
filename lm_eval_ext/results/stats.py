"""Paired significance tests used by the report sections."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class PairedTest:
    """An exact test of "after > before" over paired units.

    ``up`` units improved, ``down`` got worse, ``ties`` did not change. The p-values
    come from the binomial distribution of ``up`` among the ``up + down`` discordant
    units under p = 1/2: McNemar's exact test when each unit's outcome is 0/1, the
    exact sign test when it is a score. With no discordant unit the data are exactly
    what the null hypothesis expects, and both p-values are 1.
    """

    n: int
    up: int
    down: int
    ties: int
    p_two_sided: float
    p_greater: float


def paired_exact_test(before: Sequence[float], after: Sequence[float]) -> PairedTest:
    """Exact McNemar / sign test of ``after`` > ``before`` (same units, same order)."""
    if len(before) != len(after):
        raise ValueError(f"paired test needs as many 'after' as 'before' values ({len(after)} != {len(before)})")
    up = sum(a > b for b, a in zip(before, after))
    down = sum(a < b for b, a in zip(before, after))
    discordant = up + down
    if discordant == 0:
        return PairedTest(len(before), 0, 0, len(before), 1.0, 1.0)
    from scipy.stats import binomtest  # here: importing scipy.stats takes over a second, and most commands need none

    return PairedTest(
        n=len(before),
        up=up,
        down=down,
        ties=len(before) - discordant,
        p_two_sided=float(binomtest(up, discordant, 0.5, alternative="two-sided").pvalue),
        p_greater=float(binomtest(up, discordant, 0.5, alternative="greater").pvalue),
    )
