"""The static leaderboard site: HTML pages, one stylesheet and one small script, no server and no CDN.

Pages (all relative links, so the site opens from disk through file:// and from any static host):

- ``index.html``: one row per model (submitted records and the papers' models), the headline
  metric of each benchmark (:data:`OVERVIEW`);
- ``<benchmark>.html``: one table per task with its headline metrics (the breakdowns); LIEDER
  also shows the human-baseline comparison and the novelty test of each record;
- ``records/<model>.html`` (and the record's JSON beside it): versions, runs, seeds, judge,
  status, and the problems that make a record unvalidated;
- ``published.html``: every published number with its source.

Records that disagree on a task's version are shown in separate tables (and separate overview
columns), never averaged; published models count as this plugin's task versions. Partial,
truncated and unvalidated records carry a badge. Tables sort by clicking a header (``sort.js``).
"""
from __future__ import annotations

import html
import json
import math
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from .. import __version__
from ..export.benchmarks import BENCHMARKS, Benchmark
from ..results.output import output_dir, write_bytes, write_text
from .records import Entry

# the metric of each benchmark in the overview: the papers' main number
OVERVIEW = {"lieder": "lieder_base/acc", "lost_in_the_middle": "litm_qa_20docs/acc", "magnifico": "magnifico/rel_perf",
            "elitr_bench": "elitr_bench_qa_dev_st/score"}
ASSETS = ("site.css", "sort.js")


@dataclass
class Site:
    """What a build wrote."""

    index: Path
    pages: list[Path]
    entries: list[Entry]


def _e(text) -> str:
    return html.escape(str(text))


