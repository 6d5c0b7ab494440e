"""``lm-eval-ext run``: the harness's ``lm_eval run``, with the checks a plugin can only make around it.

Every flag of ``lm_eval run`` keeps its meaning and the harness's own command does the run
(``lm_eval.__main__.cli_evaluate``). Around it, this command

- checks the run before the model is loaded (lm_eval_ext/commands/preflight.py): task names, the
  unsafe-code flag, the output path, every data file, the judge; a failure stops it within seconds;
- indexes only the plugin's tasks when only plugin tasks are asked for (the harness otherwise
  reads its ~14,700 built-in task configs on every run);
- checks afterwards that the results file was written whole (the harness only warns when it
  cannot write it): a truncated file is set aside as ``*.incomplete`` and the command fails,
  naming the saved answers and the command that writes the results again;
- removes the run's saved answers (lm_eval_ext.answers) once its results are written;
- stops on Ctrl-C or SIGTERM with one paragraph naming the saved answers and the ``lm-eval-ext resume``
  command (lm_eval_ext/interrupts.py), exit status 130 / 143;
- activates the plugin even where the start-up hook is off (``LM_EVAL_EXT_AUTOLOAD=0``, ``python -S``).
"""
from __future__ import annotations

import json
import logging
import shutil
import sys
import time
from pathlib import Path

from .. import answers, boundary, interrupts
from ..errors import UserError
from .preflight import raise_on_failures, run_checks

log = logging.getLogger(__name__)


class ResultsNotWrittenError(UserError):
    """The run finished but its results file is missing or incomplete."""


def requested_tasks(args) -> list[str]:
    """The task, group and tag names given with ``--tasks`` (comma-separated or repeated)."""
    return [name for item in (args.tasks or []) for name in str(item).split(",") if name]


def main(argv: list[str]) -> int:
    """Run the harness with ``argv`` (everything after ``lm-eval-ext run``)."""
    from lm_eval.__main__ import cli_evaluate

    interrupts.handle_signals()
    boundary.activate()
    args = boundary.parse_run_args(argv)
    report = run_checks(args)
    raise_on_failures(report)
    for note in report.notes:
        print(f"lm-eval-ext: note: {note}", file=sys.stderr)
    if requested_tasks(args) and not args.include_path and not getattr(args, "config", None):
        boundary.index_builtin_tasks(report.needs_builtin_tasks)
    started = time.time()
    sys.argv = ["lm_eval", "run", *argv]
    cli_evaluate()
    saved = answers.run_dir(_metadata(args))
    if args.output_path:
        _check_results(Path(args.output_path).expanduser(), started, saved)
    shutil.rmtree(saved, ignore_errors=True)
    return 0


def _metadata(args) -> dict:
    metadata = getattr(args, "metadata", None)
    return metadata if isinstance(metadata, dict) else {}


def _check_results(output: Path, started: float, saved: Path) -> None:
    """Raise unless the run wrote a whole results file under ``output`` (set a truncated one aside)."""
    pattern = f"{output.stem}_*.json" if output.suffix == ".json" else "results_*.json"
    root = output.parent if output.suffix == ".json" else output
    written = [p for p in root.rglob(pattern) if p.stat().st_mtime >= started - 1] if root.is_dir() else []
    problem = None if written else f"no results file was written under {root}"
    for path in written:
        try:
            json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            incomplete = path.with_name(path.name + ".incomplete")
            path.replace(incomplete)
            problem = f"the results file was cut short (set aside as {incomplete})"
    if problem:
        keep = (f"The answers are saved in {saved}: `lm-eval-ext resume {saved} --output_path DIR` scores them again "
                "and writes the results to a writable DIR." if saved.is_dir() else "")
        raise ResultsNotWrittenError(f"The run finished but {problem} (a full disk or a read-only directory?). {keep}")
