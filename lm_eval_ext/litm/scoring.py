"""Scoring a model's answer, exactly as the authors' evaluation scripts do.

QA (``evaluate_qa_responses.py`` + ``metrics.py``): the answer is cut at its first newline and
stripped, then ``best_subspan_em``: correct when any SQuAD-normalized gold answer is a
substring of the SQuAD-normalized prediction. KV (``evaluate_kv_responses.py``): correct when
the value occurs in the whole answer, case-insensitively.
"""
from __future__ import annotations

import string
from collections.abc import Iterable, Sequence

# The authors normalize with the third-party `regex` module; using it keeps `\b` identical.
import regex
from lm_eval.api.filter import Filter

_PUNCTUATION = frozenset(string.punctuation)


def normalize_answer(text: str) -> str:
    """SQuAD normalization: lower-case, drop ASCII punctuation, drop articles a/an/the, collapse white space."""
    text = text.lower()
    text = "".join(ch for ch in text if ch not in _PUNCTUATION)
    text = regex.sub(r"\b(a|an|the)\b", " ", text)
    return " ".join(text.split())


def best_subspan_em(prediction: str, ground_truths: Iterable[str]) -> float:
    """1.0 when some normalized gold answer is a substring of the normalized prediction, else 0.0."""
    normalized_prediction = normalize_answer(prediction)
    for ground_truth in ground_truths:
        if normalize_answer(ground_truth).lower() in normalized_prediction.lower():
            return 1.0
    return 0.0


def first_line(answer: str) -> str:
    """Everything before the first newline, stripped (the authors: a copied context must not score)."""
    return answer.split("\n")[0].strip()


def kv_correct(answer: str, value: str) -> float:
    """1.0 when ``value`` occurs anywhere in ``answer`` (case-insensitive), else 0.0."""
    return 1.0 if value.lower() in answer.lower() else 0.0


class FirstLineFilter(Filter):
    """Harness filter: each response -> its first line, stripped (what QA is scored on and what the sample log shows)."""

    def apply(self, resps: Iterable, docs: Sequence[dict]) -> Iterable:
        """Map every response of every request to :func:`first_line` (a withheld request's None stays None)."""
        return [r if r is None else first_line(r) if isinstance(r, str) else [first_line(x) for x in r] for r in resps]