def _number(value) -> str:
    """A value as shown: 4 decimals, or 3 significant digits for p-values below 0.001."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, int) or float(value).is_integer() and abs(value) >= 1:
        return str(int(value))
    return f"{value:.3g}" if 0 < abs(value) < 1e-3 else f"{value:.4f}"


def _page(title: str, body: str, depth: int = 0, subtitle: str = "") -> str:
    up = "../" * depth
    nav = " ".join(f'<a href="{up}{key}.html">{_e(benchmark.title)}</a>' for key, benchmark in
                   ((b.key, b) for b in BENCHMARKS))
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
        f"<title>{_e(title)}</title><link rel=\"icon\" href=\"data:,\">"
        f"<link rel=\"stylesheet\" href=\"{up}assets/site.css\"><script src=\"{up}assets/sort.js\" defer></script></head>"
        f"<body><header><nav><a href=\"{up}index.html\">Overview</a> {nav} <a href=\"{up}published.html\">Published "
        f"results</a></nav><h1>{_e(title)}</h1>{f'<p class=meta>{_e(subtitle)}</p>' if subtitle else ''}</header>"
        f"<main>{body}</main><footer><p class=\"meta\">Built by lm-eval-ext {_e(__version__)} from leaderboard "
        "records (docs/leaderboard.md says how to submit one).</p></footer></body></html>\n"
    )


def _badges(entry: Entry) -> str:
    badges = []
    if entry.published:
        badges.append('<span class="badge published" title="a model the paper evaluated; numbers from the paper or '
                      'its released files (see Published results)">published</span>')
    elif entry.record:
        reasons = "; ".join((f"{r['task']}: " if r["task"] else "") + r["reason"] for r in entry.record["status"]["reasons"])
        if entry.status in ("partial", "truncated"):
            badges.append(f'<span class="badge {entry.status}" title="{_e(reasons)}">{entry.status}</span>')
        if entry.problems:
            badges.append(f'<span class="badge unvalidated" title="{_e("; ".join(entry.problems))}">unvalidated</span>')
    return "".join(badges)


def _model_cell(entry: Entry, depth: int = 0) -> str:
    up = "../" * depth
    href = f"{up}published.html#{entry.slug}" if entry.published else f"{up}records/{entry.slug}.html"
    return (f'<td data-value="{_e(entry.label.lower())}"><a href="{_e(href)}">{_e(entry.label)}</a>'
            f'{_badges(entry)}</td>')


def _value_cell(value, title: str | None = None) -> str:
    if value is None:
        return '<td class="num" data-value=""></td>'
    tip = f' title="{_e(title)}"' if title else ""
    return f'<td class="num" data-value="{value!r}"{tip}>{_e(_number(value))}</td>'


def _table(columns: list[str], rows: list[str], caption: str = "") -> str:
    head = "".join(f'<th scope="col"><button type="button">{_e(c)}</button></th>' for c in columns)
    cap = f'<p class="caption">{_e(caption)}</p>' if caption else ""
    return (f'{cap}<div class="scroll"><table class="sortable"><thead><tr>{head}</tr></thead>'
            f'<tbody>{"".join(rows)}</tbody></table></div>')


def _row(entry: Entry, cells: list[str], depth: int = 0) -> str:
    cls = ' class="published"' if entry.published else ""
    return f'<tr{cls} data-model="{_e(entry.label)}">{_model_cell(entry, depth)}{"".join(cells)}</tr>'


def _versions(entries: list[Entry], task: str) -> list[str | None]:
    """The versions of ``task`` among the entries that have a value of it, in a fixed order."""
    found = {entry.versions.get(task) for entry in entries if any(k.startswith(f"{task}/") for k in entry.values)}
    return sorted(found, key=lambda v: (v is None, str(v)))


# -- overview ------------------------------------------------------------------------------


def overview_page(entries: list[Entry]) -> str:
    """index.html: every model, the overview metric of each benchmark (one column per task version)."""
    columns, keys = ["model", "from"], []
    for benchmark in BENCHMARKS:
        key = OVERVIEW[benchmark.key]
        task = key.split("/")[0]
        versions = _versions(entries, task) or [None]
        for version in versions:
            suffix = f" (v{version})" if len(versions) > 1 else ""
            columns.append(f"{benchmark.title}: {key}{suffix}")
            keys.append((key, task, version))
    rows = [_row(entry, [f'<td class="from" data-value="{_e(entry.origin)}">{_e(entry.origin)}</td>',
                         *(_value_cell(entry.values.get(key) if entry.versions.get(task) == version else None,
                                       entry.sources.get(key)) for key, task, version in keys)]) for entry in entries]
    versions_note = ""
    if len(keys) > len(BENCHMARKS):
        versions_note = (" A task at two versions has two columns: results of different versions are never "
                         "compared or averaged.")
    body = (
        "<p>One row per submitted record and per model the papers evaluated (marked <em>published</em>, numbers "
        "from the paper or its released files). Click a column header to sort. Each model links to its record "
        "(versions, runs, seeds, judge, date) or to the source of its numbers. Badges: <em>partial</em> (some items "
        "not scored), <em>truncated</em> (some prompts cut to fit the model), <em>unvalidated</em> (the record "
        "fails `lm-eval-ext leaderboard validate`; hover for why).</p>"
        + _table(columns, rows, "Headline metric of each benchmark: "
                 + "; ".join(f"{b.title}: {OVERVIEW[b.key]}" for b in BENCHMARKS) + "." + versions_note)
    )
    return body


# -- one page per benchmark -------------------------------------------------------------------


def _benchmark_tasks(benchmark: Benchmark, entries: list[Entry]) -> list[str]:
    tasks = {key.split("/")[0] for entry in entries for key in entry.values if benchmark.owns(key.split("/")[0])}
    first = OVERVIEW[benchmark.key].split("/")[0]
    return sorted(tasks, key=lambda t: (t != first, t))


def benchmark_page(benchmark: Benchmark, entries: list[Entry]) -> str:
    """<benchmark>.html: one table per task (and version) with the task's headline metrics."""
    mine = [e for e in entries if (e.published and e.benchmark == benchmark.key) or
            (not e.published and any(benchmark.owns(k.split("/")[0]) for k in e.values))]
    parts = [f"<p>The headline metric is <code>{_e(OVERVIEW[benchmark.key])}</code>; each table below is one task "
             "with the metrics the paper reports (the breakdowns). Click a column header to sort.</p>"]
    if not mine:
        parts.append('<p class="note">No record or published model has results on this benchmark.</p>')
    for task in _benchmark_tasks(benchmark, mine):
        versions = _versions(mine, task)
        for version in versions:
            rows_of = [e for e in mine if e.versions.get(task) == version and any(k.startswith(f"{task}/") for k in e.values)]
            names = {k.split("/", 1)[1]: None for e in rows_of for k in e.values if k.startswith(f"{task}/")}
            metrics = benchmark.headline(task, names)
            if not metrics:
                continue
            rows = [_row(e, [_value_cell(e.values.get(f"{task}/{m}"), e.sources.get(f"{task}/{m}")) for m in metrics])
                    for e in rows_of if any(f"{task}/{m}" in e.values for m in metrics)]
            label = f" (version {version})" if version is not None else ""
            parts.append(f"<h2 id=\"{_e(task)}-{_e(version)}\">{_e(task)}{_e(label)}</h2>")
            if len(versions) > 1:
                parts.append('<p class="note">Records of another version of this task are in a separate table: '
                             "different versions are never compared or averaged.</p>")
            parts.append(_table(["model", *metrics], rows))
    if benchmark.key == "lieder":
        parts.append(_lieder_derived(mine))
    if benchmark.key == "elitr_bench":
        parts.append(_judges(mine))
    return "".join(parts)


