"""``lm-eval-ext elitr``: score-only mode and the paper's seed protocol."""
from __future__ import annotations

import argparse
import contextlib
import json
import sys

from ..elitr.seed_summary import PAPER_SEEDS


def add_elitr_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add ``elitr`` (``score``, ``seeds``, ``seeds-report``) to a CLI's subparsers; leaves set ``func(args) -> int``."""
    from .judge import add_judge_options

    elitr = subparsers.add_parser("elitr", help="ELITR-Bench tools: score-only mode, seed runs",
                                  description="ELITR-Bench tools (tasks/elitr_bench/README.md).")
    sub = elitr.add_subparsers(dest="elitr_command", required=True)

    score = sub.add_parser(
        "score",
        help="judge answers generated elsewhere (or take their stored scores) and report the metrics per model",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Score-only mode: the ELITR-Bench metrics (score, per question type and answer position, "
        "middle_pvalue, score_diff, judge_failures) of every answering model in PATH, judged now or, with "
        "--from-file, from the scores stored in the file. PATH is a JSON file in the published "
        "generated-responses format, a member of the published archive written ARCHIVE.zip:MEMBER, or a "
        "harness samples file (samples_<task>_<date>.jsonl) of an ELITR-Bench task.",
        epilog="examples:\n"
        "  lm-eval-ext elitr score generated-responses.zip:elitr-bench-qa_dev_st_gpt-4-eval.json --from-file\n"
        "  OPENAI_API_KEY=... lm-eval-ext elitr score out/my_model/samples_elitr_bench_qa_dev_st_*.jsonl --json\n"
        "  lm-eval-ext elitr score answers.json --judge prometheus5 --judge-base-url http://localhost:8000/v1",
    )
    score.add_argument("path", metavar="PATH", help="responses to score (see above)")
    score.add_argument("--from-file", action="store_true",
                       help="take the scores stored in the file (published files: --score-field) instead of judging")
    score.add_argument("--score-field", default="gpt-4-eval_score", metavar="FIELD",
                       help="with --from-file on a published file: the score field (default: gpt-4-eval_score; "
                       "the all-eval file also has prometheus-eval_score, gold-human-eval_score, "
                       "silver-human-eval_score)")
    score.add_argument("--model-name", metavar="NAME",
                       help="name of the answering model of a samples file (default: the folder it is in)")
    score.add_argument("--json", action="store_true", help="print the report as JSON on stdout")
    add_judge_options(score)
    score.set_defaults(func=score_command)

    seeds = sub.add_parser(
        "seeds",
        help="run an evaluation once per seed (the paper's 2023, 2024, 2025) and report mean +- sample std",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Run `lm-eval-ext run RUN_ARGS` once per seed (--seed S; results in "
        "<--output_path>/seed_S; API models also get seed=S), then report each task's metrics as mean +- sample "
        "standard deviation over the runs, as the paper does for test2.",
        epilog="example:\n  lm-eval-ext elitr seeds -- --model hf --model_args pretrained=... "
        "--tasks elitr_bench_qa_test2_st \\\n      --gen_kwargs do_sample=true,temperature=0.6,top_p=0.9 --output_path out",
    )
    seeds.add_argument("--seeds", type=int, nargs="+", default=list(PAPER_SEEDS), metavar="SEED",
                       help="seeds (default: 2023 2024 2025)")
    seeds.add_argument("--json", action="store_true", help="print the summary as JSON on stdout")
    seeds.add_argument("run_args", nargs=argparse.REMAINDER, metavar="-- RUN_ARGS",
                       help="flags of `lm-eval-ext run` (including --output_path), after `--`")
    seeds.set_defaults(func=seeds_command)

    report = sub.add_parser("seeds-report", help="mean +- sample std of the metrics of several results files",
                            description="Read harness results files (or the newest results_*.json in each given "
                            "directory), one per seed, and report each task's metrics as mean +- sample standard "
                            "deviation.")
    report.add_argument("paths", nargs="+", metavar="RESULTS", help="results_*.json files or directories")
    report.add_argument("--json", action="store_true", help="print the summary as JSON on stdout")
    report.set_defaults(func=seeds_report_command)
    return elitr


def score_command(args: argparse.Namespace) -> int:
    """``lm-eval-ext elitr score``."""
    from ..elitr.responses import load_answers
    from ..elitr.score import format_table, judged_verdicts, scores_by_model, stored_verdicts
    from .judge import config_from_args

    answers, source = load_answers(args.path, score_field=args.score_field, model_name=args.model_name)
    judge_record = None
    if args.from_file:
        verdicts = stored_verdicts(answers, args.score_field)
    else:
        verdicts, judge_record = judged_verdicts(answers, config_from_args(args))
        if verdicts is None:  # dry run: the judge has said how many calls it would make
            return 0
    report = scores_by_model(answers, verdicts)
    if args.json:
        payload = {"source": source, "scores": f"file:{args.score_field}" if args.from_file else "judge",
                   "judge": judge_record and judge_record.to_dict(), "models": {m.model: m.to_dict() for m in report}}
        json.dump(payload, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print(f"{source}: {len(answers)} answers, "
              + (f"scores from the file ({args.score_field})" if args.from_file else "judged now"))
        print(format_table(report))
    return 0


def seeds_command(args: argparse.Namespace) -> int:
    """``lm-eval-ext elitr seeds``."""
    from .seeds import run_seeds

    run_args = args.run_args[1:] if args.run_args[:1] == ["--"] else args.run_args
    # the runs print the harness's tables; with --json, stdout is for the summary alone
    with contextlib.redirect_stdout(sys.stderr) if args.json else contextlib.nullcontext():
        files = run_seeds(run_args, args.seeds)
    return _print_summary(files, args.json)


def seeds_report_command(args: argparse.Namespace) -> int:
    """``lm-eval-ext elitr seeds-report``."""
    from ..elitr.seed_summary import results_files

    return _print_summary(results_files(args.paths), args.json)


def _print_summary(files, as_json: bool) -> int:
    from ..elitr.seed_summary import format_summary, summarize

    summary = summarize(files)
    if as_json:
        json.dump({"runs": [str(f) for f in files], "tasks": summary}, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print(f"{len(files)} run(s): " + ", ".join(str(f) for f in files))
        print(format_summary(summary))
    return 0
