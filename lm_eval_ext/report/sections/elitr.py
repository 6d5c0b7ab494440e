"""The ELITR-Bench section: judge scores per setting, question type and answer position; seeds; the judge.

Everything comes from the results files, as tasks/elitr_bench defines it: ``score`` (mean
judge score, 1-10), ``score_<type>``, ``score_<position>``, ``score_diff``,
``middle_pvalue`` (the one-tailed Welch t-test "middle-position questions score lower"),
``judge_failures``, ``prompts_truncated``; the judge's identity is what each task recorded under
``configs.<task>.metadata.judge``. A task's setting (set, split, language, mode) is read from
its recorded ``dataset_kwargs`` (question_set, split, language, mode).

Seeds (the paper: test2 with seeds 2023, 2024, 2025, mean +- sample standard deviation): a
model's runs of the same task with different ``--seed`` (the most complete run per seed) are
summarised with the plugin's own seed summary (:func:`lm_eval_ext.elitr.seed_summary.summarize`). A
single seed gets no error bar (the figure says "1 seed"). When the judge failed on some answers
the task's ``score`` is undefined (judging is incomplete and can be resumed): shown as "n/a".

The published models (:mod:`lm_eval_ext.published.elitr`: the released answers with the paper's
GPT-4 judge scores) are drawn as grey markers beside the bars of the same setting and split, and
listed in the scores table.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...elitr.seed_summary import summarize
from ...judge.records import JudgeRecord
from ...published import Published
from ...results.load import Model, Run
from ..blocks import Figure, Note, Section, Table
from ..figures import model_color, new_figure, published_color, published_marker
from .common import OWN_SOURCE, TaskRun, citations, published_label, published_notes, source_text
from ...results.status import most_complete

TITLE = "ELITR-Bench"
KEY = "elitr_bench"
PREFIX = "elitr_bench_"
TYPES = ("who", "what", "when", "howmany")
POSITIONS = ("begin", "middle", "end", "several")
SETTING_ORDER = (("qa", "st"), ("qa", "mt"), ("conv", "mt"))
SPLIT_HATCH = {"dev": "", "test2": "//"}
JUDGE_FIELDS = ("judge", "model", "base_url_host", "template", "template_sha256", "language", "temperature", "top_p",
                "max_tokens", "seed")

INTRO = (
    "Thonet et al. (COLING 2025). Questions about hour-long meeting transcripts, each answer graded 1-10 by an LLM "
    "judge against a reference answer. Settings: QA single-turn (a fresh prompt per question), QA multi-turn and "
    "Conv multi-turn (a meeting's questions in one conversation; Conv rewrites some with pronouns). Answer "
    "positions: begin/middle/end of the transcript, or several places. middle_pvalue: one-tailed Welch t-test "
    "that middle-position questions score lower than the others. When the judge failed on some answers, score is "
    "undefined (n/a) until judging is resumed; judge_failures counts them."
)


@dataclass
class Setting(TaskRun):
    """One ELITR-Bench task of a model: its most complete run, and one run per seed."""

    seed_runs: list[Run]
    set: str
    split: str
    language: str
    mode: str

    @property
    def name(self) -> str:
        """The setting as the report names it (e.g. "QA single-turn", "Conv multi-turn (cs)")."""
        mode = "single-turn" if self.mode == "st" else "multi-turn"
        return f"{self.set.upper() if self.set == 'qa' else self.set.capitalize()} {mode}{'' if self.language == 'en' else f' ({self.language})'}"

    @property
    def judge(self) -> JudgeRecord | None:
        """The judge record of the setting's task in its run, if any."""
        return self.run.judge_record(self.task)

    @property
    def seeds(self) -> int:
        """How many seeds the shown score stands for (1 without seed runs)."""
        return max(len(self.seed_runs), 1)

    def seed_summary(self) -> dict[str, dict] | None:
        """{metric: {mean, std, n, values}} over the seed runs (None with fewer than two seeds)."""
        if len(self.seed_runs) < 2:
            return None
        return summarize([run.path for run in self.seed_runs]).get(self.task)


