"""What goes into the judge (an item) and what comes out (a result), as plain data.

A result is scored (``score`` on the reported scale, ``raw_score`` as the judge wrote it),
failed (``failure`` says why: ``unparseable``, ``transport``, ``rejected`` or ``call_cap``;
never a score), or not judged (a dry run). ``to_dict`` is what the harness logs per sample. ``usage`` is
what the requests made for the item cost (none for a verdict from the cache, or a repeated prompt).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

SCORED, FAILED, NOT_JUDGED = "scored", "failed", "not_judged"


@dataclass(frozen=True)
class JudgeItem:
    """One response to grade against a reference answer."""

    question: str
    response: str
    reference: str


@dataclass(frozen=True)
class JudgeResult:
    """The judge's verdict on one item."""

    status: str
    score: float | None = None
    raw_score: int | None = None
    failure: str | None = None
    detail: str | None = None
    judge_outputs: list[str] = field(default_factory=list)
    calls: int = 0
    usage: dict | None = None  # tokens (and dollars) of the requests made for it: lm_eval_ext.judge.usage

    @property
    def scored(self) -> bool:
        return self.status == SCORED

    @property
    def failed(self) -> bool:
        return self.status == FAILED

    def to_dict(self) -> dict:
        """A JSON-ready dict (keys with no value for this status are left out)."""
        return {k: v for k, v in asdict(self).items() if v is not None}

    @classmethod
    def from_dict(cls, data: dict) -> JudgeResult:
        """Inverse of :meth:`to_dict`."""
        return cls(**data)
