"""The LIEDER section: accuracy per property and per comparison, the human baseline, base vs diff, the published models.

Numbers come from the harness's results file (``acc``, ``acc_<property>``,
``acc_<comparison>``, ``acc_rel*``, as tasks/lieder/README.md defines them), except two
things that need the per-group sample logs (``--log_samples``) and come from
:mod:`lm_eval_ext.results.lieder` (shared with the leaderboard export): the model's accuracy on
the two sentence families the human baseline covers (``acc_human_families``, so that model and
humans are compared on the same items), and the base vs diff novelty test. The published
models (:mod:`lm_eval_ext.published.lieder`: computed from the authors' per-item result tables)
are drawn beside the user's and listed in the tables with their source.
"""
from __future__ import annotations

import numpy as np

from ...data import DataError
from ...lieder.comparisons import CONTROLS, INFORMATIVE, Comparison, comparisons_for
from ...published import Published
from ...published.lieder import HUMAN_MODEL
from ...results.lieder import (
    ALL_POS_POS,
    POS_POS,
    SCOPES,
    HumanBaseline,
    comparison_metric,
    family_mean,
    novelty_tests,
    read_human_baseline,
    scope_comparisons,
    scope_metric,
)
from ...results.load import Model
from ..blocks import Figure, Note, Section, Table
from ..figures import model_color, new_figure, published_color
from .common import OWN_SOURCE, citations, published_label, published_notes, source_text
from ...results.status import shown_run

TITLE = "LIEDER"
KEY = "lieder"
PREFIX = "lieder"
TASKS = ("lieder_base", "lieder_diff", "lieder_two")
GROUP = "lieder"
STIMULUS_SET = {"lieder_base": "base", "lieder_diff": "diff", "lieder_two": "two"}
HATCHES = {"lieder_base": "", "lieder_diff": "//", "lieder_two": "..", GROUP: "xx"}
TASK_MARKERS = {"lieder_base": "o", "lieder_diff": "s", "lieder_two": "^"}

INTRO = (
    "Zhu & Frank (ACL 2024). Accuracy = share of minimal-pair comparisons in which the felicitous item is "
    "strictly more probable than the infelicitous one (a tie is wrong); acc_rel uses the paper's relative "
    "(nonref) metric. lieder_base is Experiment 1, lieder_diff Experiment 2 (explicit novelty: \"a different "
    "dog\"), lieder_two Experiment 3 (appendix). The human baseline covers two of the three sentence families "
    "(affirmative/negation, managed/failed) of the base set; acc_human_families is the model on those same "
    "families (from the sample logs). Published models: the authors' released per-item results."
)


def _pretty(c: Comparison) -> str:
    (lc, lk), (rc, rk) = c.left, c.right
    return f"p({lk}|{lc}) > p({rk}|{rc})"


def _present(models: list[Model]) -> list[Model]:
    return [m for m in models if any(t in m.tasks for t in (*TASKS, GROUP))]


def build(models: list[Model], published: Published | None = None) -> Section | None:
    """The LIEDER section for every model with a LIEDER task, or None when there is none."""
    models = _present(models)
    if not models:
        return None
    section = Section(KEY, TITLE, INTRO)
    try:
        human = read_human_baseline()
    except DataError as err:
        human = None
        section.blocks.append(Note(f"Human baseline not shown: {err}"))
    section.blocks += [Note(text) for text in published_notes(published)]
    if published is not None:
        # the human baseline is drawn from its own file (above), not as a published model
        published = Published([n for n in published.numbers if n.model != HUMAN_MODEL])
    families = human.families if human else ()
    missing = [f"{m.label}: {task}" for m in models for task in TASKS
               if shown_run(m, task) and shown_run(m, task).samples(task) is None]
    if missing:
        section.blocks.append(Note(
            "No sample log for " + "; ".join(missing) + ". The model-on-human-families columns and the novelty "
            "test need --log_samples."))
    section.blocks += [_properties_figure(models, human, published), _properties_table(models, human, families, published)]
    if human or any(comparison_metric(c) in (shown_run(m, "lieder_base").metrics("lieder_base") if shown_run(m, "lieder_base") else {})
                    for m in models for c in INFORMATIVE):
        section.blocks.append(_comparisons_figure(models, human))
    else:  # nothing per comparison to draw: say so instead of an empty figure
        section.blocks.append(Note("Accuracy per comparison: no lieder_base run has per-comparison metrics and the "
                                   "human baseline is not available, so there is nothing to draw."))
    section.blocks.append(_comparisons_table(models, human, families, published))
    if published is not None and published.numbers:
        section.blocks.append(_published_figure(models, published, human))
    section.blocks += _novelty_blocks(models)
    section.blocks.append(_metrics_table(models))
    return section


# -- accuracy per property -------------------------------------------------------------


