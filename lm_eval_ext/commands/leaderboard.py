"""``lm-eval-ext leaderboard init|build|validate|verify``: the command line of the leaderboard."""
from __future__ import annotations

DESCRIPTION = (
    "Make a leaderboard repository that takes submissions as pull requests, build a static leaderboard site from "
    "leaderboard records (the JSON files of `lm-eval-ext export --format leaderboard`), check records before "
    "submitting them, and mark a record verified after a rerun. docs/leaderboard.md describes the whole flow."
)


def add_leaderboard_parser(subparsers) -> None:
    """Register ``leaderboard init|build|validate|verify`` on the ``lm-eval-ext`` sub-command parser."""
    parser = subparsers.add_parser("leaderboard", help="a leaderboard repository, its site, and the checks of records",
                                   description=DESCRIPTION)
    sub = parser.add_subparsers(dest="leaderboard_command", required=True, metavar="COMMAND")
    init = sub.add_parser(
        "init", help="make a leaderboard repository that takes submissions as pull requests",
        description="Write a new leaderboard repository into DIR: records/, a README with the submission steps, and a "
                    "GitHub Actions workflow (.github/workflows/leaderboard.yml) that installs one lm-eval-ext release "
                    "(--install), validates the records each pull request adds or changes, and on the default branch "
                    "builds the site and publishes it with GitHub Pages. DIR may be new, empty, or a fresh git "
                    "repository; nothing is overwritten.")
    init.add_argument("directory", metavar="DIR", help="the repository's directory")
    init.add_argument("--install", metavar="WHAT", default=None,
                      help="what the workflow installs: a version (0.1.0), a git URL with a tag or commit "
                           "(git+https://HOST/ORG/lm-eval-ext@v0.1.0), an https URL of a wheel or sdist, or a wheel "
                           "file here (copied into the repository's wheels/). Default: where the installed lm-eval-ext "
                           "came from (its git URL and commit, its wheel, or its version when a package index "
                           "installed it); an install from a checkout needs --install")
    init.set_defaults(func=run_init)
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
    build.add_argument("--allow-empty", action="store_true",
                       help="a directory with no record yet builds a site of the published models (a new leaderboard)")
    build.set_defaults(func=run_build)
    validate = sub.add_parser(
        "validate", help="check records before submitting them",
        description="Check each record: the JSON Schema, task versions known to this lm-eval-ext, partial runs "
                    "marked as such, and a validated judge for ELITR-Bench. Exit status 1 when a record fails. A "
                    "record whose numbers are not comparable with the papers' (data the user gave, truncated "
                    "prompts, a system prompt, --gen_kwargs) is listed with one line per reason.")
    validate.add_argument("records", nargs="+", metavar="RECORD", help="record JSON file, or a directory of them")
    validate.set_defaults(func=run_validate)
    verify = sub.add_parser(
        "verify", help="mark a record verified: the maintainers' rerun agrees with it",
        description="Compare a record with a rerun (its results directory): every metric of every task must agree "
                    "within --sigmas combined standard errors, as the harness recorded them (a metric without one "
                    "must be equal). If all agree, the record is rewritten with provenance.status verified and what "
                    "it was verified against; if not, the disagreements are listed, the exit status is 2 and the "
                    "record is unchanged.")
    verify.add_argument("record", metavar="RECORD", help="the record JSON file")
    verify.add_argument("results", metavar="RESULTS_DIR", help="the --output_path directory of the rerun")
    verify.add_argument("--sigmas", type=float, default=2.0,
                        help="standard errors a metric may differ by (default: 2, about 95%% for two estimates)")
    verify.set_defaults(func=run_verify)


def run_build(args) -> int:
    """Build the site and say where it is."""
    from ..leaderboard.build import build_site

    site = build_site(args.records, args.output, published=args.published, title=args.title,
                      allow_empty=args.allow_empty)
    records = [e for e in site.entries if not e.published]
    print(f"wrote {site.index} ({len(site.pages)} pages; {len(records)} record(s), "
          f"{len(site.entries) - len(records)} published model(s))")
    for entry in records:
        if entry.problems:
            print(f"unvalidated: {entry.path}: {'; '.join(entry.problems)}")
        if entry.not_comparable:
            print(f"not comparable with the papers, shown apart: {entry.path}: {'; '.join(entry.not_comparable)}")
    return 0


def run_init(args) -> int:
    """Write the repository and say what to do next."""
    from ..leaderboard.install import install_from_option, installed
    from ..leaderboard.repository import init_repository

    install = install_from_option(args.install) if args.install is not None else installed()
    for path in init_repository(args.directory, install):
        print(f"wrote {path}")
    print(f'the workflow installs: pip install "{install.requirement}" ({install.source})')
    print("next: commit, push to GitHub, and set Settings > Pages > Source to GitHub Actions; submissions are pull "
          "requests adding records (README.md)")
    return 0


def run_verify(args) -> int:
    """Compare the record with the rerun; mark it verified or explain why not."""
    from ..leaderboard.verify import verify_record

    done = verify_record(args.record, args.results, args.sigmas)
    print(f"verified {done.path}: {done.metrics} metric(s) of {done.tasks} task(s) agree with the rerun within "
          f"{done.sigmas:g} standard errors (equal where there is none); status verified")
    return 0


def run_validate(args) -> int:
    """Check every record; print one line per record (and its problems)."""
    from ..leaderboard.records import read_records
    from ..leaderboard.validate import check_record, not_comparable

    failed = 0
    for path, record in read_records(args.records):
        problems = check_record(record)
        # a record whose schema fails cannot be read further
        apart = [] if any(p.startswith("schema: ") for p in problems) else not_comparable(record)
        if problems:
            failed += 1
            print(f"FAIL {path}")
            for problem in problems:
                print(f"  - {problem}")
        else:
            status = record["status"]
            marks = "".join(f"; {kind}, marked" for kind in ("partial", "truncated") if status[kind])
            marks += "; not comparable with the papers" if apart else ""
            print(f"ok   {path} ({record['provenance']['status']}{marks})")
        for reason in apart:
            print(f"  - not comparable with the papers: {reason}")
    return 1 if failed else 0
