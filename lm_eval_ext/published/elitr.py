"""ELITR-Bench's published models, computed from the authors' released answers and their GPT-4 judge scores.

The authors release every answer of every model they evaluated with the paper's GPT-4 judge score
(``generated-responses.zip``, ``elitr-bench-<set>_<split>_<mode>_gpt-4-eval.json``, pinned and
checksummed by the data layer). Each model's metrics are computed from the stored scores with the
tasks' own definitions (:func:`lm_eval_ext.elitr.score.scores_by_model`, the same as ``lm-eval-ext
elitr score --from-file``): ``score`` and its breakdowns by question type and answer position.
The files hold one set of answers per model and setting: for test2, where Thonet et al.
(COLING 2025) report the mean over three seeds, a value can differ from the paper's by the
seed-to-seed spread.
"""
from __future__ import annotations

import json
from functools import lru_cache

from ..data import dataset_files
from ..data.registry import MANIFEST_PATH
from ..elitr.responses import PUBLISHED_SCORE_FIELD, load_answers
from ..elitr.score import scores_by_model, stored_verdicts
from .numbers import PublishedNumber, Source

BENCHMARK = "elitr_bench"
CITATION = "Thonet et al. (COLING 2025)"
ARCHIVE = "generated-responses.zip"
# (our task, the released file) for the six English settings
SETTINGS = tuple((f"elitr_bench_{setting}", f"generated-responses/elitr-bench-{setting}_gpt-4-eval.json")
                 for setting in ("qa_dev_st", "qa_dev_mt", "conv_dev_mt", "qa_test2_st", "qa_test2_mt", "conv_test2_mt"))


def _source(member: str) -> Source:
    base = json.loads(MANIFEST_PATH.read_text(encoding="utf-8"))["datasets"][BENCHMARK].get("url_base")
    sha = next(pinned.sha256 for pinned in dataset_files(BENCHMARK) if pinned.path == ARCHIVE)
    return Source(CITATION, f"{ARCHIVE}:{member} ({PUBLISHED_SCORE_FIELD})", base + ARCHIVE if base else None, sha)


@lru_cache(maxsize=1)
def _numbers() -> tuple[PublishedNumber, ...]:
    # reading the encrypted archive takes seconds: once per process
    found = []
    for task, member in SETTINGS:
        answers, _ = load_answers(f"{ARCHIVE}:{member}")
        note = "one run per model (the paper's test2 values are means over three seeds)" if "test2" in task else ""
        source = _source(member)
        for model in scores_by_model(answers, stored_verdicts(answers, PUBLISHED_SCORE_FIELD)):
            found += [PublishedNumber(BENCHMARK, model.model, task, name, value, source, note)
                      for name, value in model.metrics.items() if name != "judge_failures"]
    return tuple(found)


def numbers() -> list[PublishedNumber]:
    """Every released model's metrics in the six English settings."""
    return list(_numbers())
