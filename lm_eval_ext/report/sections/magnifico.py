"""The MAGNIFICo section: relative performance per form and prompt type, per interpretation, per position.

Task-level numbers come from the results files (``rel_perf``, ``ex``, ``ex_base``, ``em``,
``interp_left_out``, ``rel_perf_<category>``, ``excluded_*``, as tasks/magnifico defines
them). Per-interpretation numbers need the sample logs: every scored document logs its
relative-performance item ``{"key": interpretation, "side": novel|base, "score": EX}``
under ``rel_perf``, and the task's own definition (:mod:`lm_eval_ext.metrics.relative`:
``min(EX_novel / EX_base, 1) x 100``, interpretations with EX_base < 5% left out) turns them
into one value per interpretation; their mean is the task's ``rel_perf``. A task's setting
(scope, prompt type, form, position) is read from its recorded ``dataset_kwargs``.

rel_perf is undefined when every interpretation of a task was left out (base EX under 5%): the
figures write "n/a" where its bar would be and the summary table says why. The paper's only
numeric result, Table 3 (:mod:`lm_eval_ext.published.magnifico`: Description vs Dialogue for two
models), is drawn beside the report's models that ran the same tasks.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from matplotlib import colormaps
from matplotlib.cm import ScalarMappable
from matplotlib.colors import Normalize

from ...errors import metadata_arg
from ...metrics.relative import mean_scores, relative_performance
from ...published import Published
from ...published.magnifico import DIALOGUE_INTERPRETATIONS
from ...results.load import Model
from ..blocks import Figure, Note, Section, Table
from ..figures import model_color, new_figure, published_color
from .common import OWN_SOURCE, TaskRun, citations, published_label, published_notes, source_text
from ...results.status import shown_run

TITLE = "MAGNIFICo"
KEY = "magnifico"
PREFIX = "magnifico_"
CATEGORIES = ("basic", "subquery", "value", "column")
PROMPT_ORDER = ("direct", "description", "fewshot", "dialogue")
FORM_ORDER = ("plausible", "foreign", "adversarial", "concept", "base")
POSITION_ORDER = ("start", "mid", "end")
FORM_HATCH = {"plausible": "", "foreign": "//", "adversarial": "..", "concept": "xx"}
# why items were left out when the task was loaded (``excluded_<reason>`` counts, lm_eval_ext.results.load)
EXCLUDED = {"db_missing": "missing Spider database", "gold_error": "gold query fails",
            "gold_budget": "gold query does not finish within its budget"}
NA_CAPTION = " n/a: rel_perf undefined, every interpretation's base EX under 5% (none kept)."

INTRO = (
    "Patel et al. (EMNLP 2023). Relative performance rel_perf = min(EX on novel-interpretation items / EX on the "
    "matching base items, 1) x 100 per interpretation, averaged over the interpretations kept: those whose base "
    "EX is under 5% are left out (interp_left_out). EX: execution accuracy; forms: plausible word, foreign "
    "(nonsense) word, adversarial word. Description prompts state the meaning at the end of the prompt unless a "
    "position is given; dialogue tasks explain it near the start, middle or end of a long conversation."
)


@dataclass
class Setting(TaskRun):
    """One MAGNIFICo task of one model's most complete run that has it."""

    scope: str
    prompt_type: str
    form: str
    position: str | None

    @property
    def rel_perf_note(self) -> str | None:
        """Why rel_perf is undefined ("n/a: ..."), or None when it is defined or the task has none (base tasks)."""
        if "rel_perf" in self.metrics or "interp_left_out" not in self.metrics:
            return None
        return (f"n/a: every interpretation's base EX is under 5% ({int(self.metrics['interp_left_out'])} left out), so "
                "no interpretation is kept")

    def interpretation_keys(self) -> set[str] | None:
        """The interpretations the task covered: from its sample log, else the run's ``interpretations`` option
        (None: every interpretation of the task)."""
        samples = self.run.samples(self.task)
        if samples is not None:
            return {s["doc"]["interpretation"] for s in samples}
        selected = (self.run.task_config(self.task).get("metadata") or {}).get("interpretations")
        if isinstance(selected, str):
            return {name for name in selected.replace(",", " ").split() if name}
        return {str(name) for name in selected} if selected else None

    @property
    def column(self) -> str:
        """Short name of the setting in figures: prompt type (and position), form."""
        where = f"@{self.position}" if self.position and not (self.prompt_type == "description" and self.position == "end") else ""
        return f"{self.prompt_type}{where} · {self.form}"

    def interpretations(self) -> list[dict] | None:
        """Per-interpretation EX and relative performance from the sample log (None without one)."""
        samples = self.run.samples(self.task)
        if samples is None:
            return None
        items = [s["rel_perf"] for s in samples if isinstance(s.get("rel_perf"), dict)]
        if not items:
            return []
        categories = {s["doc"]["interpretation"]: s["doc"].get("category") for s in samples}
        counts: dict[tuple[str, str], int] = {}
        for item in items:
            counts[(item["key"], item["side"])] = counts.get((item["key"], item["side"]), 0) + 1
        novel, base = mean_scores(items)
        result = relative_performance(novel, base)
        rows = []
        for key in dict.fromkeys(item["key"] for item in items):
            status = "kept" if key in result.per_key else "left out (base EX < 5%)" if key in result.left_out else "incomplete"
            rows.append({"interpretation": key, "category": categories.get(key), "n_novel": counts.get((key, "novel"), 0),
                         "n_base": counts.get((key, "base"), 0), "ex_novel": novel.get(key), "ex_base": base.get(key),
                         "rel_perf": result.per_key.get(key), "status": status})
        return rows


