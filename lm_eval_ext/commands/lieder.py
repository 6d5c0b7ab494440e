"""``lm-eval-ext lieder generate``: the command line of the LIEDER stimulus generator."""
from __future__ import annotations

import argparse
from pathlib import Path

from ..errors import metadata_arg


def add_lieder_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add ``lieder`` (with ``generate``) to a CLI's subparsers; each leaf sets ``func(args) -> int``."""
    lieder = subparsers.add_parser("lieder", help="LIEDER tools: generate a fresh stimulus set")
    sub = lieder.add_subparsers(dest="lieder_command", required=True)
    generate = sub.add_parser(
        "generate",
        help="write a LIEDER stimulus set for your own nouns, verbs and names",
        description="Write a LIEDER-style stimulus set (the paper's design) for the items of LEXICON, "
        "a JSON list described in lm_eval_ext/lieder/generator.py and tasks/lieder/README.md. "
        f"Run it with: lm-eval-ext run ... --tasks lieder_<set> {metadata_arg(stimuli_file='OUTPUT')}",
    )
    generate.add_argument("lexicon", metavar="LEXICON", help="JSON list of lexical items")
    generate.add_argument("--set", dest="stimulus_set", choices=("base", "diff", "two"), default="base")
    generate.add_argument("--output", "-o", required=True, help="JSONL file to write")
    generate.set_defaults(func=generate_command)
    return lieder


def generate_command(args: argparse.Namespace) -> int:
    """``lm-eval-ext lieder generate``."""
    from ..atomic_write import write_text
    from ..lieder.generator import read_lexicon, stimuli_jsonl

    text, rows = stimuli_jsonl(read_lexicon(args.lexicon), args.stimulus_set)
    write_text(Path(args.output), text)
    print(f"wrote {rows} {args.stimulus_set} stimuli to {args.output}")
    return 0
