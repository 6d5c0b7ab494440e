"""Checking built multi-document contexts against the published ``gold_at_i`` files.

The tasks build every (k, position) from one file (contexts.py). When a published
``nq-open-{k}_total_documents_gold_at_{i}.jsonl.gz`` is already on this machine (mirror or
cache; this check never downloads), the contexts built for position i must equal its ``ctxs``
passage for passage, and its questions must be ours, in the same order.
"""
from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from pathlib import Path

from ..data import DataError, pinned_file, resolve_file
from ..data.resolve import local_candidates
from .contexts import QAExample, qa_context

log = logging.getLogger(__name__)

PUBLISHED_POSITIONS = {10: (0, 4, 9), 20: (0, 4, 9, 14, 19), 30: (0, 4, 9, 14, 19, 24, 29)}


def published_relpath(k: int, position: int) -> str:
    """The registry path (mirror layout) of the published ``gold_at_<position>`` file for k documents."""
    return f"qa_data/{k}_total_documents/nq-open-{k}_total_documents_gold_at_{position}.jsonl.gz"


def local_published_file(k: int, position: int) -> Path | None:
    """The verified local copy of that published file, or None when it is not on this machine."""
    if position not in PUBLISHED_POSITIONS.get(k, ()):
        return None
    pinned = pinned_file("lost_in_the_middle", published_relpath(k, position))
    if not any(candidate.is_file() for _, candidate in local_candidates(pinned)):
        return None
    return resolve_file("lost_in_the_middle", pinned.path)


def mismatches(examples: Sequence[QAExample], k: int, position: int, published: Iterable[dict]) -> list[str]:
    """Descriptions of every published record whose question or ``ctxs`` differ from the built context.

    Compares the first ``len(examples)`` published records; an empty list means they agree.
    """
    problems = []
    for n, (example, record) in enumerate(zip(examples, published)):
        if record.get("question") != example.question:
            problems.append(f"record {n + 1}: question {record.get('question')!r}, expected {example.question!r}")
        elif record.get("ctxs") != qa_context(example, k, position):
            problems.append(f"record {n + 1} ({example.question!r}): passages differ")
    return problems


def check_published(examples: Sequence[QAExample], k: int, position: int, published: Iterable[dict], path: str | Path) -> None:
    """Raise a DataError when the built contexts for ``position`` differ from the published file at ``path``."""
    problems = mismatches(examples, k, position, published)
    if problems:
        shown = "; ".join(problems[:3]) + (f"; and {len(problems) - 3} more" if len(problems) > 3 else "")
        raise DataError(
            f"The {k}-document contexts built with the gold passage at index {position} differ from the published "
            f"file {path}: {shown}. The distractor source and the published file must come from the same data "
            "release; run `lm-eval-ext data verify lost_in_the_middle` and re-fetch the files that fail."
        )
    log.info("Built %d-document contexts (gold at %d) equal the published file %s", k, position, path)
