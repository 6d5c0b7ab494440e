"""Lost in the Middle prompt building: throughput and peak memory for every position of a 20-document set.

Builds the `litm_qa_20docs` task on a 20-document file with every gold position swept
(`litm_positions=all`: questions x 20 prompts), then times, separately:

1. task construction (read the file through the data layer, build the documents);
2. building every prompt (`doc_to_text`, what the harness calls for each document);
3. the harness's request building (`build_all_requests`) including the long-prompt check, which
   tokenizes each distinct piece of the prompts (document, template part) once and the prompts near
   the limit whole (lm_eval_ext/prompt_length.py), with the tests' tiny model's tokenizer, built offline;
4. for comparison, the same decisions by tokenizing every whole prompt, and whether they agree.

The context length (16,384 by default) can be set with --max-length: the lower it is, the more prompts
lie near it and are tokenized whole.

Peak memory is the process's peak resident set size after each stage (ru_maxrss), and the peak
of Python allocations during the stage (tracemalloc). The default file is the mirror's partial
first-release 20-document file (441 questions -> 8,820 prompts).

    LM_EVAL_EXT_DATA_DIR=<mirror> python bench/litm_prompt_throughput.py [--qa-file PATH] [--skip-length-check] [--max-length N]
"""
from __future__ import annotations

import argparse
import logging
import resource
import shutil
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the test doubles: tests/doubles

PARTIAL = ("partial_first_release_2023/ViktorTorp+lost-in-the-middle/qa_predictions/20_total_documents/gpt_reordered/"
           "nq-open-20_total_documents_gold_at_0-gpt-35-reorder-predictions-scored.jsonl.gz")


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _stage(name: str, fn, trace: bool = True):
    """(result, seconds, peak MB of Python allocations); ``trace=False`` times without tracemalloc, which slows
    allocation-heavy code a lot (the peak is then not measured: 0)."""
    if trace:
        tracemalloc.start()
    started = time.perf_counter()
    result = fn()
    seconds = time.perf_counter() - started
    peak = tracemalloc.get_traced_memory()[1] if trace else 0
    if trace:
        tracemalloc.stop()
    return result, seconds, peak / 2**20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--qa-file", help="a 20-document QA file (default: the mirror's partial first-release file)")
    parser.add_argument("--skip-length-check", action="store_true", help="time request building without tokenizing")
    parser.add_argument("--max-length", type=int, default=16384, help="the context length checked against")
    args = parser.parse_args()
    logging.disable(logging.WARNING)

    from lm_eval.tasks import TaskManager

    from lm_eval_ext.data import resolve_file
    from doubles.tiny_model import build_tiny_model

    qa_file = args.qa_file or str(resolve_file("lost_in_the_middle", PARTIAL))
    work = Path(tempfile.mkdtemp(prefix="litm-bench-"))
    try:
        metadata = {"litm_qa_file": qa_file, "litm_positions": "all"}
        if not args.skip_length_check:
            metadata["pretrained"] = str(build_tiny_model(work / "model"))
            metadata["max_length"] = args.max_length
        manager = TaskManager(include_defaults=False, metadata=metadata)
        print(f"file: {qa_file}")
        print(f"{'stage':<44} {'seconds':>8} {'items/s':>9} {'py peak MB':>10} {'RSS MB':>7}")

        tasks, seconds, peak = _stage("load", lambda: manager.load(["litm_qa_20docs"])["tasks"])
        task = tasks["litm_qa_20docs"]
        docs = list(task.eval_docs)
        n = len(docs)
        print(f"{'task construction (' + str(len(task.data.examples)) + ' questions, ' + str(n) + ' docs)':<44} "
              f"{seconds:>8.2f} {n / seconds:>9.0f} {peak:>10.1f} {_rss_mb():>7.0f}")

        prompts, seconds, peak = _stage("prompts", lambda: [task.doc_to_text(doc) for doc in docs])
        chars = sum(map(len, prompts)) / n
        print(f"{'doc_to_text, all ' + str(n) + ' prompts':<44} {seconds:>8.2f} {n / seconds:>9.0f} {peak:>10.1f} {_rss_mb():>7.0f}")
        del prompts

        label = "build_all_requests" + ("" if args.skip_length_check else " + length check")
        _, seconds, peak = _stage("requests", lambda: task.build_all_requests(limit=n))
        print(f"{label:<44} {seconds:>8.2f} {n / seconds:>9.0f} {peak:>10.1f} {_rss_mb():>7.0f}")
        if not args.skip_length_check:
            requests = [(i.args[0], i.args[1]) for i in task.instances]
            pieces = [task.prompt_pieces(i.doc) for i in task.instances]
            fast, seconds, peak = _stage("check", lambda: task.budget.verdicts(requests, pieces=pieces), trace=False)
            whole = sum(not v.exact for v in fast)
            print(f"{'length check alone (pieces; untraced)':<44} {seconds:>8.2f} {n / seconds:>9.0f} {'':>10} {_rss_mb():>7.0f}")
            exact, seconds, peak = _stage("exact", lambda: task.budget.verdicts(requests), trace=False)
            print(f"{'length check, every prompt tokenized':<44} {seconds:>8.2f} {n / seconds:>9.0f} {'':>10} {_rss_mb():>7.0f}")
            same = [a.fits for a in fast] == [b.fits for b in exact]
            print(f"decisions identical: {same}; prompts decided from their pieces: {whole} of {n}; "
                  f"too long: {sum(not v.fits for v in exact)} (context length {args.max_length})")
        print(f"mean prompt: {chars:,.0f} characters")
        print("rerun: LM_EVAL_EXT_DATA_DIR=<mirror> python bench/litm_prompt_throughput.py"
              + (f" --qa-file {args.qa_file}" if args.qa_file else "") + (" --skip-length-check" if args.skip_length_check else "")
              + f" --max-length {args.max_length}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
