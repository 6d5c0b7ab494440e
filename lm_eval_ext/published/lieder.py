"""LIEDER's published models, computed from the authors' per-item result tables, and the human baseline.

The authors' repository publishes, for every model they evaluated, one 0/1 outcome per noun x
sentence family x comparison: ``results/<exp>/<exp>_<model>_accuracy_ref.csv`` (the direct
metric; experiments base, diff, two) and ``..._accuracy_nonref.csv`` (the relative "nonref"
metric; base and diff). The data layer fetches them pinned to the same commit as the stimuli
and checks each sha256; the models are the ones the registry lists.

From each table we compute the metrics the tasks report, with the tasks' definitions
(:mod:`lm_eval_ext.lieder.comparisons`): per comparison (``acc_<comparison>``, the two controls
as ``ctrl_acc_<comparison>``), per property and overall (``acc_<property>``, ``acc``: the mean
over the informative comparisons tagged with it, controls never counted), per sentence family
(``acc_family_<family>``), and the same with ``acc_rel`` from the nonref tables. A group's
outcome is the authors' (ties, for instance, were scored by their code). The human baseline
(``human/human_accuracy.csv``, two of the three families of the base set) is shown as one more
published "model".
"""
from __future__ import annotations

import csv
import json
import re
from collections import defaultdict

from ..data import DataError, dataset_files, resolve_file
from ..data.registry import MANIFEST_PATH
from ..lieder.comparisons import comparisons_for
from ..results.lieder import HUMAN_FILE, SCOPES, comparison_metric, read_human_baseline, scope_metric
from .numbers import PublishedNumber, Source

BENCHMARK = "lieder"
CITATION = "Zhu & Frank (ACL 2024)"
TASKS = {"base": "lieder_base", "diff": "lieder_diff", "two": "lieder_two"}
HUMAN_MODEL = "Human participants"
_RESULT_FILE = re.compile(r"^results/(base|diff|two)/\1_(.+)_accuracy_(ref|nonref)\.csv$")


class PublishedFileError(DataError):
    """A published result table does not have the expected layout."""


def _natural(name: str) -> list:
    """Sort key: numbers in a name compare as numbers (llama2_7B before llama2_13B)."""
    return [(0, int(part), "") if part.isdigit() else (1, 0, part) for part in re.split(r"(\d+)", name)]


def result_files() -> list[tuple[str, str, bool, str]]:
    """(experiment, model, relative, registry path) of every published result table, by model (natural order)."""
    found = []
    for pinned in dataset_files(BENCHMARK):
        match = _RESULT_FILE.match(pinned.path)
        if match:
            found.append((match[1], match[2], match[3] == "nonref", pinned.path))
    return sorted(found, key=lambda item: _natural(item[1]))


def _source(path: str) -> Source:
    base = json.loads(MANIFEST_PATH.read_text(encoding="utf-8"))["datasets"][BENCHMARK].get("url_base")
    sha = next(pinned.sha256 for pinned in dataset_files(BENCHMARK) if pinned.path == path)
    return Source(CITATION, path, base + path if base else None, sha)


def table_metrics(rows: list[dict], experiment: str, relative: bool, where: str) -> dict[str, float]:
    """Our metrics from one result table's rows (``id``, ``sent_type``, ``type``, ``correct``).

    Each noun x family group is scored as the task scores a document, then the metrics are means
    over groups (every group has every comparison, as in the harness's mean over documents).
    """
    comparisons = comparisons_for(experiment)
    # Names and metric names once per table, not once per row (tables have thousands of rows).
    name_of = {c.code: c.name for c in comparisons}
    groups: dict[tuple[str, str], dict[str, int]] = defaultdict(dict)
    for number, row in enumerate(rows, 2):
        name = name_of.get(row.get("type"))
        if name is None or row.get("correct") not in ("0", "1"):
            raise PublishedFileError(f"{where}, line {number}: comparison {row.get('type')!r} with outcome "
                                     f"{row.get('correct')!r} is not one of the {experiment} set's; the file is "
                                     "not the registered one (run `lm-eval-ext data verify lieder`).")
        groups[(row["id"], row["sent_type"])][name] = int(row["correct"])
    incomplete = [group for group, outcomes in groups.items() if len(outcomes) != len(comparisons)]
    if not groups or incomplete:
        raise PublishedFileError(f"{where}: {len(incomplete)} of {len(groups)} groups lack comparisons; the file is "
                                 "not the registered one (run `lm-eval-ext data verify lieder`).")
    informative = [c for c in comparisons if not c.control]
    tagged = {scope_metric(scope, relative): [c.name for c in informative if scope == "all" or scope in c.properties]
              for scope in SCOPES}
    overall = scope_metric("all", relative)
    per_comparison = [(comparison_metric(c, relative), c.name) for c in comparisons]
    per_group: dict[str, list[float]] = defaultdict(list)
    for (_, family), outcomes in groups.items():
        for metric, members in tagged.items():
            if members:
                value = sum(outcomes[name] for name in members) / len(members)
                per_group[metric].append(value)
                if metric == overall:
                    per_group[f"{overall}_family_{family}"].append(value)
        for metric, name in per_comparison:
            per_group[metric].append(float(outcomes[name]))
    return {name: sum(values) / len(values) for name, values in per_group.items()}


def _read_rows(path: str) -> list[dict]:
    with open(resolve_file(BENCHMARK, path), encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))


def model_numbers() -> list[PublishedNumber]:
    """Every published model's metrics on lieder_base, lieder_diff and lieder_two."""
    numbers = []
    for experiment, model, relative, path in result_files():
        metrics = table_metrics(_read_rows(path), experiment, relative, path)
        source = _source(path)
        numbers += [PublishedNumber(BENCHMARK, model, TASKS[experiment], name, value, source)
                    for name, value in metrics.items()]
    return numbers


def human_numbers() -> list[PublishedNumber]:
    """The human baseline on lieder_base: ``acc``, ``acc_<property>`` and every comparison, on its two families."""
    human = read_human_baseline()
    note = f"human judgements on two of the three sentence families ({', '.join(human.families)})"
    source = _source(HUMAN_FILE)
    numbers = [PublishedNumber(BENCHMARK, HUMAN_MODEL, TASKS["base"], name, value, source, note)
               for name, value in human.scopes().items() if value is not None]
    for c in comparisons_for("base"):
        value = human.accuracy((c,))
        if value is not None:
            numbers.append(PublishedNumber(BENCHMARK, HUMAN_MODEL, TASKS["base"], comparison_metric(c), value, source,
                                           note))
    return numbers


def numbers() -> list[PublishedNumber]:
    """The published models, then the human baseline."""
    return model_numbers() + human_numbers()
