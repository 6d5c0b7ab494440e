"""The static leaderboard site: HTML pages, one stylesheet and one small script, no server and no CDN.

Pages (all relative links, so the site opens from disk through file:// and from any static host):

- ``index.html``: one row per model (submitted records and the papers' models), the headline
  metric of each benchmark (:data:`OVERVIEW`);
- ``<benchmark>.html``: one table per task with its headline metrics (the breakdowns); LIEDER
  also shows the human-baseline comparison and the novelty test of each record;
- ``records/<model>.html`` (and the record's JSON beside it): provenance (community or verified,
  the model's commit, every source file's sha256), versions, runs, seeds, judge, status, and the
  problems that make a record unvalidated;
- ``published.html``: every published number with its source.

Records that disagree on a task's version are shown in separate tables (and separate overview
columns), never averaged; published models count as this plugin's task versions. Records whose
numbers are not comparable with the papers' (:func:`.validate.not_comparable`: data the user gave,
truncated prompts, a system prompt, ``--gen_kwargs``) are in a table of their own under each table
of comparable ones, never beside the papers' models. Every record carries a *community* or
*verified* badge; partial, truncated, not comparable and unvalidated records one more each.
Tables sort by a click on a header or, from the keyboard, Enter or Space on it (``sort.js``).

The pages are the templates under ``templates/html/leaderboard/``; this module gives them data
(:class:`Cell`, :class:`Row`, :class:`Table` and plain values), never markup.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace
from importlib import resources
from pathlib import Path

from .. import __version__
from ..atomic_write import output_dir, write_bytes, write_text
from ..export.benchmarks import BENCHMARKS, Benchmark
from ..report.pages import render
from .records import Entry
from .validate import validation_of


@dataclass(frozen=True)
class Headline:
    """A benchmark's column in the overview: ``metric`` of the first of ``tasks`` a model has."""

    metric: str
    tasks: tuple[str, ...]  # in order of preference; the first is the paper's headline
    any_task: bool = False  # then any other task of the benchmark that has the metric (by name)

    @property
    def key(self) -> str:
        """The headline's ``<task>/<metric>``."""
        return f"{self.tasks[0]}/{self.metric}"

    def task_of(self, benchmark: Benchmark, entry: Entry) -> str | None:
        """The task whose value the entry shows in this column (None: it has none)."""
        if found := next((t for t in self.tasks if f"{t}/{self.metric}" in entry.values), None):
            return found
        if not self.any_task:
            return None
        others = sorted(key.split("/")[0] for key in entry.values
                        if key.endswith(f"/{self.metric}") and benchmark.owns(key.split("/")[0]))
        return others[0] if others else None

    def undefined_task(self, entry: Entry) -> str | None:
        """The first of ``tasks`` the record ran whose ``metric`` it has no value of (undefined: a record keeps no
        NaN, e.g. MAGNIFICo's rel_perf with every interpretation left out, a score no judge gave); None if none."""
        ran = (entry.record or {}).get("tasks") or {}
        return next((t for t in self.tasks if t in ran and f"{t}/{self.metric}" not in entry.values), None)


# The overview's column of each benchmark: the papers' main number. MAGNIFICo's paper reports rel_perf per
# setting (Table 3: Description and Dialogue, plausible and foreign forms): a model without the magnifico
# group's value shows the first setting it has, named in the cell.
OVERVIEW = {
    "lieder": Headline("acc", ("lieder_base",)),
    "lost_in_the_middle": Headline("acc", ("litm_qa_20docs",)),
    "magnifico": Headline("rel_perf", ("magnifico", "magnifico_description_plausible", "magnifico_description_foreign",
                                       "magnifico_dialogue_start_plausible", "magnifico_dialogue_start_foreign"),
                          any_task=True),
    "elitr_bench": Headline("score", ("elitr_bench_qa_dev_st",)),
}
ASSETS = ("site.css", "sort.js")


@dataclass
class Site:
    """What a build wrote."""

    index: Path
    pages: list[Path]
    entries: list[Entry]


@dataclass(frozen=True)
class Badge:
    """A badge after a model's name: ``kind`` (published, community, verified, partial, truncated, not_comparable,
    unvalidated) and why."""

    kind: str
    title: str

    @property
    def text(self) -> str:
        """What the badge says: its kind in words."""
        return self.kind.replace("_", " ")


@dataclass(frozen=True)
class Cell:
    """One table cell as shown; ``sort`` is what the column sorts by (None: the cell has no sort key)."""

    text: str = ""
    sort: str | None = None
    number: bool = False
    cls: str | None = None
    title: str | None = None
    href: str | None = None
    badges: tuple[Badge, ...] = ()
    task: str | None = None  # the task a value is of, when the column mixes tasks


