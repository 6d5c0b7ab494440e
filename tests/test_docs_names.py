"""The names a benchmark's README gives its metrics and its documents' fields are the names the tasks write.

Each README lists them in two tables, names in backticks in the first column: under "## Metrics" the table
whose first header is `metric`, under "## Per-sample logs" the table whose first header is `doc field` (its
second column names the tasks a field belongs to, as globs, or `all`). In a name, `<n>` stands for a number,
another `<...>` for any name part, `{a,b}` for either word.

They are checked against the task YAMLs' `metric_list` (what the harness reports for every document), the
metrics the task classes add for some documents only (`subset_metrics`), and the output of real runs of
SmolLM2-135M-Instruct (tests/fixtures/real/, tests/fixtures/README.md): every metric a real results file holds
and every `doc` field a real sample has is documented, and every documented name is in that output.
"""
from __future__ import annotations

import fnmatch
import json
import re

import pytest
import yaml

from helpers.files import FIXTURES, PROJECT_ROOT

BENCHMARKS = ("lieder", "lost_in_the_middle", "magnifico", "elitr_bench")
REAL = FIXTURES / "real"
# real `doc`s kept apart from a samples file (tests/fixtures/README.md): file -> the task of its run
REAL_DOCS = {REAL / "litm_sweep7_documents.jsonl": "litm_qa_10docs"}


class _Loader(yaml.SafeLoader):
    """Task YAMLs with their `!function` tags read as nothing: only the names matter here."""


_Loader.add_multi_constructor("!", lambda loader, suffix, node: None)


def _configs(benchmark: str) -> list[dict]:
    return [yaml.load(path.read_text(encoding="utf-8"), Loader=_Loader) or {}
            for path in sorted((PROJECT_ROOT / "tasks" / benchmark).glob("*.yaml"))]


def _task_names(benchmark: str) -> set[str]:
    return {config["task"] for config in _configs(benchmark) if isinstance(config.get("task"), str)}


def _yaml_metrics(benchmark: str) -> set[str]:
    return {m["metric"] for config in _configs(benchmark) for m in config.get("metric_list") or []}


def _subset_metrics(benchmark: str) -> set[str]:
    """What the task classes add beyond the YAML where no real run shows it (ELITR-Bench, LIEDER)."""
    if benchmark == "elitr_bench":
        from lm_eval_ext.elitr.metrics import SUBSET_METRICS

        return set(SUBSET_METRICS)
    if benchmark == "lieder":
        from lm_eval_ext.lieder.scoring import family_metric_names
        from lm_eval_ext.lieder.stimuli import FAMILIES

        return set(family_metric_names(FAMILIES, relative=True))
    return set()


# -- the README's tables ----------------------------------------------------------------------

def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in re.split(r"(?<!\\)\|", line.strip().strip("|"))]


