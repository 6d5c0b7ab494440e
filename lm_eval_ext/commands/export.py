"""``lm-eval-ext export``: the command line of the exporters."""
from __future__ import annotations

DESCRIPTION = (
    "Export results of lm-eval-ext tasks for other tools. --format leaderboard writes, per model, one JSON "
    "record (schema: lm_eval_ext/export/schema/leaderboard.schema.json, described in docs/leaderboard.md) with "
    "every metric, the headline metrics, task/harness/plugin versions, model arguments, generation settings, "
    "the judge and data checksums, and leaderboard.csv with one row per model. Each RESULTS is an "
    "--output_path directory (searched recursively) or one results file, optionally prefixed with LABEL=. "
    "Partial results (--limit, --samples, --predict_only, items skipped) are refused unless --allow-partial, "
    "which marks the record partial. Check a record with `lm-eval-ext leaderboard validate`."
)


def add_export_parser(subparsers) -> None:
    """Register ``export`` on the ``lm-eval-ext`` sub-command parser."""
    parser = subparsers.add_parser("export", help="export results (a leaderboard record per model)",
                                   description=DESCRIPTION)
    parser.add_argument("results", nargs="+", metavar="[LABEL=]RESULTS", help="results directory or file")
    parser.add_argument("--format", choices=("leaderboard",), default="leaderboard", help="export format")
    parser.add_argument("--output", "-o", default="leaderboard", help="directory to write into (default: ./leaderboard)")
    parser.add_argument("--allow-partial", action="store_true",
                        help="export partial results too; their records are marked partial (status.partial)")
    parser.add_argument("--judge-validation", action="append", default=[], metavar="VALIDATION_JSON",
                        help="the validation.json of `lm-eval-ext judge validate` for the judge of the ELITR-Bench "
                             "tasks, embedded in the record (repeat for several judges)")
    parser.set_defaults(func=run_export)


def run_export(args) -> int:
    """Write the export and list the files."""
    from ..export.write import export_leaderboard

    for path in export_leaderboard(args.results, args.output, allow_partial=args.allow_partial,
                                   judge_validation=args.judge_validation):
        print(f"wrote {path}")
    return 0
