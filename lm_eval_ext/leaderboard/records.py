"""Reading leaderboard records and turning records and published numbers into the site's rows."""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import UserError
from ..published import Published
from .validate import check_record, not_comparable_by_task


class LeaderboardError(UserError):
    """Records that cannot be read or shown."""


@dataclass
class Entry:
    """One row of the leaderboard: a submitted record, or a model a paper evaluated."""

    slug: str  # its page name
    label: str
    values: dict[str, float]  # "<task>/<metric>" -> value
    versions: dict[str, str | None]  # task -> version (published: this plugin's)
    record: dict | None = None  # None for a published model
    path: Path | None = None
    problems: list[str] = field(default_factory=list)  # why the record is unvalidated
    not_comparable: list[str] = field(default_factory=list)  # why its numbers cannot stand beside the papers'
    apart: frozenset[str] = frozenset()  # the tasks (and groups) those reasons concern
    sources: dict[str, str] = field(default_factory=dict)  # published: "<task>/<metric>" -> source text
    benchmark: str | None = None  # published: the benchmark whose paper it is from
    citation: str | None = None  # published: the paper

    @property
    def published(self) -> bool:
        """A model a paper evaluated, not a submitted record."""
        return self.record is None

    @property
    def origin(self) -> str:
        """Where the row comes from: the paper, or a record and its export date."""
        return self.citation if self.record is None else f"record, exported {self.record['exported_at'][:10]}"

    @property
    def comparable(self) -> bool:
        """A published model, or a record whose numbers stand beside the papers' (:func:`.validate.not_comparable`)."""
        return not self.not_comparable

    def comparable_on(self, task: str) -> bool:
        """Whether the entry's numbers of ``task`` stand beside the papers' (no reason concerns it)."""
        return task not in self.apart

    @property
    def status(self) -> str:
        """``published``, or the record's ``partial`` / ``truncated`` / ``complete``."""
        if self.record is None:
            return "published"
        status = self.record["status"]
        return "partial" if status["partial"] else "truncated" if status["truncated"] else "complete"


def _slug(label: str, taken: set[str]) -> str:
    base = re.sub(r"[^A-Za-z0-9._-]+", "_", label).strip("_.") or "model"
    slug, number = base, 2
    while slug.lower() in taken:  # case-insensitive file systems
        slug, number = f"{base}-{number}", number + 1
    taken.add(slug.lower())
    return slug


def read_records(paths: list[str], allow_empty: bool = False) -> list[tuple[Path, dict]]:
    """Every record file named by ``paths`` (files, or directories searched for ``*.json``), parsed.
    ``allow_empty``: a directory without one is no error."""
    files = []
    for name in paths:
        path = Path(name)
        if path.is_dir():
            found = sorted(p for p in path.rglob("*.json"))
            if not found and not allow_empty:
                raise LeaderboardError(f"No *.json record under {path}. Give the files that `lm-eval-ext export "
                                       "--format leaderboard` wrote, or their directory.")
            files += found
        elif path.is_file():
            files.append(path)
        else:
            raise LeaderboardError(f"{path} does not exist. Give the leaderboard records (JSON files written by "
                                   "`lm-eval-ext export --format leaderboard`) or a directory holding them.")
    records = []
    for path in dict.fromkeys(files):
        try:
            records.append((path, json.loads(path.read_text(encoding="utf-8"))))
        except (OSError, ValueError) as err:
            raise LeaderboardError(f"Cannot read the record {path}: {err}. Give JSON files written by "
                                   "`lm-eval-ext export --format leaderboard`.") from None
    return records


def record_entries(records: list[tuple[Path, dict]], taken: set[str]) -> list[Entry]:
    """One entry per record; a record that breaks the schema cannot be shown and stops the build."""
    entries = []
    for path, record in records:
        problems = check_record(record)
        schema = [p for p in problems if p.startswith("schema: ")]
        if schema:
            raise LeaderboardError(f"{path} is not a valid leaderboard record ({'; '.join(schema[:3])}). Check it "
                                   "with `lm-eval-ext leaderboard validate` and export it again with this version "
                                   "of lm-eval-ext.")
        values = {key: value for benchmark in record["benchmarks"].values() for key, value in benchmark["headline"].items()}
        reasons = not_comparable_by_task(record)
        entries.append(Entry(_slug(record["model"]["label"], taken), record["model"]["label"], values,
                             dict(record["versions"]["tasks"]), record, path, problems,
                             [reason for _, reason in reasons], _apart(record, reasons)))
    return entries


def _apart(record: dict, reasons: list[tuple[tuple[str, ...], str]]) -> frozenset[str]:
    """The tasks the reasons concern, and the groups of their benchmarks (a group aggregates its tasks)."""
    tasks = {task for concerned, _ in reasons for task in concerned}
    benchmarks = {record["tasks"][task]["benchmark"] for task in tasks if task in record["tasks"]}
    return frozenset(tasks | {task for task, entry in record["tasks"].items()
                              if entry["is_group"] and entry["benchmark"] in benchmarks})


def published_entries(published: Published, versions: dict[str, str], taken: set[str]) -> list[Entry]:
    """One entry per benchmark and published model (two papers' "GPT-3.5-Turbo" are two entries); its numbers
    are for this plugin's task versions."""
    entries = []
    for benchmark in dict.fromkeys(n.benchmark for n in published.numbers):
        mine = published.for_benchmark(benchmark)
        for model in mine.models():
            numbers = [n for n in mine.numbers if n.model == model]
            entries.append(Entry(_slug(f"published-{benchmark}-{model}", taken), model, {n.key: n.value for n in numbers},
                                 {n.task: versions.get(n.task) for n in numbers},
                                 sources={n.key: n.source.text() + (f" ({n.note})" if n.note else "") for n in numbers},
                                 benchmark=benchmark, citation=numbers[0].source.citation))
    return entries
