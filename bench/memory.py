"""Peak memory of a full run of each benchmark with a scripted model: what the plugin and the harness hold.

Each benchmark runs in a fresh process (``simple_evaluate`` with ``log_samples``, as ``lm_eval run
--log_samples`` does) with a scripted harness model, so no model weights are in memory: what is measured is
the data, the documents, the prompts (the harness holds every request of every task until the run ends),
the length check, the answers, the judge's results and the samples. Figures:

- ``baseline``: peak resident memory after a one-document run of another task (``lieder_two``), which
  imports torch, transformers, datasets and the harness's evaluator, metrics and filters: what any run
  pays before its data (for LitM, also the model's tokenizer, which any hf or vLLM run loads);
- ``peak``: peak resident memory of the process at the end of the run; ``run`` = peak - baseline;
- ``traced``: with ``--tracemalloc``, the peak of Python allocations during the run (slower; allocations
  of Rust/C++ extensions such as tokenizers and Arrow are not traced), and the code lines holding the most
  memory at the end of the run.

Benchmarks (``--benchmarks``): ``lieder`` (the ``lieder`` group, a table of log-likelihoods), ``litm20`` (the
mirror's largest QA file, the partial first-release 20-document file: 441 questions x 5 positions),
``litm30`` (``litm_qa_30docs`` on a full-size 30-document file built here: the 2,655 oracle questions
and gold passages, 29 distractors each drawn from the 20-document file's passages; the published
30-document file is not in the mirror), ``magnifico`` (the ``magnifico`` group, every prompt type, the
SQL executed in the sandbox), ``elitr`` (ELITR-Bench test2: QA single- and multi-turn, Conv multi-turn,
judged by a local stub judge). LitM runs with the prompt-length check on (``max_length=32768``, the
tests' tiny tokenizer), as a run with a vLLM or hf model does.

    LM_EVAL_EXT_DATA_DIR=/path/to/data python bench/memory.py [--benchmarks lieder litm20 litm30 magnifico elitr] [--tracemalloc]
"""
from __future__ import annotations

import argparse
import gzip
import json
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the test doubles: tests/doubles

BENCHMARKS = ("lieder", "litm20", "litm30", "magnifico", "elitr")
PARTIAL_20 = ("partial_first_release_2023/ViktorTorp+lost-in-the-middle/qa_predictions/20_total_documents/"
              "gpt_reordered/nq-open-20_total_documents_gold_at_0-gpt-35-reorder-predictions-scored.jsonl.gz")


