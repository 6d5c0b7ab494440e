"""The ``lm-eval-ext`` command line: run, tasks-dir, data."""
from __future__ import annotations

import argparse
import sys
import textwrap

from . import __version__
from .errors import UserError


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
              lm-eval-ext run --model hf --model_args pretrained=gpt2 --tasks lieder_base --output_path out --log_samples
              lm_eval run --include_path "$(lm-eval-ext tasks-dir)" --model hf --model_args pretrained=gpt2 --tasks lieder
              lm-eval-ext data fetch lieder
              lm-eval-ext data where lieder stimuli/base/base_stimuli.jsonl
              lm-eval-ext report out -o report
              lm-eval-ext export --format leaderboard out -o records
              lm-eval-ext leaderboard build records -o site

            `lm-eval-ext run --help` lists every flag of `lm_eval run`; all of them keep their meaning.
            """
        ),
    )
    parser.add_argument("--version", action="version", version=f"lm-eval-ext {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.add_parser(
        "run",
        add_help=False,
        help="run the harness (`lm_eval run` flags) with the plugin's tasks and models",
    )
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


def _print_tasks_dir(_args) -> int:
    from .paths import tasks_dir

    print(tasks_dir())
    return 0


def main(argv: list[str] | None = None) -> None:
    """Entry point of the ``lm-eval-ext`` command."""
    argv = sys.argv[1:] if argv is None else argv
    try:
        if argv[:1] == ["run"]:
            from .commands.run import main as run_main

            code = run_main(argv[1:])
        else:
            parser = _parser()
            args = parser.parse_args(argv)
            if not getattr(args, "func", None):
                parser.print_help()
                code = 0
            else:
                code = args.func(args)
    except UserError as err:
        print(f"lm-eval-ext: error: {err}", file=sys.stderr)
        code = 2
    sys.exit(code)
