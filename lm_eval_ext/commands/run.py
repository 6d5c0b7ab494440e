"""``lm-eval-ext run``: the harness's ``lm_eval run``, with the checks a plugin can only make around it.

Every flag of ``lm_eval run`` keeps its meaning and the harness's own command does the run, in this
process (:func:`lm_eval_ext.boundary.run_harness`). Around it, this command

- checks the run before the model is loaded (lm_eval_ext/commands/preflight.py): task names, the
  unsafe-code flag, the output path, every data file, the judge; a failure stops it within seconds;
- indexes only the plugin's tasks and those under ``--include_path`` when they hold every task asked for
  (named, not by a tag or a pattern: those may gather built-in tasks); the harness otherwise reads its
  ~14,700 built-in task configs on every run;
- checks afterwards that the results file and the samples files were written whole (the harness
  only warns when it cannot write them): a truncated or empty file is set aside as ``*.incomplete``
  and the command fails, naming the saved answers and the command that writes the results again;
- removes the run's saved answers (lm_eval_ext.answers) once its results are written;
- stops on Ctrl-C or SIGTERM with one paragraph naming the saved answers and the ``lm-eval-ext resume``
  command (lm_eval_ext/interrupts.py), exit status 130 / 143;
- activates the plugin even where the start-up hook is off (``LM_EVAL_EXT_AUTOLOAD=0``, ``python -S``).
"""
from __future__ import annotations

import argparse
import json
import os
import logging
import shutil
import sys
import time
from pathlib import Path

from .. import answers, boundary, interrupts
from ..errors import UserError
from .flag_errors import unreadable_flags
from .preflight import raise_on_failures, run_checks

log = logging.getLogger(__name__)


class ResultsNotWrittenError(UserError):
    """The run finished but its results file is missing or incomplete."""


def add_run_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add ``run`` to a CLI's subparsers: every flag after it goes to ``lm_eval run`` (``--help`` shows them)."""
    run = subparsers.add_parser(
        "run", add_help=False,
        help="`lm_eval run`, checked first (names, flags, output path, data, judge) and after (results)")
    run.set_defaults(func=run_command, harness_flags=[])
    return run


def run_command(args: argparse.Namespace) -> int:
    """``lm-eval-ext run``."""
    return main(args.harness_flags)


def main(argv: list[str]) -> int:
    """Run the harness with ``argv`` (everything after ``lm-eval-ext run``)."""
    interrupts.handle_signals()
    boundary.activate()
    try:
        args = boundary.parse_run_args(argv)
    except ValueError as err:  # argparse's own errors exit with its usage line; these escape it on some versions
        raise unreadable_flags(argv, err) from None
    report = run_checks(args)
    raise_on_failures(report)
    for note in report.notes:
        print(f"lm-eval-ext: note: {note}", file=sys.stderr)
    boundary.index_builtin_tasks(report.needs_builtin_tasks)  # decided on the tasks of the flags and --config's file
    started = time.time()
    boundary.run_harness(argv)
    # the run's configuration as the harness made it: --config's YAML may set the metadata and the output path
    config = report.config
    saved = answers.run_dir(config.metadata or {})
    # in a multi-process run (torchrun, accelerate) only the first process writes the results files
    writes_results = config.output_path and os.environ.get("RANK", "0") == "0"
    results = _check_results(Path(config.output_path).expanduser(), started, saved) if writes_results else []
    unjudged = _judge_failures(results)
    if unjudged and saved.is_dir():
        print(f"lm-eval-ext: note: the judge failed on {unjudged} answer(s), so the run's answers are kept in {saved}: "
              f"`lm-eval-ext resume {saved}` judges them again (verdicts already given come from the judge's cache).",
              file=sys.stderr)
    else:
        shutil.rmtree(saved, ignore_errors=True)
    return 0


def _check_results(output: Path, started: float, saved: Path) -> list[Path]:
    """The results files the run wrote under ``output``; raises unless it wrote whole results and samples files
    (cut ones are set aside)."""
    root = output.parent if output.suffix == ".json" else output
    results = _written(root, f"{output.stem}_*.json" if output.suffix == ".json" else "results_*.json", started)
    problems = [] if results else [f"no results file was written under {root}"]
    for path in results:
        if not _whole(path, json.loads):
            problems.append(f"the results file was cut short (set aside as {_set_aside(path)})")
    for path in _written(root, "samples_*.jsonl", started):
        if not _whole(path, _jsonl):
            problems.append(f"the samples file {path.name} was cut short (set aside as {_set_aside(path)})")
    if problems:
        keep = (f"The answers are saved in {saved}: `lm-eval-ext resume {saved} --output_path DIR` scores them again "
                "and writes the results to a writable DIR." if saved.is_dir() else "")
        raise ResultsNotWrittenError(f"The run finished but {'; '.join(problems)} (a full disk or a read-only "
                                     f"directory?). {keep}")
    return results


def _judge_failures(results: list[Path]) -> int:
    """How many answers the judge failed on, by the ``judge_failures`` counts of the results files."""
    return sum(int(value) for path in results
               for metrics in json.loads(path.read_text(encoding="utf-8")).get("results", {}).values()
               for name, value in metrics.items()
               if name.split(",")[0] == "judge_failures" and isinstance(value, (int, float)) and value == value)


def _written(root: Path, pattern: str, started: float) -> list[Path]:
    """The files matching ``pattern`` under ``root`` written by this run."""
    return [p for p in sorted(root.rglob(pattern)) if p.stat().st_mtime >= started - 1] if root.is_dir() else []


def _jsonl(text: str) -> None:
    """Parse every line of a samples file; a file the harness finished ends with a newline and is never empty
    (a task without documents fails before its samples are written)."""
    if not text.endswith("\n"):
        raise ValueError("the last line is incomplete")
    for line in text.splitlines():
        json.loads(line)


def _whole(path: Path, parse) -> bool:
    """Whether ``parse`` reads the whole text of ``path``."""
    try:
        parse(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return True


def _set_aside(path: Path) -> Path:
    """Rename a cut file to ``<name>.incomplete``, so that no reader takes it for a finished one."""
    incomplete = path.with_name(path.name + ".incomplete")
    path.replace(incomplete)
    return incomplete
