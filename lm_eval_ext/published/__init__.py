"""The models each paper evaluated, with their published numbers, as data.

Every number is a :class:`~.numbers.PublishedNumber`: a model's value of one of our metrics
on one of our tasks, at the granularity the authors published, naming its source (a table of
the paper, or a released file at a pinned commit):

- LIEDER (:mod:`.lieder`): ten models, computed from the authors' per-item result tables, and
  the human baseline;
- Lost in the Middle (:mod:`.litm`): Table 1 and the appendix tables by gold position;
- MAGNIFICo (:mod:`.magnifico`): Table 3 (everything else in the paper is a bar chart);
- ELITR-Bench (:mod:`.elitr`): nine models, computed from the released answers and their GPT-4
  judge scores.

Released files are read through the data layer like every dataset; a source that is not
available is reported (:attr:`Published.missing`), not fatal. The report draws these models
beside the user's and the leaderboard lists them. This package reads nothing above
:mod:`lm_eval_ext.results`.
"""
from __future__ import annotations

from collections.abc import Iterable

from ..data import DataError
from . import elitr, lieder, litm, magnifico
from .numbers import TITLES, Published, PublishedNumber, Source

MODULES = {"lieder": lieder, "lost_in_the_middle": litm, "magnifico": magnifico, "elitr_bench": elitr}

__all__ = ["MODULES", "Published", "PublishedNumber", "Source", "load_published"]


def load_published(benchmarks: Iterable[str] | None = None) -> Published:
    """The published numbers of ``benchmarks`` (default: all four), in that order.

    A benchmark whose released files cannot be read (no mirror, offline, a checksum mismatch)
    contributes a sentence to ``missing`` instead of numbers.
    """
    published = Published()
    for key in (MODULES if benchmarks is None else benchmarks):
        try:
            published.numbers += MODULES[key].numbers()
        except DataError as err:
            published.missing.append(f"{TITLES[key]}: the published results are not shown, because their released "
                                     f"files could not be read: {err}")
    return published
