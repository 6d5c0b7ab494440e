"""A report figure's files (lm_eval_ext/report/figures.py): one layout for the PNG and the SVG, the same bytes
each time."""
from __future__ import annotations

from lm_eval_ext.report.figures import new_figure, save


def _figure():
    figure = new_figure(5, 3)
    axes = figure.add_subplot()
    axes.plot(range(4), [0.2, 0.9, 0.4, 0.7], marker="o")
    axes.set_xticks(range(4), ["first position", "second", "third", "a much longer last label"])
    axes.set_ylabel("accuracy")
    return figure, axes


def test_the_png_and_the_svg_share_one_layout_and_draw_the_figure_three_times(tmp_path):
    figure, axes = _figure()
    draws = []
    figure.canvas.mpl_connect("draw_event", lambda event: draws.append(event))
    png, svg = save(figure, tmp_path, "f")
    assert [png.name, svg.name] == ["f.png", "f.svg"] and png.stat().st_size > 0 and svg.stat().st_size > 0
    assert len(draws) == 3  # the layout pass, the PNG, the SVG: the SVG is not laid out again
    laid_out = axes.get_position().bounds
    assert laid_out != (0.125, 0.11, 0.775, 0.77)  # constrained layout moved the axes from the default place
    save(figure, tmp_path / "again", "f")
    assert axes.get_position().bounds == laid_out


def test_the_same_figure_gives_the_same_bytes(tmp_path):
    first = save(_figure()[0], tmp_path / "one", "f")
    second = save(_figure()[0], tmp_path / "two", "f")
    assert [p.read_bytes() for p in first] == [p.read_bytes() for p in second]
