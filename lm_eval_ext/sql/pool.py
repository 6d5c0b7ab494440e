"""Sandbox worker processes with a watchdog: a stuck or crashed worker costs one query, not the run.

Why not ``concurrent.futures.ProcessPoolExecutor``: it cannot stop one running task, and
one dead worker breaks the whole pool. Here each worker has its own pipe; the parent
sends a batch of queries (same database together, so each worker reuses its
connection), receives one reply per query (only the verdict when the query came with gold
rows to compare against: rows stay in the worker), and gives the query being run a deadline
of ``limits.timeout + grace`` from the moment the previous reply arrived. A worker past
its deadline is killed, a worker that dies is noticed through its process sentinel;
either way the query it was running fails ("stopped" / "crashed"), the rest of its
batch goes to a fresh worker, and the other workers carry on.
"""
from __future__ import annotations

import atexit
import multiprocessing
import os
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass, field, replace
from multiprocessing.connection import wait
from typing import Sequence

from tqdm import tqdm

from .compare import Against
from .readonly import Limits, QueryResult

_WORKER_MODULE = "lm_eval_ext.sql.worker"


def _context():
    # forkserver: workers start from a small clean process (no torch, no threads of the
    # parent), and a replacement starts in milliseconds. spawn where there is no fork.
    if "forkserver" in multiprocessing.get_all_start_methods():
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload([_WORKER_MODULE])
        return ctx
    return multiprocessing.get_context("spawn")


@dataclass
class _Worker:
    process: multiprocessing.process.BaseProcess
    pipe: object
    jobs: deque = field(default_factory=deque)  # (index, db_path, sql, against) sent and not answered
    started: float = 0.0  # when the current job (jobs[0]) became current
    deadline: float = 0.0


