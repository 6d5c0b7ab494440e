"""Mean and sample standard deviation of the metrics of several runs (the ELITR-Bench paper's seed protocol).

:func:`summarize` reads harness results files (of ``lm-eval-ext elitr seeds`` runs, or of runs
made elsewhere) and gives, per task and metric, the mean, the sample standard deviation (n - 1
in the denominator, as the paper reports) and the values.
"""
from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

from ..errors import UserError

PAPER_SEEDS = (2023, 2024, 2025)


class SeedRunError(UserError):
    """The seed runs cannot be set up, or their results cannot be read."""


def results_files(paths: list[str]) -> list[Path]:
    """Results files named directly, or the newest ``results_*.json`` in each given directory tree."""
    files = []
    for given in paths:
        path = Path(given)
        if path.is_dir():
            found = sorted(path.rglob("results_*.json"), key=lambda p: p.stat().st_mtime)
            if not found:
                raise SeedRunError(f"No results_*.json file under {path}: give the --output_path folder of a seed's "
                                   "run (or its results file).")
            files.append(found[-1])
        elif path.is_file():
            files.append(path)
        else:
            raise SeedRunError(f"{path} is neither a results file nor a directory: check the path (a seed's "
                               "results_*.json, or the --output_path folder of its run).")
    return files


def summarize(files: list[Path]) -> dict[str, dict[str, dict]]:
    """``{task: {metric: {"mean", "std", "n", "values"}}}`` over the runs (metrics without "_stderr").

    ``std`` is the sample standard deviation, left out with fewer than two values; NaN values
    (an undefined p-value) are left out of both.
    """
    runs = []
    for path in files:
        try:
            runs.append((json.loads(path.read_text(encoding="utf-8"))["results"], path))
        except (OSError, ValueError, KeyError) as err:
            raise SeedRunError(f"Cannot read the harness results file {path}: {err!r}.") from None
    summary: dict[str, dict[str, dict]] = {}
    for results, _ in runs:
        for task, metrics in results.items():
            for key, value in metrics.items():
                metric = key.split(",", 1)[0]
                if "," not in key or metric.endswith("_stderr") or not isinstance(value, (int, float)):
                    continue
                if isinstance(value, float) and math.isnan(value):
                    continue
                summary.setdefault(task, {}).setdefault(metric, {"values": []})["values"].append(value)
    for metrics in summary.values():
        for entry in metrics.values():
            values = entry["values"]
            entry["n"] = len(values)
            entry["mean"] = statistics.fmean(values)
            if len(values) > 1:
                entry["std"] = statistics.stdev(values)
    return summary


def format_summary(summary: dict[str, dict[str, dict]], metrics: tuple[str, ...] | None = None) -> str:
    """Lines ``task  metric  mean +- std  (n runs)``."""
    lines = []
    for task, entries in summary.items():
        for metric, entry in entries.items():
            if metrics and metric not in metrics:
                continue
            spread = f" +- {entry['std']:.2f}" if "std" in entry else ""
            lines.append(f"{task:<32} {metric:<16} {entry['mean']:.2f}{spread}  (n={entry['n']})")
    return "\n".join(lines)
