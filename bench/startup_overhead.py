"""What the start-up hook (lm_eval_ext_autoload.pth) costs a Python process that never imports lm_eval.

Two measures, for this venv's interpreter:

1. the hook's own import time, from ``python -X importtime -c pass`` (the ``lm_eval_ext`` and
   ``lm_eval_ext.autoload`` lines; microseconds, as Python reports them), median of the runs;
2. the wall time of ``python -c pass`` with the hook and with it switched off
   (``LM_EVAL_EXT_AUTOLOAD=0``, which skips installing the finder but still runs the ``.pth`` line),
   alternated run by run, and their difference: median and a bootstrap 95% interval.

    python bench/startup_overhead.py [--runs 200]
"""
from __future__ import annotations

import argparse
import os
import random
import re
import statistics
import subprocess
import sys
import time


def import_microseconds() -> dict[str, int]:
    """Self and cumulative import time of the hook's modules, in microseconds, from one interpreter start."""
    err = subprocess.run([sys.executable, "-X", "importtime", "-c", "pass"], capture_output=True, text=True).stderr
    found = {}
    for line in err.splitlines():
        match = re.match(r"import time:\s+(\d+) \|\s+(\d+) \|\s*(\S+)", line)
        if match and match.group(3) == "lm_eval_ext.autoload":
            found[match.group(3)] = int(match.group(2))  # cumulative: with the lm_eval_ext package
    return found


def wall_seconds(env: dict) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], env=env, check=True)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=200)
    args = parser.parse_args()

    imports = [import_microseconds() for _ in range(25)]
    if not all(imports):
        sys.exit("the start-up hook is not installed in this interpreter (no lm_eval_ext_autoload.pth)")
    hook = statistics.median(i["lm_eval_ext.autoload"] for i in imports)
    on, off = [], []
    base = {**os.environ}
    base.pop("LM_EVAL_EXT_AUTOLOAD", None)
    for _ in range(args.runs):
        on.append(wall_seconds(base))
        off.append(wall_seconds({**base, "LM_EVAL_EXT_AUTOLOAD": "0"}))
    diffs = [a - b for a, b in zip(on, off)]
    rng = random.Random(0)
    boot = sorted(statistics.median(rng.choices(diffs, k=len(diffs))) for _ in range(2000))
    print(f"hook import (python -X importtime, median of 25): {hook:.0f} us")
    print(f"python -c pass, {args.runs} alternated runs: hook on {statistics.median(on) * 1000:.2f} ms, "
          f"switched off {statistics.median(off) * 1000:.2f} ms (medians)")
    print(f"difference (on - off): median {statistics.median(diffs) * 1000:+.2f} ms, "
          f"95% interval [{boot[50] * 1000:+.2f}, {boot[1949] * 1000:+.2f}] ms")
    print(f"rerun: python bench/startup_overhead.py --runs {args.runs}")


if __name__ == "__main__":
    main()
