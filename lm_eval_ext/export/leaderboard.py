"""The leaderboard record of one model: every metric of the plugin's tasks and how they were obtained.

One record per model (all its runs), in the layout of ``schema/leaderboard.schema.json``
(docs/leaderboard.md describes each field). A task run several times is taken from its
most complete run (the newest of equals), as in the report. The record says whether its numbers are partial or truncated
(:mod:`lm_eval_ext.results.status`), carries LIEDER's human-baseline comparison and novelty test
(:mod:`lm_eval_ext.results.lieder`, the same functions as the report) and, when given, the
validation of the ELITR-Bench judge (:mod:`.judge_validation`).
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

from .. import __version__
from ..data import DataError, dataset_files, pinned_file, sha256_of
from ..data.registry import MANIFEST_PATH
from ..elitr.seed_summary import summarize
from ..judge.usage import add_up
from ..results.lieder import family_mean, novelty_tests, read_human_baseline
from ..results.load import Model, Run
from ..results.status import PARTIAL, TRUNCATED, run_status, shown_run
from .benchmarks import BENCHMARKS, benchmark_of
from .provenance import provenance_entry, seal
from .schema import SCHEMA_VERSION


def _run_entry(run: Run, tasks: list[str]) -> dict:
    config = run.config
    return {
        "results_file": str(run.path),
        "results_sha256": sha256_of(run.path),
        "date": run.date_id,
        "lm_eval_version": run.data.get("lm_eval_version"),
        "transformers_version": run.data.get("transformers_version"),
        "model_source": run.model_source,
        "model_args": run.public_model_args,
        "gen_kwargs": run.gen_kwargs,
        "seeds": {name: config.get(key) for name, key in
                  (("random", "random_seed"), ("numpy", "numpy_seed"), ("torch", "torch_seed"), ("fewshot", "fewshot_seed"))},
        "limit": config.get("limit"),
        "apply_chat_template": run.chat_template is not None,
        "chat_template_sha": run.data.get("chat_template_sha"),
        "system_instruction_sha": run.data.get("system_instruction_sha"),
        "fewshot_as_multiturn": run.data.get("fewshot_as_multiturn"),
        "tasks": tasks,
        "resumed": ({"from": run.resumed_from, "verdicts_from_cache": run.verdicts_from_cache()}
                    if run.resumed_from else None),
    }


def _task_entry(run: Run, run_index: int, task: str) -> dict:
    config = run.task_config(task)
    errors = run.stderr(task)
    return {
        "benchmark": benchmark_of(task).key,
        "run": run_index,
        "version": None if run.version(task) is None else str(run.version(task)),
        "is_group": run.is_group(task),
        "n_samples": run.documents(task),
        "num_fewshot": (run.data.get("n-shot") or {}).get(task),
        "output_type": config.get("output_type"),
        "generation_kwargs": config.get("generation_kwargs"),
        "task_hash": (run.data.get("task_hashes") or {}).get(task),
        "metrics": {name: {"value": value, "stderr": errors.get(name)} for name, value in run.metrics(task).items()},
    }


def _data_entry(tasks: dict[str, tuple[Run, dict]]) -> dict:
    datasets, files = {}, []
    for task, (run, _) in tasks.items():
        benchmark = benchmark_of(task)
        for name in benchmark.datasets:
            if name not in datasets:
                pinned_files = dataset_files(name)
                listing = json.dumps([[s.path, s.sha256] for s in pinned_files])
                datasets[name] = {
                    "source": _registry_source(name),
                    "registry_sha256": hashlib.sha256(listing.encode("utf-8")).hexdigest(),
                    "registered_files": len(pinned_files),
                }
        for data_file in benchmark.files(run.task_config(task)):
            if data_file.user_file:
                path = Path(data_file.path)
                sha = sha256_of(path) if path.is_file() else None
            else:
                try:
                    sha = pinned_file(data_file.dataset, data_file.path).sha256
                except DataError:
                    sha = None
            files.append({"task": task, "dataset": data_file.dataset, "path": data_file.path, "sha256": sha,
                          "user_file": data_file.user_file})
    return {"datasets": datasets, "files": files}


def _registry_source(dataset: str) -> str | None:
    """The pinned base URL of a dataset (its commit), from the packaged manifest."""
    return json.loads(MANIFEST_PATH.read_text(encoding="utf-8"))["datasets"][dataset].get("url_base")


def _judge_entry(tasks: dict[str, tuple[Run, dict]]) -> dict | None:
    """The judge of every judged task, as the task recorded it (``configs.<task>.metadata.judge``)."""
    judged = {task: run.judge_record(task) for task, (run, _) in sorted(tasks.items())}
    return {task: record.to_dict() for task, record in judged.items() if record} or None


def _judge_usage(judged: dict | None) -> dict:
    """``judge_usage``, the judge's tokens and dollars over every judged task, when the tasks recorded them."""
    total = add_up((record.get("usage") for record in (judged or {}).values()))
    return {"judge_usage": total} if total else {}