def _lieder_derived(entries: list[Entry]) -> str:
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
        cells = [_value_cell((human.get("model") or {}).get("acc")), _value_cell((human.get("human") or {}).get("acc")),
                 *(_value_cell(test.get(k)) for k in ("base_acc", "diff_acc", "groups_up", "groups_down", "p_two_sided",
                                                      "p_diff_gt_base"))]
        rows.append(_row(entry, cells))
    if not rows:
        return ""
    return ("<h2 id=\"beyond\">Beyond the paper: human baseline and novelty test</h2>"
            + _table(columns, rows, "From each record's sample logs (benchmarks.lieder.derived): the model's "
                     "lieder_base acc on the two sentence families humans judged, beside the humans'; the paired "
                     "exact sign test over the 48 noun x family groups of lieder_base vs lieder_diff on the 7 "
                     "comparisons with a pos_pos side (p one-sided for diff > base)."))


def _judges(entries: list[Entry]) -> str:
    columns = ["model", "task", "judge model", "template", "validated: Pearson r vs gold", "n"]
    rows = []
    for entry in entries:
        record = entry.record or {}
        for task, judge in sorted((record.get("judge") or {}).items()):
            validation = next((v for v in record.get("judge_validation") or []
                               if v["judge"]["model"] == judge.get("model")
                               and v["judge"]["template_sha256"] == judge.get("template_sha256")), None)
            gold = (validation or {}).get("vs_gold") or {}
            rows.append(f'<tr>{_model_cell(entry)}<td>{_e(task)}</td><td>{_e(judge.get("model"))}</td>'
                        f'<td>{_e(judge.get("template"))}</td>{_value_cell(gold.get("pearson"))}'
                        f'{_value_cell(gold.get("n"))}</tr>')
    if not rows:
        return ""
    return ("<h2 id=\"judges\">Judges</h2>"
            + _table(columns, rows, "The judge each record's tasks were scored by, and its agreement with the expert "
                     "human scores of ELITR-Bench's validation file (empty: not validated). Scores of different "
                     "judges are not comparable; the published models were judged by the paper's GPT-4 judge."))


# -- record pages and published numbers ---------------------------------------------------------


class Markup(str):
    """HTML that is already escaped."""


def _dl(items: list[tuple[str, object]]) -> str:
    return "<dl>" + "".join(f"<dt>{_e(k)}</dt><dd>{v if isinstance(v, Markup) else _e(v)}</dd>" for k, v in items) + "</dl>"


def _json(value) -> Markup:
    return Markup(f"<code>{_e(json.dumps(value, sort_keys=True, default=str))}</code>")