def _table(benchmark: str, section: str, header: str) -> list[list[str]]:
    text = (PROJECT_ROOT / "tasks" / benchmark / "README.md").read_text(encoding="utf-8")
    found = re.search(rf"^## {re.escape(section)}\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert found, f"{benchmark}/README.md has no '## {section}' section"
    lines = found[1].splitlines()
    for i, line in enumerate(lines):
        if line.startswith("|") and _cells(line)[0] == header:
            rows = []
            for row in lines[i + 2:]:
                if not row.startswith("|"):
                    break
                rows.append(_cells(row))
            return rows
    raise AssertionError(f"{benchmark}/README.md, '## {section}': no table whose first column is '{header}'")


def _names(cell: str) -> list[str]:
    return re.findall(r"`([^`]+)`", cell)


def _pattern(name: str) -> re.Pattern:
    parts = []
    for part in re.split(r"(<\w+>|\{[^}]*\})", name):
        if part == "<n>":
            parts.append(r"\d+")
        elif part.startswith("<"):
            parts.append(r"[a-z0-9_]+")
        elif part.startswith("{"):
            parts.append("(?:" + "|".join(map(re.escape, part[1:-1].split(","))) + ")")
        else:
            parts.append(re.escape(part))
    return re.compile("".join(parts))


def documented_metrics(benchmark: str) -> list[str]:
    """The metric names of the README's metrics table."""
    return [name for row in _table(benchmark, "Metrics", "metric") for name in _names(row[0])]


def documented_doc_fields(benchmark: str) -> list[tuple[str, list[str]]]:
    """(field, task globs) of the README's `doc field` table."""
    rows = _table(benchmark, "Per-sample logs", "doc field")
    return [(name, _names(row[1]) or ["*"]) for row in rows for name in _names(row[0])]


def _undocumented(names: set[str], documented: list[str]) -> list[str]:
    return sorted(n for n in names if not any(_pattern(d).fullmatch(n) for d in documented))


def _unseen(documented: list[str], names: set[str]) -> list[str]:
    return [d for d in documented if not any(_pattern(d).fullmatch(n) for n in names)]


# -- real output ------------------------------------------------------------------------------

def real_metrics(benchmark: str) -> set[str]:
    """The metrics of the benchmark's tasks in the real results files, and of their samples in real samples files."""
    tasks, names = _task_names(benchmark), set()
    for path in REAL.rglob("results_*.json"):
        for task, values in json.loads(path.read_text(encoding="utf-8"))["results"].items():
            if task in tasks:  # "<metric>,<filter>" and "<metric>_stderr,<filter>"
                names |= {key.split(",")[0] for key in values if "," in key and "_stderr," not in key}
    for _, sample in _real_samples(benchmark):
        names |= set(sample.get("metrics") or [])
    return names


def _real_samples(benchmark: str) -> list[tuple[str, dict]]:
    """(task, sample) of every real sample of the benchmark's tasks (samples files, and `doc`s kept apart)."""
    tasks, found = _task_names(benchmark), []
    files = {path: re.fullmatch(r"samples_(.+)_\d{4}-.*\.jsonl", path.name) for path in REAL.rglob("samples_*.jsonl")}
    named = {path: match[1] for path, match in files.items() if match} | REAL_DOCS
    for path, task in sorted(named.items()):
        if task in tasks:
            found += [(task, json.loads(line)) for line in path.read_text(encoding="utf-8").splitlines() if line]
    return found


# -- the checks -------------------------------------------------------------------------------

@pytest.mark.parametrize("benchmark", BENCHMARKS)
def test_the_tables_name_metrics_and_doc_fields_of_the_benchmarks_tasks(benchmark):
    assert documented_metrics(benchmark)
    fields = documented_doc_fields(benchmark)
    assert fields
    tasks = _task_names(benchmark)
    for field, globs in fields:
        for glob in globs:
            assert fnmatch.filter(tasks, glob), f"{benchmark}: doc field {field}: no task matches {glob!r}"


@pytest.mark.parametrize("benchmark", BENCHMARKS)
def test_the_tasks_metrics_are_documented_and_nothing_else(benchmark):
    documented = documented_metrics(benchmark)
    missing = _undocumented(_yaml_metrics(benchmark) | _subset_metrics(benchmark), documented)
    assert not missing, f"{benchmark}: metrics of the tasks the README's metrics table does not name: {missing}"
    unknown = _unseen(documented, _yaml_metrics(benchmark) | _subset_metrics(benchmark) | real_metrics(benchmark))
    assert not unknown, f"{benchmark}: the README names metrics no task reports: {unknown}"


@pytest.mark.parametrize("benchmark", BENCHMARKS)
def test_real_runs_write_the_documented_metrics(benchmark):
    real = real_metrics(benchmark)
    if not real:
        pytest.skip(f"no real run of a task of {benchmark} in tests/fixtures/real")
    documented = documented_metrics(benchmark)
    missing = _undocumented(real, documented)
    assert not missing, f"{benchmark}: metrics of real runs the README's metrics table does not name: {missing}"
    # a score by slice (question type, answer position, family) is written only for the slices a run's documents
    # cover; the task code names those (the test above)
    by_slice = _subset_metrics(benchmark)
    unseen = [d for d in _unseen(documented, real) if not any(_pattern(d).fullmatch(n) for n in by_slice)]
    assert not unseen, f"{benchmark}: the README names metrics no real run wrote: {unseen}"


@pytest.mark.parametrize("benchmark", BENCHMARKS)
def test_real_samples_have_the_documented_doc_fields(benchmark):
    samples = _real_samples(benchmark)
    if not samples:
        pytest.skip(f"no real sample of a task of {benchmark} in tests/fixtures/real")
    fields = documented_doc_fields(benchmark)
    for task, sample in samples:
        expected = {field for field, globs in fields if any(fnmatch.fnmatch(task, g) for g in globs)}
        real = set(sample["doc"])
        assert real == expected, (f"{task}, document {sample.get('doc_id')}: real doc fields the README does not "
                                  f"name: {sorted(real - expected)}; named but absent: {sorted(expected - real)}")