def _seeds_entry(model: Model, benchmark, tasks: dict[str, dict], read: list[Run]) -> dict:
    """Mean and sample standard deviation of the headline metrics of every task run with two seeds or more
    (the newest run per seed), by the plugin's seed summary (ELITR-Bench's protocol). The runs read are
    added to ``read``."""
    entry = {}
    for task, metrics in sorted(tasks.items()):
        by_seed = {run.seed: run for run in model.runs_with(task)}
        if len(by_seed) < 2:
            continue
        read += by_seed.values()
        summary = summarize([run.path for run in by_seed.values()]).get(task, {})
        for name in benchmark.headline(metrics):
            if name in summary and summary[name]["n"] >= 2:
                entry[f"{task}/{name}"] = {"mean": summary[name]["mean"], "sd": summary[name].get("std"),
                                           "n": summary[name]["n"], "seeds": list(by_seed)}
    return entry


def _lieder_derived(model: Model) -> dict:
    """LIEDER's human-baseline comparison and base vs diff novelty test, from the sample logs of the newest
    lieder_base and lieder_diff runs (each null, with a note, when it cannot be computed)."""
    notes = []
    base_run, diff_run = shown_run(model, "lieder_base"), shown_run(model, "lieder_diff")
    base = base_run.samples("lieder_base") if base_run else None
    diff = diff_run.samples("lieder_diff") if diff_run else None
    human_entry = None
    if base is None:
        notes.append("human baseline comparison: needs lieder_base run with --log_samples")
    else:
        try:
            human = read_human_baseline()
        except DataError as err:
            notes.append(f"human baseline comparison: {err}")
        else:
            human_entry = {"families": list(human.families), "human": human.scopes(),
                           "model": {name: family_mean(base, name, human.families) for name in human.scopes()}}
    tests = None
    if base is None or diff is None:
        notes.append("novelty test: needs lieder_base and lieder_diff runs with --log_samples")
    else:
        tests = [{"metric": t.metric, "scope": t.scope, "n_groups": t.test.n, "base_acc": t.base_acc,
                  "diff_acc": t.diff_acc, "groups_up": t.test.up, "groups_down": t.test.down, "groups_tied": t.test.ties,
                  "p_two_sided": t.test.p_two_sided, "p_diff_gt_base": t.test.p_greater} for t in novelty_tests(base, diff)]
    return {"human_baseline": human_entry, "novelty_test": tests, "notes": notes}


def _status_entry(runs: list[Path], chosen: dict[str, Run], allowed: bool) -> dict:
    """Whether the record is partial or truncated, and why: the flags of each run over the tasks taken from it."""
    reasons = []
    for index, path in enumerate(runs):
        tasks = [task for task, run in chosen.items() if run.path == path]
        for flag in run_status(chosen[tasks[0]], tasks).flags:
            reasons.append({"kind": flag.kind, "task": flag.task, "run": index, "reason": flag.reason})
    return {
        "partial": any(reason["kind"] == PARTIAL for reason in reasons),
        "truncated": any(reason["kind"] == TRUNCATED for reason in reasons),
        "allowed_partial": allowed,
        "reasons": reasons,
    }


