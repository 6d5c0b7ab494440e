"""ELITR-Bench multi-turn generation: batched across meetings (the ext-multiturn runner) vs one meeting at a time.

A random Llama is built offline (default: the tests' tiny model, 2 layers, hidden 64;
`--layers 12 --hidden 768` for a model where forward passes dominate). The transcripts are
truncated to their first LINES lines (a user corpus directory in the official layout), so that
the prompts fit the random model's 2,048 positions. The same loaded model answers the first TURNS
questions of the 10 dev meetings (QA set, multi-turn): once with all meetings in one evaluation
(the runner generates turn k of every meeting in one batched call), and once meeting by meeting
(ten evaluations, one conversation each). Model loading is not timed; the time spent generating
(inside the runner) and the whole evaluations (which also load the task's data each time) are.

    LM_EVAL_EXT_DATA_DIR=/path/to/data python bench/elitr_multiturn.py [--layers 2 --hidden 64] [--turns 4] [--lines 2] [--max-gen-toks 64]
"""
from __future__ import annotations

import argparse
import logging
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the test doubles: tests/doubles


def short_corpus(root: Path, lines: int) -> Path:
    from lm_eval_ext.data import dataset_files, resolve_file
    from lm_eval_ext.elitr.data import CORPUS_ROOT, DATASET

    for pinned in dataset_files(DATASET):
        if pinned.path.startswith(f"{CORPUS_ROOT}/dev/"):
            meeting = pinned.path.split("/")[-2]
            folder = root / "elitr-minuting-corpus-en" / "dev" / meeting
            folder.mkdir(parents=True, exist_ok=True)
            text = resolve_file(DATASET, pinned.path).read_text(encoding="utf-8").splitlines(keepends=True)
            (folder / Path(pinned.path).name).write_text("".join(text[:lines]), encoding="utf-8")
    return root


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--turns", type=int, default=4, help="questions per meeting")
    parser.add_argument("--lines", type=int, default=2, help="transcript lines kept")
    parser.add_argument("--max-gen-toks", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=2, help="alternated runs of each mode (the best counts)")
    args = parser.parse_args()

    import lm_eval
    from lm_eval.tasks import TaskManager

    from lm_eval_ext.elitr.data import build_documents
    from lm_eval_ext.models.multiturn import MultiTurnLM
    from lm_eval_ext.paths import tasks_dir
    from lm_eval_ext.plugin import register
    from doubles.tiny_model import build_tiny_model

    logging.getLogger("lm_eval").setLevel(logging.WARNING)
    register()
    work = Path(tempfile.mkdtemp(prefix="elitr-bench-"))
    try:
        model_dir = build_tiny_model(work / "model", num_layers=args.layers, hidden_size=args.hidden)
        corpus = short_corpus(work / "corpus", args.lines)
        task = "elitr_bench_qa_dev_mt"
        docs, _ = build_documents("qa", "dev", corpus=corpus)
        by_meeting: dict[str, list[int]] = {}
        for index, doc in enumerate(docs):
            if doc["turn"] <= args.turns:
                by_meeting.setdefault(doc["meeting"], []).append(index)
        lm = MultiTurnLM(inner_model="hf", pretrained=str(model_dir), dtype="float32", device="cpu",
                         batch_size=len(by_meeting))
        manager = TaskManager(include_path=str(tasks_dir()), include_defaults=False, metadata={"elitr_corpus": str(corpus)})
        gen_kwargs = {"max_gen_toks": args.max_gen_toks, "suppress_tokens": [0, 1, 2, 3]}

        generating = [0.0]
        generate = lm.generate_until
        answer_chars: list[int] = []

        def timed_generate(requests):
            started = time.perf_counter()
            try:
                outputs = generate(requests)
                answer_chars.extend(len(out) for out in outputs)
                return outputs
            finally:
                generating[0] += time.perf_counter() - started

        lm.generate_until = timed_generate

        def run(indices: list[int]) -> tuple[float, float]:
            """(wall time of the evaluation, time inside the runner's generate_until)."""
            generating[0] = 0.0
            started = time.perf_counter()
            lm_eval.simple_evaluate(model=lm, tasks=[task], task_manager=manager, samples={task: indices},
                                    predict_only=True, gen_kwargs=gen_kwargs, verbosity="WARNING")
            return time.perf_counter() - started, generating[0]

        run(by_meeting[next(iter(by_meeting))][:1])  # warm-up
        batched_runs, sequential_runs, answers_of = [], [], {}
        for _ in range(args.repeats):  # alternated: the machine's load changes over time; the best of each counts
            answer_chars.clear()
            batched_runs.append(run([i for indices in by_meeting.values() for i in indices]))
            answers_of["batched"] = list(answer_chars)
            answer_chars.clear()
            one_by_one = [run(indices) for indices in by_meeting.values()]
            sequential_runs.append((sum(wall for wall, _ in one_by_one), sum(gen for _, gen in one_by_one)))
            answers_of["sequential"] = list(answer_chars)
        batched = min(batched_runs, key=lambda r: r[1])
        sequential = min(sequential_runs, key=lambda r: r[1])
        same = sorted(answers_of["batched"]) == sorted(answers_of["sequential"])
        print(f"answers: {len(answers_of['batched'])} per mode, same lengths in both modes: {'yes' if same else 'NO'}")
        answers = sum(len(v) for v in by_meeting.values())
        print(f"model: random Llama, {args.layers} layers, hidden {args.hidden}; {len(by_meeting)} dev meetings x "
              f"{args.turns} turns = {answers} answers, transcripts cut to {args.lines} lines, "
              f"{args.max_gen_toks} new tokens per answer")
        print(f"{'':<26}{'generation s':>13}{'whole evaluation s':>20}")
        print(f"{'batched across meetings':<26}{batched[1]:>13.2f}{batched[0]:>20.2f}")
        print(f"{'one meeting at a time':<26}{sequential[1]:>13.2f}{sequential[0]:>20.2f}")
        print(f"{'ratio':<26}{sequential[1] / batched[1]:>12.1f}x{sequential[0] / batched[0]:>19.1f}x")
        print(f"rerun: LM_EVAL_EXT_DATA_DIR=/path/to/data python bench/elitr_multiturn.py --layers {args.layers} "
              f"--hidden {args.hidden} --turns {args.turns} --lines {args.lines} --max-gen-toks {args.max_gen_toks} "
              f"--repeats {args.repeats}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
