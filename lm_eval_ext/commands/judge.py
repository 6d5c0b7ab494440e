"""``lm-eval-ext judge``: judge validation against human scores, batch output collection, and the judge options
shared by commands.

``add_judge_options(parser)`` adds one ``--judge-*`` flag per option of
:class:`~lm_eval_ext.judge.config.JudgeConfig`; ``config_from_args(args)`` resolves them (flags,
then ``LM_EVAL_EXT_JUDGE_*`` variables, then defaults). Other commands (e.g. score-only mode)
reuse both.
"""
from __future__ import annotations

import argparse
import csv
import dataclasses
import io
import json
import sys
import time
from pathlib import Path

from ..judge.config import OPTIONS, REMOVED, JudgeConfig, cli_flag, metadata_name, removed_option, resolve_config

_DEST = "judge_option_"


def add_judge_options(parser: argparse.ArgumentParser) -> None:
    """Add the judge's flags (one per JudgeConfig option) to ``parser``, in their own group."""
    group = parser.add_argument_group("judge options (also LM_EVAL_EXT_JUDGE_* variables; see docs/judge.md)")
    for option in OPTIONS:
        flag, dest = cli_flag(option.name), _DEST + option.name
        if option.metadata["kind"] is bool:
            # --flag / --no-flag: a flag whose default is on (check) must be able to turn it off
            group.add_argument(flag, dest=dest, action=argparse.BooleanOptionalAction, default=None,
                               help=option.metadata["help"] + f" (default: {'on' if option.default else 'off'})")
        else:
            default = "" if option.default is None else f" (default: {option.default})"
            group.add_argument(flag, dest=dest, default=None, metavar=option.name.upper(),
                               help=option.metadata["help"] + default)
    for name in REMOVED:  # given, a removed option is an error that says what to do
        group.add_argument(cli_flag(name), dest=_DEST + name, default=None, help=argparse.SUPPRESS)


def _no_removed(args: argparse.Namespace) -> None:
    for name in REMOVED:
        if getattr(args, _DEST + name, None) is not None:
            raise removed_option(name, cli_flag(name), "the command line")


def judge_flags_as_metadata(args: argparse.Namespace) -> dict:
    """The ``--judge-*`` flags given, as the ``judge_*`` metadata a run's tasks read."""
    _no_removed(args)
    return {metadata_name(option.name): value for option in OPTIONS
            if (value := getattr(args, _DEST + option.name)) is not None}


def config_from_args(args: argparse.Namespace, **task_defaults) -> JudgeConfig:
    """The judge configuration from parsed flags (and the environment, and ``task_defaults``)."""
    _no_removed(args)
    explicit = {option.name: getattr(args, _DEST + option.name) for option in OPTIONS}
    return resolve_config(explicit=explicit, task_defaults=task_defaults)


def add_judge_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add ``judge`` (with ``validate``) to a CLI's subparsers; each leaf sets ``func(args) -> int``."""
    judge = subparsers.add_parser("judge", help="the LLM judge: validate a judge against human scores",
                                  description="The LLM judge (docs/judge.md).")
    sub = judge.add_subparsers(dest="judge_command", required=True)
    validate = sub.add_parser(
        "validate",
        help="compare a judge's scores with the human scores of ELITR-Bench's 390 judged responses",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Run the judge on the 390 (question, reference, response) triples of ELITR-Bench's "
        "elitr-bench-qa_test2_st_all-eval.json and report, beside the published GPT-4 and Prometheus judges and "
        "the silver human scores: the mean score per answering model, the Pearson, Spearman and Kendall "
        "correlations with the gold and with the silver human scores, and a plot of the mean score (95% CI) per "
        "gold-human score; and what judging 1,000 items takes (input and output tokens, dollars with "
        "--judge-price-input/--judge-price-output, seconds at the concurrency used). Writes correlations.csv, "
        "gold_bins.csv, gold_bins.png and validation.json to --output-dir.",
        epilog="examples:\n"
        "  lm-eval-ext judge validate --from-file --json\n"
        "  OPENAI_API_KEY=... lm-eval-ext judge validate --judge-model gpt-4o-mini\n"
        "  lm-eval-ext judge validate --judge prometheus5 --judge-base-url http://localhost:8000/v1 \\\n"
        "      --judge-model prometheus-eval/prometheus-13b-v1.0 --judge-api-key-env VLLM_KEY\n"
        "  lm-eval-ext judge validate --dry-run",
    )
    validate.add_argument("path", nargs="?", metavar="PATH",
                          help="a JSON file in the all-eval format (default: the published file, via the data layer)")
    validate.add_argument("--from-file", action="store_true",
                          help="report only the scores already in the file (published judges, humans); call no judge")
    validate.add_argument("--json", action="store_true",
                          help="print the report as JSON on stdout (the summary then goes to stderr)")
    validate.add_argument("--output-dir", default="judge-validation", metavar="DIR",
                          help="where to write the table, plot and JSON (default: ./judge-validation)")
    add_judge_options(validate)
    validate.set_defaults(func=validate_command)
    collect = sub.add_parser(
        "collect", help="put the replies of a batch output file (OpenAI's, or vLLM's offline run_batch) into the "
        "judge cache", description="Read a batch output file: one JSON line per request, its custom_id the judge "
        "cache key the plugin wrote into the request file (a dry run with --judge-batch writes them), and store "
        "every reply in the judge cache, so that the run, rerun, judges nothing again (docs/judge.md, Batch judging).")
    collect.add_argument("path", metavar="FILE", help="a batch output file (JSONL)")
    collect.add_argument("--judge-cache", dest="cache", default=None, metavar="CACHE",
                         help="the judge cache file (default: the judge's default cache)")
    collect.set_defaults(func=collect_command)
    return judge


