"""Whether a run's numbers cover the whole benchmark: partial and truncated runs.

A run is **partial** when some items were not scored: ``--limit`` was set, a task scored fewer
documents than it has (``n-samples.effective < original``, with the count the task recorded as
``effective``: :meth:`Run.documents`; ``--limit`` or ``--samples``), the run was ``--predict_only`` (its
metrics are the harness's ``bypass`` placeholder), or a task counted items it could not score
(``prompts_skipped``: prompts too long for the model; ``excluded_db_missing``, ``excluded_gold_error``,
``excluded_gold_budget``: MAGNIFICo items without a usable database or gold query (one that fails, one
that does not finish within its instruction budget), recorded in the task's metadata and read with its
metrics by :meth:`Run.metrics`; ``judge_failures``: answers the judge could not score; ``not_judged``:
answers a judge dry run left unjudged). A run is **truncated** when prompts were cut to fit the model
and scored anyway (``prompts_truncated``): complete, but not the published prompts. Groups are not
checked: their counts are their subtasks'.

A partial position sweep also says when its gold positions got different numbers of documents
(:func:`documents_by_position`: ``--limit`` over a number of documents that is not a multiple of the
number of positions, or ``--samples``): each position's accuracy is then over other questions.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from .. import sweeps
from ..errors import UserError
from ..litm.options import setup_from
from .load import Model, Run

PARTIAL = "partial"
TRUNCATED = "truncated"
# per-document counts summed by the harness: (metric, kind, what one of them is)
COUNTS = (
    ("prompts_skipped", PARTIAL, "prompt(s) skipped as too long for the model"),
    ("excluded_db_missing", PARTIAL, "item(s) excluded: their Spider database is missing"),
    ("excluded_gold_error", PARTIAL, "item(s) excluded: their gold query fails"),
    ("excluded_gold_budget", PARTIAL, "item(s) excluded: their gold query does not finish within its budget"),
    ("judge_failures", PARTIAL, "answer(s) the judge could not score"),
    ("not_judged", PARTIAL, "answer(s) not judged (a judge dry run: no judge was called)"),
    ("prompts_truncated", TRUNCATED, "prompt(s) truncated to fit the model (scored, but not the published prompt)"),
)
# the counts of COUNTS that are documents of the harness's count (n-samples) left unscored; MAGNIFICo's excluded
# items are not: the task leaves them out when it is loaded, before the harness counts its documents
UNSCORED_DOCUMENTS = ("prompts_skipped", "judge_failures", "not_judged")
# the metric the harness puts in place of a task's metrics with --predict_only
BYPASS = "bypass"


@dataclass(frozen=True)
class Flag:
    """One reason why a run's numbers are partial or truncated."""

    kind: str  # PARTIAL or TRUNCATED
    task: str | None  # None: the whole run
    reason: str

    def text(self) -> str:
        """The reason, prefixed with its task."""
        return f"{self.task}: {self.reason}" if self.task else self.reason


@dataclass(frozen=True)
class Status:
    """Every flag of a run (or of a record's runs)."""

    flags: tuple[Flag, ...] = ()

    @property
    def partial(self) -> bool:
        """Some items were not scored."""
        return any(flag.kind == PARTIAL for flag in self.flags)

    @property
    def truncated(self) -> bool:
        """Some prompts were cut to fit the model."""
        return any(flag.kind == TRUNCATED for flag in self.flags)

    @property
    def label(self) -> str:
        """``partial``, ``truncated`` or ``complete``."""
        return PARTIAL if self.partial else TRUNCATED if self.truncated else "complete"

    def summary(self) -> str:
        """The flags as one sentence-like list (empty when complete)."""
        return "; ".join(flag.text() for flag in self.flags)