def rss_mb() -> float:
    """Peak resident memory of this process so far (Linux reports kB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _records(relpath: str) -> list[dict]:
    from lm_eval_ext.data import resolve_file
    from lm_eval_ext.litm.records import iter_records

    return list(iter_records(resolve_file("lost_in_the_middle", relpath)))


def full_size_30_docs(path: Path) -> Path:
    """A 30-document QA file as large as the published one (see the module docstring)."""
    distractors = [c for r in _records(PARTIAL_20) for c in r["ctxs"] if not c.get("isgold")]
    rng = random.Random(0)
    with gzip.open(path, "wt", encoding="utf-8") as handle:
        for record in _records("qa_data/nq-open-oracle.jsonl.gz"):
            handle.write(json.dumps({**record, "ctxs": record["ctxs"] + rng.sample(distractors, 29)}) + "\n")
    return path


def run_child(name: str, work: Path, traced: bool) -> dict:
    """One benchmark in this process; returns its figures."""
    import lm_eval
    from lm_eval.tasks import TaskManager

    import doubles

    doubles.register()  # the scripted models

    responses = work / "responses.json"
    responses.write_text(json.dumps({"rules": [], "default": "no_such_column FROM no_such_table"}))
    table = work / "table.json"
    table.write_text(json.dumps({"entries": [], "default": -10.0}))
    # The baseline: what any run pays before its data (imports of torch, transformers, datasets, the harness's
    # evaluator, metrics and filters): a one-document run of another task first.
    lm_eval.simple_evaluate(model="ext-loglik-table", model_args={"table": str(table)}, tasks=["lieder_two"],
                            limit=1, task_manager=TaskManager(include_defaults=False), bootstrap_iters=0)
    model, model_args, metadata = "ext-canned-gen", {"responses": str(responses)}, {}
    if name == "lieder":
        model, model_args, tasks = "ext-loglik-table", {"table": str(table)}, ["lieder"]
    elif name.startswith("litm"):
        from transformers import AutoTokenizer

        from doubles.tiny_model import build_tiny_model

        tokenizer = build_tiny_model(work / "tiny")
        AutoTokenizer.from_pretrained(tokenizer)  # the model's tokenizer: loaded by any hf or vLLM run
        qa_file = full_size_30_docs(work / "qa30.jsonl.gz") if name == "litm30" else None
        if qa_file is None:
            from lm_eval_ext.data import resolve_file

            qa_file = resolve_file("lost_in_the_middle", PARTIAL_20)
        tasks = ["litm_qa_30docs" if name == "litm30" else "litm_qa_20docs"]
        metadata = {"litm_qa_file": str(qa_file), "max_length": 32768, "tokenizer": str(tokenizer)}
    elif name == "magnifico":
        tasks = ["magnifico"]
    else:
        tasks = ["elitr_bench_qa_test2_st", "elitr_bench_qa_test2_mt", "elitr_bench_conv_test2_mt"]
    baseline = rss_mb()
    judge = None
    if name == "elitr":
        import os

        from doubles.stub_openai import StubOpenAIServer

        judge = StubOpenAIServer(text="Feedback: fine.\n\\boxed{7}", model="stub-judge").__enter__()
        os.environ.setdefault("OPENAI_API_KEY", "sk-bench-not-a-secret")
        metadata = {"judge_base_url": judge.base_url, "judge_model": "stub-judge", "judge_cache": "none"}
    if traced:
        import tracemalloc

        tracemalloc.start()
    start = time.perf_counter()
    manager = TaskManager(include_defaults=False, metadata=metadata)
    out = lm_eval.simple_evaluate(model=model, model_args=model_args, tasks=tasks, task_manager=manager,
                                  log_samples=True, confirm_run_unsafe_code=True, bootstrap_iters=0)
    seconds = time.perf_counter() - start
    figures = {"benchmark": name, "baseline_mb": round(baseline), "peak_mb": round(rss_mb()),
               "run_mb": round(rss_mb() - baseline), "seconds": round(seconds, 1),
               "documents": sum(len(s) for s in out["samples"].values())}
    if traced:
        snapshot = tracemalloc.take_snapshot()
        figures["traced_peak_mb"] = round(tracemalloc.get_traced_memory()[1] / 2**20)
        figures["held_at_end"] = [f"{s.size / 2**20:.0f} MB {s.traceback[0].filename.split('site-packages/')[-1]}:"
                                  f"{s.traceback[0].lineno}" for s in snapshot.statistics("lineno")[:8]]
    if judge is not None:
        judge.__exit__(None, None, None)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--benchmarks", nargs="+", choices=BENCHMARKS, default=list(BENCHMARKS))
    parser.add_argument("--tracemalloc", action="store_true", help="also trace Python allocations (slower)")
    parser.add_argument("--child", choices=BENCHMARKS, help=argparse.SUPPRESS)
    parser.add_argument("--work", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(run_child(args.child, Path(args.work), args.tracemalloc)))
        return
    rows = []
    for name in args.benchmarks:
        with tempfile.TemporaryDirectory(prefix=f"memory-{name}-") as work:
            cmd = [sys.executable, __file__, "--child", name, "--work", work, *(["--tracemalloc"] * args.tracemalloc)]
            proc = subprocess.run(cmd, capture_output=True, text=True)
            if proc.returncode != 0:
                sys.exit(f"{name} failed:\n{proc.stderr[-3000:]}")
            rows.append(json.loads(proc.stdout.strip().splitlines()[-1]))
            print(json.dumps(rows[-1]), flush=True)
    print("\n| benchmark | documents | baseline | peak | run (peak - baseline) | traced peak | time |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        traced = f"{r['traced_peak_mb']} MB" if "traced_peak_mb" in r else ""
        print(f"| {r['benchmark']} | {r['documents']:,} | {r['baseline_mb']} MB | {r['peak_mb']} MB | {r['run_mb']} MB | "
              f"{traced} | {r['seconds']} s |")
    print(f"\nrerun: LM_EVAL_EXT_DATA_DIR=/path/to/data python bench/memory.py --benchmarks {' '.join(args.benchmarks)}"
          + (" --tracemalloc" if args.tracemalloc else ""))


if __name__ == "__main__":
    main()