@dataclass
class Row:
    """A table row; ``model``: the row's model (its ``data-model``), None for rows that are not a model's."""

    cells: list[Cell]
    model: str | None = None
    published: bool = False


@dataclass
class Table:
    """A sortable table under named columns; ``id``: its element id (None: none)."""

    columns: list[str]
    rows: list[Row]
    caption: str = ""
    id: str | None = None


@dataclass(frozen=True)
class Fact:
    """One line of a record page's list: a name and its value (``code``: JSON, shown as code)."""

    name: str
    value: object
    code: bool = False


def _number(value) -> str:
    """A value as shown: 4 decimals, or 3 significant digits for p-values below 0.001."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, int) or float(value).is_integer() and abs(value) >= 1:
        return str(int(value))
    return f"{value:.3g}" if 0 < abs(value) < 1e-3 else f"{value:.4f}"


def _text(text) -> Cell:
    return Cell(str(text), sort=str(text))


def _value(value, title: str | None = None, task: str | None = None) -> Cell:
    if value is None:
        return Cell(sort="", number=True)
    return Cell(_number(value), sort=repr(value), number=True, title=title, task=task)


def _undefined(task: str, metric: str, named: bool) -> Cell:
    """A headline the record's task ran for but has no value of: "n/a", not a blank (which means not run)."""
    return Cell("n/a", sort="", number=True, task=task if named else None,
                title=f"{task}/{metric} is undefined in this record (its run gave no value); its page says why")


def _reasons(record: dict, kind: str | None = None) -> str:
    """The record's status reasons (of ``kind`` only, when given), as one text."""
    return "; ".join((f"{r['task']}: " if r["task"] else "") + r["reason"] for r in record["status"]["reasons"]
                     if kind is None or r["kind"] == kind)


def _badges(entry: Entry) -> tuple[Badge, ...]:
    if entry.published:
        return (Badge("published", "a model the paper evaluated; numbers from the paper or its released files (see "
                                   "Published results)"),)
    badges = [_standing_badge(entry.record["provenance"])]
    badges += [Badge(kind, _reasons(entry.record, kind)) for kind in ("partial", "truncated")
               if entry.record["status"][kind]]
    if entry.not_comparable:
        badges.append(Badge("not_comparable",
                            "not comparable with the papers' numbers: " + "; ".join(entry.not_comparable)))
    if entry.problems:
        badges.append(Badge("unvalidated", "; ".join(entry.problems)))
    return tuple(badges)


def _standing_badge(provenance: dict) -> Badge:
    check = provenance["verification"]
    if check is None:
        return Badge("community", "as submitted: the maintainers have not rerun it")
    return Badge("verified", f"the maintainers reran it: {check['metrics_compared']} metrics agreed within "
                             f"{check['sigmas']:g} standard errors (verified {check['verified_at'][:10]} with "
                             f"lm-eval-ext {check['lm_eval_ext']})")


def _model_cell(entry: Entry, depth: int = 0) -> Cell:
    up = "../" * depth
    href = f"{up}published.html#{entry.slug}" if entry.published else f"{up}records/{entry.slug}.html"
    return Cell(entry.label, sort=entry.label.lower(), href=href, badges=_badges(entry))


def _row(entry: Entry, cells: list[Cell], depth: int = 0) -> Row:
    return Row([_model_cell(entry, depth), *cells], model=entry.label, published=entry.published)


def _versions(entries: list[Entry], task: str) -> list[str | None]:
    """The versions of ``task`` among the entries that have a value of it, in a fixed order."""
    found = {entry.versions.get(task) for entry in entries if any(k.startswith(f"{task}/") for k in entry.values)}
    return _ordered(found)


def _ordered(versions) -> list[str | None]:
    return sorted(versions, key=lambda v: (v is None, str(v)))


def _common(title: str, depth: int = 0, subtitle: str = "") -> dict:
    """What every page's frame (``base.html.j2``) shows."""
    return {"title": title, "subtitle": subtitle, "up": "../" * depth, "version": __version__,
            "benchmarks": [{"key": b.key, "title": b.title} for b in BENCHMARKS]}


# -- overview ------------------------------------------------------------------------------


