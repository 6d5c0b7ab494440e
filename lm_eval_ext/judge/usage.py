"""What judging costs: the tokens every judge reply reports (``usage``), their price, and the cost limit.

Each reply of the endpoint states its ``usage`` (prompt and completion tokens); an item's
:class:`~lm_eval_ext.judge.records.JudgeResult` carries the sum over the requests made for it
(re-asks included; a verdict from the cache cost nothing and carries none), a task sums its
items (:func:`summarize`, recorded as ``configs.<task>.metadata.judge.usage``) and a run its tasks
(:func:`add_up`). With prices (``price_input`` / ``price_output``, dollars per million tokens)
every figure has its dollars; requests sent through the batch API cost ``batch_discount`` less.

``cost_limit`` bounds what one process's judge may spend (all tasks of a run together): before
each request, the :class:`CostMeter` reserves its price at most (the prompt's estimated tokens,
the reply at ``max_tokens``) and refuses the request when that could pass the limit.

Estimates (the preflight's, a reservation's) count ~4 characters per token, the usual rule of
thumb for English with OpenAI's tokenizers; a judge reply is assumed :data:`REPLY_TOKENS` long.
"""
from __future__ import annotations

import math
import threading
from collections.abc import Iterable

from .config import JudgeConfig, how_to_set
from .errors import JudgeError

CHARS_PER_TOKEN = 4
# A rubric judge writes a short feedback paragraph, then its score: about 150 words.
REPLY_TOKENS = 200
TOKEN_FIELDS = ("prompt_tokens", "completion_tokens")


class JudgeCostLimitError(JudgeError):
    """The next judge request could pass the run's ``cost_limit``."""


def estimate_tokens(text: str) -> int:
    """Tokens of ``text`` by the ~4 characters per token rule (what the estimates use; no tokenizer)."""
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def request_tokens(request: dict) -> int:
    """Estimated prompt tokens of a chat-completions request body."""
    return estimate_tokens(" ".join(str(m.get("content", "")) for m in request.get("messages", [])))


def priced(config: JudgeConfig) -> bool:
    """Whether the configuration gives both prices."""
    return config.price_input is not None and config.price_output is not None


def dollars(config: JudgeConfig, prompt_tokens: int, completion_tokens: int, batch: bool = False) -> float | None:
    """The price of these tokens (None without prices); batch requests cost ``batch_discount`` less."""
    if not priced(config):
        return None
    full = (prompt_tokens * config.price_input + completion_tokens * config.price_output) / 1e6
    return full * (1 - config.batch_discount) if batch else full


def reply_usage(reply: dict) -> dict[str, int]:
    """The prompt and completion tokens a chat completion (parsed JSON) reports; zeros when it reports none."""
    usage = reply.get("usage") if isinstance(reply, dict) else None
    usage = usage if isinstance(usage, dict) else {}
    return {name: int(usage.get(name) or 0) for name in TOKEN_FIELDS}


class ItemUsage:
    """The tokens (and dollars) of the requests made for one item; filled as its replies come in."""

    def __init__(self, config: JudgeConfig) -> None:
        self.config = config
        self.requests = 0
        self.tokens = dict.fromkeys(TOKEN_FIELDS, 0)
        self.cost = 0.0

    def add(self, usage: dict[str, int], batch: bool = False) -> None:
        """Count one reply's usage (``batch``: it came through the batch API)."""
        self.requests += 1
        for name in TOKEN_FIELDS:
            self.tokens[name] += usage[name]
        self.cost += dollars(self.config, usage["prompt_tokens"], usage["completion_tokens"], batch) or 0.0

    def record(self) -> dict | None:
        """What the item's result carries (None when no request was made)."""
        if not self.requests:
            return None
        return {"requests": self.requests, **self.tokens, **({"cost_usd": self.cost} if priced(self.config) else {})}


def summarize(usages: Iterable[dict | None], from_cache: int, config_priced: bool) -> dict:
    """A task's usage from its items' records: ``requests``, the token counts, ``from_cache`` (verdicts that
    cost nothing) and, with prices, ``cost_usd``."""
    total = {"requests": 0, **dict.fromkeys(TOKEN_FIELDS, 0), "from_cache": from_cache}
    cost = 0.0
    for usage in usages:
        if not usage:
            continue
        total["requests"] += usage.get("requests", 0)
        for name in TOKEN_FIELDS:
            total[name] += usage.get(name, 0)
        cost += usage.get("cost_usd", 0.0)
    if config_priced:
        total["cost_usd"] = round(cost, 6)
    return total


def add_up(usages: Iterable[dict]) -> dict | None:
    """The run's usage: the sum of its tasks' (``cost_usd`` only when every task has one); None for none."""
    usages = [u for u in usages if u]
    if not usages:
        return None
    total = {name: sum(u.get(name, 0) for u in usages) for name in ("requests", *TOKEN_FIELDS, "from_cache")}
    if all("cost_usd" in u for u in usages):
        total["cost_usd"] = round(sum(u["cost_usd"] for u in usages), 6)
    return total


def usage_text(usage: dict) -> str:
    """``"1,234 input + 56 output tokens ($0.04)"``: a usage summary for logs."""
    cost = f" (${usage['cost_usd']:,.2f})" if "cost_usd" in usage else ""
    return f"{usage['prompt_tokens']:,} input + {usage['completion_tokens']:,} output tokens{cost}"


