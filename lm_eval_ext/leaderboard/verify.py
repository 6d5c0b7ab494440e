"""Marking a record ``verified``: the maintainers reran it and every number agrees (``lm-eval-ext leaderboard verify``).

Each metric of each task of the record (groups too) is compared with the rerun's value of the same
task. They agree when the difference is within ``sigmas`` (default 2) combined standard errors,
``sqrt(stderr_record² + stderr_rerun²)``, each as the harness recorded it (the record's
``metrics.<name>.stderr``; the rerun's ``<name>_stderr``). A stderr the harness did not record
(``N/A``: counts, p-values, metrics without one, or a run with ``--bootstrap_iters 0``) counts as
none; when neither side has one the values must be equal (up to float rounding, relative 1e-9).
A task of another version, another number of documents scored, a task or metric missing from
the rerun, another model commit (when both sides name one), and other settings that change the
numbers (chat template, system prompt, ``--gen_kwargs``: a run with them is another measurement)
are disagreements too.

If everything agrees the record is rewritten (atomically) with ``provenance.status`` ``verified``
and ``provenance.verification`` (when, by which plugin and harness versions, the tolerance, the
tasks and metrics compared, the rerun's results files with their sha256), and sealed again; if
not, nothing is written and the error lists every disagreement.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from .. import __version__
from ..atomic_write import write_text
from ..data import sha256_of
from ..export.leaderboard import chosen_tasks
from ..export.provenance import VERIFIED, model_revision, seal
from ..results.load import TEMPLATE_APPLIED, Model, Run, gen_kwargs_text, load_models
from .records import LeaderboardError, read_records
from .validate import check_record

SIGMAS = 2.0
_ROUNDING = 1e-9  # relative: what two sums of the same numbers in another order may differ by


@dataclass(frozen=True)
class Verified:
    """What ``verify_record`` compared and wrote."""

    path: Path
    tasks: int
    metrics: int
    sigmas: float


def _rerun(results_dir: str) -> Model:
    models = load_models([results_dir])
    if len(models) > 1:
        raise LeaderboardError(
            f"{results_dir} holds runs of {len(models)} models ({', '.join(m.label for m in models)}): give the "
            "directory of the rerun of the record's model only.")
    return models[0]


def _agree(ours: float, theirs: float, errors: list[float], sigmas: float) -> tuple[bool, float]:
    """Whether two values agree, and the difference allowed (0: they must be equal)."""
    allowed = sigmas * math.sqrt(sum(e * e for e in errors)) if errors else 0.0
    equal = math.isclose(ours, theirs, rel_tol=_ROUNDING, abs_tol=1e-12)
    return equal or abs(ours - theirs) <= allowed, allowed


def _settings(entry: dict, run: Run) -> list[tuple[str, object, object]]:
    """(name, the record's, the rerun's) of each setting that changes the numbers (results.load.Run.settings), for
    a run of the record (``runs[]`` entry) and the rerun's run of the same tasks."""
    template = entry["chat_template_sha"] or (TEMPLATE_APPLIED if entry["apply_chat_template"] else None)
    return [("chat template", template, run.chat_template),
            ("system prompt sha256", entry["system_instruction_sha"], run.settings.get("system_instruction")),
            ("--gen_kwargs", gen_kwargs_text(entry["gen_kwargs"]), gen_kwargs_text(run.gen_kwargs))]


def _settings_disagreements(record: dict, runs: dict[str, Run]) -> list[str]:
    """The settings in which the rerun's runs differ from the record's runs of the same tasks."""
    found = []
    for index, entry in enumerate(record["runs"]):
        theirs = {run.path: run for task in entry["tasks"] if (run := runs.get(task)) is not None}
        for run in theirs.values():
            found += [f"run {index}: {name} {ours!r} in the record, {other!r} in the rerun ({run.path})"
                      for name, ours, other in _settings(entry, run) if ours != other]
    return list(dict.fromkeys(found))


