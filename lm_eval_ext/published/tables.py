"""Reading the transcribed tables shipped with the package (``published/tables/<benchmark>.csv``).

Each row is one number as the paper prints it, in percent (``paper_percent``), with the table
it is in (``source``) and, optionally, the condition it holds under (``note``).
"""
from __future__ import annotations

import csv
from importlib import resources


def read_table(benchmark: str) -> list[dict[str, str]]:
    """The rows of ``tables/<benchmark>.csv``."""
    text = resources.files(__package__).joinpath("tables", f"{benchmark}.csv").read_text(encoding="utf-8")
    return list(csv.DictReader(text.splitlines()))