def per_thousand(config: JudgeConfig, usage: dict, items: int, seconds: float) -> dict:
    """What judging 1,000 items takes, as judge leaderboards state it, from a run whose judge calls judged
    ``items`` items (verdicts from the cache left out), used ``usage`` (:func:`summarize`) and took ``seconds``.

    ``items``, ``concurrency``, ``batch`` and ``seconds_total`` always; with ``items``: ``prompt_tokens``,
    ``completion_tokens``, ``seconds`` per 1,000 items, and with prices ``cost_usd`` and ``batch_cost_usd``.
    The time is a report figure only: it depends on the endpoint's load and decides nothing.
    """
    out: dict = {"items": items, "concurrency": config.concurrency, "batch": config.batch,
                 "seconds_total": round(seconds, 3)}
    if not items:
        return out
    prompt, completion = usage["prompt_tokens"] * 1000 / items, usage["completion_tokens"] * 1000 / items
    out.update(prompt_tokens=round(prompt), completion_tokens=round(completion), seconds=round(seconds * 1000 / items, 3))
    if priced(config):
        out["cost_usd"] = round(dollars(config, prompt, completion), 6)
        out["batch_cost_usd"] = round(dollars(config, prompt, completion, batch=True), 6)
    return out


def per_thousand_text(figures: dict) -> str:
    """``"per 1,000 items: 1,234,567 input / 200,000 output tokens, $5.09 at the given prices ($2.55 with batch
    discount), 48.2 s at concurrency 16"``; without prices, what to give for the price."""
    if not figures["items"]:
        return ("per 1,000 items: no figures, every verdict came from the judge's cache (nothing was spent); run "
                f"with {how_to_set('cache', 'none')} to measure tokens, price and time")
    text = f"per 1,000 items: {figures['prompt_tokens']:,} input / {figures['completion_tokens']:,} output tokens, "
    if "cost_usd" in figures:
        text += f"${figures['cost_usd']:,.2f} at the given prices (${figures['batch_cost_usd']:,.2f} with batch discount), "
    how = "through the batch API" if figures["batch"] else f"at concurrency {figures['concurrency']}"
    text += f"{figures['seconds']:,.1f} s {how}"
    if "cost_usd" not in figures:
        text += (f"; the price needs the judge model's prices: {how_to_set('price_input', 'DOLLARS')} and "
                 f"{how_to_set('price_output', 'DOLLARS')} (per million input/output tokens)")
    return text


def estimate(config: JudgeConfig, requests: Iterable[dict]) -> dict:
    """What judging ``requests`` (request bodies, one per expected call) would take: ``calls``,
    ``prompt_tokens`` (~4 characters per token), ``completion_tokens`` (:data:`REPLY_TOKENS` each) and, with
    prices, ``cost_usd`` and ``batch_cost_usd``."""
    calls = prompt = 0
    for request in requests:
        calls += 1
        prompt += request_tokens(request)
    out = {"calls": calls, "prompt_tokens": prompt, "completion_tokens": calls * REPLY_TOKENS}
    if priced(config):
        out["cost_usd"] = dollars(config, prompt, out["completion_tokens"])
        out["batch_cost_usd"] = dollars(config, prompt, out["completion_tokens"], batch=True)
    return out


def estimate_text(estimate: dict) -> str:
    """``"about 1,692 judge calls, ~5.1M input tokens, ~$78 at the given prices, $39 with batch"``."""
    text = f"about {estimate['calls']:,} judge calls, ~{_short(estimate['prompt_tokens'])} input tokens"
    if "cost_usd" in estimate:
        text += (f", ~${estimate['cost_usd']:,.{_digits(estimate['cost_usd'])}f} at the given prices, "
                 f"${estimate['batch_cost_usd']:,.{_digits(estimate['batch_cost_usd'])}f} with batch")
    return text


def _short(n: int) -> str:
    for size, unit in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if n >= size:
            return f"{n / size:.1f}{unit}"
    return str(n)


def _digits(amount: float) -> int:
    return 0 if amount >= 10 else 2


class CostMeter:
    """What this process's judge has spent, and the reservations of the requests in flight (thread-safe)."""

    def __init__(self) -> None:
        self.spent = 0.0
        self.reserved = 0.0
        self._lock = threading.Lock()

    def reserve(self, config: JudgeConfig, request: dict, batch: bool = False) -> float:
        """Reserve the most ``request`` may cost; raise :class:`JudgeCostLimitError` when it could pass the limit."""
        if config.cost_limit is None:
            return 0.0
        most = dollars(config, request_tokens(request), config.max_tokens, batch) or 0.0
        with self._lock:
            if self.spent + self.reserved + most > config.cost_limit:
                raise JudgeCostLimitError(limit_message(config, self.spent))
            self.reserved += most
        return most

    def settle(self, reservation: float, cost: float) -> None:
        """Replace a reservation by what the request cost (0 when it failed)."""
        with self._lock:
            self.reserved -= reservation
            self.spent += cost


def limit_message(config: JudgeConfig, spent: float) -> str:
    """The paragraph of a run stopped by its cost limit."""
    return (f"The judge stopped before its cost limit of ${config.cost_limit:,.2f} would be passed (spent so far by "
            f"this run: ${spent:,.2f} at ${config.price_input:g}/${config.price_output:g} per million input/output "
            f"tokens); the verdicts given so far are in the judge's cache. Raise the limit ({how_to_set('cost_limit', 'DOLLARS')}) "
            "and judge the rest.")


METER = CostMeter()  # one per process: cost_limit bounds all the tasks of a run together
