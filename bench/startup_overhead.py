"""What the start-up hook (lm_eval_ext_autoload.pth) costs a Python process that never imports lm_eval.

Three measures, for this venv's interpreter:

1. the plugin modules a bare start imports (``python -X importtime -c pass``): none is expected, the hook's
   line runs its own source (lm_eval_ext/startup_hook.py) and imports nothing of the plugin;
2. the hook line's own run time, in process: the ``.pth`` line executed the way ``site`` executes it,
   repeated (its finder taken off ``sys.meta_path`` after each run), median in microseconds;
3. the wall time of ``python -c pass`` with the hook and with it switched off
   (``LM_EVAL_EXT_AUTOLOAD=0``: the line runs but installs no finder), alternated run by run, and their
   difference: median and a bootstrap 95% interval.

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
import sysconfig
import time
from pathlib import Path


def plugin_imports() -> list[str]:
    """The lm_eval_ext modules a bare interpreter start imports."""
    err = subprocess.run([sys.executable, "-X", "importtime", "-c", "pass"], capture_output=True, text=True).stderr
    return [m.group(1) for line in err.splitlines() if (m := re.match(r"import time:.*\|\s*(lm_eval_ext\S*)", line))]


def hook_microseconds(line: str, repeat: int = 2000) -> float:
    """Median run time of the .pth line, executed as site executes it (each run's finder removed after it)."""
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        exec(line)  # noqa: S102 -- the installed hook's own line, as site.addpackage runs it
        times.append(time.perf_counter() - started)
        sys.meta_path[:] = [f for f in sys.meta_path if getattr(f, "__name__", None) != "LmEvalExtStartupHook"]
    return statistics.median(times) * 1e6


def wall_seconds(env: dict) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], env=env, check=True)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=200)
    args = parser.parse_args()

    pth = Path(sysconfig.get_paths()["purelib"]) / "lm_eval_ext_autoload.pth"
    if not pth.is_file():
        sys.exit(f"the start-up hook is not installed in this interpreter (no {pth})")
    imported = plugin_imports()
    hook = hook_microseconds(pth.read_text(encoding="utf-8"))
    on, off = [], []
    base = {**os.environ}
    base.pop("LM_EVAL_EXT_AUTOLOAD", None)
    for _ in range(args.runs):
        on.append(wall_seconds(base))
        off.append(wall_seconds({**base, "LM_EVAL_EXT_AUTOLOAD": "0"}))
    diffs = [a - b for a, b in zip(on, off)]
    rng = random.Random(0)
    boot = sorted(statistics.median(rng.choices(diffs, k=len(diffs))) for _ in range(2000))
    print(f"plugin modules imported by a bare start (python -X importtime): {', '.join(imported) or 'none'}")
    print(f"the hook line's run time (in process, median of 2000): {hook:.1f} us")
    print(f"python -c pass, {args.runs} alternated runs: hook on {statistics.median(on) * 1000:.2f} ms, "
          f"switched off {statistics.median(off) * 1000:.2f} ms (medians)")
    print(f"difference (on - off): median {statistics.median(diffs) * 1000:+.2f} ms, "
          f"95% interval [{boot[50] * 1000:+.2f}, {boot[1949] * 1000:+.2f}] ms")
    print(f"rerun: python bench/startup_overhead.py --runs {args.runs}")


if __name__ == "__main__":
    main()
