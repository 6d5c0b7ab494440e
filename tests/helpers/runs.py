"""Running one ``lm_eval run`` command in one process and under ``torchrun``, and comparing what they wrote."""
from __future__ import annotations

import json
import math
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from .commands import run
from .harness import broken

# Where the harness writes as a task's sample counts (n-samples, sample_len) those of its last metric (a defect of
# lm-eval 0.4.12), runs are compared by the plugin's count instead: each task's documents, in "configs"
# (metadata.documents).
UNCOUNTED = {"sample_len"} if broken("sample_count") else set()


def lm_eval_run(args: list, cwd: Path, processes: int = 1, env: dict | None = None, timeout: float = 900,
                program: str = "lm_eval", process: bool = False) -> Path:
    """``lm_eval run ARGS --output_path out --log_samples`` (``program="lm-eval-ext"`` for ``lm-eval-ext run``) in
    ``cwd``, with the test doubles: in this process, or (``process``) in a subprocess, or in ``processes`` processes
    under ``torchrun --standalone`` (a free rendezvous port; ``timeout`` for the last two); returns ``cwd/out``."""
    from doubles import LM_EVAL, LM_EVAL_EXT

    command = {"lm_eval": LM_EVAL, "lm-eval-ext": LM_EVAL_EXT}[program]  # python -m doubles PROGRAM
    cwd.mkdir(parents=True, exist_ok=True)
    if processes > 1:  # torchrun starts each worker as `python -m doubles PROGRAM ...`
        command = [os.path.join(os.path.dirname(sys.executable), "torchrun"), "--standalone", "--nproc_per_node",
                   str(processes), *command[1:]]
    elif not process:
        command = [program]
    cmd = [*command, "run", *map(str, args), "--output_path", "out", "--log_samples"]
    proc = run(cmd, cwd=cwd, env=env, timeout=timeout)
    assert proc.returncode == 0, f"{' '.join(cmd)} failed:\n{proc.stderr[-6000:]}"
    return cwd / "out"


@dataclass
class Run:
    """A results file and its samples files: ``samples[task]`` in file order."""

    results: dict
    samples: dict[str, list[dict]]

    @classmethod
    def load(cls, out: Path) -> Run:
        (path,) = out.rglob("results_*.json")
        date = path.stem[len("results_"):]
        samples = {}
        for task in json.loads(path.read_text())["results"]:
            (file,) = path.parent.glob(f"samples_{task}_{date}.jsonl")
            samples[task] = [json.loads(line) for line in file.read_text().splitlines()]
        return cls(json.loads(path.read_text()), samples)

    def by_doc(self, task: str) -> dict[int, dict]:
        """The task's samples keyed by doc_id."""
        return {s["doc_id"]: s for s in self.samples[task]}


def same(a, b) -> bool:
    """Equal, NaN equal to NaN."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b


def _aggregations():
    from lm_eval.api.metrics import mean, mean_stderr

    from lm_eval_ext.elitr.metrics import middle_pvalue

    return {"mean": mean, "mean_stderr": mean_stderr, "middle_pvalue": middle_pvalue}


def summation_order_difference(task: str, key: str, one: Run, two: Run) -> str | None:
    """Why ``results[task][key]`` may differ between two runs with the same per-document values: the name of
    an aggregation that gives exactly each run's number from its samples in its own order (the harness
    gathers process 0's documents first). None when there is no such explanation."""
    name = key.split(",")[0]
    metric = name[: -len("_stderr")] if name.endswith("_stderr") else name
    values = [[s[metric] for s in run.samples[task] if metric in s] for run in (one, two)]
    if sorted(map(repr, values[0])) != sorted(map(repr, values[1])):
        return None
    for label, aggregate in _aggregations().items():
        try:
            if all(same(aggregate(v), run.results["results"][task][key]) for v, run in zip(values, (one, two))):
                return label
        except (TypeError, ValueError, ZeroDivisionError):
            continue
    return None


def assert_same_run(one: Run, two: Run, ignore_sample_fields: dict | None = None) -> None:
    """``two`` (several processes) reports what ``one`` (one process) reports: every sample (by doc_id, every
    field, except ``ignore_sample_fields[task][doc_id]``), every number (or the same aggregation of the same
    values in another order), the sample counts, configs, versions and directions, and task hashes that are
    those of the same samples in ``two``'s order."""
    from lm_eval.utils import hash_string

    ignore = ignore_sample_fields or {}
    assert set(one.samples) == set(two.samples)
    for task in one.samples:
        mine, theirs = one.by_doc(task), two.by_doc(task)
        assert len(theirs) == len(two.samples[task]), f"{task}: a document was reported twice"
        assert sorted(mine) == sorted(theirs), task
        for doc_id, sample in mine.items():
            skip = ignore.get(task, {}).get(doc_id, ())
            for field in set(sample) | set(theirs[doc_id]):
                if field not in skip:
                    assert same(sample.get(field), theirs[doc_id].get(field)), (task, doc_id, field)
        order = [mine[s["doc_id"]] for s in two.samples[task]]
        assert two.results["task_hashes"][task] == hash_string(
            "".join(s["doc_hash"] + s["prompt_hash"] + s["target_hash"] for s in order))
    sections = ("configs", "versions", "higher_is_better", "n-shot") + (() if UNCOUNTED else ("n-samples",))
    for section in sections:
        assert one.results[section] == two.results[section], section
    for task, numbers in one.results["results"].items():
        assert set(numbers) == set(two.results["results"][task]), task
        for key, value in numbers.items():
            if key not in UNCOUNTED and not same(value, two.results["results"][task][key]):
                assert summation_order_difference(task, key, one, two), (task, key, value, two.results["results"][task][key])
