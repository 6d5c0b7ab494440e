"""``lm-eval-ext leaderboard build|validate``: the command line of the leaderboard."""
from __future__ import annotations

DESCRIPTION = (
    "Build a static leaderboard site from leaderboard records (the JSON files of `lm-eval-ext export --format "
    "leaderboard`), or check records before submitting them. docs/leaderboard.md describes both."
)


def add_leaderboard_parser(subparsers) -> None:
    """Register ``leaderboard build`` and ``leaderboard validate`` on the ``lm-eval-ext`` sub-command parser."""
    parser = subparsers.add_parser("leaderboard", help="build a static leaderboard site from records; check a record",
                                   description=DESCRIPTION)
    sub = parser.add_subparsers(dest="leaderboard_command", required=True, metavar="COMMAND")
    build = sub.add_parser(
        "build", help="write the static site (HTML, no server needed) from records",
        description="Write a static site from leaderboard records: an overview of the four benchmarks, one page per "
                    "benchmark, one page per record, and the papers' published models (marked). Open OUTPUT/index.html "
                    "from disk or put OUTPUT on any static host.")
    build.add_argument("records", nargs="+", metavar="RECORD", help="record JSON file, or a directory of them")
    build.add_argument("--output", "-o", default="site", help="directory to write into (default: ./site)")
    build.add_argument("--title", default=None, help="site title (default: 'lm-eval-ext leaderboard')")
    build.add_argument("--no-published", dest="published", action="store_false",
                       help="leave out the models each paper evaluated")
    build.set_defaults(func=run_build)
    validate = sub.add_parser(
        "validate", help="check records before submitting them",
        description="Check each record: the JSON Schema, task versions known to this lm-eval-ext, partial runs "
                    "marked as such, and a validated judge for ELITR-Bench. Exit status 1 when a record fails.")
    validate.add_argument("records", nargs="+", metavar="RECORD", help="record JSON file, or a directory of them")
    validate.set_defaults(func=run_validate)


def run_build(args) -> int:
    """Build the site and say where it is."""
    from .build import build_site

    site = build_site(args.records, args.output, published=args.published, title=args.title)
    records = [e for e in site.entries if not e.published]
    print(f"wrote {site.index} ({len(site.pages)} pages; {len(records)} record(s), "
          f"{len(site.entries) - len(records)} published model(s))")
    for entry in records:
        if entry.problems:
            print(f"unvalidated: {entry.path}: {'; '.join(entry.problems)}")
    return 0


def run_validate(args) -> int:
    """Check every record; print one line per record (and its problems)."""
    from .records import read_records
    from .validate import check_record

    failed = 0
    for path, record in read_records(args.records):
        problems = check_record(record)
        if problems:
            failed += 1
            print(f"FAIL {path}")
            for problem in problems:
                print(f"  - {problem}")
        else:
            status = record["status"]
            mark = " (partial, marked)" if status["partial"] else " (truncated, marked)" if status["truncated"] else ""
            print(f"ok   {path}{mark}")
    return 1 if failed else 0
