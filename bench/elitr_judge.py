"""ELITR-Bench judging throughput: 271 answers (every dev and test2 question) against a slow local judge.

The judge is the OpenAI-compatible stub server with a fixed delay per call; the answers are judged
through score-only mode's path (lm_eval_ext.elitr.score.judged_verdicts: the same concurrent,
cached judge the harness tasks use), with the cache off so that every answer is a call. One at a
time this would take 271 x delay; the target (bench/README.md) is at most 4.3 s for a 200 ms
delay at concurrency 16 (ideal: 271 x 0.2 / 16 = 3.4 s).

    LM_EVAL_EXT_DATA_DIR=/path/to/data python bench/elitr_judge.py [--delay 0.2] [--concurrency 16]
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the test doubles: tests/doubles


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--delay", type=float, default=0.2, help="seconds the stub waits before each reply")
    parser.add_argument("--concurrency", type=int, default=16)
    args = parser.parse_args()

    from lm_eval_ext.elitr.data import build_documents
    from lm_eval_ext.elitr.responses import Answer
    from lm_eval_ext.elitr.score import judged_verdicts, scores_by_model
    from lm_eval_ext.judge import resolve_config
    from doubles.stub_openai import StubOpenAIServer

    answers = [Answer(model="bench", meeting=d["meeting"], question_id=d["question_id"], question=d["question"],
                      reference=d["reference"], question_type=d["question_type"], answer_position=d["answer_position"],
                      differentiating=d["differentiating"], response=f"an answer to {d['meeting']} {d['question_id']}")
               for split in ("dev", "test2") for d in build_documents("qa", split)[0]]
    os.environ.setdefault("LMX_BENCH_JUDGE_KEY", "sk-bench-key-0123456789abcdef")
    with StubOpenAIServer(text="Feedback. \\boxed{7}", delay_s=args.delay) as srv:
        config = resolve_config(explicit={"base_url": srv.base_url, "api_key_env": "LMX_BENCH_JUDGE_KEY",
                                          "cache": "none", "concurrency": args.concurrency})
        started = time.perf_counter()
        verdicts, _ = judged_verdicts(answers, config)
        wall = time.perf_counter() - started
        calls = srv.call_count
    (report,) = scores_by_model(answers, verdicts)
    ideal = len(answers) * args.delay / args.concurrency
    print(f"answers: {len(answers)}, judge calls: {calls}, scored: {report.n_scored}, mean score {report.metrics['score']:.1f}")
    print(f"delay {args.delay * 1000:.0f} ms, concurrency {args.concurrency}: {wall:.2f} s "
          f"(ideal {ideal:.2f} s, one at a time {len(answers) * args.delay:.1f} s)")
    print(f"rerun: LM_EVAL_EXT_DATA_DIR=/path/to/data python bench/elitr_judge.py --delay {args.delay} "
          f"--concurrency {args.concurrency}")


if __name__ == "__main__":
    main()