def _order(s: Setting):
    return (s.scope, PROMPT_ORDER.index(s.prompt_type) if s.prompt_type in PROMPT_ORDER else 9,
            POSITION_ORDER.index(s.position) if s.position in POSITION_ORDER else -1,
            FORM_ORDER.index(s.form) if s.form in FORM_ORDER else 9, s.task)


def settings_of(models: list[Model]) -> list[Setting]:
    """Every MAGNIFICo task (not group) any model ran, from its most complete run."""
    found = []
    for index, model in enumerate(models):
        for task in model.tasks:
            if not task.startswith(PREFIX):
                continue
            run = shown_run(model, task)
            kwargs = run.task_config(task).get("dataset_kwargs") or {}
            if {"scope", "prompt_type", "form"} <= kwargs.keys():
                found.append(Setting(model, index, task, run, kwargs["scope"], kwargs["prompt_type"], kwargs["form"],
                                     kwargs.get("position")))
    return sorted(found, key=lambda s: (s.index, _order(s)))


def build(models: list[Model], published: Published | None = None) -> Section | None:
    """The section for every model with a MAGNIFICo task, or None."""
    settings = settings_of(models)
    if not settings:
        return None
    section = Section(KEY, TITLE, INTRO)
    section.blocks += _notes(settings)
    section.blocks += [Note(text) for text in published_notes(published)]
    shown = [m for m in models if any(s.model is m for s in settings)]
    novel = [s for s in settings if "rel_perf" in s.metrics or "interp_left_out" in s.metrics]
    # the paper's main comparison: Direct, Description (at the end) and Few-shot
    single = [s for s in novel if s.scope == "single" and (s.prompt_type != "description" or s.position in (None, "end"))]
    # a figure whose every rel_perf is n/a would be empty axes: the note above says why instead
    if any("rel_perf" in s.metrics for s in single):
        section.blocks.append(_bars(shown, _unique(single), "magnifico_forms",
                                    "Relative performance per form and prompt type (single-word interpretations)",
                                    "Bars: rel_perf of each task (mean over the interpretations kept). Description: the "
                                    "description at the end of the prompt."))
    per_interpretation = [(s, rows) for s in novel if s.scope in ("single", "dialogue", "phrase")
                          and (rows := s.interpretations())]
    if per_interpretation:
        section.blocks.append(_heatmap(shown, per_interpretation))
    swept = [s for s in novel if s.position and (s.prompt_type == "dialogue" or s.task.startswith(
        f"{PREFIX}description_{s.position}_"))]
    if any("rel_perf" in s.metrics for s in swept):
        section.blocks.append(_positions(shown, [s for s in swept if "rel_perf" in s.metrics]))
    multi_phrase = [s for s in novel if s.scope in ("multi", "phrase")]
    if any("rel_perf" in s.metrics for s in multi_phrase):
        section.blocks.append(_bars(shown, multi_phrase, "magnifico_multi_phrase",
                                    "Two interpretations at once, and phrase interpretations",
                                    "Bars: rel_perf of the multi_* tasks (two novel interpretations per example, base: "
                                    "combination/baseline.tsv) and of the phrase_* tasks (6 phrase interpretations).",
                                    label=lambda s: f"{s.scope} {s.column}"))
    table3 = [s for s in settings if published is not None and published.models(s.task)]
    if table3:
        section.blocks.append(_table3_figure(shown, table3, published))
    section.blocks.append(_summary_table(settings, published))
    rows = [(s, r) for s in settings if (r := s.interpretations())]
    if rows:
        section.blocks.append(_interpretations_table(rows))
    return section