def _properties_table(models: list[Model], human: HumanBaseline | None, families: tuple[str, ...],
                      published: Published | None) -> Table:
    rows = []
    for model in models:
        for task in (*TASKS, GROUP):
            run = shown_run(model, task)
            if run is None:
                continue
            values, errors = run.metrics(task), run.stderr(task)
            samples = run.samples(task) if task in TASKS else None
            for scope in SCOPES:
                metric, rel = scope_metric(scope), scope_metric(scope, relative=True)
                rows.append([
                    model.label, task, scope,
                    values.get(metric), errors.get(metric), values.get(rel), errors.get(rel),
                    family_mean(samples, metric, families) if families else None,
                    human.accuracy(scope_comparisons(scope)) if human and task == "lieder_base" else None,
                    OWN_SOURCE,
                ])
    for name in (published.models() if published else []):
        for task in TASKS:
            if published.get(name, task, "acc") is None:
                continue
            for scope in SCOPES:
                number = published.get(name, task, scope_metric(scope))
                rows.append([published_label(name), task, scope, number.value if number else None, None,
                             published.value(name, task, scope_metric(scope, relative=True)), None, None,
                             None, source_text(number)])
    return Table(
        "lieder_properties", "Accuracy per property",
        ["model", "task", "property", "acc", "acc_stderr", "acc_rel", "acc_rel_stderr", "acc_human_families", "human_acc",
         "source"],
        rows,
        "acc, acc_rel and their standard errors are the harness's results (property 'all' = the metric acc). "
        "acc_human_families: the model's acc on the human baseline's families (sample logs); human_acc: "
        "the human baseline (base set). Rows marked (published): computed from the authors' released per-item "
        "results (source column; acc_rel from the nonref tables).",
    )


def _bar_groups(models: list[Model]) -> list[tuple[int, Model, str]]:
    """(model index, model, task) for every LIEDER task a model has, in a fixed order."""
    return [(i, m, task) for i, m in enumerate(models) for task in TASKS if shown_run(m, task)]


def _properties_figure(models: list[Model], human: HumanBaseline | None, published: Published | None) -> Figure:
    bars = _bar_groups(models)
    fig = new_figure(8.0, 4.2)
    ax = fig.subplots()
    x = np.arange(len(SCOPES))
    width = 0.8 / max(len(bars), 1)
    caption = ("Bars: the model's acc / acc_<property> (all three sentence families) per task; black lines: "
               "human accuracy on the base set (two families); dotted: chance.")
    names = published.models("lieder_base") if published else []
    if names:
        # the published models' range on lieder_base, behind the bars
        values = np.array([[published.value(n, "lieder_base", scope_metric(scope)) for scope in SCOPES] for n in names],
                          dtype=float)
        low, high = np.nanmin(values, axis=0), np.nanmax(values, axis=0)
        ax.bar(x, high - low, 0.86, bottom=low, color="0.88", edgecolor="0.6", linestyle="--", zorder=0,
               label=f"published range, lieder_base ({len(names)} models)")
        caption += (f" Grey boxes: lowest to highest accuracy of the {len(names)} published models on lieder_base "
                    f"({citations([n for n in published.numbers if n.task == 'lieder_base'])}).")
    for j, (i, model, task) in enumerate(bars):
        values = shown_run(model, task).metrics(task)
        heights = [values.get(scope_metric(scope), np.nan) for scope in SCOPES]
        ax.bar(x - 0.4 + width * (j + 0.5), heights, width, color=model_color(i), hatch=HATCHES[task],
               edgecolor="white", label=f"{model.label} · {task}")
    if human:
        human_values = [human.accuracy(scope_comparisons(scope)) for scope in SCOPES]
        ax.hlines(human_values, x - 0.42, x + 0.42, colors="black", linewidth=2.5, label="human (base, 2 families)")
    ax.set_xticks(x, ["overall" if scope == "all" else scope for scope in SCOPES])
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("accuracy")
    ax.axhline(0.5, color="grey", linestyle=":", linewidth=1)
    ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return Figure("lieder_properties", "LIEDER: accuracy per property", caption, fig)


# -- accuracy per comparison -----------------------------------------------------------


