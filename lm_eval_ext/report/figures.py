"""Plot helpers shared by the sections: new figures, model colours, saving as PNG and SVG.

Figures are built with matplotlib's object-oriented API (``matplotlib.figure.Figure``),
never through pyplot, so no GUI backend or global state is involved and the report
renders on headless machines.
"""
from __future__ import annotations

import io
from pathlib import Path

from matplotlib import colormaps, rc_context
from matplotlib.figure import Figure

from ..atomic_write import write_bytes

# Dates and tool versions are left out so that the same results give byte-identical files.
_METADATA = {"png": {"Software": None}, "svg": {"Date": None, "Creator": None}}
DPI = 150


def new_figure(width: float = 7.0, height: float = 4.0) -> Figure:
    """An empty figure of the given size in inches, laid out with constrained layout."""
    return Figure(figsize=(width, height), layout="constrained")


def model_color(index: int):
    """The colour of the ``index``-th model (the same in every figure of a report)."""
    return colormaps["tab10"](index % 10)


# Published models are drawn in greys with hollow markers, so they never look like the user's models.
PUBLISHED_MARKERS = ("o", "s", "^", "v", "D", "P", "X", "<", ">", "p", "h", "*")


def published_color(index: int, count: int):
    """The grey of the ``index``-th of ``count`` published models (darker to lighter)."""
    return str(round(0.15 + 0.55 * index / max(count - 1, 1), 3))


def published_marker(index: int) -> str:
    """The marker of the ``index``-th published model."""
    return PUBLISHED_MARKERS[index % len(PUBLISHED_MARKERS)]


def render(figure: Figure, kind: str) -> bytes:
    """The figure as PNG (``kind`` "png", at :data:`DPI`) or SVG bytes."""
    buffer = io.BytesIO()
    # A fixed salt makes the SVG's element ids the same from one run to the next.
    with rc_context({"svg.hashsalt": "lm-eval-ext"}):
        figure.savefig(buffer, format=kind, metadata=_METADATA[kind], **({"dpi": DPI} if kind == "png" else {}))
    return buffer.getvalue()


def save(figure: Figure, directory: Path, name: str) -> tuple[Path, Path]:
    """Write ``<name>.png`` and ``<name>.svg`` into ``directory`` (atomically); returns both paths.

    The layout is computed once, for the PNG, and the figure keeps it for the SVG: with no layout engine left,
    saving does not draw the figure an extra time to lay it out (drawing is most of a report's time)."""
    png = write_bytes(directory / f"{name}.png", render(figure, "png"))
    # None means "no engine" only while these settings are off (otherwise it picks the one they name)
    with rc_context({"figure.autolayout": False, "figure.constrained_layout.use": False}):
        figure.set_layout_engine(None)
    return png, write_bytes(directory / f"{name}.svg", render(figure, "svg"))