def chosen_tasks(model: Model) -> dict[str, Run]:
    """The plugin's tasks of a model, each with the run a report shows (the most complete; the newest of equals)."""
    return {task: shown_run(model, task) for task in model.tasks if benchmark_of(task)}


def leaderboard_record(model: Model, exported_at: str, *, allow_partial: bool = False,
                       judge_validation: list[dict] | None = None) -> dict | None:
    """The record of one model, or None when it ran none of the plugin's tasks.

    ``allow_partial`` is recorded (``status.allowed_partial``): the caller has decided to export a
    partial record. ``judge_validation``: entries of :func:`.judge_validation.read_validation`.
    """
    newest_runs = chosen_tasks(model)
    chosen: dict[str, tuple[Run, dict]] = {task: (run, run.metrics(task)) for task, run in newest_runs.items()}
    if not chosen:
        return None
    runs = list(dict.fromkeys(run.path for run, _ in chosen.values()))
    run_objects = {run.path: run for run, _ in chosen.values()}
    index = {path: i for i, path in enumerate(runs)}
    newest = max(run_objects.values(), key=lambda r: r.date_id or "")
    benchmarks, seed_runs = {}, []
    for benchmark in BENCHMARKS:
        mine = {task: metrics for task, (_, metrics) in chosen.items() if benchmark_of(task) is benchmark}
        if mine:
            benchmarks[benchmark.key] = {
                "title": benchmark.title,
                "headline": {f"{task}/{name}": metrics[name]
                             for task, metrics in sorted(mine.items()) for name in benchmark.headline(metrics)},
            }
            seeds = _seeds_entry(model, benchmark, mine, seed_runs)
            if seeds:
                benchmarks[benchmark.key]["seeds"] = seeds
    if "lieder" in benchmarks:
        benchmarks["lieder"]["derived"] = _lieder_derived(model)
    tasks_of = {path: sorted(t for t, (r, _) in chosen.items() if r.path == path) for path in runs}
    return seal({
        "schema_version": SCHEMA_VERSION,
        "exported_at": exported_at,
        "status": _status_entry(runs, newest_runs, allow_partial),
        "model": {
            "label": model.label,
            "source": newest.model_source,
            "name": newest.model_name,
            "args": newest.public_model_args,
        },
        "versions": {
            "lm_eval": newest.data.get("lm_eval_version"),
            "lm_eval_ext": __version__,
            "lm_eval_ext_recorded": "export",
            "transformers": newest.data.get("transformers_version"),
            "tasks": {task: (None if run.version(task) is None else str(run.version(task)))
                      for task, (run, _) in sorted(chosen.items())},
        },
        "runs": [_run_entry(run_objects[path], tasks_of[path]) for path in runs],
        "tasks": {task: _task_entry(run, index[run.path], task) for task, (run, _) in sorted(chosen.items())},
        "benchmarks": benchmarks,
        "judge": _judge_entry(chosen),
        **_judge_usage(_judge_entry(chosen)),
        # only a judged record needs the judge's validation
        "judge_validation": (judge_validation or None) if _judge_entry(chosen) else None,
        "data": _data_entry(chosen),
        "provenance": provenance_entry([run_objects[path] for path in runs], tasks_of, seed_runs),
    })


def csv_row(record: dict) -> dict[str, object]:
    """The record's CSV row: the model, the versions, and every headline metric as ``<task>/<metric>``."""
    row: dict[str, object] = {
        "model": record["model"]["label"],
        "model_source": record["model"]["source"],
        "model_name": record["model"]["name"],
        "lm_eval_version": record["versions"]["lm_eval"],
        "lm_eval_ext_version": record["versions"]["lm_eval_ext"],
        "status": "partial" if record["status"]["partial"] else "truncated" if record["status"]["truncated"] else "complete",
    }
    for benchmark in record["benchmarks"].values():
        row.update(benchmark["headline"])
    return row