def _comparisons_table(models: list[Model], human: HumanBaseline | None, families: tuple[str, ...],
                       published: Published | None) -> Table:
    rows = []

    def describe(c: Comparison) -> list:
        return [c.name, c.code, "+".join(c.properties) or None, c.control]

    for model in models:
        for task in TASKS:
            run = shown_run(model, task)
            if run is None:
                continue
            values = run.metrics(task)
            samples = run.samples(task)
            for c in comparisons_for(STIMULUS_SET[task]):
                metric = comparison_metric(c)
                rows.append([
                    model.label, task, *describe(c), values.get(metric), values.get(comparison_metric(c, relative=True)),
                    family_mean(samples, metric, families) if families else None,
                    human.accuracy((c,)) if human and task == "lieder_base" else None, OWN_SOURCE,
                ])
    for name in (published.models() if published else []):
        for task in TASKS:
            for c in comparisons_for(STIMULUS_SET[task]):
                number = published.get(name, task, comparison_metric(c))
                if number is not None:
                    rows.append([published_label(name), task, *describe(c), number.value,
                                 published.value(name, task, comparison_metric(c, relative=True)), None, None,
                                 source_text(number)])
    return Table(
        "lieder_comparisons", "Accuracy per comparison",
        ["model", "task", "comparison", "notation", "properties", "control", "acc", "acc_rel",
         "acc_human_families", "human_acc", "source"],
        rows,
        "acc / acc_rel: the harness's acc_<comparison> (ctrl_acc_<comparison> for the two controls, which no "
        "headline accuracy counts). notation: the authors' (human baseline file) notation. Rows marked "
        "(published): from the authors' released per-item results.",
    )


def _comparisons_figure(models: list[Model], human: HumanBaseline | None) -> Figure:
    comparisons = INFORMATIVE + CONTROLS
    shown = [(i, m) for i, m in enumerate(models) if shown_run(m, "lieder_base")]
    fig = new_figure(8.0, 6.0)
    ax = fig.subplots()
    y = np.arange(len(comparisons))
    height = 0.8 / max(len(shown), 1)
    families = human.families if human else ()
    on_families = []
    for j, (i, model) in enumerate(shown):
        run = shown_run(model, "lieder_base")
        samples = run.samples("lieder_base")
        # Compare with humans on their own families when the sample log allows it.
        use_families = bool(families) and samples is not None
        on_families.append(use_families)
        values = run.metrics("lieder_base")
        widths = [(family_mean(samples, comparison_metric(c), families) if use_families
                   else values.get(comparison_metric(c))) for c in comparisons]
        ax.barh(y - 0.4 + height * (j + 0.5), [np.nan if w is None else w for w in widths], height,
                color=model_color(i), label=model.label + ("" if use_families else " (all families)"))
    if human:
        ax.plot([human.accuracy((c,)) for c in comparisons], y, "D", color="black", markersize=5, label="human")
    ax.set_yticks(y, [_pretty(c) + ("  [control]" if c.control else "") for c in comparisons], fontsize="small")
    ax.invert_yaxis()
    ax.set_xlim(0, 1.02)
    ax.axvline(0.5, color="grey", linestyle=":", linewidth=1)
    ax.set_xlabel("accuracy (lieder_base)")
    ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.0, 1.0))
    scope = ("on the human baseline's families (" + ", ".join(families) + ")") if families and all(on_families) else \
        "on the families stated in the legend"
    return Figure("lieder_comparisons", "LIEDER: accuracy per comparison, model vs humans",
                  f"Bars: the model's accuracy per comparison on lieder_base, {scope}; diamonds: human accuracy. "
                  "The two controls compare two felicitous (or two infelicitous) items and count in no accuracy. "
                  "The published models' values per comparison are in the table below.", fig)


# -- beside the published models ---------------------------------------------------------


def _published_figure(models: list[Model], published: Published, human: HumanBaseline | None) -> Figure:
    """One row per model (published and the user's), acc on each task, sorted by lieder_base."""
    names = published.models()
    # (label, colour index: None published, -1 humans; published rank, values per task)
    rows = [(published_label(n), None, k, {t: published.value(n, t, "acc") for t in TASKS}) for k, n in enumerate(names)]
    rows += [(m.label, i, None, {t: shown_run(m, t).metrics(t).get("acc") if shown_run(m, t) else None for t in TASKS})
             for i, m in enumerate(models)]
    if human:
        rows.append(("human (base, 2 families)", -1, None, {"lieder_base": human.accuracy(INFORMATIVE)}))
    rows.sort(key=lambda r: (r[3].get("lieder_base") is None, r[3].get("lieder_base") or 0.0))
    fig = new_figure(8.0, 0.32 * len(rows) + 1.6)
    ax = fig.subplots()
    for y, (_, index, rank, values) in enumerate(rows):
        for task in TASKS:
            value = values.get(task)
            if value is None:
                continue
            if index is None:  # published: grey, hollow
                ax.plot(value, y, TASK_MARKERS[task], markerfacecolor="none",
                        markeredgecolor=published_color(rank, len(names)), markersize=7)
            elif index == -1:
                ax.plot(value, y, "D", color="black", markersize=6)
            else:
                ax.plot(value, y, TASK_MARKERS[task], color=model_color(index), markersize=8)
    for task in TASKS:  # legend entries for the marker shapes
        ax.plot([], [], TASK_MARKERS[task], color="0.3", label=task)
    ax.set_yticks(range(len(rows)), [label for label, *_ in rows], fontsize="small")
    for tick, (_, index, _, _) in zip(ax.get_yticklabels(), rows):
        tick.set_color("0.35" if index is None else "black")
        tick.set_fontweight("normal" if index is None else "bold")
    ax.set_xlim(0, 1.02)
    ax.axvline(0.5, color="grey", linestyle=":", linewidth=1)
    ax.set_xlabel("accuracy (acc)")
    ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ax.grid(axis="y", color="0.93")
    return Figure("lieder_published", "LIEDER: your models among the published ones",
                  "acc of each task (circle: lieder_base, square: lieder_diff, triangle: lieder_two); bold, coloured: "
                  "the models of this report; grey, hollow: the models the authors evaluated, computed from their "
                  f"released per-item results ({citations(published.numbers)}); black diamond: humans on two of the "
                  "three families. Sorted by lieder_base.", fig)


