"""Checking a leaderboard record before it is submitted (``lm-eval-ext leaderboard validate``) or shown.

A record passes when:

1. it is of this plugin's schema version and matches the JSON Schema
   (``lm_eval_ext/export/schema/leaderboard.schema.json``); a record of an older version (before
   1.2 it had no provenance) is refused with one problem saying to export it again;
2. every task it has is a task of this plugin version, at the version this plugin has
   (a different version means different prompts, data or scoring);
3. it is partial only if it says so: its status is recomputed from its own tasks (documents
   scored, items skipped or excluded, judge failures, ``--limit``) with the same rules as the
   export (:func:`lm_eval_ext.results.status.status_of`), and must match ``status``;
4. every ELITR-Bench task was scored by a validated judge: the record's ``judge_validation``
   holds a ``lm-eval-ext judge validate`` report of the same judge (endpoint host, model and
   template sha256), made on the published validation file, with every correlation with the
   human scores computed (a null one means too few items scored, or scores that never vary);
5. its provenance holds: the record is unchanged since its export or verification (its sha256 is
   ``provenance.content_sha256``), every run's ``results_sha256`` is the one ``provenance.files``
   lists, and a record that claims ``verified`` carries what it was verified against
   (``provenance.verification``, which only ``lm-eval-ext leaderboard verify`` writes).

A record that passes may still not be comparable with the papers (:func:`not_comparable`: data the
user gave, truncated prompts, a system prompt, ``--gen_kwargs``): ``validate`` lists why, and the site
shows it apart from the papers' models, badged *not comparable*.
"""
from __future__ import annotations

from functools import lru_cache

from .. import __version__
from ..export.judge_validation import validates
from ..export.provenance import VERIFIED, content_sha256
from ..export.schema import SCHEMA_VERSION, schema_problems
from ..judge.records import JudgeRecord
from ..results.status import TRUNCATED, Flag, status_of


@lru_cache(maxsize=1)
def known_task_versions() -> dict[str, str]:
    """Every task and group of this plugin with its ``metadata.version`` (as records write it)."""
    from ..boundary import index_directories
    from ..paths import tasks_dir

    versions = {}
    for name, entry in index_directories([tasks_dir()]).items():
        version = ((entry.cfg or {}).get("metadata") or {}).get("version")
        if version is not None:
            versions[name] = str(version)
    return versions


def _version_problems(record: dict) -> list[str]:
    known = known_task_versions()
    problems = []
    for task, version in record["versions"]["tasks"].items():
        if task not in known:
            problems.append(f"task {task} is not a task of this lm-eval-ext version")
        elif version != known[task]:
            problems.append(f"task {task} is at version {version}, this lm-eval-ext has {known[task]} (different "
                            "prompts, data or scoring: rerun it with this version)")
    return problems


def _flags(record: dict) -> list[tuple[Flag, int]]:
    """The partial and truncated flags of the record's own tasks (with the index of their run), by the export's
    rules (:func:`lm_eval_ext.results.status.status_of`)."""
    tasks = {name: (entry["n_samples"], {metric: value["value"] for metric, value in entry["metrics"].items()})
             for name, entry in record["tasks"].items() if not entry["is_group"]}
    flags = []
    for index, run in enumerate(record["runs"]):
        mine = {task: tasks[task] for task in run["tasks"] if task in tasks}
        flags += [(flag, index) for flag in status_of(run.get("limit"), mine).flags]
    return flags


def _status_problems(record: dict) -> list[str]:
    flags = [(flag.kind, flag.task, index) for flag, index in _flags(record)]
    status = record["status"]
    problems = []
    for kind in ("partial", "truncated"):
        found = [f for f in flags if f[0] == kind]
        if found and not status[kind]:
            where = ", ".join(sorted({task or f"run {index}" for _, task, index in found}))
            problems.append(f"the record is {kind} ({where}) but its status does not say so")
        elif status[kind] and not found:
            problems.append(f"the record's status says {kind} but none of its tasks is")
    return problems


# the correlations a judge validation must have, against each set of human scores
CORRELATIONS = tuple(f"{humans}.{name}" for humans in ("vs_gold", "vs_silver") for name in ("pearson", "spearman", "kendall"))


def validation_of(record: dict, judge: dict) -> dict | None:
    """The record's validation of ``judge`` (a task's judge record): same endpoint host, model and template, made
    on the published validation file; None when it has none."""
    ours = JudgeRecord.from_dict(judge)
    return next((entry for entry in record.get("judge_validation") or [] if validates(entry, ours)), None)


def _judge_text(judge: dict) -> str:
    return (f"{judge.get('model')} at {judge.get('base_url_host')} "
            f"(template sha256 {str(judge.get('template_sha256'))[:12]}...)")


def _judge_problems(record: dict) -> list[str]:
    judged = {task: judge for task, judge in (record.get("judge") or {}).items()
              if record["tasks"].get(task, {}).get("benchmark") == "elitr_bench"}
    unscored = [task for task, entry in record["tasks"].items()
                if entry["benchmark"] == "elitr_bench" and not entry["is_group"] and task not in judged]
    problems = [f"{task} has no judge record" for task in unscored]
    validations = record.get("judge_validation") or []
    for task, judge in sorted(judged.items()):
        validation = validation_of(record, judge)
        if validation is None:
            others = "; ".join(dict.fromkeys(_judge_text(entry["judge"]) for entry in validations))
            problems.append(f"{task} was scored by judge {judge.get('model')} (template {judge.get('template')}), "
                            "which the record shows no validation of"
                            + (f" (it was scored by {_judge_text(judge)}; the record validates {others})" if others
                               else "")
                            + ": run `lm-eval-ext judge validate` with that judge (same endpoint, model and template) "
                            "and export with --judge-validation validation.json")
            continue
        missing = [name for name in CORRELATIONS
                   if validation[name.split(".")[0]].get(name.split(".")[1]) is None]
        if missing:
            problems.append(f"{task}: the validation of judge {judge.get('model')} has no {', '.join(missing)} "
                            f"({validation['n_scored']} of {validation['n_items']} items scored; a correlation is "
                            "missing when too few items were scored or the scores never vary): run `lm-eval-ext judge "
                            "validate` again until every item is scored, and export with the new validation.json")
    return problems


