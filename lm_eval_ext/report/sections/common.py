"""What the sections share: a task of a model's run, which run of a task is shown, and how published models are
named and drawn."""
from __future__ import annotations

from dataclasses import dataclass

from ...published import Published, PublishedNumber
from ...results.load import Model, Run
from ...results.status import COUNTS, PARTIAL

# the source column of a row from the user's results
OWN_SOURCE = "results file"


@dataclass
class TaskRun:
    """One task of one model's run, as a report section shows it (sections extend it with their facets)."""

    model: Model
    index: int  # the model's position among the models (its colour)
    task: str
    run: Run

    @property
    def metrics(self) -> dict[str, float]:
        """The task's metrics in this run."""
        return self.run.metrics(self.task)


def documents_scored(run: Run, task: str) -> int | None:
    """How many documents of ``task`` the run scored: the harness's effective count (a group: its subtasks'),
    less the items the task counted as not scored (prompts skipped, items excluded, judge failures); None when
    the results file does not say."""
    subtasks = (run.data.get("group_subtasks") or {}).get(task)
    if subtasks:
        counts = [documents_scored(run, subtask) for subtask in subtasks]
        return None if None in counts else sum(counts)
    effective = ((run.data.get("n-samples") or {}).get(task) or {}).get("effective")
    if not isinstance(effective, int):
        return None
    metrics = run.metrics(task)
    return effective - int(sum(metrics.get(name) or 0 for name, kind, _ in COUNTS if kind == PARTIAL))


def most_complete(runs: list[Run], task: str) -> Run | None:
    """The run (of ``runs``, oldest first) a report shows for ``task``: the one that scored the most documents,
    the newest of equals."""
    if not runs:
        return None
    return max(reversed(runs), key=lambda run: documents_scored(run, task) or -1)


def shown_run(model: Model, task: str) -> Run | None:
    """The model's run a report shows for ``task`` (:func:`most_complete` of the runs that have it)."""
    return most_complete(model.runs_with(task), task)


def published_label(model: str) -> str:
    """How a published model is named in figures and tables."""
    return f"{model} (published)"


def source_text(number: PublishedNumber | None) -> str | None:
    """A table's source cell for a published number (with its note)."""
    if number is None:
        return None
    return number.source.text() + (f" ({number.note})" if number.note else "")


def published_notes(published: Published | None) -> list[str]:
    """The sentences a section shows about its published numbers (sources that could not be read)."""
    return list(published.missing) if published else []


def citations(numbers: list[PublishedNumber]) -> str:
    """The distinct sources of ``numbers``, for a caption: ``citation: locator, locator``."""
    by_citation: dict[str, dict[str, None]] = {}
    for number in numbers:
        by_citation.setdefault(number.source.citation, {})[number.source.locator] = None
    return "; ".join(f"{citation}: {', '.join(_shorten(list(locators)))}" for citation, locators in by_citation.items())


def _shorten(locators: list[str]) -> list[str]:
    # many released files of one folder are summarised by the folder
    if len(locators) <= 3:
        return locators
    folders = list(dict.fromkeys(locator.rsplit("/", 1)[0] + "/" if "/" in locator else locator for locator in locators))
    return [f"{folder}... ({sum(loc.startswith(folder) for loc in locators)} files)" for folder in folders]
