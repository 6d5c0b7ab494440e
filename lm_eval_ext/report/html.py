"""The report page: one self-contained HTML file (figures embedded as PNG data, no script, no external file).

The page is ``templates/html/report/page.html.j2``; this module gives it the sections' data: each
figure's PNG (base64) and the relative links to its SVG/PNG files, each table's cells as shown (the
CSV beside the page keeps full precision). The links are plain relative links: the page renders
without the files.
"""
from __future__ import annotations

import base64
import math
from pathlib import Path

from .blocks import Figure, Note, Section, Table
from .pages import render
from .write import FigureFiles

# Tables longer than this are folded (a <details> element; no script needed).
FOLD_ROWS = 30
# Text cells longer than this wrap (at a readable width); shorter ones stay on one line.
LONG_CELL = 40


def _format(column: str, value) -> tuple[str, bool]:
    """(text, is_number) of a table cell as shown in the page (the CSV keeps full precision)."""
    if value is None:
        return "", False
    if isinstance(value, bool):
        return ("yes" if value else "no"), False
    if isinstance(value, int):
        return str(value), True
    if isinstance(value, float):
        if math.isnan(value):
            return "", False
        if column.startswith("p_") or "pvalue" in column:
            return f"{value:.3g}", True
        return f"{value:.4f}", True
    return str(value), False


def _cell(column: str, value) -> dict:
    text, number = _format(column, value)
    return {"text": text, "number": number, "long": len(text) > LONG_CELL}


def _table(table: Table, csv: Path, out: Path) -> dict:
    return {"kind": "table", "title": table.title, "caption": table.caption, "csv_href": csv.relative_to(out).as_posix(),
            "columns": table.columns, "folded": len(table.rows) > FOLD_ROWS,
            "rows": [[_cell(column, value) for column, value in zip(table.columns, row)] for row in table.rows]}


def _figure(figure: Figure, files: FigureFiles, out: Path) -> dict:
    return {"kind": "figure", "title": figure.title, "caption": figure.caption,
            "png_data": base64.b64encode(files.png.read_bytes()).decode("ascii"),
            "png_href": files.png.relative_to(out).as_posix(), "svg_href": files.svg.relative_to(out).as_posix()}


def section_data(section: Section, files: dict[int, object], out: Path) -> dict:
    """What the page shows of one section; ``files`` maps ``id(block)`` to where its figure/table was written."""
    blocks = []
    for block in section.blocks:
        if isinstance(block, Figure):
            blocks.append(_figure(block, files[id(block)], out))
        elif isinstance(block, Table):
            blocks.append(_table(block, files[id(block)], out))
        elif isinstance(block, Note):
            blocks.append({"kind": "note", "text": block.text})
    return {"key": section.key, "title": section.title, "intro": section.intro, "blocks": blocks}


def render_page(title: str, subtitle: str, sections: list[dict], banners: list[tuple[str, str]] = ()) -> str:
    """The whole page; ``sections`` as :func:`section_data` gives them, in display order, ``banners``
    ``[(kind, text)]`` (kind ``partial`` or ``truncated``) shown above everything, one per run."""
    return render("report/page.html.j2", title=title, subtitle=subtitle, sections=sections,
                  banners=[{"kind": kind, "text": text} for kind, text in banners])
