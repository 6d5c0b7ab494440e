"""The ``lm-eval-ext`` command line: one argparse sub-command per command group, each in its own module.

Every command group (``run``, ``check``, ``resume``, ``tasks-dir``, ``data``, ``elitr``, ``report``,
``export``, ``leaderboard``, ``judge``, ``lieder``) has a module of :mod:`lm_eval_ext.commands` named for
it, with an ``add_<group>_parser(subparsers)`` that registers it; each leaf sets ``func(args) -> int`` (the
exit code). The commands that hand their flags on to ``lm_eval run`` (``run``, ``check``, ``resume``) set
``harness_flags``: the flags this parser does not know go there, unparsed, for the harness's own parser.
"""
from __future__ import annotations

import argparse
import sys
import textwrap
from contextlib import nullcontext

from . import __version__


def _parser() -> argparse.ArgumentParser:
    from .commands.check import add_check_parser
    from .commands.data import add_data_parser
    from .commands.elitr import add_elitr_parser
    from .commands.export import add_export_parser
    from .commands.judge import add_judge_parser
    from .commands.leaderboard import add_leaderboard_parser
    from .commands.lieder import add_lieder_parser
    from .commands.report import add_report_parser
    from .commands.resume import add_resume_parser
    from .commands.run import add_run_parser
    from .commands.tasks_dir import add_tasks_dir_parser

    parser = argparse.ArgumentParser(
        prog="lm-eval-ext",
        description="LIEDER, Lost in the Middle, MAGNIFICo and ELITR-Bench for lm-evaluation-harness.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=textwrap.dedent(
            """\
            examples:
              lm_eval run --model hf --model_args pretrained=gpt2 --tasks lieder --output_path out --log_samples
              lm-eval-ext run --model hf --model_args pretrained=gpt2 --tasks elitr_bench --output_path out --log_samples
              lm-eval-ext check --tasks elitr_bench --judge-model gpt-4o
              lm-eval-ext resume ~/.cache/lm_eval_ext/answers/20261123-101500-4242
              lm-eval-ext data fetch lieder
              lm-eval-ext data where lieder stimuli/base/base_stimuli.jsonl
              lm-eval-ext report out -o report
              lm-eval-ext export --format leaderboard out -o records
              lm-eval-ext leaderboard init my-leaderboard
              lm-eval-ext leaderboard verify records/gpt2.json rerun-out
              lm-eval-ext leaderboard build records -o site

            The plain `lm_eval` command runs every plugin task. `lm-eval-ext run` takes the same flags
            (`lm-eval-ext run --help` lists them) and adds checks before the model is loaded and after the
            results are written (docs/index.md).
            """
        ),
    )
    parser.add_argument("--version", action="version", version=f"lm-eval-ext {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for add in (add_run_parser, add_check_parser, add_resume_parser, add_tasks_dir_parser, add_data_parser,
                add_elitr_parser, add_report_parser, add_export_parser, add_leaderboard_parser, add_judge_parser,
                add_lieder_parser):
        add(sub)
    return parser


JUDGE_FLAG_COMMANDS = ("check", "judge", "elitr")  # the commands that take the --judge-* flags


def main(argv: list[str] | None = None) -> None:
    """Entry point of the ``lm-eval-ext`` command."""
    argv = sys.argv[1:] if argv is None else argv
    advice = nullcontext()
    if argv[:1] and argv[0] in JUDGE_FLAG_COMMANDS:  # errors advise the --judge-* flags, elsewhere --metadata
        from .judge.config import judge_flags_in_advice

        advice = judge_flags_in_advice()
    with advice:
        code = _command(argv)
    sys.exit(code)


def _command(argv: list[str]) -> int:
    try:
        parser = _parser()
        args, rest = parser.parse_known_args(argv)
        if rest and not hasattr(args, "harness_flags"):
            parser.error(f"unrecognized arguments: {' '.join(rest)}")
        if rest:
            args.harness_flags = rest
        if not getattr(args, "func", None):
            parser.print_help()
            code = 0
        else:
            code = args.func(args)
    except KeyboardInterrupt as interrupt:  # Ctrl-C, or SIGTERM under `run` (lm_eval_ext/interrupts.py)
        from .interrupts import stop

        stop(interrupt)  # ends the process (returns only in an interactive session)
        raise
    except Exception as err:
        from .commands.model_errors import model_error
        from .user_errors import PREFIX, plugin_error

        error = plugin_error(err) or model_error(err)
        if error is None:
            raise
        print(PREFIX + str(error), file=sys.stderr)
        code = 2
    return code
