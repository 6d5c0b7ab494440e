"""What the sections share: a task of a model's run, which run of a task is shown, and how published models are
named and drawn."""
from __future__ import annotations

from dataclasses import dataclass

from ...published import Published, PublishedNumber
from ...results.load import Model, Run

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
