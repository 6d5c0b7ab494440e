"""Executing gold and predicted queries in the sandbox, and the harness filter that does it in bulk.

Options (``--metadata``): ``budget`` (SQLite instructions per query), ``timeout`` (the wall-clock
backstop, at least 60 s), ``max_rows``, ``workers``, ``comparison`` (``authors`` | ``testsuite``);
:func:`execution_options` reads them.

What decides whether a query runs to its end is the instruction budget, which counts the same on a
busy machine as on an idle one: no item and no score depends on the machine's load. Each distinct gold
query is executed once per database for the whole process (a cache shared by all tasks); one that
exhausts its budget is run again with ``GOLD_RETRY_FACTOR`` times the budget (and backstop), and if it
still does not finish, its items are left out and counted as ``gold_budget``, apart from the gold
queries that fail (``gold_error``); predictions are executed in parallel worker processes
(:class:`~lm_eval_ext.sql.SandboxPool`) when the harness applies the task's filter,
which sees every response of the task at once. Each prediction goes to its worker with the
gold rows and is compared there: only the verdict comes back, so the memory of this process
does not depend on what the model's queries return (docs/magnifico.md has the figures). The filter's output per response is a
small record (the predicted query, whether it executed, the error, ``ex``, ``em``, and whether
the reply had to be normalised; a chat reply that holds no query is not executed and its record says
so) as a JSON string: it is what ``process_results`` scores and what
``--log_samples`` shows as ``filtered_resps`` (the harness writes filtered responses with
``str()``, so JSON keeps them machine-readable); the raw reply stays in ``resps``.

Which query a reply gives depends on the path the task recorded for the run
(``reply_format`` in the task's metadata, :mod:`lm_eval_ext.magnifico.replies`): ``completion``
(the paper's) or ``chat`` (with a chat template: the query a reader sees in the reply, or none).
"""
from __future__ import annotations

import json
import threading
from dataclasses import dataclass, replace
from functools import lru_cache

from ..errors import UserError, metadata_arg
from ..sql import COMPARISONS, Against, Limits, QueryResult, query_orders, shared_pool
from ..task_base import RunAwareFilter
from .replies import NO_QUERY, reply_query

REPLY_FORMATS = ("completion", "chat")
OPTIONS = ("budget", "timeout", "max_rows", "workers", "comparison")  # the --metadata keys read here
GOLD_RETRY_FACTOR = 10


class ExecutionOptionError(UserError):
    """An execution option given with --metadata is invalid."""


@dataclass(frozen=True)
class ExecutionOptions:
    """How queries are run and compared (``--metadata`` keys of the same names)."""

    budget: int = Limits.budget
    timeout: float = Limits.timeout
    max_rows: int = 100_000
    workers: int | None = None
    comparison: str = "authors"

    def __post_init__(self) -> None:
        if self.comparison not in COMPARISONS:
            raise ExecutionOptionError(f"Unknown comparison {self.comparison!r} (the --metadata option comparison); "
                                       f"use one of {', '.join(COMPARISONS)}.")
        if self.budget < Limits.check_every or self.max_rows < 1 or (self.workers is not None and self.workers < 1):
            raise ExecutionOptionError(
                f"The --metadata option budget must be at least {Limits.check_every} SQLite instructions, "
                f"max_rows and workers at least 1 (got budget={self.budget}, max_rows={self.max_rows}, "
                f"workers={self.workers}).")
        # The budget decides which queries fail; a wall-clock bound near it would let a busy machine decide. The
        # harness also passes --model_args to the tasks, so an API model's timeout= arrives here unasked.
        if not self.timeout >= Limits.timeout:
            raise ExecutionOptionError(
                f"The MAGNIFICo option timeout={self.timeout:g} is below {Limits.timeout:g} seconds. It is a wall-clock "
                f"backstop far above what the instruction budget takes; a lower one would let the machine's speed "
                f"decide which queries fail. The harness passes --model_args to the tasks too, so a model's "
                f"timeout= sets it when --metadata does not: give {metadata_arg(timeout=int(Limits.timeout))} "
                f"(--metadata wins over --model_args), or a larger value.")

    @property
    def limits(self) -> Limits:
        """The sandbox limits these options give."""
        return Limits(budget=int(self.budget), timeout=float(self.timeout), max_rows=int(self.max_rows))


def execution_options(metadata: dict) -> ExecutionOptions:
    """The execution options given with ``--metadata`` (defaults for the others)."""
    def number(key: str, kind, default):
        value = metadata.get(key, default)
        try:
            return None if value is None else kind(value)
        except (TypeError, ValueError):
            raise ExecutionOptionError(f"The --metadata option {key} ({value!r}) is not a valid {kind.__name__}.") from None

    return ExecutionOptions(budget=number("budget", int, Limits.budget), timeout=number("timeout", float, Limits.timeout),
                            max_rows=number("max_rows", int, 100_000),
                            workers=number("workers", int, None), comparison=str(metadata.get("comparison", "authors")))


@lru_cache(maxsize=None)
def database_path(db_id: str) -> str:
    """The .sqlite file of a Spider database (DataError when it is missing)."""
    from ..data import spider_database_path

    return str(spider_database_path(db_id))