def _schema_version_problem(record) -> str | None:
    version = record.get("schema_version") if isinstance(record, dict) else None
    if version is None or version == SCHEMA_VERSION:
        return None
    return (f"the record is of schema version {version}, and lm-eval-ext {__version__} reads version "
            f"{SCHEMA_VERSION} only (1.2 added the provenance a leaderboard checks: the model's commit, the sha256 "
            "of every results and samples file, community or verified): export it again from its results with "
            "`lm-eval-ext export --format leaderboard`")


UNVERIFIED_CLAIM = ("the record claims status verified but has no provenance.verification (the maintainers' rerun "
                    "it was compared with): only `lm-eval-ext leaderboard verify RECORD RESULTS_DIR` marks a record "
                    "verified; submit it as exported (community)")


def _schema_check(record) -> list[str]:
    problems = schema_problems(record)
    provenance = record.get("provenance") if isinstance(record, dict) else None
    if isinstance(provenance, dict) and provenance.get("status") == VERIFIED and not isinstance(
            provenance.get("verification"), dict):
        problems = [UNVERIFIED_CLAIM] + [p for p in problems if not p.startswith("provenance/verification:")]
    return problems


def _provenance_problems(record: dict) -> list[str]:
    provenance = record["provenance"]
    problems = []
    digest = content_sha256(record)
    if digest != provenance["content_sha256"]:
        problems.append(f"the record was changed after it was exported: its sha256 is {digest[:12]}..., "
                        f"provenance.content_sha256 says {provenance['content_sha256'][:12]}... (a score, a checksum "
                        "or the status edited by hand): export it again from the results with `lm-eval-ext export "
                        "--format leaderboard` instead of editing it")
    listed = {entry["run"]: entry["sha256"] for entry in provenance["files"] if entry["kind"] == "results"}
    for index, run in enumerate(record["runs"]):
        if listed.get(index) != run["results_sha256"]:
            problems.append(f"run {index} ({run['results_file']}): its results_sha256 is not the sha256 "
                            "provenance.files lists for its results file: export the record again")
    return problems


# output types whose requests are scored without generating: --gen_kwargs does not reach them
_SCORED_ONLY = frozenset({"loglikelihood", "loglikelihood_rolling", "multiple_choice"})


def not_comparable_by_task(record: dict) -> list[tuple[tuple[str, ...], str]]:
    """Why the record's numbers cannot stand beside the papers', each reason with the tasks it concerns (empty:
    they can): a task read a data file the user gave instead of the benchmark's (``data.files[].user_file``),
    prompts were truncated to fit the model, a run added a system prompt (``--system_instruction``), or a run's
    ``--gen_kwargs`` replaced the generation settings of a task that generates. Each is another measurement than
    the papers' (other data, other prompts, other decoding). Partial records are not among them: the benchmark's
    own items, prompts and decoding, fewer items (their status says which). Reads a record that passed the schema."""
    reasons = [((entry["task"],), f"{entry['task']}: read a data file the user gave ({entry['path']}), not the "
                                  "benchmark's published data")
               for entry in record["data"]["files"] if entry["user_file"]]
    reasons += [((flag.task,) if flag.task else tuple(record["runs"][index]["tasks"]), flag.text())
                for flag, index in _flags(record) if flag.kind == TRUNCATED]
    for index, run in enumerate(record["runs"]):
        if run["system_instruction_sha"]:
            reasons.append((tuple(run["tasks"]), f"run {index}: a system prompt was added (--system_instruction, "
                                                 f"sha256 {run['system_instruction_sha'][:12]}...): not the papers' "
                                                 "prompts"))
        generating = tuple(task for task in run["tasks"]
                           if record["tasks"].get(task, {}).get("output_type") not in _SCORED_ONLY
                           and not record["tasks"].get(task, {}).get("is_group"))
        if run["gen_kwargs"] and generating:
            given = ",".join(f"{key}={value}" for key, value in sorted(run["gen_kwargs"].items()))
            reasons.append((generating, f"run {index}: --gen_kwargs {given} replaced the generation settings of "
                                        f"{', '.join(generating)}: not the papers' decoding"))
    return reasons


def not_comparable(record: dict) -> list[str]:
    """Why the record's numbers cannot stand beside the papers' (:func:`not_comparable_by_task`), one line each."""
    return [reason for _, reason in not_comparable_by_task(record)]


def check_record(record) -> list[str]:
    """Every problem of a record (empty: it can be submitted). A record of another schema version, and schema
    problems, stop the other checks (each such problem starts with ``schema: ``)."""
    if (old := _schema_version_problem(record)) is not None:
        return [f"schema: {old}"]
    problems = _schema_check(record)
    if problems:
        return [f"schema: {problem}" for problem in problems]
    return (_provenance_problems(record) + _version_problems(record) + _status_problems(record)
            + _judge_problems(record))
