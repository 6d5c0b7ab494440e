"""LIEDER throughput: wall time and requests per second of `lm-eval-ext run --tasks lieder_base`.

Builds a random Llama offline (default: 12 layers, hidden 768, 1,000-token BPE
vocabulary; `--layers 2 --hidden 64` for the tests' tiny model), then times the whole command
at each batch size, start-up included, as a user would see it.

    LM_EVAL_EXT_DATA_DIR=/path/to/data python bench/lieder_throughput.py [--layers 12 --hidden 768] [--batch-sizes 1 8 32]
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the test doubles: tests/doubles

REQUESTS = 576  # lieder_base: 48 groups x 12 rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--hidden", type=int, default=768)
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--task", default="lieder_base")
    args = parser.parse_args()

    from doubles.tiny_model import build_tiny_model

    work = Path(tempfile.mkdtemp(prefix="lieder-bench-"))
    try:
        started = time.perf_counter()
        model_dir = build_tiny_model(work / "model", num_layers=args.layers, hidden_size=args.hidden)
        print(f"model: random Llama, {args.layers} layers, hidden {args.hidden}, vocab 1000 (built in {time.perf_counter() - started:.1f} s)")
        cli = Path(sys.executable).with_name("lm-eval-ext")
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
        print(f"{'batch':>5}  {'wall s':>7}  {'requests/s':>10}")
        for batch in args.batch_sizes:
            command = [str(cli), "run", "--model", "hf", "--model_args", f"pretrained={model_dir},dtype=float32",
                       "--tasks", args.task, "--batch_size", str(batch), "--device", "cpu"]
            started = time.perf_counter()
            subprocess.run(command, check=True, env=env, cwd=work, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            wall = time.perf_counter() - started
            print(f"{batch:>5}  {wall:>7.1f}  {REQUESTS / wall:>10.1f}")
        print("rerun: LM_EVAL_EXT_DATA_DIR=/path/to/data python bench/lieder_throughput.py "
              f"--layers {args.layers} --hidden {args.hidden} --batch-sizes {' '.join(map(str, args.batch_sizes))}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
