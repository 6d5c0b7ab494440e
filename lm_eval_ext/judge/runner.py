"""Judging many items at once: cache replay, dry run, spending cap, bounded concurrency, re-asks.

``judge_many(items, config)`` is the whole pipeline for one batch (all responses of a task,
or a score-only file); :class:`Judge` keeps the pieces (setup, cache, statistics) for callers
that need them (the harness filter records them with the task's results).

Identical prompts within a batch are judged once. An item's asks are numbered 0..reasks;
ask k uses seed+k and is its own cache entry, so a rerun replays the same asks from the
cache and makes no call. A run whose judge never answered stops with one error.

One ask loop (:meth:`Judge._asks`) serves live and batch judging: it takes each reply from the cache, else from
its source, :class:`Live` (the judge endpoint, through :class:`lm_eval_ext.judge.client.JudgeClient`) or
:class:`lm_eval_ext.judge.batch.Batched` (the OpenAI Batch API), and decides the verdict the same way.
"""
from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tqdm import tqdm

from .cache import JudgeCache, request_key
from .client import Aborted, CallBudget, CallCapReached, ItemRejected, JudgeClient, JudgeGone, TransientError, run
from .config import JudgeConfig, how_to_set
from .errors import JudgeBudgetError, JudgeUnreachableError
from .records import FAILED, NOT_JUDGED, SCORED, JudgeItem, JudgeResult
from .templates import config_record, judge_setup
from .usage import METER, ItemUsage, priced, summarize, usage_text

log = logging.getLogger(__name__)


@dataclass
class JudgeStats:
    """What one run of the judge did (recorded with results, printed as a summary)."""

    items: int = 0
    unique_prompts: int = 0
    from_cache: int = 0
    calls: int = 0
    reasks: int = 0
    retries: Counter = field(default_factory=Counter)
    scored: int = 0
    failures: Counter = field(default_factory=Counter)
    dry_run_calls_needed: int | None = None
    cache_problem: str | None = None  # the cache stopped being read or written during the run (why)
    usage: dict = field(default_factory=dict)  # tokens and dollars (lm_eval_ext.judge.usage.summarize)

    def to_dict(self) -> dict:
        """The statistics as recorded with the results (the optional ones only when set)."""
        data = {
            "items": self.items, "unique_prompts": self.unique_prompts, "from_cache": self.from_cache,
            "calls": self.calls, "reasks": self.reasks, "retries": dict(self.retries), "scored": self.scored,
            "failures": dict(self.failures), "usage": self.usage,
        }
        if self.dry_run_calls_needed is not None:
            data["dry_run_calls_needed"] = self.dry_run_calls_needed
        if self.cache_problem is not None:
            data["cache_problem"] = self.cache_problem
        return data


class Live:
    """Replies from the judge endpoint, one request at a time per prompt, ``2 x concurrency`` prompts at once: the
    client's slots bound the requests in flight to ``concurrency``, and the other prompts ask as soon as a slot is
    free, while one waits out a backoff."""

    batch = False

    def __init__(self, client: JudgeClient, concurrency: int) -> None:
        self.client = client
        self._gate = asyncio.Semaphore(2 * concurrency)

    def slot(self) -> asyncio.Semaphore:
        """Held by a prompt for all its asks."""
        return self._gate

    def done(self) -> None:
        """A prompt has its verdict."""

    async def reply(self, key: str, request: dict, usage: ItemUsage) -> str:
        """The reply text to ``request`` (its tokens added to ``usage``); raises the client's errors."""
        return await self.client.complete(request, on_usage=usage.add)

    def detail(self, key: str, exc: Exception) -> str:
        """What a judge failure of the request ``key`` records."""
        return f"{exc} (tried {self.client.config.retries + 1} times)"


