"""The last section: which models and runs the report is made of, and whether each run is complete."""
from __future__ import annotations

import json

from ...results.load import Model
from ...results.status import run_status
from ..blocks import Note, Section, Table
from ...results.status import documents_scored, shown_run

TITLE = "Models and runs"


def _resumed(run) -> str | None:
    """Where a resumed run's answers came from, and per judged task the verdicts taken from the judge's cache."""
    if not run.resumed_from:
        return None
    cached = run.verdicts_from_cache()
    return run.resumed_from + "".join(f"; {task}: {n} verdicts from the judge's cache" for task, n in cached.items())


def build(models: list[Model]) -> Section:
    """One row per results file: model, when, how it was run, which tasks it has, and its status."""
    rows = []
    for model in models:
        for run in model.runs:
            logged = [task for task in run.tasks if run.samples_path(task)]
            status = run_status(run)
            rows.append([
                model.label, str(run.path), run.date_id, run.model_source,
                json.dumps(run.public_model_args, sort_keys=True, default=str),
                json.dumps(run.gen_kwargs, sort_keys=True, default=str),
                json.dumps(run.settings, sort_keys=True), run.seed, run.data.get("lm_eval_version"), " ".join(run.tasks), " ".join(logged),
                status.label, status.summary() or None, _resumed(run),
            ])
    section = Section("runs", TITLE, "Every results file read for this report. Of a model's runs of one task, the most "
                                     "complete (most documents scored; the newest of equals) is the one shown, the "
                                     "others are listed below. Runs that differ only in how the model was run (context "
                                     "length, batch size, device, seed) are one model; runs with settings that change "
                                     "the numbers (chat template, system prompt, few-shot, --gen_kwargs) are separate "
                                     "models, each labelled with its settings.")
    differing = [f"{model.label}: " + "; ".join(f"{key} = {', '.join(values)}" for key, values in diff.items())
                 for model in models if (diff := model.differences())]
    if differing:
        section.blocks.append(Note("Runs of one model run in different ways (one row per model in every figure and "
                                   "table; the most complete run of each task is shown): " + " | ".join(differing)
                                   + "."))
    section.blocks.append(Table(
        "runs", "Results files",
        ["model", "results_file", "date", "model_source", "model_args", "gen_kwargs", "settings", "seed",
         "lm_eval_version", "tasks", "tasks_with_samples", "status", "status_reasons", "resumed_from"],
        rows,
        "model_args with credentials redacted; settings: those that change the numbers, as the results file records "
        "them (chat_template: the template's sha256, or applied when the harness recorded none; system_instruction: "
        "the sha256 of the system prompt; num_fewshot: tasks with examples; gen_kwargs); tasks_with_samples: tasks run with --log_samples; status: complete, "
        "partial (some items not scored) or truncated (some prompts cut to fit), with the reasons; resumed_from: "
        "for a run resumed with `lm-eval-ext resume`, the saved answers it scored again and how many judge verdicts "
        "came from the judge's cache.",
    ))
    repeated = _repeated_tasks(models)
    if repeated:
        section.blocks.append(Table(
            "task_runs", "Tasks run more than once",
            ["model", "task", "results_file", "date", "documents_scored", "shown"], repeated,
            "Every run of a task that a model ran more than once; shown: the run every figure and table of this report "
            "uses (the one that scored the most documents, the newest of equals). documents_scored: the documents the "
            "run took (the task's count, else the harness's n-samples effective), less prompts skipped and judge "
            "failures (empty: the file does not say); items a task excluded when it was loaded (MAGNIFICo) are not "
            "among them."))
    if not any(model.tasks for model in models):
        section.blocks.append(Note("These results files hold no task results."))
    return section


def _repeated_tasks(models: list[Model]) -> list[list]:
    """One row per run of each (model, task) that several runs have: which run is shown, which are not."""
    rows = []
    for model in models:
        for task in model.tasks:
            runs = model.runs_with(task)
            if len(runs) < 2:
                continue
            shown = shown_run(model, task)
            rows += [[model.label, task, str(run.path), run.date_id, documents_scored(run, task), run is shown]
                     for run in runs]
    return rows