def settings_of(models: list[Model]) -> list[Setting]:
    """Every ELITR-Bench task (not group) any model ran."""
    found = []
    for index, model in enumerate(models):
        for task in model.tasks:
            if not task.startswith(PREFIX):
                continue
            runs = model.runs_with(task)
            shown = most_complete(runs, task)
            kwargs = shown.task_config(task).get("dataset_kwargs") or {}
            if not {"question_set", "split", "mode"} <= kwargs.keys():
                continue
            seeds = {run.seed: None for run in runs}  # the most complete run of each seed
            by_seed = [most_complete([run for run in runs if run.seed == seed], task) for seed in seeds]
            found.append(Setting(model, index, task, shown, by_seed, kwargs["question_set"], kwargs["split"],
                                 kwargs.get("language", "en"), kwargs["mode"]))
    order = {key: i for i, key in enumerate(SETTING_ORDER)}
    return sorted(found, key=lambda s: (s.index, s.language, order.get((s.set, s.mode), 9), s.split, s.task))


def build(models: list[Model], published: Published | None = None) -> Section | None:
    """The section for every model with an ELITR-Bench task, or None."""
    settings = settings_of(models)
    if not settings:
        return None
    section = Section(KEY, TITLE, INTRO)
    section.blocks += _notes(settings)
    section.blocks += [Note(text) for text in published_notes(published)]
    if published is not None:  # the published numbers of the tasks the report's models ran
        published = Published([n for n in published.numbers if n.task in {s.task for s in settings}])
    shown = [m for m in models if any(s.model is m for s in settings)]
    if any(_score(s) is not None for s in settings):
        section.blocks.append(_settings_figure(shown, settings, published))
    if any(s.metrics.get(f"score_{n}") is not None for s in settings for n in (*TYPES, *POSITIONS)):
        section.blocks.append(_breakdown_figure(settings))
    section.blocks.append(_scores_table(settings, published))
    seeds = _seeds_table(settings)
    if seeds.rows:
        section.blocks.append(seeds)
    section.blocks.append(_judge_table(settings))
    return section


def _notes(settings: list[Setting]) -> list[Note]:
    notes = []
    judges = {(s.judge.model, s.judge.template_sha256) if s.judge else None for s in settings}
    if len(judges) > 1:
        notes.append(Note("These tasks were not all scored by the same judge (model, template): scores are comparable "
                          "only between rows with the same judge (see the judge table)."))
    unjudged = [f"{s.model.label} · {s.task}" for s in settings if not s.judge]
    if unjudged:
        notes.append(Note("No judge record for " + "; ".join(unjudged) + "."))
    for name, what in (("judge_failures", "answers the judge could not score (score is n/a until judging is "
                                           "resumed)"),
                       ("prompts_truncated", "prompts whose transcript was shortened to fit the model")):
        hits = [f"{s.model.label} · {s.task}: {int(s.metrics[name])}" for s in settings if s.metrics.get(name)]
        if hits:
            notes.append(Note(f"{what[0].upper() + what[1:]}: " + "; ".join(hits) + "."))
    undefined = [s for s in settings if _score(s) is None]
    failed = [f"{s.model.label} · {s.task}" for s in undefined if not s.metrics.get("not_judged")]
    if failed:
        notes.append(Note("No score to show (n/a) for " + "; ".join(failed) + ": the judge failed on some answers "
                          "(judge_failures), so the mean would leave them out; rerun with the same judge cache to "
                          "resume judging."))
    dry = [f"{s.model.label} · {s.task}: {int(s.metrics['not_judged'])}" for s in undefined
           if s.metrics.get("not_judged")]
    if dry:
        notes.append(Note("No score to show (n/a) for answers a judge dry run (judge_dry_run) did not judge: " +
                          "; ".join(dry) + ". Run again without judge_dry_run, or judge the saved answers with "
                          "`lm-eval-ext resume DIR --metadata ...` (the run's log names DIR; the run's --metadata "
                          "with judge_dry_run false)."))
    return notes


def _score(s: Setting) -> tuple[float, float | None] | None:
    """The score a figure shows (the mean over seeds with their sd, or the shown run's score and no sd);
    None when undefined."""
    summary = s.seed_summary()
    if summary and "score" in summary:
        return summary["score"]["mean"], summary["score"].get("std")
    return (s.metrics["score"], None) if "score" in s.metrics else None