def disagreements(record: dict, rerun: Model, sigmas: float = SIGMAS) -> tuple[list[str], int]:
    """Every way the rerun disagrees with the record (empty: it agrees), and how many metrics were compared."""
    runs = chosen_tasks(rerun)
    found, compared = _settings_disagreements(record, runs), 0
    for task, entry in sorted(record["tasks"].items()):
        run = runs.get(task)
        if run is None:
            found.append(f"{task}: not in the rerun")
            continue
        version = None if run.version(task) is None else str(run.version(task))
        if version != entry["version"]:
            found.append(f"{task}: version {entry['version']} in the record, {version} in the rerun")
            continue
        scored = run.documents(task)
        if entry["n_samples"] is not None and scored != entry["n_samples"]:
            found.append(f"{task}: documents scored {entry['n_samples']} in the record, {scored} in the rerun")
        values, errors = run.metrics(task), run.stderr(task)
        for name, metric in sorted(entry["metrics"].items()):
            if name not in values:
                found.append(f"{task}/{name}: {metric['value']!r} in the record, none in the rerun")
                continue
            compared += 1
            stderrs = [e for e in (metric["stderr"], errors.get(name)) if e is not None]
            agree, allowed = _agree(metric["value"], values[name], stderrs, sigmas)
            if not agree:
                bound = f"allowed ±{allowed:.4g} ({sigmas:g} standard errors)" if stderrs else "no stderr: must be equal"
                found.append(f"{task}/{name}: {metric['value']!r} in the record, {values[name]!r} in the rerun, {bound}")
    ours = record["provenance"]["model_revision"]["revision"]
    theirs = model_revision(list({r.path: r for task, r in runs.items() if task in record["tasks"]}.values()))["revision"]
    if ours and theirs and ours != theirs:
        found.append(f"model commit: {ours} in the record, {theirs} in the rerun")
    return found, compared


def verify_record(record_path: str, results_dir: str, sigmas: float = SIGMAS) -> Verified:
    """Compare the record at ``record_path`` with the rerun in ``results_dir``; mark it verified if they agree.

    Raises :class:`LeaderboardError` (the record unchanged) when the record does not pass ``leaderboard
    validate``, or when any metric disagrees (listing them).
    """
    if not sigmas > 0:
        raise LeaderboardError(f"--sigmas {sigmas:g}: give a positive number of standard errors (default {SIGMAS:g}).")
    if not Path(record_path).is_file():
        raise LeaderboardError(f"{record_path} is not a file. Give one record JSON file (`lm-eval-ext export --format "
                               "leaderboard` wrote it) and the results directory of the maintainers' rerun.")
    ((path, record),) = read_records([record_path])
    problems = check_record(record)
    if problems:
        raise LeaderboardError(f"{path} does not pass `lm-eval-ext leaderboard validate` ({'; '.join(problems)}); "
                               "a record is verified only once it is valid. The record is unchanged.")
    rerun = _rerun(results_dir)
    found, compared = disagreements(record, rerun, sigmas)
    if not found and not compared:
        found = ["the record has no metric to compare"]
    if found:
        raise LeaderboardError(
            f"{path} does not agree with the rerun in {results_dir} ({len(found)} disagreement(s): {'; '.join(found)}). "
            "The record is unchanged and stays community. Check that the rerun used the record's model, commit, "
            "tasks and settings (its runs[]), and the full data.")
    used = list({r.path: r for task, r in chosen_tasks(rerun).items() if task in record["tasks"]}.values())
    record["provenance"]["status"] = VERIFIED
    record["provenance"]["verification"] = {
        "verified_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "lm_eval_ext": __version__,
        "lm_eval": max(used, key=lambda r: r.date_id or "").data.get("lm_eval_version"),
        "sigmas": sigmas,
        "tasks": sorted(record["tasks"]),
        "metrics_compared": compared,
        "files": [{"path": str(r.path), "sha256": sha256_of(r.path)} for r in sorted(used, key=lambda r: str(r.path))],
    }
    write_text(path, json.dumps(seal(record), indent=2, ensure_ascii=False) + "\n", "RECORD")
    return Verified(path, len(record["tasks"]), compared, sigmas)
