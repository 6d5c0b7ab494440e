"""``lm-eval-ext check [run flags] [judge flags]``: the checks of ``lm-eval-ext run``, without running.

Takes the flags of ``lm_eval run`` (so a command can be checked by writing ``check`` for ``run``)
and the judge's ``--judge-*`` flags, which stand for ``--metadata judge_*``; prints what it found
and exits 0 when every check passed, 2 otherwise. lm_eval_ext/commands/preflight.py lists the checks.
"""
from __future__ import annotations

import argparse

from .. import boundary
from .judge import add_judge_options, judge_flags_as_metadata
from .preflight import raise_on_failures, run_checks


def add_check_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add ``check`` to a CLI's subparsers: the flags after it are those of ``lm_eval run`` and the judge's."""
    check = subparsers.add_parser("check", add_help=False,
                                  help="the checks of `run` alone (the same flags, plus the judge's --judge-* flags)")
    check.set_defaults(func=check_command, harness_flags=[])
    return check


def check_command(args: argparse.Namespace) -> int:
    """``lm-eval-ext check``."""
    return main(args.harness_flags)


def main(argv: list[str]) -> int:
    """Check the run ``argv`` describes (``lm_eval run`` and ``--judge-*`` flags)."""
    judge = argparse.ArgumentParser(
        prog="lm-eval-ext check", add_help=False,
        usage="lm-eval-ext check [flags of `lm_eval run`] [judge flags]",
        description="Run the checks of `lm-eval-ext run` (task and model names, the model's arguments, flags, "
                    "output path, data, judge) without loading the model. Takes every flag of `lm_eval run` "
                    "(`lm_eval run --help` lists them) and the judge flags below, which stand for `--metadata "
                    "judge_*`. The model's arguments are checked when --model or --model_args is given.")
    add_judge_options(judge)
    if {"-h", "--help"} & set(argv):
        judge.print_help()
        return 0
    judge_args, run_argv = judge.parse_known_args(argv)
    boundary.activate()
    args = boundary.parse_run_args(run_argv)
    args.metadata = {**(args.metadata or {}), **judge_flags_as_metadata(judge_args)}
    report = run_checks(args, model_required=False)  # checking the data and the judge needs no model
    raise_on_failures(report)
    for note in report.notes:
        print(f"lm-eval-ext: note: {note}")
    print("lm-eval-ext: every check passed: task and model names, the model's arguments, flags, output path, data, "
          "judge" + (f" (not checked: {'; '.join(report.unchecked)})" if report.unchecked else ""))
    return 0
