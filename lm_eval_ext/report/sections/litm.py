"""The Lost in the Middle section: accuracy by gold position (U-curves), KV curves, length x position.

Everything comes from the results files: ``acc``, ``acc_pos_<n>`` (n = 1-based gold
position), ``acc_gap``, ``acc_middle_drop``, and the over-long prompt counts
``prompts_skipped`` / ``prompts_truncated`` (overall and ``_pos_<n>``), as the tasks of
tasks/lost_in_the_middle define them, and the documents each run took at each position
(:func:`lm_eval_ext.results.status.documents_by_position`): the positions table counts them, and a
note names the runs whose positions got different numbers (``--limit``, ``--samples``). Each task's
setting is read from its recorded config (``dataset_kwargs``: setting, k, query_aware, random_order,
generated; the run's ``litm_kv_pairs`` for generated KV data), not from its name.

The generated KV tasks (``litm_kv_generated*``) take their number of pairs from the run, so
a model's sweep over lengths is several runs of the same task: every run (the most complete per
length) is shown, and two lengths or more give the length x position heatmap.

The published models (:mod:`lm_eval_ext.published.litm`: the paper's Table 1 and its appendix
tables by gold position) get a panel of their own in the QA figure, for the numbers of documents
the report's models ran, and rows in the tables.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from matplotlib import colormaps
from matplotlib.cm import ScalarMappable
from matplotlib.colors import Normalize
from matplotlib.patches import Rectangle
from matplotlib.ticker import MaxNLocator

from ...published import Published
from ...results.load import Model, Run
from ..blocks import Figure, Note, Section, Table
from ..figures import new_figure, published_color, published_marker
from .common import OWN_SOURCE, TaskRun, citations, published_label, published_notes, source_text
from ... import sweeps
from ...results.status import documents_by_position, most_complete

TITLE = "Lost in the Middle"
KEY = "lost_in_the_middle"
PREFIX = "litm_"
GENERATED = ("litm_kv_generated", "litm_kv_generated_qac")
LENGTH_COUNTS = ("prompts_skipped", "prompts_truncated")
LINESTYLES = {"plain": "-", "query-aware": "--", "random order": ":"}
# the tasks with published numbers: (setting, k) of litm_qa_<k>docs, closed-book and oracle
PUBLISHED_TASKS = {"litm_qa_10docs": ("qa", 10), "litm_qa_20docs": ("qa", 20), "litm_qa_30docs": ("qa", 30),
                   "litm_qa_closedbook": ("closedbook", None), "litm_qa_oracle": ("oracle", None)}

INTRO = (
    "Liu et al. (TACL 2024). Accuracy by the 1-based position of the one relevant item: the gold passage among k "
    "retrieved documents (multi-document QA, best_subspan_em on the answer's first line) or the queried pair "
    "among k key-value pairs (KV retrieval). Closed-book (no documents) and oracle (the gold passage only) are "
    "the floor and ceiling of QA. acc_gap = best minus worst position; acc_middle_drop = mean of the two ends "
    "minus the lowest accuracy inside. Prompts longer than the model's context are skipped and counted "
    "(prompts_skipped), never cut, unless the run asked for truncation (prompts_truncated)."
)


@dataclass
class Setting(TaskRun):
    """One task of one run, with what its recorded config says it is."""

    setting: str  # qa, oracle, closedbook, kv
    k: int | None
    variant: str  # plain, query-aware, random order
    generated: bool
    user_file: str | None

    @property
    def label(self) -> str:
        """The setting as figures and tables name it (size, variant, data source)."""
        size = f"{self.k} {'pairs' if self.setting == 'kv' else 'docs'}" if self.setting in ("qa", "kv") else self.setting
        source = "user file" if self.user_file else "generated" if self.generated else None
        extra = [v for v in (self.variant if self.variant != "plain" else None, source) if v]
        return size + (f" ({', '.join(extra)})" if extra else "")

    @property
    def where(self) -> str:
        """The model and task, for notes (with the number of pairs of a generated KV task)."""
        return f"{self.model.label} · {self.task}" + (f" ({self.k} pairs)" if self.generated else "")

    def positions(self) -> list[int]:
        """1-based gold positions with an accuracy or a length count, sorted."""
        found = set()
        for name in self.metrics:
            for prefix in ("acc_pos_", *(f"{c}_pos_" for c in LENGTH_COUNTS)):
                if name.startswith(prefix) and name[len(prefix):].isdigit():
                    found.add(int(name[len(prefix):]))
        return sorted(found)

    def points(self) -> list[int]:
        """The positions that have an accuracy (some prompt there was scored)."""
        return [p for p in self.positions() if f"acc_pos_{p}" in self.metrics]

    @property
    def lengths_checked(self) -> bool:
        """False when the run knew no context length: the task says so in its config (the counts are then 0
        but mean nothing); results without any length count were not checked either."""
        note = str((self.run.task_config(self.task).get("metadata") or {}).get("prompt_length", ""))
        return not note.startswith("not checked") and any(name in self.metrics for name in LENGTH_COUNTS)

    def count(self, name: str, position: int | None = None) -> float | None:
        """A length count (overall or at a 1-based position); None when the run did not check lengths."""
        if not self.lengths_checked:
            return None
        return self.metrics.get(name if position is None else f"{name}_pos_{position}")

    def documents(self) -> dict[str, int] | None:
        """The documents the run took at each 1-based gold position (None when the results do not say)."""
        return documents_by_position(self.run, self.task)

    def drawable(self) -> bool:
        """True when the curves have something of this task to draw."""
        return ("acc" in self.metrics) if self.setting in ("oracle", "closedbook") else bool(self.points())


def _setting(model: Model, index: int, task: str, run: Run) -> Setting | None:
    config = run.task_config(task)
    kwargs, metadata = config.get("dataset_kwargs") or {}, config.get("metadata") or {}
    setting = kwargs.get("setting")
    if setting not in ("qa", "oracle", "closedbook", "kv"):
        return None
    generated = bool(kwargs.get("generated"))
    k = metadata.get("litm_kv_pairs") if generated else kwargs.get("k")
    variant = "random order" if kwargs.get("random_order") else "query-aware" if kwargs.get("query_aware") else "plain"
    user_file = metadata.get("litm_kv_file" if setting == "kv" else "litm_qa_file")
    return Setting(model, index, task, run, setting, k, variant, generated, user_file)


def settings_of(models: list[Model]) -> list[Setting]:
    """Every Lost in the Middle task result to show: the most complete run of each task, and of each length
    for the generated KV tasks."""
    found = []
    for index, model in enumerate(models):
        for task in model.tasks:
            if not task.startswith(PREFIX):
                continue
            runs = model.runs_with(task)
            by_pairs = {_pairs(run, task): None for run in runs}
            chosen = ([most_complete(runs, task)] if task not in GENERATED else
                      [most_complete([r for r in runs if _pairs(r, task) == pairs], task) for pairs in by_pairs])
            found += [s for run in chosen if (s := _setting(model, index, task, run)) is not None]
    return found


def _pairs(run: Run, task: str):
    return (run.task_config(task).get("metadata") or {}).get("litm_kv_pairs")


def build(models: list[Model], published: Published | None = None) -> Section | None:
    """The section for every model with a Lost in the Middle task, or None."""
    settings = settings_of(models)
    if not settings:
        return None
    section = Section(KEY, TITLE, INTRO)
    section.blocks += _length_notes(settings)
    section.blocks += [Note(text) for text in published_notes(published)]
    shown = [m for m in models if any(s.model is m for s in settings)]
    # the published numbers beside this report's: QA with the same numbers of documents, closed-book and
    # oracle when some QA task ran (the paper tabulates no key-value result)
    ran_qa = {s.k for s in settings if s.setting == "qa" and s.variant == "plain"}
    any_qa = any(s.setting != "kv" for s in settings)
    panels = [task for task, (setting, k) in PUBLISHED_TASKS.items() if setting == "qa" and k in ran_qa]
    if published is not None:
        published = Published([n for n in published.numbers if n.task in panels or
                               (any_qa and PUBLISHED_TASKS.get(n.task, ("qa",))[0] != "qa")], published.missing)
    for kind, mine in (("qa", [s for s in settings if s.setting != "kv"]), ("kv", [s for s in settings if s.setting == "kv"])):
        if mine:
            section.blocks += _curves(shown, mine, kind, published if kind == "qa" else None, panels)
    heat = [m for m in shown if len({s.k for s in settings if s.model is m and s.setting == "kv" and s.points()}) >= 2]
    if heat:
        section.blocks.append(_heatmap(heat, [s for s in settings if s.setting == "kv" and s.model in heat]))
    section.blocks += [_summary_table(settings, published), _positions_table(settings, published)]
    return section


def _length_notes(settings: list[Setting]) -> list[Note]:
    notes = []
    for name, what in (("prompts_skipped", "were skipped (not sent to the model, not scored)"),
                       ("prompts_truncated", "were cut by the model adapter (scored; the curve may be bent)")):
        hits = [f"{s.where}: {int(s.count(name))}" for s in settings if s.count(name)]
        if hits:
            notes.append(Note(f"Prompts longer than the model's context {what}: " + "; ".join(hits) + ". The "
                              "per-position counts are in the positions table; the curves show accuracy over the "
                              "prompts that fit."))
    unchecked = [f"{s.model.label} · {s.task}" for s in settings if not s.lengths_checked]
    if unchecked:
        notes.append(Note("Prompt lengths were not checked for " + "; ".join(unchecked) + " (the run named no "
                          "context length: give max_length= in --model_args); an adapter may have cut long prompts."))
    uneven = [f"{s.where}: {sweeps.coverage_text(docs)}" for s in settings
              if (docs := s.documents()) and sweeps.uneven(docs)]
    if uneven:
        notes.append(Note("Gold positions covered unevenly: " + "; ".join(uneven) + ". The documents of a sweep go "
                          "example by example and --limit N takes the first N (--samples the ones it names), so the "
                          "accuracies at different positions are over different questions, and acc_gap and "
                          "acc_middle_drop compare them. A --limit that is a multiple of the number of positions "
                          "takes whole examples."))
    mirror = [f"{s.model.label} · {s.task}: {s.user_file}" for s in settings if s.user_file]
    if mirror:
        notes.append(Note("Data files given by the user instead of the published ones (not comparable with the "
                          "paper unless they are the published files): " + "; ".join(mirror) + "."))
    return notes


def _grid(n: int):
    columns = min(n, 3)
    rows = -(-n // columns)
    fig = new_figure(4.6 * columns + 1.8, 3.6 * rows)
    axes = np.atleast_1d(fig.subplots(rows, columns, sharey=True, squeeze=False)).ravel()
    for ax in axes[n:]:
        ax.set_visible(False)
    return fig, axes


def _empty_note(settings: list[Setting]) -> str:
    """Why tasks have nothing to draw: every prompt skipped, or no accuracy at all."""
    parts = []
    for s in settings:
        skipped = s.count("prompts_skipped")
        why = f"every prompt was skipped as too long ({int(skipped)} skipped)" if skipped else "it has no accuracy"
        parts.append(f"{s.where}: {why}")
    return "; ".join(parts)


def _curves(models: list[Model], settings: list[Setting], kind: str, published: Published | None,
            published_tasks: list[str]) -> list:
    """The curves figure (one panel per model with something to draw, then the published panels), and a note
    naming the tasks with nothing to draw."""
    what = "Multi-document QA" if kind == "qa" else "Key-value retrieval"
    blocks = []
    empty = [s for s in settings if not s.drawable()]
    if empty:
        blocks.append(Note(f"{what}: nothing to draw for {_empty_note(empty)}."))
    drawn = [m for m in models if any(s.model is m and s.drawable() for s in settings)]
    extra = [task for task in published_tasks if published is not None and published.models(task)]
    if not drawn and not extra:
        return blocks
    fig, axes = _grid(len(drawn) + len(extra))
    sizes = sorted({s.k for s in settings if s.setting in ("qa", "kv")}, key=lambda k: (k is None, k))
    colours = {k: colormaps["viridis"](i / max(len(sizes) - 1, 1) * 0.85) for i, k in enumerate(sizes)}
    swept = set()  # the panels with a curve (not only the closed-book and oracle lines)
    for ax, model in zip(axes, drawn):
        for s in sorted((s for s in settings if s.model is model and s.drawable()), key=lambda s: (s.k or 0, s.variant)):
            if s.setting in ("oracle", "closedbook"):
                ax.axhline(s.metrics["acc"], color="black" if s.setting == "oracle" else "grey",
                           linestyle="-." if s.setting == "oracle" else "--", linewidth=1.2,
                           label=f"{s.setting} ({s.metrics['acc']:.2f})")
                continue
            xs = s.points()
            skipped = s.count("prompts_skipped")
            label = s.label + (f", {int(skipped)} skipped" if skipped else "")
            ax.plot(xs, [s.metrics[f"acc_pos_{p}"] for p in xs], marker="o", markersize=4,
                    linestyle=LINESTYLES[s.variant], color=colours[s.k], label=label)
            swept.add(ax)
        ax.set_title(model.label, fontsize="medium")
    for ax, task in zip(axes[len(drawn):], extra):
        names = published.models(task)
        for rank, name in enumerate(names):
            metrics = sorted((n for n in published.numbers if n.model == name and n.task == task and
                              n.metric.startswith("acc_pos_")), key=lambda n: int(n.metric.rsplit("_", 1)[1]))
            ax.plot([int(n.metric.rsplit("_", 1)[1]) for n in metrics], [n.value for n in metrics],
                    marker=published_marker(rank), markerfacecolor="none", linestyle="--",
                    color=published_color(rank, len(names)), label=name)
        k = PUBLISHED_TASKS[task][1]
        ax.set_title(f"published, {k} docs ({citations([n for n in published.numbers if n.task == task])})",
                     fontsize="small", color="0.3")
    for ax in axes[:len(drawn) + len(extra)]:
        ax.set_xlabel("position of the " + ("gold document" if kind == "qa" else "queried pair") + " (1-based)")
        ax.set_ylim(-0.02, 1.02)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.legend(fontsize="x-small")
    # a panel of closed-book and oracle lines alone spans the positions the other panels sweep (else it has none)
    widest = max([k for k in sizes if k] + [PUBLISHED_TASKS[task][1] for task in extra], default=None)
    for ax in axes[:len(drawn)]:
        if ax not in swept and widest:
            ax.set_xlim(0.5, widest + 0.5)
        elif ax not in swept:
            ax.set_xticks([])
            ax.set_xlabel("(no position sweep)")
    axes[0].set_ylabel("accuracy")
    if kind == "qa":
        caption = ("One line per number of documents k (solid: the standard prompt, dashed: query-aware, dotted: "
                   "random order); closed-book and oracle as horizontal lines. Positions whose prompts were all "
                   "skipped have no point.")
        if extra:
            caption += (" Grey panels: the models the paper evaluated, accuracy by gold position as its appendix "
                        "tables give it (their closed-book and oracle accuracies are in the summary table).")
        blocks.append(Figure("litm_qa_curves", "Multi-document QA: accuracy by gold position", caption, fig))
    else:
        blocks.append(Figure("litm_kv_curves", "Key-value retrieval: accuracy by position of the queried pair",
                             "One line per number of pairs (dashed: query-aware). Positions whose prompts were all "
                             "skipped have no point. The paper gives its KV results as figures only.", fig))
    return blocks


def _heatmap(models: list[Model], settings: list[Setting]) -> Figure:
    fig, axes = _grid(len(models))
    cmap, norm = colormaps["RdYlGn"], Normalize(0, 1)
    for ax, model in zip(axes, models):
        rows = sorted((s for s in settings if s.model is model), key=lambda s: (s.k, s.variant, s.generated))
        for y, s in enumerate(rows):
            positions = s.positions()
            depths = [(p - 1) / (s.k - 1) if s.k > 1 else 0.0 for p in positions]
            edges = [0.0] + [(a + b) / 2 for a, b in zip(depths, depths[1:])] + [1.0]
            for p, left, right in zip(positions, edges, edges[1:]):
                acc = s.metrics.get(f"acc_pos_{p}")
                if acc is None:  # every prompt at this position was skipped
                    ax.add_patch(Rectangle((left, y), right - left, 1, facecolor="lightgrey", hatch="xx", edgecolor="white"))
                    continue
                ax.add_patch(Rectangle((left, y), right - left, 1, facecolor=cmap(norm(acc)), edgecolor="white"))
                if len(positions) <= 12:
                    ax.text((left + right) / 2, y + 0.5, f"{acc:.2f}", ha="center", va="center", fontsize="x-small")
        ax.set_xlim(0, 1)
        ax.set_ylim(0, len(rows))
        ax.set_yticks(np.arange(len(rows)) + 0.5, [s.label for s in rows], fontsize="small")
        ax.set_xticks([0, 0.25, 0.5, 0.75, 1.0], ["first", "25%", "50%", "75%", "last"])
        ax.set_xlabel("depth of the queried pair in the context")
        ax.set_title(model.label, fontsize="medium")
    fig.colorbar(ScalarMappable(norm=norm, cmap=cmap), ax=[ax for ax in axes if ax.get_visible()], label="accuracy")
    return Figure("litm_kv_heatmap", "Key-value retrieval: context length x position",
                  "Rows: number of key-value pairs; columns: where the queried pair sits (each cell spans the depths "
                  "closest to its swept position). Hatched grey: every prompt at that position was skipped as too long.",
                  fig)


def _summary_table(settings: list[Setting], published: Published | None) -> Table:
    rows = []
    for s in settings:
        values, errors = s.metrics, s.run.stderr(s.task)
        rows.append([s.model.label, s.task, s.setting, s.k, s.variant, s.generated, values.get("acc"), errors.get("acc"),
                     values.get("acc_gap"), values.get("acc_middle_drop"), s.count("prompts_skipped"),
                     s.count("prompts_truncated"), OWN_SOURCE])
    for name in (published.models() if published else []):
        for task, (setting, k) in PUBLISHED_TASKS.items():
            acc = published.get(name, task, "acc")
            if acc is not None:
                rows.append([published_label(name), task, setting, k, "plain", False, acc.value, None,
                             published.value(name, task, "acc_gap"), published.value(name, task, "acc_middle_drop"),
                             None, None, source_text(acc)])
    return Table("litm_summary", "Accuracy per task",
                 ["model", "task", "setting", "k", "variant", "generated", "acc", "acc_stderr", "acc_gap",
                  "acc_middle_drop", "prompts_skipped", "prompts_truncated", "source"], rows,
                 "The harness's results. k: documents (QA) or key-value pairs (KV). skipped/truncated: prompts that did "
                 "not fit the model's context (empty: lengths were not checked). Rows marked (published): the paper's "
                 "tables; for multi-document QA, acc, acc_gap and acc_middle_drop are derived from its accuracies by "
                 "position with the tasks' definitions (acc: their mean; every position has the same questions).")


def _positions_table(settings: list[Setting], published: Published | None) -> Table:
    rows = []
    for s in settings:
        errors, documents = s.run.stderr(s.task), s.documents() or {}
        for p in s.positions():
            depth = (p - 1) / (s.k - 1) if s.k and s.k > 1 else None
            rows.append([s.model.label, s.task, s.setting, s.k, s.variant, p, depth, documents.get(str(p)),
                         s.metrics.get(f"acc_pos_{p}"), errors.get(f"acc_pos_{p}"), s.count("prompts_skipped", p),
                         s.count("prompts_truncated", p), OWN_SOURCE])
    for name in (published.models() if published else []):
        for task, (setting, k) in PUBLISHED_TASKS.items():
            numbers = sorted((n for n in published.numbers if n.model == name and n.task == task and
                              n.metric.startswith("acc_pos_")), key=lambda n: int(n.metric.rsplit("_", 1)[1]))
            for n in numbers:
                p = int(n.metric.rsplit("_", 1)[1])
                rows.append([published_label(name), task, setting, k, "plain", p, (p - 1) / (k - 1), None, n.value,
                             None, None, None, source_text(n)])
    return Table("litm_positions", "Accuracy per gold position",
                 ["model", "task", "setting", "k", "variant", "position", "depth", "documents", "acc", "acc_stderr",
                  "prompts_skipped", "prompts_truncated", "source"], rows,
                 "position: 1-based (acc_pos_<position>); depth: (position - 1) / (k - 1); documents: those the run "
                 "took at that position (skipped prompts included; empty where the results do not say). acc is "
                 "empty where every prompt at that position was skipped. Rows marked (published): the paper's "
                 "appendix tables.")