def collect_command(args: argparse.Namespace) -> int:
    """``lm-eval-ext judge collect FILE``."""
    from ..judge.batch import collect_file

    config = resolve_config(explicit={"cache": args.cache})
    stored, failed = collect_file(Path(args.path), config)
    print(f"{args.path}: {stored} replies stored in the judge cache {config.cache_path()}"
          + (f"; {failed} request(s) without a reply (judged live by the next run)" if failed else ""))
    return 0


def validate_command(args: argparse.Namespace) -> int:
    """``lm-eval-ext judge validate``."""
    from ..judge.plot import plot_gold_bins
    from ..judge.records import JudgeItem
    from ..judge.validate import summary_lines, validation_report
    from ..judge.validation_data import default_source, load_rows

    rows = load_rows(args.path)
    source = args.path or default_source()
    judge_scores = judge_record = per_1000 = None
    if not args.from_file:
        from ..judge.runner import Judge
        from ..judge.usage import per_thousand

        judge = Judge(config_from_args(args))
        started = time.perf_counter()
        try:
            results = judge.run([JudgeItem(r.question, r.response, r.reference) for r in rows], label="validation")
        finally:
            judge.close()
        if judge.config.dry_run:
            return 0
        judge_scores = [r.score for r in results]
        judge_record = dataclasses.replace(judge.record, run=judge.stats.to_dict())
        # the items the judge was called for: a verdict from the cache or a repeated prompt cost nothing
        per_1000 = per_thousand(judge.config, judge.stats.usage, sum(1 for r in results if r.usage),
                                time.perf_counter() - started)
    report = validation_report(rows, judge_scores, source=str(source), judge_record=judge_record,
                               per_1000_items=per_1000)
    out = Path(args.output_dir)
    report["files"] = _write_files(report, out, plot_gold_bins)
    text = "\n".join(summary_lines(report) + ["", "files: " + ", ".join(report["files"].values())])
    if args.json:
        print(text, file=sys.stderr)
        json.dump(report, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print(text)
    return 0


def _write_files(report: dict, out: Path, plot) -> dict[str, str]:
    from ..atomic_write import output_dir, write_bytes, write_text

    output_dir(out, "--output-dir")
    files = {
        "correlations": out / "correlations.csv",
        "gold_bins": out / "gold_bins.csv",
        "plot": out / "gold_bins.png",
        "json": out / "validation.json",
    }
    models = report["models"]
    correlations = io.StringIO(newline="")
    writer = csv.writer(correlations)
    writer.writerow(["scorer", "kind", "n_scored", "n_failures", "mean", *(f"mean_{m}" for m in models),
                     *(f"{k}_{h}" for h in ("gold", "silver") for k in ("pearson", "spearman", "kendall")), "n_pairs_gold"])
    for name, entry in report["scorers"].items():
        corr = [entry.get(f"vs_{h}", {}).get(k, "") for h in ("gold", "silver") for k in ("pearson", "spearman", "kendall")]
        writer.writerow([name, entry["kind"], entry["n_scored"], entry["n_failures"], entry["mean"],
                         *(entry["mean_by_model"][m] for m in models), *corr, entry.get("vs_gold", {}).get("n", "")])
    write_text(files["correlations"], correlations.getvalue(), "--output-dir")
    gold_bins = io.StringIO(newline="")
    writer = csv.writer(gold_bins)
    writer.writerow(["scorer", "gold_score", "n", "mean", "ci95_low", "ci95_high"])
    for name, entry in report["scorers"].items():
        for level, cell in entry.get("by_gold_bin", {}).items():
            writer.writerow([name, level, cell["n"], cell["mean"], cell.get("ci95_low", ""), cell.get("ci95_high", "")])
    write_text(files["gold_bins"], gold_bins.getvalue(), "--output-dir")
    write_bytes(files["plot"], plot(report), "--output-dir")
    paths = {key: str(path) for key, path in files.items()}
    write_text(files["json"], json.dumps({**report, "files": paths}, indent=2) + "\n", "--output-dir")
    return paths
