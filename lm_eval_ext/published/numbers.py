"""What a published number is: a model's value of one of our metrics on one of our tasks, and its source."""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

# benchmark key -> title (missing-source sentences start with the title)
TITLES = {"lieder": "LIEDER", "lost_in_the_middle": "Lost in the Middle", "magnifico": "MAGNIFICo",
          "elitr_bench": "ELITR-Bench"}


@dataclass(frozen=True)
class Source:
    """Where a published number comes from: a table of the paper, or a released file at a pinned commit."""

    citation: str  # the paper, e.g. "Zhu & Frank (ACL 2024)"
    locator: str  # "Table 3", or the released file's path
    url: str | None = None  # a released file: its address at the pinned commit
    sha256: str | None = None  # a released file: its checksum (the data layer verified it)

    def text(self) -> str:
        """``<citation>, <locator>``."""
        return f"{self.citation}, {self.locator}"


@dataclass(frozen=True)
class PublishedNumber:
    """One published value, in the units of our metric (accuracies in [0, 1], rel_perf in %)."""

    benchmark: str  # lieder, lost_in_the_middle, magnifico, elitr_bench
    model: str  # as the authors name it
    task: str
    metric: str
    value: float
    source: Source
    note: str = ""  # a condition the value holds under, or how it was derived from the source

    @property
    def key(self) -> str:
        """``<task>/<metric>``, as in a leaderboard record's headline."""
        return f"{self.task}/{self.metric}"


@dataclass
class Published:
    """Published numbers, and a sentence for each source that could not be read (never changed once built)."""

    numbers: list[PublishedNumber] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)

    def for_benchmark(self, benchmark: str) -> Published:
        """Only one benchmark's numbers (and every missing-source sentence that names it)."""
        return Published([n for n in self.numbers if n.benchmark == benchmark],
                         [m for m in self.missing if m.startswith(TITLES.get(benchmark, benchmark))])

    def models(self, task: str | None = None) -> list[str]:
        """The models, in order of first appearance (those with a number on ``task``, when given)."""
        return list(dict.fromkeys(n.model for n in self.numbers if task is None or n.task == task))

    def get(self, model: str, task: str, metric: str) -> PublishedNumber | None:
        """The number of ``model`` on ``task``/``metric``, or None."""
        return self._index.get((model, task, metric))

    def value(self, model: str, task: str, metric: str) -> float | None:
        """The value of :meth:`get`, or None."""
        number = self.get(model, task, metric)
        return number.value if number else None

    def tasks(self) -> list[str]:
        """The tasks with a published number, in order of first appearance."""
        return list(dict.fromkeys(n.task for n in self.numbers))

    @cached_property
    def _index(self) -> dict[tuple[str, str, str], PublishedNumber]:
        return {(n.model, n.task, n.metric): n for n in self.numbers}
