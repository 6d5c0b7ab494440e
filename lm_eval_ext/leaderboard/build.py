"""Building the leaderboard site: read and check every record, add the published models, write the pages.

Every record is read and checked before the output directory is touched; a record that breaks
the schema stops the build (it cannot be shown), one that fails the other checks is shown
marked unvalidated.
"""
from __future__ import annotations

from pathlib import Path

from ..published import load_published
from .records import published_entries, read_records, record_entries
from .site import Site, write_site
from .validate import known_task_versions

TITLE = "lm-eval-ext leaderboard"


def build_site(paths: list[str], out: str | Path, *, published: bool = True, title: str | None = None,
               allow_empty: bool = False) -> Site:
    """Build the site from the records named by ``paths`` (files or directories) into ``out``.

    ``published``: list the models each paper evaluated beside the records. ``allow_empty``: a directory
    without records is no error (a new leaderboard's first site).
    """
    taken: set[str] = set()
    entries = record_entries(read_records(paths, allow_empty=allow_empty), taken)
    notes = []
    if published:
        numbers = load_published()
        entries += published_entries(numbers, known_task_versions(), taken)
        notes += numbers.missing
    return write_site(entries, out, title or TITLE, notes)
