"""Building a report: load the runs, build every section, write figures, tables and the page.

The inputs are read and every section is built before anything is written, so a wrong input
leaves no output directory behind; files are written atomically (:mod:`lm_eval_ext.atomic_write`).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from .. import __version__
from ..atomic_write import output_dir, write_text
from ..published import Published, load_published
from ..results.load import Model, load_models
from ..results.status import run_status
from .blocks import Figure, Note, Section, Table
from .html import render_page, section_data
from .sections import SECTIONS, runs
from .write import write_figure, write_table

PAGE = "report.html"


@dataclass
class Report:
    """What a report run wrote."""

    page: Path
    models: list[Model]
    sections: list[Section]
    banners: list[tuple[str, str]] = field(default_factory=list)
    figures: list[Path] = field(default_factory=list)
    tables: list[Path] = field(default_factory=list)


def benchmarks_of(models: list[Model]) -> list[str]:
    """The keys of the benchmarks some model ran (the sections that will show)."""
    return [module.KEY for module in SECTIONS
            if any(task.startswith(module.PREFIX) for model in models for task in model.tasks)]


def build_sections(models: list[Model], published: Published | None = None) -> list[Section]:
    """The section of every benchmark some model ran, then the inventory of the runs read.

    ``published``: the published numbers to draw beside the models (None: none).
    """
    built = [section for module in SECTIONS
             if (section := module.build(models, published.for_benchmark(module.KEY) if published else None)) is not None]
    inventory = runs.build(models)
    if not built:
        inventory.blocks.append(Note("No lm-eval-ext benchmark task (LIEDER, Lost in the Middle, MAGNIFICo, "
                                     "ELITR-Bench) in these results: nothing else to show."))
    return built + [inventory]


def run_banners(models: list[Model]) -> list[tuple[str, str]]:
    """(kind, text) of every run that is partial or truncated, for the top of the page."""
    banners = []
    for model in models:
        for run in model.runs:
            status = run_status(run)
            if status.flags:
                banners.append((status.label, f"{model.label} · {run.path}: {status.summary()}."))
    return banners


def build_report(sources: list[str], out: str | Path, title: str | None = None, published: bool = True) -> Report:
    """Read the runs named by ``sources`` (``[LABEL=]PATH``) and write the report into ``out``.

    ``published``: draw the models each paper evaluated beside the runs' models.
    """
    models = load_models(sources)
    numbers = load_published(benchmarks_of(models)) if published else None
    sections = build_sections(models, numbers)
    out = output_dir(out)
    report = Report(out / PAGE, models, sections, run_banners(models))
    rendered = []
    for section in sections:
        files: dict[int, object] = {}
        for block in section.blocks:
            if isinstance(block, Figure):
                files[id(block)] = written = write_figure(block, out)
                report.figures += [written.png, written.svg]
            elif isinstance(block, Table):
                files[id(block)] = path = write_table(block, out)
                report.tables.append(path)
        rendered.append(section_data(section, files, out))
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    subtitle = (f"{len(models)} model(s): {', '.join(m.label for m in models)}. {_published_note(numbers)} "
                f"Generated {stamp} by lm-eval-ext {__version__}.")
    write_text(report.page, render_page(title or "lm-eval-ext report", subtitle, rendered, report.banners))
    return report


def _published_note(numbers: Published | None) -> str:
    """The subtitle's sentence on the published models: shown, not asked for, or (partly) unreadable."""
    if numbers is None:
        return "Published models not shown."
    if not numbers.missing:
        return "Published models drawn beside them (grey)."
    if not numbers.numbers:
        return "Published models not shown: their released files could not be read (each section says why)."
    return ("Published models drawn beside them (grey) where their released files could be read (the other "
            "sections say why not).")