def _unique(settings: list[Setting]) -> list[Setting]:
    """One task per (model, prompt type, form): magnifico_description_<form> and
    magnifico_description_end_<form> are the same setting."""
    seen, kept = set(), []
    for s in settings:
        key = (s.index, s.prompt_type, s.form)
        if key not in seen:
            seen.add(key)
            kept.append(s)
    return kept


def _notes(settings: list[Setting]) -> list[Note]:
    notes = []
    left = [f"{s.model.label} · {s.task}: {int(s.metrics['interp_left_out'])}" for s in settings
            if s.metrics.get("interp_left_out")]
    if left:
        notes.append(Note("Interpretations left out because their base EX is under 5% (rel_perf is the mean over the "
                          "others): " + "; ".join(left) + "."))
    excluded = [f"{s.model.label} · {s.task}: " + ", ".join(f"{int(s.metrics.get(f'excluded_{reason}', 0))} ({why})"
                                                         for reason, why in EXCLUDED.items())
                for s in settings if any(s.metrics.get(f"excluded_{reason}") for reason in EXCLUDED)]
    if excluded:
        notes.append(Note("Items excluded before scoring: " + "; ".join(excluded) + "."))
    undefined = [f"{s.model.label} · {s.task}" for s in settings if s.rel_perf_note]
    if undefined:
        notes.append(Note("rel_perf is n/a (undefined) for " + "; ".join(undefined) + ": every interpretation's base "
                          "EX is under 5%, so none is kept and there is nothing to average. The figures write n/a "
                          "where the bar would be."))
    missing = [f"{s.model.label} · {s.task}" for s in settings if s.run.samples(s.task) is None]
    if missing:
        notes.append(Note("No sample log (--log_samples) for " + "; ".join(missing) + ": no per-interpretation values."))
    return notes


def _bars(models: list[Model], settings: list[Setting], name: str, title: str, caption: str, label=None) -> Figure:
    label = label or (lambda s: s.prompt_type)
    groups = list(dict.fromkeys(label(s) for s in sorted(settings, key=_order)))
    forms = [f for f in FORM_ORDER if any(s.form == f for s in settings)]
    bars = [(i, m, f) for i, m in enumerate(models) for f in forms
            if any(s.model is m and s.form == f for s in settings)]
    fig = new_figure(max(6.0, 1.3 * len(groups) + 3.0), 4.0)
    ax = fig.subplots()
    x = np.arange(len(groups))
    width = 0.8 / max(len(bars), 1)
    undefined = False
    for j, (i, model, form) in enumerate(bars):
        mine = {label(s): s for s in settings if s.model is model and s.form == form}
        positions = x - 0.4 + width * (j + 0.5)
        ax.bar(positions, [mine[g].metrics.get("rel_perf", np.nan) if g in mine else np.nan for g in groups], width,
               color=model_color(i), hatch=FORM_HATCH.get(form, ""), edgecolor="white", label=f"{model.label} · {form}")
        for position, group in zip(positions, groups):
            if group in mine and mine[group].rel_perf_note:
                undefined = True
                _write_na(ax, position, model_color(i))
    if undefined:
        caption += NA_CAPTION
    ax.set_xticks(x, groups, rotation=20 if len(groups) > 4 else 0, ha="right" if len(groups) > 4 else "center")
    ax.set_xlim(-0.5, len(groups) - 0.5)  # every slot shown, even one whose bars are all n/a
    ax.set_ylim(0, 105)
    ax.set_ylabel("relative performance (%)")
    ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return Figure(name, f"MAGNIFICo: {title}", caption, fig)


def _write_na(ax, position: float, color) -> None:
    """"n/a" where a bar of an undefined rel_perf would stand (a bar of NaN draws nothing)."""
    ax.text(position, 2, "n/a", rotation=90, ha="center", va="bottom", fontsize="x-small", color=color)