def overview_table(entries: list[Entry], table_id: str | None = None) -> Table:
    """index.html's table of ``entries``: the overview metric of each benchmark (one column per task version)."""
    columns, shown = ["model", "from"], []
    for benchmark in BENCHMARKS:
        headline = OVERVIEW[benchmark.key]
        picked = {}  # entry -> (task, its version, whether the entry has a value of it)
        for entry in entries:
            task = headline.task_of(benchmark, entry)
            found = task or headline.undefined_task(entry)
            if found is not None:
                picked[id(entry)] = (found, entry.versions.get(found), task is not None)
        versions = _ordered({version for _, version, _ in picked.values()}) or [None]
        name = headline.key if not headline.any_task else headline.metric
        for version in versions:
            columns.append(f"{benchmark.title}: {name}" + (f" (v{version})" if len(versions) > 1 else ""))
            shown.append((headline, picked, version))
    rows = []
    for entry in entries:
        cells = [Cell(entry.origin, sort=entry.origin, cls="from")]
        for headline, picked, version in shown:
            task, task_version, defined = picked.get(id(entry), (None, None, False))
            if task is None or task_version != version:
                cells.append(_value(None))
                continue
            if not defined:
                cells.append(_undefined(task, headline.metric, task != headline.tasks[0]))
                continue
            key = f"{task}/{headline.metric}"
            cells.append(_value(entry.values[key], entry.sources.get(key), task if task != headline.tasks[0] else None))
        rows.append(_row(entry, cells))
    caption = ("Headline metric of each benchmark: "
               + "; ".join(f"{b.title}: {_headline_text(OVERVIEW[b.key])}" for b in BENCHMARKS) + ".")
    if len(columns) - 2 > len(BENCHMARKS):
        caption += " A task at two versions has two columns: results of different versions are never compared or averaged."
    return Table(columns, rows, caption, table_id)


def _headline_text(headline: Headline) -> str:
    return headline.key + (f" ({_fallback(headline)})" if headline.any_task else "")


def _fallback(headline: Headline) -> str:
    """Where the column takes a model's value from when it has no value of the headline task."""
    return (f"else {headline.metric} of the first of {', '.join(headline.tasks[1:])} or of any other task the model "
            "has, named under the value: another setting, so compare like with like on the benchmark's page")


# -- one page per benchmark -------------------------------------------------------------------


def _benchmark_tasks(benchmark: Benchmark, entries: list[Entry]) -> list[str]:
    tasks = {key.split("/")[0] for entry in entries for key in entry.values if benchmark.owns(key.split("/")[0])}
    first = OVERVIEW[benchmark.key].tasks[0]
    return sorted(tasks, key=lambda t: (t != first, t))


def benchmark_data(benchmark: Benchmark, entries: list[Entry]) -> dict:
    """What <benchmark>.html shows: one table per task (and version) with the task's headline metrics."""
    mine = [e for e in entries if (e.published and e.benchmark == benchmark.key) or
            (not e.published and any(benchmark.owns(k.split("/")[0]) for k in e.values))]
    tasks = []
    for task in _benchmark_tasks(benchmark, mine):
        versions = _versions(mine, task)
        for version in versions:
            rows_of = [e for e in mine if e.versions.get(task) == version and any(k.startswith(f"{task}/") for k in e.values)]
            names = {k.split("/", 1)[1]: None for e in rows_of for k in e.values if k.startswith(f"{task}/")}
            metrics = benchmark.headline(names)
            if not metrics:
                continue
            shown = [e for e in rows_of if any(f"{task}/{m}" in e.values for m in metrics)]
            rows = {comparable: [_row(e, [_value(e.values.get(f"{task}/{m}"), e.sources.get(f"{task}/{m}"))
                                          for m in metrics])
                                 for e in shown if e.comparable_on(task) is comparable] for comparable in (True, False)}
            anchor = f"{task}-{version}"
            tasks.append({"anchor": anchor, "heading": task + (f" (version {version})" if version is not None else ""),
                          "versions_apart": len(versions) > 1,
                          "table": Table(["model", *metrics], rows[True]) if rows[True] else None,
                          "apart": Table(["model", *metrics], rows[False], NOT_COMPARABLE_CAPTION,
                                         id=f"{anchor}-not-comparable") if rows[False] else None})
    headline = OVERVIEW[benchmark.key]
    return {"headline": headline.key, "fallback": _fallback(headline) if headline.any_task else "", "tasks": tasks,
            "derived": _lieder_derived(mine) if benchmark.key == "lieder" else None,
            "judges": _judges(mine) if benchmark.key == "elitr_bench" else None}


