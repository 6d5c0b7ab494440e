"""``lm-eval-ext resume DIR [flags]``: score a run's saved answers again and write its results.

``DIR`` is a run's saved answers (lm_eval_ext.answers; the run's log names it when judging
starts). The run's own command is run again through ``lm-eval-ext run``, with the ``ext-replay``
model answering every request from ``DIR`` and ``--tasks`` narrowed to the tasks whose answers
were saved. The replay model is given the run's own model type and arguments (it ignores them), so
the results are the same run's: same model name, arguments and results folder, with
``config.resumed_from`` naming ``DIR`` (lm_eval_ext/models/replay.py). Nothing is generated again; the judge's cache gives back every verdict already
given, so only what failed (or was never judged) is sent to the judge. Flags given after ``DIR``
replace the saved command's (e.g. ``--output_path`` when the first one was not writable). ``DIR``
is removed once the results are written.
"""
from __future__ import annotations

import argparse
import json
import shlex
import shutil
import sys

from ..answers import SavedAnswersError, load
from ..models import NAME as REPLAY
from ..models import OWN_ARGS

REPLACED = {"--model", "--model_args", "-a", "--tasks", "-t"}


def _without(flags: list[str], names: set[str]) -> list[str]:
    """``flags`` without the options in ``names`` and their values (``--flag value...`` and ``--flag=value``)."""
    kept, skipping = [], False
    for flag in flags:
        if flag.startswith("-"):
            skipping = flag.split("=", 1)[0] in names
            if skipping:
                continue
        elif skipping:
            continue
        kept.append(flag)
    return kept


def resume_arguments(folder: str, extra: list[str]) -> list[str]:
    """The ``lm-eval-ext run`` flags that replay the saved run in ``folder`` (then ``extra``)."""
    from ..boundary import parse_run_args, task_names

    saved = load(folder)
    if saved.run_args() is None:
        raise SavedAnswersError(
            f"The answers in {folder} come from a run started from Python ({' '.join(saved.command)[:120]}), not "
            f"from the lm_eval or lm-eval-ext command: replay them with lm_eval.simple_evaluate(model={REPLAY!r}, "
            f"model_args={{'answers': {str(folder)!r}}}, tasks={saved.tasks!r}, ...) and the run's other arguments.")
    flags = saved.command[1:]
    flags = flags[1:] if flags[:1] == ["run"] else flags
    overridden = {flag.split("=", 1)[0] for flag in extra if flag.startswith("-")}
    base = _without(flags, REPLACED | overridden)
    original = parse_run_args(flags)
    dropped = [t for t in task_names(original.tasks or []) if t and t not in saved.tasks]
    if dropped:
        print(f"lm-eval-ext: note: {', '.join(dropped)} saved no answers of their own in {folder} (groups and tags "
              f"are resumed through their tasks: {', '.join(saved.tasks)})", file=sys.stderr)
    return [*base, "--model", REPLAY, "--model_args", json.dumps(replay_args(folder, original)),
            "--tasks", ",".join(saved.tasks), *extra]


def replay_args(folder: str, original) -> dict:
    """The replay model's arguments: the answers in ``folder`` and the model type and arguments of the run
    that saved them (``original``, its parsed flags; the first run's when it was itself a resumed run)."""
    model, args = original.model or "hf", dict(original.model_args or {})  # "hf": the harness's default --model
    if model == REPLAY:  # answers saved by a resumed run: the model is the one that run replayed
        model, args = args.get("replayed_model"), {k: v for k, v in args.items() if k not in OWN_ARGS}
    clash = sorted(set(args) & set(OWN_ARGS))
    if clash:
        raise SavedAnswersError(
            f"The run saved in {folder} gave its model the argument(s) {', '.join(clash)}, which the replay model "
            f"{REPLAY} uses itself: resume it from Python with lm_eval.simple_evaluate(model={REPLAY!r}, "
            f"model_args={{'answers': {str(folder)!r}}}, ...).")
    return {"answers": str(folder), "replayed_model": model, **args}


def add_resume_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add ``resume DIR`` to a CLI's subparsers: the flags after ``DIR`` go to ``lm_eval run``."""
    resume = subparsers.add_parser(
        "resume", help="score a run's saved answers again and write its results",
        usage="lm-eval-ext resume [-h] DIR [flags of `lm_eval run`]",
        description="Score the answers a run saved before scoring (the run's log names the directory) and write "
                    "the run's results; flags of `lm_eval run` after DIR replace the saved command's.")
    resume.add_argument("folder", metavar="DIR", help="the run's saved answers")
    resume.set_defaults(func=resume_command, harness_flags=[])
    return resume


def resume_command(args: argparse.Namespace) -> int:
    """``lm-eval-ext resume``."""
    return main(args.folder, args.harness_flags)


def main(folder: str, extra: list[str]) -> int:
    """Resume the run saved in ``folder``."""
    from .run import main as run_main

    argv = resume_arguments(folder, extra)
    print(f"lm-eval-ext: resuming: lm-eval-ext run {shlex.join(argv)}", file=sys.stderr)
    code = run_main(argv)
    shutil.rmtree(folder, ignore_errors=True)  # run_main raised if the results were not written
    return code
