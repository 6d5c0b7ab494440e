"""What goes into the judge (an item), what comes out (a result), and which judge it was (a record), as plain data.

A result is scored (``score`` on the reported scale, ``raw_score`` as the judge wrote it),
failed (``failure`` says why: ``unparseable``, ``transport``, ``rejected`` or ``call_cap``;
never a score), or not judged (a dry run). ``to_dict`` is what the harness logs per sample. ``calls`` and
``usage`` are the asks sent for the item and what they cost (0 and none for a verdict from the cache, or a
prompt that repeats an earlier item's: it was judged once).

A :class:`JudgeRecord` says which judge gave the scores and how it was set up; a judged task
writes it into the results file (``configs.<task>.metadata.judge``), ``judge validate`` into its
report (``judge``) and ``elitr score --json`` into its output (``judge``). Everything that reads
one (report, export, leaderboard) reads it with :meth:`JudgeRecord.from_dict`.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields

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
        """The judge gave the item a valid score."""
        return self.status == SCORED

    @property
    def failed(self) -> bool:
        """The judge could not score the item (a judge failure)."""
        return self.status == FAILED

    def to_dict(self) -> dict:
        """A JSON-ready dict (keys with no value for this status are left out)."""
        return {k: v for k, v in asdict(self).items() if v is not None}

    @classmethod
    def from_dict(cls, data: dict) -> JudgeResult:
        """Inverse of :meth:`to_dict`."""
        return cls(**data)


class JudgeRecordError(ValueError):
    """A judge record without the fields that say which judge it was."""


@dataclass(frozen=True, kw_only=True)
class JudgeRecord:
    """Which judge gave a set of scores, and how: no key, no full URL, no path.

    ``base_url_host``, ``model`` and ``template_sha256`` say which judge it was (:meth:`same_judge`); ``run`` is
    what the judge did (calls, answers from the cache, scored, ...) and ``usage`` what it cost (tokens, and dollars
    at the given prices: :mod:`lm_eval_ext.judge.usage`), when the writer recorded them.
    """

    judge: str | None = None
    model: str
    base_url_host: str | None = None
    template: str | None = None
    template_sha256: str
    language: str | None = None
    parser: str | None = None
    score_range: list[int] | None = None
    score_scale: float | None = None
    system_message: str | None = None
    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    seed: int | None = None
    reasks: int | None = None
    run: dict | None = None
    usage: dict | None = None

    def to_dict(self) -> dict:
        """The record as JSON-ready data (``run`` and ``usage`` left out when not recorded)."""
        return {name: value for name, value in asdict(self).items()
                if value is not None or name not in ("run", "usage")}

    @classmethod
    def from_dict(cls, data: dict) -> JudgeRecord:
        """Read a record written by :meth:`to_dict` (fields it lacks are None).

        Raises :class:`JudgeRecordError` when ``data`` is not a mapping or lacks ``model`` or
        ``template_sha256`` as text.
        """
        if not isinstance(data, dict):
            raise JudgeRecordError(f"a judge record is a mapping, not {type(data).__name__}")
        missing = [name for name in ("model", "template_sha256") if not isinstance(data.get(name), str)]
        if missing:
            raise JudgeRecordError(f"the judge record has no {', '.join(missing)}")
        return cls(**{f.name: data.get(f.name) for f in fields(cls)})

    def same_judge(self, other: JudgeRecord) -> bool:
        """Whether ``other`` is the same judge: the same model behind the same endpoint host, with the same template
        (by its sha256)."""
        return ((self.base_url_host, self.model, self.template_sha256)
                == (other.base_url_host, other.model, other.template_sha256))