def _lieder_derived(entries: list[Entry]) -> Table | None:
    columns = ["model", "acc on human families", "human acc", "novelty: base acc", "novelty: diff acc", "groups up",
               "groups down", "p two-sided", "p diff > base"]
    rows = []
    for entry in entries:
        derived = ((entry.record or {}).get("benchmarks", {}).get("lieder") or {}).get("derived")
        if not derived:
            continue
        human = derived.get("human_baseline") or {}
        test = next((t for t in derived.get("novelty_test") or [] if t["metric"] == "acc" and t["scope"].startswith("pos_pos")),
                    {})
        cells = [_value((human.get("model") or {}).get("acc")), _value((human.get("human") or {}).get("acc")),
                 *(_value(test.get(k)) for k in ("base_acc", "diff_acc", "groups_up", "groups_down", "p_two_sided",
                                                 "p_diff_gt_base"))]
        rows.append(_row(entry, cells))
    if not rows:
        return None
    return Table(columns, rows, "From each record's sample logs (benchmarks.lieder.derived): the model's lieder_base "
                 "acc on the two sentence families humans judged, beside the humans'; the paired exact sign test over "
                 "the 48 noun x family groups of lieder_base vs lieder_diff on the 7 comparisons with a pos_pos side "
                 "(p one-sided for diff > base).")


def _judges(entries: list[Entry]) -> Table | None:
    columns = ["model", "task", "judge model", "template", "validated: Pearson r vs gold", "n"]
    rows = []
    for entry in entries:
        record = entry.record or {}
        for task, judge in sorted((record.get("judge") or {}).items()):
            gold = (validation_of(record, judge) or {}).get("vs_gold") or {}
            rows.append(Row([_model_cell(entry), Cell(task), Cell(str(judge.get("model"))), Cell(str(judge.get("template"))),
                             _value(gold.get("pearson")), _value(gold.get("n"))]))
    if not rows:
        return None
    return Table(columns, rows, "The judge each record's tasks were scored by, and its agreement with the expert human "
                 "scores of ELITR-Bench's validation file (empty: not validated by the same judge: endpoint host, "
                 "model and template). Scores of different judges are not comparable; the published models were "
                 "judged by the paper's GPT-4 judge.")


# -- record pages and published numbers ---------------------------------------------------------


def _json(value) -> str:
    return json.dumps(value, sort_keys=True, default=str)


# under every table of records not comparable with the papers
NOT_COMPARABLE_CAPTION = ("Not comparable with the papers: these records were measured on data the user gave, with "
                          "truncated prompts, a system prompt or other generation settings (hover their badge for "
                          "why), so they are not ranked beside the papers' models.")


def _documents(counts) -> str:
    return "" if not counts else f"{counts['effective']} / {counts['original']}"


def record_data(entry: Entry) -> dict:
    """What records/<model>.html shows: how the record's numbers were made."""
    record = entry.record
    status = record["status"]
    model, versions = record["model"], record["versions"]
    judges = [Fact(task, _json({k: judge.get(k) for k in ("judge", "model", "base_url_host", "template", "template_sha256",
                                                           "temperature", "top_p", "seed")}), code=True)
              for task, judge in sorted((record["judge"] or {}).items())]
    return {
        "badges": _badges(entry), "json_href": f"{entry.slug}.json", "problems": "; ".join(entry.problems),
        "not_comparable": entry.not_comparable,
        **provenance_data(record),
        "status": ("Partial" if status["partial"] else "Truncated") + ": " + _reasons(record) if status["reasons"] else "",
        "model": [Fact("label", model["label"]), Fact("type", model["source"]), Fact("name", model["name"]),
                  Fact("arguments", _json(model["args"]), code=True), Fact("exported", record["exported_at"])],
        "versions": [Fact("lm-eval", versions["lm_eval"]), Fact("lm-eval-ext", versions["lm_eval_ext"]),
                     Fact("transformers", versions["transformers"])],
        "tasks": Table(["task", "version", "benchmark", "documents (effective / original)"],
                       [Row([_text(t), _text(v), _text(record["tasks"][t]["benchmark"]),
                             Cell(_documents(record["tasks"][t]["n_samples"]))])
                        for t, v in sorted(versions["tasks"].items())]),
        "runs": [{"date": run["date"], "facts": [
            Fact("tasks", " ".join(run["tasks"])), Fact("seeds", _json(run["seeds"]), code=True),
            Fact("--limit", run["limit"]), Fact("generation", _json(run["gen_kwargs"]), code=True),
            Fact("chat template", run["apply_chat_template"]),
            Fact("system prompt sha256", run["system_instruction_sha"]), Fact("harness", run["lm_eval_version"]),
            Fact("results file sha256", run["results_sha256"])]} for run in record["runs"]],
        "judges": judges,
        "validations": [[Fact("judge", _json(v["judge"]), code=True), Fact("file", v["source"]),
                         Fact("scored", f"{v['n_scored']} of {v['n_items']}"),
                         Fact("vs gold humans", _json(v["vs_gold"]), code=True),
                         Fact("vs silver humans", _json(v["vs_silver"]), code=True)]
                        for v in record["judge_validation"] or []],
        "seed_tables": [{"title": benchmark["title"], "table": Table(
            ["metric", "mean", "sd", "n", "seeds"],
            [Row([_text(m), _value(s["mean"]), _value(s["sd"]), _value(s["n"]), Cell(" ".join(map(str, s["seeds"])))])
             for m, s in benchmark["seeds"].items()])}
            for benchmark in record["benchmarks"].values() if benchmark.get("seeds")],
        "data": [Fact(name, f"{d['source']} (registry sha256 {d['registry_sha256']})")
                 for name, d in record["data"]["datasets"].items()],
    }


