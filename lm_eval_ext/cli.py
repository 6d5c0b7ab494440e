"""The ``lm-eval-ext`` command line: run, check, resume, and the tools of the data, judge, reports and benchmarks."""
from __future__ import annotations

import argparse
import sys
import textwrap
from contextlib import nullcontext

from . import __version__


def _parser() -> argparse.ArgumentParser:
    from .commands.elitr import add_elitr_parser
    from .data.cli import add_data_parser
    from .judge.cli import add_judge_parser
    from .export.cli import add_export_parser
    from .leaderboard.cli import add_leaderboard_parser
    from .report.cli import add_report_parser

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
              lm-eval-ext leaderboard build records -o site

            The plain `lm_eval` command runs every plugin task. `lm-eval-ext run` takes the same flags
            (`lm-eval-ext run --help` lists them) and adds checks before the model is loaded and after the
            results are written (docs/index.md).
            """
        ),
    )
    parser.add_argument("--version", action="version", version=f"lm-eval-ext {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.add_parser("run", add_help=False,
                   help="`lm_eval run`, checked first (names, flags, output path, data, judge) and after (results)")
    sub.add_parser("check", add_help=False,
                   help="the checks of `run` alone (the same flags, plus the judge's --judge-* flags)")
    resume = sub.add_parser("resume", help="score a run's saved answers again and write its results",
                            description="Score the answers a run saved before scoring (the run's log names the "
                            "directory) and write the run's results; flags after DIR replace the saved command's.")
    resume.add_argument("folder", metavar="DIR", help="the run's saved answers")
    resume.add_argument("flags", nargs=argparse.REMAINDER, help="`lm_eval run` flags that replace the run's own")
    resume.set_defaults(func=lambda args: _resume(args.folder, args.flags))
    tasks = sub.add_parser("tasks-dir", help="print the directory holding the plugin's task YAMLs (for --include_path)")
    tasks.set_defaults(func=_print_tasks_dir)
    add_data_parser(sub)
    add_elitr_parser(sub)
    add_report_parser(sub)
    add_export_parser(sub)
    add_leaderboard_parser(sub)
    add_judge_parser(sub)
    _add_lieder_parser(sub)
    return parser


def _add_lieder_parser(sub) -> None:
    lieder = sub.add_parser("lieder", help="LIEDER tools: generate a fresh stimulus set")
    lieder_sub = lieder.add_subparsers(dest="lieder_command", required=True)
    generate = lieder_sub.add_parser(
        "generate",
        help="write a LIEDER stimulus set for your own nouns, verbs and names",
        description="Write a LIEDER-style stimulus set (the paper's design) for the items of LEXICON, "
        "a JSON list described in lm_eval_ext/lieder/generator.py and tasks/lieder/README.md. "
        "Run it with: lm-eval-ext run ... --tasks lieder_<set> --metadata stimuli_file=OUTPUT",
    )
    generate.add_argument("lexicon", metavar="LEXICON", help="JSON list of lexical items")
    generate.add_argument("--set", dest="stimulus_set", choices=("base", "diff", "two"), default="base")
    generate.add_argument("--output", "-o", required=True, help="JSONL file to write")
    generate.set_defaults(func=_generate_stimuli)


def _generate_stimuli(args) -> int:
    from .lieder.generator import read_lexicon, write_stimuli

    rows = write_stimuli(read_lexicon(args.lexicon), args.stimulus_set, args.output)
    print(f"wrote {rows} {args.stimulus_set} stimuli to {args.output}")
    return 0


def _resume(folder: str, flags: list[str]) -> int:
    from .commands.resume import main as resume_main

    return resume_main(folder, flags)


def _print_tasks_dir(_args) -> int:
    from .paths import tasks_dir

    print(tasks_dir())
    return 0


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
        if argv[:1] == ["run"]:
            from .commands.run import main as run_main

            code = run_main(argv[1:])
        elif argv[:1] == ["check"]:
            from .commands.check import main as check_main

            code = check_main(argv[1:])
        else:
            parser = _parser()
            args = parser.parse_args(argv)
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
        from .user_errors import PREFIX, plugin_error

        error = plugin_error(err)
        if error is None:
            raise
        print(PREFIX + str(error), file=sys.stderr)
        code = 2
    return code