def _heatmap(models: list[Model], data: list[tuple[Setting, list[dict]]]) -> Figure:
    per_model = [(m, [(s, rows) for s, rows in data if s.model is m]) for m in models]
    per_model = [(m, d) for m, d in per_model if d]
    heights = [len({r["interpretation"] for _, rows in d for r in rows}) for _, d in per_model]
    widths = [len(d) for _, d in per_model]
    fig = new_figure(max(6.0, 0.55 * max(widths) + 3.5), sum(0.28 * h + 1.6 for h in heights))
    axes = np.atleast_1d(fig.subplots(len(per_model), 1, squeeze=False)).ravel()
    cmap, norm = colormaps["viridis"], Normalize(0, 100)
    for ax, (model, entries) in zip(axes, per_model):
        names = sorted({r["interpretation"] for _, rows in entries for r in rows},
                       key=lambda n: (_category_rank(entries, n), n))
        grid = np.full((len(names), len(entries)), np.nan)
        left = []
        for col, (_, rows) in enumerate(entries):
            for r in rows:
                row = names.index(r["interpretation"])
                if r["rel_perf"] is not None:
                    grid[row, col] = r["rel_perf"]
                elif r["status"].startswith("left out"):
                    left.append((row, col))
        ax.imshow(grid, cmap=cmap, norm=norm, aspect="auto", interpolation="nearest")
        for row, col in left:
            ax.add_patch(_hatched(col, row))
        ax.set_xticks(range(len(entries)), [s.column if s.scope in ("single", "dialogue") else f"{s.scope} {s.column}"
                                            for s, _ in entries], rotation=35, ha="right", fontsize="x-small")
        ax.set_yticks(range(len(names)), names, fontsize="x-small")
        ax.set_title(model.label, fontsize="medium")
    fig.colorbar(ScalarMappable(norm=norm, cmap=cmap), ax=axes.tolist(), label="relative performance (%)")
    return Figure("magnifico_interpretations", "MAGNIFICo: relative performance per interpretation",
                  "Cells: min(EX novel / EX base, 1) x 100 of one interpretation in one task (from the sample logs). "
                  "Hatched grey: left out (base EX under 5%); blank: not in that task.", fig)


def _category_rank(entries, name: str) -> int:
    for _, rows in entries:
        for r in rows:
            if r["interpretation"] == name and r["category"] in CATEGORIES:
                return CATEGORIES.index(r["category"])
    return len(CATEGORIES)


def _hatched(col: int, row: int):
    from matplotlib.patches import Rectangle

    return Rectangle((col - 0.5, row - 0.5), 1, 1, facecolor="lightgrey", hatch="xx", edgecolor="white")


def _positions(models: list[Model], settings: list[Setting]) -> Figure:
    kinds = [k for k in ("description", "dialogue") if any(s.prompt_type == k for s in settings)]
    fig = new_figure(4.8 * len(kinds) + 2.0, 3.8)
    axes = np.atleast_1d(fig.subplots(1, len(kinds), sharey=True, squeeze=False)).ravel()
    styles = {"plausible": "-", "foreign": "--", "adversarial": ":"}
    for ax, kind in zip(axes, kinds):
        mine = [s for s in settings if s.prompt_type == kind]
        for model in models:
            for form in FORM_ORDER:
                points = {s.position: s.metrics.get("rel_perf") for s in mine if s.model is model and s.form == form}
                if not points:
                    continue
                xs = [p for p in POSITION_ORDER if points.get(p) is not None]
                ax.plot([POSITION_ORDER.index(p) for p in xs], [points[p] for p in xs], marker="o",
                        linestyle=styles.get(form, "-."), color=model_color(models.index(model)),
                        label=f"{model.label} · {form}")
        ax.set_xticks(range(3), ["start", "middle", "end"])
        ax.set_xlim(-0.3, 2.3)
        ax.set_title("description position" if kind == "description" else "dialogue: where the meaning is explained",
                     fontsize="medium")
        ax.legend(fontsize="x-small")
    axes[0].set_ylabel("relative performance (%)")
    axes[0].set_ylim(0, 105)
    return Figure("magnifico_positions", "MAGNIFICo: where the interpretation is given",
                  "rel_perf of the description_{start,mid,end}_* and dialogue_{start,mid,end}_* tasks.", fig)