def provenance_data(record: dict) -> dict:
    """The record page's provenance: community or verified (and against what), the model's commit, the record's
    sha256, and every file it was made from with its sha256."""
    provenance = record["provenance"]
    revision = provenance["model_revision"]
    facts = [Fact("status", _standing_badge(provenance).title),
             Fact("model commit", f"{revision['revision']} (from {revision['source']})" if revision["revision"]
                  else f"unknown: {revision['reason']}"),
             Fact("record sha256", provenance["content_sha256"], code=True)]
    check = provenance["verification"]
    if check is not None:
        facts += [Fact("verified", f"{check['verified_at']} by lm-eval-ext {check['lm_eval_ext']} on a rerun with "
                                   f"lm-eval {check['lm_eval']}"),
                  Fact("compared", f"{check['metrics_compared']} metrics of {len(check['tasks'])} task(s), within "
                                   f"{check['sigmas']:g} standard errors (equal where there is none)"),
                  *(Fact("rerun file sha256", f"{f['sha256']} {f['path']}", code=True) for f in check["files"])]
    files = Table(["kind", "run", "task", "file", "sha256"],
                  [Row([_text(f["kind"]), Cell("" if f["run"] is None else str(f["run"])), Cell(f["task"] or ""),
                        _text(f["path"]), Cell(f["sha256"], cls="sha")]) for f in provenance["files"]],
                  "Every results and samples file the record was made from, with its sha256 (run: index into the runs "
                  "below; empty: another seed's run the seeds summary read).")
    return {"provenance": facts, "source_files": files}


def published_data(entries: list[Entry]) -> dict:
    """What published.html shows: every published number, by model, with its source."""
    models = []
    for entry in (e for e in entries if e.published):
        benchmark = next(b for b in BENCHMARKS if b.key == entry.benchmark)
        rows = [Row([_text(k), _value(v), Cell(entry.sources.get(k, ""))]) for k, v in entry.values.items()]
        models.append({"anchor": entry.slug, "label": entry.label, "benchmark": benchmark.title,
                       "table": Table(["task/metric", "value", "source"], rows)})
    return {"models": models}


# -- building -----------------------------------------------------------------------------------


def write_site(entries: list[Entry], out: str | Path, title: str, notes: list[str]) -> Site:
    """Write every page and asset into ``out`` (atomically, file by file)."""
    out = output_dir(out)
    for name in ASSETS:
        write_bytes(out / "assets" / name, resources.files(__package__).joinpath("assets", name).read_bytes())
    records = [e for e in entries if not e.published]
    subtitle = f"{len(records)} record(s), {sum(e.published for e in entries)} published model(s)."
    apart = [e for e in records if not e.comparable]
    pages = [write_text(out / "index.html", render(
        "leaderboard/overview.html.j2", **_common(title, subtitle=subtitle), notes=notes,
        overview=overview_table([e for e in entries if e.comparable], "overview"),
        apart=replace(overview_table(apart, "not-comparable"), caption=NOT_COMPARABLE_CAPTION) if apart else None))]
    for benchmark in BENCHMARKS:
        pages.append(write_text(out / f"{benchmark.key}.html", render(
            "leaderboard/benchmark.html.j2", **_common(f"{title}: {benchmark.title}"), **benchmark_data(benchmark, entries))))
    pages.append(write_text(out / "published.html", render("leaderboard/published.html.j2",
                                                           **_common(f"{title}: published results"), **published_data(entries))))
    for entry in records:
        pages.append(write_text(out / "records" / f"{entry.slug}.html", render(
            "leaderboard/record.html.j2", **_common(entry.label, depth=1,
                                                    subtitle=f"leaderboard record, exported {entry.record['exported_at']}"),
            **record_data(entry))))
        write_text(out / "records" / f"{entry.slug}.json", json.dumps(entry.record, indent=2, ensure_ascii=False) + "\n")
    return Site(pages[0], pages, entries)
