"""``lm-eval-ext report``: the command line of the report builder."""
from __future__ import annotations

DESCRIPTION = (
    "Read the harness's results (results_*.json, and samples_*.jsonl from --log_samples) of one or several runs "
    "and models, and write a self-contained HTML page, the figures as PNG and SVG, and the tables as CSV. "
    "Each RESULTS is an --output_path directory (searched recursively) or one results file, optionally "
    "prefixed with LABEL= to name the model in the figures; runs of the same model are reported together."
)


def add_report_parser(subparsers) -> None:
    """Register ``report`` on the ``lm-eval-ext`` sub-command parser."""
    parser = subparsers.add_parser("report", help="HTML report, figures (PNG, SVG) and tables (CSV) from results",
                                   description=DESCRIPTION)
    parser.add_argument("results", nargs="+", metavar="[LABEL=]RESULTS", help="results directory or file")
    parser.add_argument("--output", "-o", default="report", help="directory to write into (default: ./report)")
    parser.add_argument("--title", default=None, help="page title (default: 'lm-eval-ext report')")
    parser.add_argument("--no-published", dest="published", action="store_false",
                        help="do not draw the models each paper evaluated beside yours (drawn by default, in grey, "
                             "with their source)")
    parser.set_defaults(func=run_report)


def run_report(args) -> int:
    """Build the report and print where it is."""
    from ..report.build import build_report

    report = build_report(args.results, args.output, args.title, published=args.published)
    print(f"wrote {report.page} ({len(report.sections) - 1} benchmark section(s), "
          f"{len(report.figures) // 2} figure(s) as PNG + SVG, {len(report.tables)} CSV table(s))")
    for kind, text in report.banners:
        print(f"{kind.upper()} run: {text}")
    return 0