def _settings_figure(models: list[Model], settings: list[Setting], published: Published | None) -> Figure:
    groups = list(dict.fromkeys(s.name for s in settings))
    splits = list(dict.fromkeys(s.split for s in sorted(settings, key=lambda s: s.split)))
    bars = [(i, m, split) for i, m in enumerate(models) for split in splits
            if any(s.model is m and s.split == split for s in settings)]
    names = published.models() if published else []
    task_of = {(s.name, s.split): s.task for s in settings}
    # the published models get a lane of their own per split, right of the bars
    lanes = [split for split in splits if any(published.get(n, task_of[(g, split)], "score") for n in names
                                               for g in groups if (g, split) in task_of)] if names else []
    fig = new_figure(max(6.0, 1.6 * len(groups) + 3.2), 4.2)
    ax = fig.subplots()
    x = np.arange(len(groups))
    width = 0.8 / max(len(bars) + len(lanes), 1)
    for j, (i, model, split) in enumerate(bars):
        for group, position in zip(groups, x - 0.4 + width * (j + 0.5)):
            match = [s for s in settings if s.model is model and s.split == split and s.name == group]
            if not match:
                continue
            shown = _score(match[0])
            if shown is None:
                ax.text(position, 0.2, "n/a", rotation=90, ha="center", va="bottom", fontsize="x-small",
                        color=model_color(i))
                continue
            mean, sd = shown
            # an error bar only from two seeds or more: one seed has no spread to show
            ax.bar(position, mean, width, yerr=None if sd is None else sd, capsize=3 if sd is not None else 0,
                   color=model_color(i), hatch=SPLIT_HATCH.get(split, ".."), edgecolor="white",
                   label=f"{model.label} · {split}")
            seeds = match[0].seeds
            ax.text(position, 0.2, f"{seeds} seed{'s' if seeds > 1 else ''}", ha="center", va="bottom",
                    fontsize="xx-small", rotation=90, color="white")
    caption = ("Bars: score of each task; with runs for two seeds or more, the mean over the seeds with the sample "
               "standard deviation as error bar (the paper's test2 protocol); a single seed has no error bar (the "
               "label in the bar gives the number of seeds). n/a: score undefined (judge failures).")
    for rank, name in enumerate(names):
        xs, ys = [], []
        for lane, split in enumerate(lanes):
            for group, position in zip(groups, x - 0.4 + width * (len(bars) + lane + 0.5)):
                value = published.value(name, task_of[(group, split)], "score") if (group, split) in task_of else None
                if value is not None:
                    xs.append(position)
                    ys.append(value)
        ax.plot(xs, ys, linestyle="none", marker=published_marker(rank), markerfacecolor="none", markersize=7,
                markeredgecolor=published_color(rank, len(names)), label=published_label(name))
    if lanes:
        caption += (" Grey hollow markers, right of the bars (one column per split): the models the paper evaluated, "
                    "their released answers scored by the paper's GPT-4 judge "
                    f"({citations(published.numbers)}); comparable with the bars only when the bars' judge is the "
                    "same (see the judge table).")
    ax.set_xticks(x, groups)
    ax.set_xlim(-0.5, len(groups) - 0.5)
    ax.set_ylim(0, 10.5)
    ax.set_ylabel("mean judge score (1-10)")
    handles, labels = ax.get_legend_handles_labels()
    unique = dict(zip(labels, handles))
    ax.legend(unique.values(), unique.keys(), fontsize="small", loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return Figure("elitr_settings", "ELITR-Bench: judge score per setting", caption, fig)


def _breakdown_figure(settings: list[Setting]) -> Figure:
    fig = new_figure(11.0, 4.0)
    axes = fig.subplots(1, 2, sharey=True)
    width = 0.8 / max(len(settings), 1)
    for ax, names, title in ((axes[0], TYPES, "question type"), (axes[1], POSITIONS, "answer position")):
        x = np.arange(len(names))
        for j, s in enumerate(settings):
            values = [s.metrics.get(f"score_{n}", np.nan) for n in names]
            label = f"{s.model.label} · {s.name} {s.split}"
            if ax is axes[1] and "middle_pvalue" in s.metrics:
                label += f" (p = {s.metrics['middle_pvalue']:.3g})"
            ax.bar(x - 0.4 + width * (j + 0.5), values, width, color=model_color(s.index),
                   alpha=0.45 + 0.55 * (j + 1) / len(settings), hatch=SPLIT_HATCH.get(s.split, ".."), edgecolor="white",
                   label=label)
        ax.set_xticks(x, names)
        ax.set_title(title, fontsize="medium")
        ax.set_ylim(0, 10.5)
    axes[0].set_ylabel("mean judge score (1-10)")
    axes[1].legend(fontsize="x-small", loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return Figure("elitr_breakdown", "ELITR-Bench: score per question type and answer position",
                  "score_<type> and score_<position> of each task (its most complete run). p: middle_pvalue, the one-tailed Welch "
                  "t-test that middle-position questions score lower than the others.", fig)


SCORE_COLUMNS = ("score", "score_stderr", *(f"score_{t}" for t in TYPES), *(f"score_{p}" for p in POSITIONS),
                 "score_diff", "middle_pvalue", "judge_failures", "prompts_truncated")


def _scores_table(settings: list[Setting], published: Published | None) -> Table:
    rows = []
    for s in settings:
        values, errors = s.metrics, s.run.stderr(s.task)
        cells = [errors.get("score") if c == "score_stderr" else values.get(c) for c in SCORE_COLUMNS]
        rows.append([s.model.label, s.task, s.set, s.split, s.language, s.mode, s.run.seed, *cells, OWN_SOURCE])
    seen = set()
    for name in (published.models() if published else []):
        for s in settings:
            number = published.get(name, s.task, "score")
            if number is None or (name, s.task) in seen:
                continue
            seen.add((name, s.task))
            cells = [published.value(name, s.task, c) if c not in ("score_stderr", "prompts_truncated") else None
                     for c in SCORE_COLUMNS]
            rows.append([published_label(name), s.task, s.set, s.split, s.language, s.mode, None, *cells,
                         source_text(number)])
    return Table("elitr_scores", "Scores per task", ["model", "task", "set", "split", "language", "mode", "seed",
                                                     *SCORE_COLUMNS, "source"], rows,
                 "The harness's results of each task's most complete run. score empty: undefined (judge failures; "
                 "judging can be resumed). middle_pvalue empty: the test is undefined (fewer than two scores on a "
                 "side, or no variance). Rows marked (published): the released answers with the paper's GPT-4 "
                 "judge scores, with the tasks' definitions.")


def _seeds_table(settings: list[Setting]) -> Table:
    rows = []
    for s in settings:
        summary = s.seed_summary()
        if not summary:
            continue
        seeds = [run.seed for run in s.seed_runs]
        for metric in ("score", *(f"score_{t}" for t in TYPES), *(f"score_{p}" for p in POSITIONS), "score_diff",
                       "judge_failures"):
            entry = summary.get(metric)
            if entry:
                rows.append([s.model.label, s.task, metric, entry["mean"], entry.get("std"), entry["n"],
                             " ".join(map(str, seeds)), " ".join(map(repr, entry["values"]))])
    return Table("elitr_seeds", "Mean and standard deviation over seeds",
                 ["model", "task", "metric", "mean", "sd", "n", "seeds", "values"], rows,
                 "Over the most complete run of each seed (sd: sample standard deviation, n - 1), as the paper reports test2.")


def _judge_table(settings: list[Setting]) -> Table:
    rows = []
    for s in settings:
        judge = s.judge
        recorded = [getattr(judge, f) for f in JUDGE_FIELDS] if judge else [None] * len(JUDGE_FIELDS)
        stats = (judge and judge.run) or {}
        usage = (judge and judge.usage) or {}
        rows.append([s.model.label, s.task, *recorded, stats.get("calls"), stats.get("from_cache"), stats.get("scored"),
                     usage.get("prompt_tokens"), usage.get("completion_tokens"), usage.get("cost_usd")])
    columns = [{"model": "judge_model", "seed": "judge_seed"}.get(f, f) for f in JUDGE_FIELDS]
    return Table("elitr_judge", "The judge of each task",
                 ["model", "task", *columns, "calls", "from_cache", "scored", "input_tokens", "output_tokens", "cost_usd"],
                 rows, "As each task recorded it in the results file (configs.<task>.metadata.judge), most complete run. "
                 "input_tokens, output_tokens: what the judge's replies reported (verdicts from the cache cost "
                 "nothing); cost_usd: at the prices the run was given (empty without).")