def gold_out_of_budget(result: QueryResult) -> bool:
    """Whether a gold query failed only because it was stopped (budget or backstop), not by an error."""
    return not result.ok and (result.out_of_budget or result.timed_out)


def exact_match(pred: str, gold: str) -> int:
    """The authors' EM: equal after stripping and removing every space (case-sensitive)."""
    return int(pred.strip().replace(" ", "") == gold.strip().replace(" ", ""))


_GOLD: dict[tuple, QueryResult] = {}
_GOLD_LOCK = threading.Lock()


class Scorer:
    """Runs gold and predicted queries for one task's options and compares the results."""

    def __init__(self, options: ExecutionOptions = ExecutionOptions()) -> None:
        self.options = options
        self.limits = options.limits

    @property
    def pool(self):
        """The process-wide sandbox pool for these limits (started on first use)."""
        return shared_pool(self.limits, self.options.workers)

    def gold_results(self, queries: list[tuple[str, str]]) -> list[QueryResult]:
        """Results of ``(db_path, gold_sql)`` queries, each distinct one executed once per process.

        A gold query stopped by its budget (or the backstop) is run again with ``GOLD_RETRY_FACTOR``
        times both; its result then says whether it finished (:func:`gold_out_of_budget`).
        """
        with _GOLD_LOCK:
            missing = list(dict.fromkeys(q for q in queries if (self.limits, *q) not in _GOLD))
            if missing:
                results = self.pool.run(missing)
                stopped = [i for i, result in enumerate(results) if gold_out_of_budget(result)]
                if stopped:
                    larger = replace(self.limits, budget=self.limits.budget * GOLD_RETRY_FACTOR,
                                     timeout=self.limits.timeout * GOLD_RETRY_FACTOR)
                    again = shared_pool(larger, self.options.workers).run([missing[i] for i in stopped])
                    for i, result in zip(stopped, again):
                        results[i] = result
                for query, result in zip(missing, results):
                    _GOLD[(self.limits, *query)] = result
            return [_GOLD[(self.limits, *q)] for q in queries]

    def against(self, gold: QueryResult, gold_sql: str) -> Against:
        """What a prediction is compared with in its worker: the gold rows and the chosen comparison."""
        if not gold.ok:  # excluded when the task was loaded; cannot happen unless the files changed
            raise RuntimeError(f"gold query no longer executes: {gold_sql!r} ({gold.error})")
        ordered = self.options.comparison == "testsuite" and query_orders(gold_sql)
        return Against(gold.rows, self.options.comparison, ordered)

    def score(self, db_paths: list[str], golds: list[str], generations: list[str], chat: bool = False,
              progress: str | None = None) -> list[dict]:
        """One record per reply: ``prediction`` (the executed query; None when a chat reply holds no query),
        ``executed``, ``error`` (:data:`~lm_eval_ext.magnifico.replies.NO_QUERY` for a reply without a query),
        ``ex``, ``em``, ``normalized`` (the query had to be taken out of the reply: chat path only,
        :mod:`~lm_eval_ext.magnifico.replies`). ``progress``: the label of a progress bar over the queries run."""
        queries = [reply_query(g, chat) for g in generations]
        gold_results = self.gold_results(list(zip(db_paths, golds)))
        against = [self.against(gold, gold_sql) for gold, gold_sql in zip(gold_results, golds)]
        runnable = [i for i, query in enumerate(queries) if query.sql is not None]
        executed = self.pool.run([(db_paths[i], queries[i].sql, against[i]) for i in runnable], progress)
        results = dict(zip(runnable, executed))
        records = []
        for i, (query, gold_sql) in enumerate(zip(queries, golds)):
            if query.sql is None:
                records.append({"prediction": None, "executed": False, "error": NO_QUERY, "ex": 0, "em": 0,
                                "normalized": False})
                continue
            pred = results[i]
            records.append({"prediction": query.sql, "executed": pred.ok, "error": pred.error,
                            "ex": int(bool(pred.match)), "em": exact_match(query.sql, gold_sql),
                            "normalized": query.normalized})
        return records


class SqlExecutionFilter(RunAwareFilter):
    """Harness filter: each response (its first generation) -> the execution record of its query, as JSON.

    Its options come from the run's ``--metadata`` (:func:`execution_options`); the path (completion or
    chat) from ``reply_format``, which the task records in its metadata when it builds its requests.
    """

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.scorer = Scorer(execution_options(self.run.metadata))
        reply_format = self.run.metadata.get("reply_format")
        if reply_format not in REPLY_FORMATS:  # the task records it before any filter is built
            raise RuntimeError(f"{self.run.task}: reply_format {reply_format!r} was not recorded by the task; "
                               f"expected one of {REPLY_FORMATS}")
        self.chat = reply_format == "chat"

    def apply(self, resps, docs):
        """Execute every predicted query of the task in the sandbox pool, in parallel."""
        resps, docs = list(resps), list(docs)
        generations = [r[0] if isinstance(r, (list, tuple)) else r for r in resps]
        records = self.scorer.score([database_path(d["db_id"]) for d in docs], [d["gold"] for d in docs], generations,
                                    chat=self.chat, progress=f"SQL {self.run.task}")
        return [json.dumps(record, ensure_ascii=False) for record in records]