# -- base vs diff ----------------------------------------------------------------------


def _novelty_blocks(models: list[Model]) -> list:
    rows, plotted = [], []
    for i, model in enumerate(models):
        base_run, diff_run = shown_run(model, "lieder_base"), shown_run(model, "lieder_diff")
        if not base_run or not diff_run:
            continue
        base, diff = base_run.samples("lieder_base"), diff_run.samples("lieder_diff")
        if base is None or diff is None:
            continue
        for result in novelty_tests(base, diff):
            test = result.test
            rows.append([model.label, result.metric, result.scope, test.n, result.base_acc, result.diff_acc, test.up,
                         test.down, test.ties, test.p_two_sided, test.p_greater])
            if result.metric == "acc":
                plotted.append((i, result))
    if not rows:
        return [Note("Base vs diff novelty test: needs lieder_base and lieder_diff with --log_samples for the same model.")]
    table = Table(
        "lieder_novelty_test", "Implicit vs explicit novelty: lieder_base vs lieder_diff",
        ["model", "metric", "scope", "n_groups", "base_acc", "diff_acc", "groups_up", "groups_down", "groups_tied",
         "p_two_sided", "p_diff_gt_base"],
        rows,
        f"Paired over the noun x family groups of both sets. Only the {len(POS_POS)} comparisons with a pos_pos "
        "side can differ between the sets (diff only rewrites pos_pos contexts). One comparison: McNemar's exact "
        "test on the groups whose 0/1 outcome changed; all of them: the exact sign test on the groups whose "
        "accuracy over them changed. p: two-sided, and one-sided for diff > base.",
    )
    return [_novelty_figure(models, plotted), table]


def _novelty_figure(models: list[Model], plotted: list) -> Figure:
    scopes = list(dict.fromkeys(result.scope for _, result in plotted))
    model_ids = list(dict.fromkeys(i for i, _ in plotted))
    fig = new_figure(8.0, 4.2)
    ax = fig.subplots()
    x = np.arange(len(scopes))
    width = 0.8 / (2 * len(model_ids))
    summary = []
    for j, i in enumerate(model_ids):
        entries = {result.scope: result for k, result in plotted if k == i}
        for half, (label, hatch) in enumerate((("base", ""), ("diff", "//"))):
            offset = -0.4 + width * (2 * j + half + 0.5)
            ax.bar(x + offset, [entries[s].diff_acc if half else entries[s].base_acc for s in scopes], width,
                   color=model_color(i), hatch=hatch, edgecolor="white", label=f"{models[i].label} · {label}")
        test = entries[ALL_POS_POS].test
        summary.append(f"{models[i].label}: p = {test.p_two_sided:.3g} (two-sided), {test.p_greater:.3g} (diff > base)")
    pretty = {c.name: _pretty(c) for c in POS_POS}
    ax.set_xticks(x, [pretty.get(s, s) for s in scopes], rotation=30, ha="right", fontsize="small")
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("accuracy (acc)")
    ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return Figure("lieder_novelty", "LIEDER: implicit (base) vs explicit (diff) novelty",
                  "Accuracy on the comparisons with a pos_pos side, all together and one by one. Exact sign test "
                  "over groups for all of them: " + "; ".join(summary) + ".", fig)


# -- every metric ----------------------------------------------------------------------


def _metrics_table(models: list[Model]) -> Table:
    rows = []
    for model in models:
        for task in (*TASKS, GROUP):
            run = shown_run(model, task)
            if run is None:
                continue
            errors = run.stderr(task)
            rows += [[model.label, task, name, value, errors.get(name)] for name, value in run.metrics(task).items()]
    return Table("lieder_metrics", "Every LIEDER metric", ["model", "task", "metric", "value", "stderr"], rows,
                 "All metrics of the results files, as the harness wrote them.")
