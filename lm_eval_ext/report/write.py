"""Writing a section's figures (PNG + SVG) and tables (CSV) into the report directory (atomically)."""
from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from pathlib import Path

from ..atomic_write import write_text
from .blocks import Figure, Table
from .figures import save

FIGURES_DIR = "figures"
TABLES_DIR = "tables"


@dataclass(frozen=True)
class FigureFiles:
    """Where a figure was written."""

    png: Path
    svg: Path


def write_figure(figure: Figure, out: Path) -> FigureFiles:
    """Save ``figures/<name>.png`` and ``figures/<name>.svg`` under ``out``."""
    png, svg = save(figure.figure, out / FIGURES_DIR, figure.name)
    return FigureFiles(png, svg)


def _cell(value) -> str:
    # repr() of a float is the shortest text that reads back as the same float.
    if value is None:
        return ""
    if isinstance(value, float):
        return repr(value)
    return str(value)


def write_table(table: Table, out: Path) -> Path:
    """Save ``tables/<name>.csv`` under ``out`` (header row, then one line per row), atomically."""
    text = io.StringIO(newline="")
    writer = csv.writer(text)
    writer.writerow(table.columns)
    writer.writerows([_cell(value) for value in row] for row in table.rows)
    return write_text(out / TABLES_DIR / f"{table.name}.csv", text.getvalue())