def _summary_table(settings: list[Setting], published: Published | None) -> Table:
    columns = ["rel_perf", "ex", "ex_stderr", "ex_base", "em", "interp_left_out", *(f"rel_perf_{c}" for c in CATEGORIES),
               *(f"excluded_{reason}" for reason in EXCLUDED)]
    rows = []
    for s in settings:
        values, errors = s.metrics, s.run.stderr(s.task)
        cells = [errors.get("ex") if c == "ex_stderr" else values.get(c) for c in columns]
        rows.append([s.model.label, s.task, s.scope, s.prompt_type, s.form, s.position, *cells, s.rel_perf_note,
                     OWN_SOURCE])
    for name in (published.models() if published else []):
        for s in settings:
            number = published.get(name, s.task, "rel_perf")
            if number is not None and not any(r[0] == published_label(name) and r[1] == s.task for r in rows):
                cells = [number.value if c == "rel_perf" else None for c in columns]
                rows.append([published_label(name), s.task, s.scope, s.prompt_type, s.form, s.position, *cells, None,
                             source_text(number)])
    return Table("magnifico_summary", "Relative performance and execution accuracy per task",
                 ["model", "task", "scope", "prompt_type", "form", "position", *columns, "rel_perf_note", "source"], rows,
                 "The harness's results (EX and EM in [0, 1], rel_perf in %). Empty rel_perf: a base task, or n/a "
                 "(rel_perf_note says why). Rows marked (published): the paper's Table 3 (its only numeric result).")


def _table3_figure(models: list[Model], settings: list[Setting], published: Published) -> Figure:
    """The paper's Table 3 (Description vs Dialogue, plausible and foreign) beside the report's models."""
    numbers = [n for n in published.numbers if n.task in {s.task for s in settings}]
    groups = list(dict.fromkeys((s.prompt_type, s.form) for s in sorted(settings, key=_order)))
    names = published.models()
    fig = new_figure(max(6.0, 1.5 * len(groups) + 3.5), 4.0)
    ax = fig.subplots()
    x = np.arange(len(groups))
    series = [("published", rank, name) for rank, name in enumerate(names)]
    series += [("own", models.index(m), m) for m in models if any(s.model is m for s in settings)]
    width = 0.8 / max(len(series), 1)
    other_sets, undefined = [], []
    for j, (kind, rank, who) in enumerate(series):
        heights = []
        positions = x - 0.4 + width * (j + 0.5)
        for prompt_type, form in groups:
            task = next(s.task for s in settings if (s.prompt_type, s.form) == (prompt_type, form))
            if kind == "published":
                value = published.value(who, task, "rel_perf")
                heights.append(np.nan if value is None else value)
                continue
            mine = [s for s in settings if s.model is who and (s.prompt_type, s.form) == (prompt_type, form)]
            value = mine[0].metrics.get("rel_perf", np.nan) if mine else np.nan
            heights.append(value)
            if mine and mine[0].rel_perf_note:
                undefined.append((positions[len(heights) - 1], model_color(rank)))
            keys = mine[0].interpretation_keys() if mine else None
            if mine and prompt_type == "description" and keys != set(DIALOGUE_INTERPRETATIONS):
                other_sets.append(f"{who.label} · {mine[0].task}")
        if kind == "published":
            ax.bar(positions, heights, width, color=published_color(rank, len(names)), hatch="xx", edgecolor="white",
                   label=published_label(who))
        else:
            ax.bar(positions, heights, width, color=model_color(rank), edgecolor="white", label=who.label)
    for position, color in undefined:
        _write_na(ax, position, color)
    ax.set_xticks(x, [f"{prompt_type} · {form}" for prompt_type, form in groups])
    ax.set_xlim(-0.5, len(groups) - 0.5)
    ax.set_ylim(0, 105)
    ax.set_ylabel("relative performance (%)")
    ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.0, 1.0))
    caption = (f"Grey, hatched: the paper's Table 3 ({citations(numbers)}), over the 8 interpretations that have "
               "dialogues; dialogue = magnifico_dialogue_start_<form> (the authors' default conversations). "
               "Coloured: the report's models, rel_perf of the same tasks.")
    if undefined:
        caption += NA_CAPTION
    if other_sets:
        caption += (" Not over Table 3's 8 interpretations, so not directly comparable: " +
                    "; ".join(dict.fromkeys(other_sets)) +
                    f" (run it with {metadata_arg(interpretations=list(DIALOGUE_INTERPRETATIONS))}).")
    return Figure("magnifico_table3", "MAGNIFICo: description vs dialogue, beside the paper's Table 3", caption, fig)


def _interpretations_table(data: list[tuple[Setting, list[dict]]]) -> Table:
    rows = [[s.model.label, s.task, r["interpretation"], r["category"], r["n_novel"], r["n_base"], r["ex_novel"],
             r["ex_base"], r["rel_perf"], r["status"]] for s, entries in data for r in entries]
    return Table("magnifico_interpretations", "Per interpretation",
                 ["model", "task", "interpretation", "category", "n_novel", "n_base", "ex_novel", "ex_base", "rel_perf",
                  "status"], rows,
                 "From the sample logs, with the task's own definition; the mean of rel_perf over the kept "
                 "interpretations of a task is its rel_perf.")