def record_page(entry: Entry) -> str:
    """records/<model>.html: what the record says about how its numbers were made."""
    record = entry.record
    status = record["status"]
    parts = [f'<p>{_badges(entry)} <a href="{_e(entry.slug)}.json">the record (JSON)</a></p>']
    if entry.problems:
        parts.append('<p class="note">Unvalidated: ' + _e("; ".join(entry.problems)) + ".</p>")
    if status["reasons"]:
        parts.append('<p class="note">' + _e(status["partial"] and "Partial" or "Truncated") + ": " + _e("; ".join(
            (f"{r['task']}: " if r["task"] else "") + r["reason"] for r in status["reasons"])) + ".</p>")
    model = record["model"]
    parts.append("<h2>Model</h2>" + _dl([("label", model["label"]), ("type", model["source"]), ("name", model["name"]),
                                          ("arguments", _json(model["args"])), ("exported", record["exported_at"])]))
    versions = record["versions"]
    parts.append("<h2>Versions</h2>" + _dl([("lm-eval", versions["lm_eval"]), ("lm-eval-ext", versions["lm_eval_ext"]),
                                             ("transformers", versions["transformers"])]))
    parts.append(_table(["task", "version", "benchmark", "documents (effective / original)"],
                        [f'<tr><td data-value="{_e(t)}">{_e(t)}</td><td data-value="{_e(v)}">{_e(v)}</td>'
                         f'<td data-value="{_e(record["tasks"][t]["benchmark"])}">{_e(record["tasks"][t]["benchmark"])}</td>'
                         f'<td>{_e(_documents(record["tasks"][t]["n_samples"]))}</td></tr>'
                         for t, v in sorted(versions["tasks"].items())]))
    parts.append("<h2>Runs</h2>")
    for index, run in enumerate(record["runs"]):
        parts.append(f"<h3>Run {index}: {_e(run['date'])}</h3>" + _dl([
            ("tasks", " ".join(run["tasks"])), ("seeds", _json(run["seeds"])), ("--limit", run["limit"]),
            ("generation", _json(run["gen_kwargs"])), ("chat template", run["apply_chat_template"]),
            ("harness", run["lm_eval_version"]), ("results file sha256", run["results_sha256"])]))
    if record["judge"]:
        parts.append("<h2>Judge</h2>" + _dl([(task, _json({k: judge.get(k) for k in ("judge", "model", "base_url_host",
                                                                                     "template", "template_sha256",
                                                                                     "temperature", "top_p", "seed")}))
                                             for task, judge in sorted(record["judge"].items())]))
        for validation in record["judge_validation"] or []:
            parts.append("<h3>Judge validation</h3>" + _dl([
                ("judge", _json(validation["judge"])), ("file", validation["source"]),
                ("scored", f"{validation['n_scored']} of {validation['n_items']}"),
                ("vs gold humans", _json(validation["vs_gold"])), ("vs silver humans", _json(validation["vs_silver"]))]))
    for key, benchmark in record["benchmarks"].items():
        if benchmark.get("seeds"):
            parts.append(f"<h2>Seeds: {_e(benchmark['title'])}</h2>" + _table(
                ["metric", "mean", "sd", "n", "seeds"],
                [f'<tr><td data-value="{_e(m)}">{_e(m)}</td>{_value_cell(s["mean"])}{_value_cell(s["sd"])}'
                 f'{_value_cell(s["n"])}<td>{_e(" ".join(map(str, s["seeds"])))}</td></tr>'
                 for m, s in benchmark["seeds"].items()]))
    parts.append("<h2>Data</h2>" + _dl([(name, f"{d['source']} (registry sha256 {d['registry_sha256']})")
                                         for name, d in record["data"]["datasets"].items()]))
    return "".join(parts)


def _documents(counts) -> str:
    return "" if not counts else f"{counts['effective']} / {counts['original']}"


def published_page(entries: list[Entry]) -> str:
    """published.html: every published number, by model, with its source."""
    parts = ["<p>The models each paper evaluated, with the numbers the authors published, each naming its source: "
             "a table of the paper, or a released file at a pinned commit (read and checked by the data layer). "
             "LIEDER and ELITR-Bench values are computed from the released per-item files with the tasks' own "
             "definitions; Lost in the Middle and MAGNIFICo values are transcribed from the papers' tables. "
             "MAGNIFICo's paper gives every other result as bar charts only.</p>"]
    for entry in (e for e in entries if e.published):
        benchmark = next(b for b in BENCHMARKS if b.key == entry.benchmark)
        rows = [f'<tr><td data-value="{_e(k)}">{_e(k)}</td>{_value_cell(v)}<td>{_e(entry.sources.get(k, ""))}</td></tr>'
                for k, v in entry.values.items()]
        parts.append(f'<h2 id="{_e(entry.slug)}">{_e(entry.label)} <span class="meta">{_e(benchmark.title)}</span></h2>'
                     + _table(["task/metric", "value", "source"], rows))
    return "".join(parts)


# -- building -----------------------------------------------------------------------------------


def write_site(entries: list[Entry], out: str | Path, title: str, notes: list[str]) -> Site:
    """Write every page and asset into ``out`` (atomically, file by file)."""
    out = output_dir(out)
    for name in ASSETS:
        write_bytes(out / "assets" / name, resources.files(__package__).joinpath("assets", name).read_bytes())
    records = [e for e in entries if not e.published]
    subtitle = (f"{len(records)} record(s), {sum(e.published for e in entries)} published model(s).")
    note_html = "".join(f'<p class="note">{_e(n)}</p>' for n in notes)
    pages = [write_text(out / "index.html", _page(title, note_html + overview_page(entries), subtitle=subtitle))]
    for benchmark in BENCHMARKS:
        pages.append(write_text(out / f"{benchmark.key}.html",
                                _page(f"{title}: {benchmark.title}", benchmark_page(benchmark, entries))))
    pages.append(write_text(out / "published.html", _page(f"{title}: published results", published_page(entries))))
    for entry in records:
        pages.append(write_text(out / "records" / f"{entry.slug}.html",
                                _page(f"{entry.label}", record_page(entry), depth=1,
                                      subtitle=f"leaderboard record, exported {entry.record['exported_at']}")))
        write_text(out / "records" / f"{entry.slug}.json", json.dumps(entry.record, indent=2, ensure_ascii=False) + "\n")
    return Site(pages[0], pages, entries)