def _count(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def _limit_text(limit) -> str:
    return f"--limit {_count(limit)}" if isinstance(limit, (int, float)) else f"--limit {limit}"


def status_of(limit, tasks: Mapping[str, tuple[Mapping | None, Mapping[str, object]]],
              coverage: Mapping[str, Mapping[str, int]] | None = None) -> Status:
    """The flags of a run given its ``--limit`` and, per task (not group), ``(n-samples entry, metrics)``:
    the harness's ``{"original", "effective"}`` (or None) and the task's metric values by name; and, per
    position sweep, its documents at each position (``coverage``, :func:`documents_by_position`).

    Shared by :func:`run_status` (results files) and the leaderboard's check of a record.
    """
    flags: list[Flag] = []
    if any(BYPASS in metrics for _, metrics in tasks.values()):
        flags.append(Flag(PARTIAL, None, "--predict_only: outputs were logged, no metric was computed"))
    reduced = False
    for task, (counts, metrics) in tasks.items():
        original, effective = (counts or {}).get("original"), (counts or {}).get("effective")
        if isinstance(original, int) and isinstance(effective, int) and effective < original:
            reduced = True
            how = _limit_text(limit) if limit is not None else "--samples"
            flags.append(Flag(PARTIAL, task, f"{effective} of {original} documents scored ({how})"))
        positions = (coverage or {}).get(task)
        if positions and sweeps.uneven(positions):
            flags.append(Flag(PARTIAL, task, f"gold positions covered unevenly: {sweeps.coverage_text(positions)}"))
        for name, kind, what in COUNTS:
            value = metrics.get(name)
            if isinstance(value, (int, float)) and value > 0:
                flags.append(Flag(kind, task, f"{_count(value)} {what}"))
    if limit is not None and not reduced:
        flags.append(Flag(PARTIAL, None, f"{_limit_text(limit)} was set"))
    return Status(tuple(flags))


def run_status(run: Run, tasks: Iterable[str] | None = None) -> Status:
    """The flags of ``run``, over ``tasks`` (default: every task of the run; groups are skipped)."""
    results = run.data.get("results") or {}
    chosen = [task for task in (run.tasks if tasks is None else tasks) if not run.is_group(task)]
    entries = {}
    for task in chosen:
        # every metric name, numeric or not: the harness's bypass placeholder has no number
        names = {key.split(",")[0]: None for key in results.get(task, {}) if "," in key}
        entries[task] = (run.documents(task), {**names, **run.metrics(task)})
    coverage = {task: positions for task in chosen if (positions := documents_by_position(run, task))}
    return status_of(run.config.get("limit"), entries, coverage)


LITM_TASK = "lm_eval_ext.litm."  # how the recorded config of a Lost in the Middle task names its process_results


def documents_by_position(run: Run, task: str) -> dict[str, int] | None:
    """The documents a position sweep took at each 1-based gold position (:mod:`lm_eval_ext.sweeps`), as the task
    recorded them (``configs.<task>.metadata.documents_by_position``); None for a task that is no sweep.

    Lost in the Middle results written before the tasks recorded it: derived from the number of documents
    scored, which (without ``--samples``) are the task's first ones, example by example; None after
    ``--samples``, which may pick any."""
    config = run.task_config(task)
    metadata = config.get("metadata") or {}
    recorded = metadata.get("documents_by_position")
    if isinstance(recorded, dict):
        return {str(position): int(count) for position, count in recorded.items()}
    counts = run.documents(task) or {}
    effective, original = counts.get("effective"), counts.get("original")
    if (not str(config.get("process_results", "")).startswith(LITM_TASK) or not isinstance(effective, int)
            or (run.config.get("limit") is None and effective != original)):
        return None
    try:
        setup = setup_from(task, config.get("dataset_kwargs") or {}, metadata)
    except UserError:  # a config this version cannot read: say nothing rather than guess
        return None
    return sweeps.prefix_coverage(effective, setup.positions) if setup.swept else None


def documents_scored(run: Run, task: str) -> int | None:
    """How many documents of ``task`` the run scored: the harness's effective count (a group: its subtasks'),
    less those of them the task could not score (:data:`UNSCORED_DOCUMENTS`: prompts skipped, judge failures);
    None when the results file does not say. Items a task excluded when it was loaded are not among the harness's
    documents, so they are not subtracted."""
    subtasks = (run.data.get("group_subtasks") or {}).get(task)
    if subtasks:
        counts = [documents_scored(run, subtask) for subtask in subtasks]
        return None if None in counts else sum(counts)
    effective = (run.documents(task) or {}).get("effective")
    if not isinstance(effective, int):
        return None
    metrics = run.metrics(task)
    return effective - int(sum(metrics.get(name) or 0 for name in UNSCORED_DOCUMENTS))


def most_complete(runs: list[Run], task: str) -> Run | None:
    """The run (of ``runs``, oldest first) a report shows for ``task``: the one that scored the most documents,
    the newest of equals."""
    if not runs:
        return None
    return max(reversed(runs), key=lambda run: documents_scored(run, task) or -1)


def shown_run(model: Model, task: str) -> Run | None:
    """The model's run a report shows for ``task`` (:func:`most_complete` of the runs that have it)."""
    return most_complete(model.runs_with(task), task)