class SandboxPool:
    """Runs ``(db_path, sql)`` queries in ``workers`` sandbox processes (see the module docstring).

    ``run`` is blocking and thread-safe (one run at a time); results come back in input order.
    """

    def __init__(self, workers: int | None = None, limits: Limits = Limits(), grace: float = 0.5,
                 batch_size: int = 16) -> None:
        self.size = max(1, workers or min(4, os.cpu_count() or 1))
        self.limits = limits
        self.grace = grace
        self.batch_size = batch_size
        self._ctx = _context()
        self._workers: list[_Worker | None] = []  # None: a slot whose worker was discarded
        self._dying: list = []  # killed processes not yet reaped
        self._lock = threading.Lock()
        self.replaced = 0  # workers killed or found dead, for tests and logs

    def _start_worker(self) -> _Worker:
        from .worker import serve

        parent_end, child_end = self._ctx.Pipe()
        process = self._ctx.Process(target=serve, args=(child_end, self.limits), daemon=True,
                                    name="lm-eval-ext-sql-sandbox")
        process.start()
        child_end.close()
        return _Worker(process, parent_end)

    def _discard(self, worker: _Worker) -> None:
        """Drop a killed or dead worker; its slot is refilled by the dispatch loop.

        Not joined here: a process that held much memory can take a while to exit, and the
        loop must keep watching the other workers' deadlines meanwhile.
        """
        worker.process.kill()
        worker.pipe.close()
        self._dying.append(worker.process)
        self.replaced += 1
        self._workers[self._workers.index(worker)] = None

    def _reap(self, wait_seconds: float = 0.0) -> None:
        for process in list(self._dying):
            process.join(wait_seconds)
            if not process.is_alive():
                self._dying.remove(process)

    def run(self, queries: Sequence[tuple[str, str] | tuple[str, str, Against | None]],
            progress: str | None = None) -> list[QueryResult]:
        """Execute each ``(db_path, sql)`` or ``(db_path, sql, against)``; results in input order.

        With ``against`` the worker compares the rows with the gold rows and replies with
        ``match`` and no rows. A failure of any kind is a ``QueryResult`` with ``ok=False``.
        ``progress``: the label of a progress bar over the queries (on stderr; none without it).
        """
        with self._lock, tqdm(total=len(queries), desc=progress, unit="query", disable=progress is None,
                              file=sys.stderr) as bar:
            self._workers += [None] * (self.size - len(self._workers))
            self._workers = [w or self._start_worker() for w in self._workers]
            return self._run(queries, bar)

    def _batches(self, queries: Sequence[tuple], results: list) -> deque:
        by_db: dict[str, list] = {}
        for index, (db_path, sql, *against) in enumerate(queries):
            if len(sql.encode("utf-8", "surrogatepass")) > self.limits.max_sql_bytes:
                # SQLite would refuse it too; not sending it keeps the pipes (and the watchdog) quick
                results[index] = QueryResult(False, error=f"query longer than {self.limits.max_sql_bytes} bytes",
                                             wall=0.0)
                continue
            by_db.setdefault(str(db_path), []).append((index, str(db_path), sql, against[0] if against else None))
        batches = deque()
        for jobs in by_db.values():
            for start in range(0, len(jobs), self.batch_size):
                batches.append(jobs[start:start + self.batch_size])
        return batches

    def _run(self, queries: Sequence[tuple], bar: tqdm) -> list[QueryResult]:
        results: list[QueryResult | None] = [None] * len(queries)
        pending = self._batches(queries, results)
        bar.update(len(queries) - sum(len(batch) for batch in pending))  # refused before sending
        allowed = self.limits.timeout + self.grace
        while True:
            # Refill one empty slot per round, so that starting processes never delays the
            # deadline checks of the running ones for long.
            refill = bool(pending) and None in self._workers
            self._reap()
            if refill:
                self._workers[self._workers.index(None)] = self._start_worker()
            for worker in self._workers:
                if worker is not None and not worker.jobs and pending:
                    batch = pending.popleft()
                    worker.jobs.extend(batch)
                    worker.started = time.monotonic()
                    worker.deadline = worker.started + allowed
                    worker.pipe.send(batch)
            busy = [w for w in self._workers if w is not None and w.jobs]
            if not busy:
                if not pending:
                    return results  # type: ignore[return-value]
                continue
            timeout = 0.0 if refill else max(0.0, min(w.deadline for w in busy) - time.monotonic())
            ready = set(wait([w.pipe for w in busy] + [w.process.sentinel for w in busy], timeout))
            failed = []
            for worker in busy:
                if worker.pipe in ready or worker.process.sentinel in ready:
                    if not self._collect(worker, results, allowed, bar):
                        failed.append((worker, False))
                elif time.monotonic() > worker.deadline:
                    failed.append((worker, True))
            for worker, timed_out in failed:
                self._fail_current(worker, results, pending, timed_out, bar)
            for worker, _ in failed:
                self._discard(worker)

    def _collect(self, worker: _Worker, results: list, allowed: float, bar: tqdm) -> bool:
        """Take the worker's replies; False when it died or misbehaved with a job unanswered."""
        try:
            while worker.jobs and worker.pipe.poll():
                job_id, result = worker.pipe.recv()
                index = worker.jobs.popleft()[0]
                if index != job_id:  # cannot happen with an honest worker; do not trust it
                    worker.jobs.appendleft((index, None, None, None))
                    return False
                now = time.monotonic()
                results[index] = replace(result, wall=now - worker.started)
                bar.update()
                worker.started, worker.deadline = now, now + allowed
        except (EOFError, OSError):
            return False
        return not (worker.jobs and not worker.process.is_alive())

    def _fail_current(self, worker: _Worker, results: list, pending: deque, timed_out: bool, bar: tqdm) -> None:
        """The worker's current query failed (stopped or crashed); its other queries go back to the queue."""
        worker.process.kill()
        index = worker.jobs.popleft()[0]
        if timed_out:
            error = f"stopped by the watchdog after {self.limits.timeout + self.grace:g} s"
        else:
            worker.process.join(1)
            error = f"the sandbox process died (exit code {worker.process.exitcode})"
        results[index] = QueryResult(False, error=error, timed_out=timed_out, wall=time.monotonic() - worker.started)
        bar.update()
        if worker.jobs:
            pending.appendleft(list(worker.jobs))
            worker.jobs.clear()

    def close(self) -> None:
        """Stop every worker."""
        with self._lock:
            workers = [w for w in self._workers if w is not None]
            for worker in workers:
                try:
                    worker.pipe.send(None)
                except (OSError, ValueError):
                    pass
            for worker in workers:
                worker.process.join(1)
                if worker.process.is_alive():
                    worker.process.kill()
                    worker.process.join(1)
                worker.pipe.close()
            self._workers.clear()
            self._reap(5)

    def worker_pids(self) -> list[int]:
        """Process ids of the running workers (tests kill one to check recovery)."""
        return [w.process.pid for w in self._workers if w is not None]

    def __enter__(self) -> SandboxPool:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


_SHARED: dict[tuple, SandboxPool] = {}
_SHARED_LOCK = threading.Lock()


def shared_pool(limits: Limits = Limits(), workers: int | None = None) -> SandboxPool:
    """One pool per (limits, workers) for the whole process, closed at exit (tasks share it)."""
    key = (limits, workers)
    with _SHARED_LOCK:
        pool = _SHARED.get(key)
        if pool is None:
            if not _SHARED:
                atexit.register(_close_shared)
            pool = _SHARED[key] = SandboxPool(workers, limits)
        return pool


def _close_shared() -> None:
    for pool in _SHARED.values():
        pool.close()
    _SHARED.clear()
