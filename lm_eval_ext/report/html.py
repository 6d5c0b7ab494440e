"""The report page: one self-contained HTML file (figures embedded as PNG data, no script, no external file).

Links to the SVG/PNG/CSV files beside the page are plain relative links: the page
renders without them.
"""
from __future__ import annotations

import base64
import html
import math
from pathlib import Path

from .blocks import Figure, Note, Section, Table
from .write import FigureFiles

# Tables longer than this are folded (a <details> element; no script needed).
FOLD_ROWS = 30

STYLE = """
body { font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 2em auto; max-width: 75em;
       padding: 0 1.5em; color: #1f2328; line-height: 1.45; }
h1 { font-size: 1.8em; margin-bottom: .2em; } h2 { border-bottom: 1px solid #d0d7de; padding-bottom: .2em; margin-top: 2em; }
h3 { font-size: 1.1em; margin-top: 1.6em; }
.meta, figcaption, .caption { color: #57606a; font-size: .9em; }
nav ul { columns: 2; }
figure { margin: 1.5em 0; } figure img { max-width: 100%; height: auto; border: 1px solid #eaeef2; }
table { border-collapse: collapse; font-size: .85em; margin: .5em 0; }
th, td { border: 1px solid #d0d7de; padding: .25em .6em; text-align: left; vertical-align: top; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
th { background: #f6f8fa; }
.note { background: #fff8c5; border-left: 4px solid #d4a72c; padding: .5em 1em; }
.scroll { overflow-x: auto; }
.banner { padding: .6em 1em; margin: .4em 0; border-radius: 4px; border: 1px solid; }
.banner.partial { background: #ffebe9; border-color: #cf222e; }
.banner.truncated { background: #fff8c5; border-color: #d4a72c; }
.banner strong { text-transform: uppercase; margin-right: .5em; }
"""


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


def _table(table: Table, csv_href: str) -> str:
    head = "".join(f"<th>{html.escape(column)}</th>" for column in table.columns)
    body = []
    for row in table.rows:
        cells = []
        for column, value in zip(table.columns, row):
            text, number = _format(column, value)
            cells.append(f'<td class="num">{html.escape(text)}</td>' if number else f"<td>{html.escape(text)}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    grid = f'<div class="scroll"><table><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table></div>'
    caption = (f'<p class="caption">{html.escape(table.caption)} '
               f'<a href="{html.escape(csv_href)}">CSV</a></p>')
    title = f"<h3>{html.escape(table.title)}</h3>"
    if len(table.rows) > FOLD_ROWS:
        return (f"{title}{caption}<details><summary>{len(table.rows)} rows</summary>{grid}</details>")
    return title + caption + grid


def _figure(figure: Figure, files: FigureFiles, out: Path) -> str:
    data = base64.b64encode(files.png.read_bytes()).decode("ascii")
    png, svg = (html.escape(p.relative_to(out).as_posix()) for p in (files.png, files.svg))
    return (
        f"<figure><h3>{html.escape(figure.title)}</h3>"
        f'<img src="data:image/png;base64,{data}" alt="{html.escape(figure.title)}">'
        f"<figcaption>{html.escape(figure.caption)} "
        f'<a href="{svg}">SVG</a> · <a href="{png}">PNG</a></figcaption></figure>'
    )


def render_section(section: Section, files: dict[int, object], out: Path) -> str:
    """HTML of one section; ``files`` maps ``id(block)`` to where its figure/table was written."""
    parts = [f'<section id="{html.escape(section.key)}"><h2>{html.escape(section.title)}</h2>',
             f"<p>{html.escape(section.intro)}</p>"]
    for block in section.blocks:
        if isinstance(block, Figure):
            parts.append(_figure(block, files[id(block)], out))
        elif isinstance(block, Table):
            parts.append(_table(block, files[id(block)].relative_to(out).as_posix()))
        elif isinstance(block, Note):
            parts.append(f'<p class="note">{html.escape(block.text)}</p>')
    parts.append("</section>")
    return "".join(parts)


def render_page(title: str, subtitle: str, sections_html: list[tuple[str, str, str]],
                banners: list[tuple[str, str]] = ()) -> str:
    """The whole page; ``sections_html`` is ``[(anchor, heading, html)]`` in display order, ``banners``
    ``[(kind, text)]`` (kind ``partial`` or ``truncated``) shown above everything, one per run."""
    toc = "".join(f'<li><a href="#{html.escape(key)}">{html.escape(heading)}</a></li>' for key, heading, _ in sections_html)
    body = "".join(f'<p class="banner {html.escape(kind)}"><strong>{html.escape(kind)} run</strong>{html.escape(text)}</p>'
                   for kind, text in banners)
    body += "".join(part for _, _, part in sections_html)
    return (
        "<!DOCTYPE html>\n"
        f'<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<title>{html.escape(title)}</title><link rel="icon" href="data:,"><style>{STYLE}</style></head>'
        f"<body><h1>{html.escape(title)}</h1><p class=\"meta\">{html.escape(subtitle)}</p>"
        f"<nav><ul>{toc}</ul></nav>{body}</body></html>\n"
    )