class Judge:
    """A configured judge: builds prompts, replays the cache, calls the endpoint, parses scores."""

    def __init__(self, config: JudgeConfig, *, progress: bool = True, batch_dir: Path | None = None,
                 batch_lookup: Sequence[Path] = ()) -> None:
        self.config = config
        # batch judging (lm_eval_ext/judge/batch.py): where this judge saves its batches, where it looks for
        # batches submitted before; default: beside the judge's cache
        self.batch_dir = batch_dir
        self.batch_lookup = list(batch_lookup)
        self.setup = judge_setup(config)
        self._endpoint = config.endpoint_id()  # in every cache key: the URL parsed once, not twice per item
        self.cache = JudgeCache(config.cache_path())
        self.record = config_record(config, self.setup)
        self.progress = progress
        self.stats = JudgeStats()

    # -- requests ---------------------------------------------------------

    def messages(self, item: JudgeItem) -> list[dict[str, str]]:
        """The chat messages for ``item``."""
        return self.setup.messages(item.question, item.response, item.reference)

    def request(self, messages: list[dict[str, str]], ask: int) -> dict:
        """The chat-completions request body of ask number ``ask`` (0 = first) for ``messages``."""
        return {
            "model": self.setup.model,
            "messages": messages,
            "temperature": self.config.temperature,
            "top_p": self.config.top_p,
            "max_tokens": self.config.max_tokens,
            "seed": self.config.seed + ask,
        }

    def key(self, request: dict) -> str:
        """The cache key of a request body (its endpoint, model, messages, sampling parameters, seed)."""
        return request_key(self._endpoint, request)

    # -- verdicts ---------------------------------------------------------

    def _verdict(self, outputs: list[str], calls: int, usage: dict | None = None) -> JudgeResult | None:
        """Scored if the last output parses; failed once every ask is used; else None (ask again)."""
        parsed = self.setup.parser.parse(outputs[-1], self.setup.low, self.setup.high)
        if parsed.raw_score is not None:
            return JudgeResult(SCORED, score=float(parsed.raw_score * self.setup.scale), raw_score=parsed.raw_score,
                               judge_outputs=outputs, calls=calls, usage=usage)
        if len(outputs) > self.config.reasks:
            return JudgeResult(FAILED, failure="unparseable",
                               detail=f"{parsed.reason} (asked {len(outputs)} time(s))", judge_outputs=outputs,
                               calls=calls, usage=usage)
        return None

    def _replay(self, messages: list[dict[str, str]]) -> JudgeResult | None:
        """The verdict from cached replies alone, or None if some ask still needs a call."""
        outputs: list[str] = []
        for ask in range(self.config.reasks + 1):
            reply = self.cache.get(self.key(self.request(messages, ask)))
            if reply is None:
                return None
            outputs.append(reply)
            verdict = self._verdict(outputs, calls=0)
            if verdict is not None:
                return verdict
        raise AssertionError("unreachable: the last ask always gives a verdict")

    async def _asks(self, client: JudgeClient, source, messages: list[dict[str, str]]) -> JudgeResult:
        """The ask loop of one prompt, live or batched (``source``: :class:`Live` or
        :class:`lm_eval_ext.judge.batch.Batched`): each ask from the cache, else from the source (and cached),
        until a reply holds a score or every ask is used."""
        outputs: list[str] = []
        calls = 0
        usage = ItemUsage(self.config)
        for ask in range(self.config.reasks + 1):
            request = self.request(messages, ask)
            key = self.key(request)
            reply = self.cache.get(key)
            if reply is None:
                calls += 1
                reservation, cost_before = METER.reserve(self.config, request, batch=source.batch), usage.cost
                try:
                    reply = await source.reply(key, request, usage)
                except CallCapReached as exc:
                    return JudgeResult(FAILED, failure="call_cap", detail=str(exc), judge_outputs=outputs, calls=calls,
                                       usage=usage.record())
                except ItemRejected as exc:
                    return JudgeResult(FAILED, failure="rejected", detail=str(exc), judge_outputs=outputs, calls=calls,
                                       usage=usage.record())
                except JudgeGone as exc:
                    raise self._unreachable(exc.last, breaker=True) from None
                except TransientError as exc:
                    if client.gone is not None:
                        raise Aborted() from None  # the circuit breaker stopped the run: its error is the one shown
                    # Unreachable: nothing has ever answered, or the judge stopped answering (no request of the
                    # run got a reply while this one was tried, and it timed out or could not connect). A judge
                    # that hangs mid-run then stops the run after one item's tries, not after every item's.
                    gone = (exc.kind in ("timeout", "connection") and exc.sent is not None
                            and client.last_reply < exc.sent)
                    if not client.reached or gone:
                        client.abort()
                        raise self._unreachable(exc, since_start=not client.reached) from None
                    return JudgeResult(FAILED, failure="transport", detail=source.detail(key, exc),
                                       judge_outputs=outputs, calls=calls, usage=usage.record())
                finally:
                    METER.settle(reservation, usage.cost - cost_before)
                self.cache.put(key, reply, self.setup.model)
            outputs.append(reply)
            verdict = self._verdict(outputs, calls, usage.record())
            if verdict is not None:
                return verdict
        raise AssertionError("unreachable: the last ask always gives a verdict")

    def _unreachable(self, exc: TransientError, since_start: bool = False, breaker: bool = False
                     ) -> JudgeUnreachableError:
        if breaker:
            why = (f"{self.config.stop_after_timeouts} judge calls in a row timed out or could not connect, and "
                   f"nothing came back from the judge for {self.config.timeout:g} s")
        else:
            when = "of this run has succeeded" if since_start else "has succeeded since this one was first tried"
            why = f"tried {self.config.retries + 1} times, and no judge call {when}"
        return JudgeUnreachableError(
            f"The judge at {self.config.base_url_host()} could not be used: {exc} ({why}). Check that the server "
            f"is up and that the base URL is right (now {self.config.base_url!r}; set it with "
            f"{how_to_set('base_url', 'URL')}); a judge that is only slow needs a longer "
            f"{how_to_set('timeout', 'SECONDS')} (now {self.config.timeout:g} s for a whole call). The run was stopped; "
            "replies judged so far are cached."
        )

    # -- the batch --------------------------------------------------------

    def run(self, items: Sequence[JudgeItem], *, label: str = "") -> list[JudgeResult]:
        """Judge every item (one result per item, in order); see the module docstring."""
        what = f"judge{' ' + label if label else ''}"
        prompts: dict[str, list[dict[str, str]]] = {}
        item_prompt = []
        for item in items:
            messages = self.messages(item)
            key = json.dumps(messages, ensure_ascii=False)
            prompts.setdefault(key, messages)
            item_prompt.append(key)
        verdicts: dict[str, JudgeResult] = {}
        pending = []
        for key, messages in prompts.items():
            replayed = self._replay(messages)
            if replayed is None:
                pending.append(key)
            else:
                verdicts[key] = replayed
        self.stats = JudgeStats(items=len(items), unique_prompts=len(prompts), from_cache=len(verdicts))

        if self.config.dry_run:
            self.stats.dry_run_calls_needed = len(pending)
            self._say(f"{what} (dry run): {len(items)} items, {len(prompts)} distinct prompts, {len(verdicts)} "
                      f"answered by the cache; {len(pending)} need a judge call (up to "
                      f"{len(pending) * (self.config.reasks + 1)} with re-asks, plus transport retries). Nothing "
                      "was called.")
            if self.config.batch:
                firsts = [self.request(prompts[key], 0) for key in pending]
                files = self._batches(kept=True).write_files({self.key(request): request for request in firsts})
                self._say(f"{what} (dry run): the first asks are written as batch request files: "
                          f"{', '.join(map(str, files))}")
            for key in pending:
                verdicts[key] = JudgeResult(NOT_JUDGED, detail="dry run")
        elif pending:
            cap = self.config.max_calls
            if cap is not None and len(pending) > cap:
                raise JudgeBudgetError(
                    f"The {what} run needs at least {len(pending)} judge calls ({len(verdicts)} of "
                    f"{len(prompts)} prompts are cached), more than the cap of {cap}. Nothing was called. Raise "
                    f"the cap ({how_to_set('max_calls', 'N')}), or check the count first with the dry run "
                    f"({how_to_set('dry_run', 'true')}).")
            self._say(f"{what}: {len(items)} items, {len(verdicts)} answered by the cache, {len(pending)} to judge "
                      f"with {self.setup.model} at {self.config.base_url_host()} ({self.config.concurrency} at a time)")
            work = [(key, prompts[key]) for key in pending]
            verdicts.update(run(self._judge_all(work, what)))
        results, seen = [], set()
        for key in item_prompt:  # a repeated prompt was judged once: its calls and cost are counted once
            verdict = verdicts[key]
            results.append(verdict if key not in seen else dataclasses.replace(verdict, calls=0, usage=None))
            seen.add(key)
        self._summarize(results, what)
        return results

    async def _judge_all(self, work: list[tuple[str, list[dict[str, str]]]], what: str) -> dict[str, JudgeResult]:
        """Verdicts of ``work`` (prompt key, messages): every prompt a task on this event loop, through the live
        source (``concurrency`` requests in flight) or the batch API."""
        budget = CallBudget(self.config.max_calls)
        client = JudgeClient(self.config, budget=budget)
        live = Live(client, self.config.concurrency)
        source = live
        if self.config.batch:
            from .batch import Batched

            source = Batched(self._batches(), live, budget, len(work), what)
        bar = tqdm(total=len(work), desc=what, unit="item", disable=not self.progress, file=sys.stderr)

        async def judged(key: str, messages: list[dict[str, str]]) -> tuple[str, JudgeResult]:
            try:
                async with source.slot():
                    return key, await self._asks(client, source, messages)
            finally:
                source.done()

        verdicts: dict[str, JudgeResult] = {}
        tasks = [asyncio.ensure_future(judged(key, messages)) for key, messages in work]
        try:
            for next_done in asyncio.as_completed(tasks):
                try:
                    key, verdict = await next_done
                except Aborted:
                    continue
                verdicts[key] = verdict
                bar.update(1)
        finally:
            # on an error: send no new request; the requests in flight end (their replies are cached). On Ctrl-C
            # (asyncio.run cancels this task) the tasks are cancelled with it.
            client.abort()
            await asyncio.gather(*tasks, return_exceptions=True)
            await client.close()
            bar.close()
            self.stats.calls = budget.used
            self.stats.retries = client.retries
        return verdicts

    def _batches(self, kept: bool = False):
        """The batch runner; ``kept``: its files go beside the judge's cache (a run's answers folder is removed)."""
        from ..data.config import cache_dir
        from .batch import BatchRunner

        folder = cache_dir() / "judge" if kept or self.batch_dir is None else self.batch_dir
        return BatchRunner(self.config, folder, self.batch_lookup, self.progress)

    def _summarize(self, results: list[JudgeResult], what: str) -> None:
        self.stats.scored = sum(r.scored for r in results)
        self.stats.failures = Counter(r.failure for r in results if r.failed)
        self.stats.reasks = sum(max(0, len(r.judge_outputs) - 1) for r in results)
        self.stats.cache_problem = self.cache.problem
        self.stats.usage = summarize([r.usage for r in results], self.stats.from_cache, priced(self.config))
        if self.config.dry_run:
            return
        failures = sum(self.stats.failures.values())
        retries = ", ".join(f"{kind}: {n}" for kind, n in sorted(self.stats.retries.items()))
        self._say(f"{what}: {self.stats.scored} scored, {failures} judge failure(s)"
                  + (f" ({', '.join(f'{k}: {n}' for k, n in sorted(self.stats.failures.items()))})" if failures else "")
                  + f"; {self.stats.calls} calls, {sum(self.stats.retries.values())} transport retries"
                  + (f" ({retries})" if retries else "") + f", {self.stats.reasks} re-asks; "
                  + usage_text(self.stats.usage))
        if failures:
            log.warning("%s: %d of %d items could not be scored: they are counted as judge failures (with the judge "
                        "cache on, a rerun judges only them)", what, failures, len(results))

    def _say(self, message: str) -> None:
        log.info(message)
        if self.progress:
            tqdm.write(message, file=sys.stderr)

    def close(self) -> None:
        """Close the cache."""
        self.cache.close()


def judge_many(items: Sequence[JudgeItem], config: JudgeConfig, *, label: str = "",
               progress: bool = True) -> list[JudgeResult]:
    """Judge every item with ``config``: one :class:`JudgeResult` per item, in order."""
    judge = Judge(config, progress=progress)
    try:
        return judge.run(items, label=label)
    finally:
        judge.close()
