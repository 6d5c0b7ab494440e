"""One judge call over the OpenAI chat-completions API, bounded in time and size, with the retry policy of judge.md.

Each HTTP request goes through the judge's transport (:mod:`lm_eval_ext.judge.http`: ``aiohttp`` on the
judge's own event loop, where a run's calls are tasks; the reply is read in pieces as it arrives):

- **an overall deadline**: connecting, sending and reading the whole reply must end within
  ``timeout`` seconds of the start; a reply still arriving then (a server that streams
  forever) is cut, not only one that is silent for that long;
- **a size cap**: a reply body larger than ``max_reply_bytes`` is cut when the cap is passed
  (``Accept-Encoding: identity``, so the cap counts the bytes that reach memory).

Both are faults of that try. The policy is ours, with ``tenacity``:

- retried with exponential backoff and full jitter (``retry_wait`` * 2^k, at most
  ``retry_max_wait``), or exactly as long as a ``Retry-After`` header says: timeouts (the
  deadline), connection errors, replies over the size cap, HTTP 408/409/429/5xx, and 200
  replies that are not a chat completion; up to four retries of a call after a 5xx without
  ``Retry-After`` or a dropped connection go at once while the run's retry budget allows (mostly
  one request's bad luck; :mod:`lm_eval_ext.judge.retry_budget`), and wait as above once such
  faults are frequent;
- fatal for the whole run (every call would fail the same way): HTTP 401, 403, 404;
- failed at once for this item only: any other 4xx (e.g. a prompt too long for the judge);
- the circuit breaker: ``stop_after_timeouts`` tries in a row, across every call in flight,
  that time out or cannot connect, with nothing back from the judge for ``timeout`` seconds,
  stop the run (:class:`JudgeGone`).

The request body is sent as it is and the reply's bytes read with ``json``: the official
``openai`` client's typed ``chat.completions.create`` re-validates every request and builds a
typed object of every reply, which cost more CPU than the rest of a call, and its generic
``post`` reads a reply whole, with a timeout per read only (docs/judge.md, Throughput).

The API key is read from the environment variable named in the configuration when the
client is built, sent as the ``Authorization`` header and kept only to scrub it from any
text we pass on (server error messages, replies).
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import email.utils
import json
import logging
import os
import threading
import time
from collections import Counter
from collections.abc import Mapping

import tenacity

from .config import JudgeConfig, env_name, how_to_set
from .errors import JudgeConfigError, JudgeRequestRejected
from .http import Cut, Transport
from .retry_budget import RetryBudget
from .usage import reply_usage

log = logging.getLogger(__name__)

_MIN_SECRET_LENGTH = 8  # shorter "keys" are placeholders, not secrets
_ABORT_TICK = 0.05  # seconds: how often a retry's wait looks whether the run was stopped
# a request whose retries at once failed four times is not having bad luck: its later retries back off
# whatever the run's budget (a judge restarting for half a minute is still ridden out at concurrency 1)
_AT_ONCE_PER_CALL = 4
_RETRIED_STATUS = {408, 409, 429}
_FATAL_STATUS = {401: "rejected the API key", 403: "refused access with this API key",
                 404: "does not know this model or path"}


class TransientError(Exception):
    """A failed call worth retrying; ``kind`` is timeout, connection, malformed or the HTTP status."""

    def __init__(self, kind: str, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.retry_after = retry_after


class ItemRejected(Exception):
    """The endpoint refused this one request (a 4xx other than 401/403/404/408/409/429)."""


class CallCapReached(Exception):
    """The run has used all the judge calls ``max_calls`` allows."""


class Aborted(Exception):
    """The run is stopping (another call hit a fatal error); make no more calls."""


class JudgeGone(Exception):
    """The circuit breaker: ``stop_after_timeouts`` tries in a row timed out or could not connect."""

    def __init__(self, message: str, last: TransientError) -> None:
        super().__init__(message)
        self.last = last


class CallBudget:
    """A thread-safe count of HTTP requests against the optional cap."""

    def __init__(self, max_calls: int | None) -> None:
        self.max_calls = max_calls
        self.used = 0
        self._lock = threading.Lock()

    def take(self) -> None:
        with self._lock:
            if self.max_calls is not None and self.used >= self.max_calls:
                raise CallCapReached(f"the cap of {self.max_calls} judge calls is reached")
            self.used += 1


def _retry_after(headers) -> float | None:
    """Seconds from ``retry-after-ms`` / ``retry-after`` (seconds or an HTTP date), if present."""
    if headers is None:
        return None
    for name, divisor in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            return max(0.0, float(value) / divisor)
        except ValueError:
            when = email.utils.parsedate_to_datetime(value) if name == "retry-after" else None
            if when is not None:
                return max(0.0, when.timestamp() - time.time())
    return None


def _at_once(exc: TransientError) -> bool:
    """Whether a retry after ``exc`` may go at once: a server error (5xx) or a dropped connection is most
    often one request's bad luck (a stale kept-alive connection, a worker restarting), not a server asking
    for less (429, a timeout)."""
    return exc.kind == "connection" or exc.kind.isdigit() and int(exc.kind) >= 500


class _WaitRetryAfter(tenacity.wait.wait_base):
    """Wait what the server's Retry-After says; otherwise the fallback (exponential with jitter), except that
    up to ``_AT_ONCE_PER_CALL`` retries of one call after a server error or a dropped connection
    (:func:`_at_once`) go at once while the run's retry budget (:mod:`lm_eval_ext.judge.retry_budget`)
    allows it. One instance serves one call. ``tries`` is the call's last attempt number: tenacity asks for
    the wait before it checks the stop, and the last failure pays for no retry."""

    def __init__(self, fallback: tenacity.wait.wait_base, max_wait: float, budget: RetryBudget, tries: int) -> None:
        self.fallback = fallback
        self.max_wait = max_wait
        self.budget = budget
        self.tries = tries
        self.at_once = 0

    def __call__(self, retry_state: tenacity.RetryCallState) -> float:
        exc = retry_state.outcome.exception() if retry_state.outcome else None
        if isinstance(exc, TransientError) and exc.retry_after is not None:
            return min(exc.retry_after, self.max_wait)
        if (isinstance(exc, TransientError) and _at_once(exc) and self.at_once < _AT_ONCE_PER_CALL
                and retry_state.attempt_number < self.tries and self.budget.withdraw()):
            self.at_once += 1
            return 0.0
        return self.fallback(retry_state)


class JudgeClient:
    """Sends chat-completion requests to the judge endpoint with the retry policy above.

    ``stop`` is set when the run aborts: waits end early and no new call starts.
    ``budget`` counts every HTTP request against the spending cap.
    """

    def __init__(self, config: JudgeConfig, *, stop: threading.Event, budget: CallBudget) -> None:
        secret = os.environ.get(config.api_key_env, "")
        if not secret:
            raise JudgeConfigError(
                f"The judge needs an API key in the environment variable {config.api_key_env}, which is not set. "
                f"Export it (for a local server without authentication any value works, e.g. "
                f"{config.api_key_env}=EMPTY), or name another variable with {how_to_set('api_key_env', 'NAME')} "
                f"or {env_name('api_key_env')}=NAME."
            )
        self._secret = secret
        self.config = config
        self.host = config.base_url_host()
        self._stop = stop
        self._budget = budget
        root = config.base_url.rstrip("/")
        self._urls = {path: f"{root}/{path}" for path in ("chat/completions", "models")}
        self._http = Transport(root, {"Authorization": f"Bearer {secret}", "Accept-Encoding": "identity"},
                               connections=config.concurrency)
        self.reached = threading.Event()  # set by the first well-formed reply of this run
        self.last_reply = float("-inf")  # time.monotonic() of the latest well-formed reply
        self.retries: Counter[str] = Counter()
        self._retry_budget = RetryBudget(config.retry_budget)
        self.gone: JudgeGone | None = None  # set when the circuit breaker stopped the run
        self._timeouts_in_a_row = 0
        self._last_answer = float("-inf")  # time.monotonic() of the latest HTTP response of any kind
        self._stats_lock = threading.Lock()

    def abort(self) -> None:
        """Stop the run's calls: waits end, no new call starts (others raise :class:`Aborted`)."""
        self._stop.set()

    def close(self) -> None:
        """Close the connections."""
        self._http.close()

    def redact(self, text: str) -> str:
        """``text`` with the API key replaced by ``***``.

        Keys shorter than ``_MIN_SECRET_LENGTH`` are placeholders for keyless local servers
        ("x", "EMPTY"): replacing them would mangle replies (``\\boxed`` with key "x").
        """
        if self._secret and len(self._secret) >= _MIN_SECRET_LENGTH:
            return text.replace(self._secret, "***")
        return text

    def list_models(self, timeout: float) -> set[str] | None:
        """The model ids of the endpoint's list (``GET /models``), one try within ``timeout`` seconds.

        None when the endpoint lists none (no such route, an error, a list that is not one or is
        over the size cap: not every server has it). Raises :class:`TransientError` (timeout,
        connection) or :class:`JudgeRequestRejected` (HTTP 401/403: the key).
        """
        self._budget.take()
        try:
            status, headers, body = self._http.run(self._fetch("GET", "models", None, timeout))
        except TransientError as err:
            if err.kind == "too_large":
                return None
            raise
        if status in (401, 403):
            raise self._status_error(status, body, headers, model=None)
        try:
            listed = json.loads(body).get("data") if status == 200 else None
            return {entry["id"] for entry in listed} if isinstance(listed, list) else None
        except (ValueError, AttributeError, KeyError, TypeError):
            return None

    def complete(self, request: dict, *, timeout: float | None = None, tries: int | None = None,
                 on_usage=None) -> str:
        """The reply text for one request body, retrying transient failures (blocks this thread; see
        :meth:`acomplete`)."""
        return self._http.run(self.acomplete(request, timeout=timeout, tries=tries, on_usage=on_usage))

    def submit(self, call) -> concurrent.futures.Future:
        """Run the coroutine ``call`` (which may await :meth:`acomplete`) on the HTTP loop; its future."""
        return self._http.submit(call)

    async def acomplete(self, request: dict, *, timeout: float | None = None, tries: int | None = None,
                        on_usage=None) -> str:
        """The reply text for one request body, retrying transient failures; awaited on the HTTP loop.

        ``timeout`` (the deadline of each try, in seconds) and ``tries`` (1 = no retry) replace the
        configuration's ``timeout`` and ``retries + 1`` for this call: ``complete(request, timeout=10,
        tries=1)`` is a probe that tells a judge that hangs within 10 s. Raises the last
        :class:`TransientError` when the tries are used up, :class:`ItemRejected`,
        :class:`JudgeRequestRejected` (fatal), :class:`JudgeGone` (the circuit breaker),
        :class:`CallCapReached` or :class:`Aborted`. ``on_usage`` is called with the tokens the reply
        reports (:func:`lm_eval_ext.judge.usage.reply_usage`).
        """
        tries = tries or self.config.retries + 1
        retrying = tenacity.AsyncRetrying(
            retry=tenacity.retry_if_exception_type(TransientError),
            stop=tenacity.stop_after_attempt(tries) | (lambda _state: self._stop.is_set()),
            wait=_WaitRetryAfter(
                tenacity.wait_random_exponential(multiplier=self.config.retry_wait, max=self.config.retry_max_wait),
                self.config.retry_max_wait, self._retry_budget, tries,
            ),
            sleep=self._sleep,
            before_sleep=self._note_retry,
            reraise=True,
        )
        async for attempt in retrying:
            with attempt:
                return await self._call_once(request, timeout or self.config.timeout, on_usage)
        raise AssertionError("unreachable: tenacity either returns or reraises")

    async def _sleep(self, seconds: float) -> None:
        """The wait before a retry; an abort (from any thread) ends it within ``_ABORT_TICK`` seconds."""
        end = time.monotonic() + seconds
        while not self._stop.is_set() and (left := end - time.monotonic()) > 0:
            await asyncio.sleep(min(left, _ABORT_TICK))

    def _note_retry(self, state: tenacity.RetryCallState) -> None:
        exc = state.outcome.exception()
        with self._stats_lock:
            self.retries[exc.kind] += 1
        log.debug("judge call failed (%s: %s); retry %d in %.2f s", exc.kind, exc, state.attempt_number,
                  state.next_action.sleep if state.next_action else 0.0)

    async def _call_once(self, request: dict, timeout: float, on_usage=None) -> str:
        if self._stop.is_set():
            raise Aborted()
        self._budget.take()
        try:
            status, headers, body = await self._fetch("POST", "chat/completions", request, timeout)
        except TransientError as err:
            self._count_silence(err)
            raise
        self._count_silence(None)
        if status != 200:
            error = self._status_error(status, body, headers, request.get("model"))
            if isinstance(error, JudgeRequestRejected):
                self.abort()  # at once, so that no other worker starts a call bound to fail the same way
            raise error
        try:
            reply = json.loads(body)
        except ValueError:  # a 200 whose body is not JSON (an HTML page, cut off, not UTF-8)
            raise TransientError("malformed", f"{self.host} answered with a body that is not valid JSON, "
                                              "not a chat completion") from None
        text = reply_text(reply)
        if text is None:
            raise TransientError("malformed", f"{self.host} answered with something that is not a chat completion")
        if on_usage is not None:
            on_usage(reply_usage(reply))
        if not self.reached.is_set():  # set() takes a lock and wakes waiters at every reply
            self.reached.set()
        self._retry_budget.deposit()
        self.last_reply = time.monotonic()
        return self.redact(text)

    async def _fetch(self, method: str, path: str, body: dict | None, timeout: float
                     ) -> tuple[int, Mapping[str, str], bytes]:
        """Status, headers and body of one request that must end within ``timeout`` s and ``max_reply_bytes``
        (:meth:`lm_eval_ext.judge.http.Transport.fetch`); a cut or failed request is a :class:`TransientError`."""
        cap = self.config.max_reply_bytes
        # the body as the openai client sends it: compact UTF-8 JSON
        data = None if body is None else json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()
        try:
            return await self._http.fetch(method, self._urls[path], data, timeout, cap)
        except Cut as cut:
            if cut.kind == "too_large":
                raise TransientError("too_large", f"{self.host} sent a reply of more than {cap} bytes "
                                                  f"(judge option max_reply_bytes); it was cut there") from None
            if cut.kind == "timeout" and cut.received is not None:
                raise TransientError("timeout", f"no whole reply from {self.host} within {timeout:g} s "
                                                f"(it was still arriving: {cut.received} bytes so far)") from None
            if cut.kind == "timeout":
                raise TransientError("timeout", f"no reply from {self.host} within {timeout:g} s") from None
            raise TransientError("connection", self.redact(f"cannot connect to {self.host}: {cut}")) from None

    def _count_silence(self, err: TransientError | None) -> None:
        """The circuit breaker: count tries in a row that got nothing back (timeout, no connection).

        It trips when there are ``stop_after_timeouts`` of them and nothing at all has come back
        for ``timeout`` seconds: occasional timeouts among the replies of a busy judge never trip it.
        """
        limit, now = self.config.stop_after_timeouts, time.monotonic()
        with self._stats_lock:
            if err is None or err.kind not in ("timeout", "connection"):
                self._timeouts_in_a_row, self._last_answer = 0, now
                return
            self._timeouts_in_a_row += 1
            if (not limit or self._timeouts_in_a_row < limit or now - self._last_answer < self.config.timeout
                    or self.gone is not None):
                return
            self.gone = JudgeGone(str(err), err)
        self.abort()
        raise self.gone

    def _status_error(self, status: int, body: bytes, headers: Mapping[str, str], model: str | None) -> Exception:
        message = self.redact(_error_message(body))
        if status in _RETRIED_STATUS or status >= 500:
            return TransientError(str(status), f"HTTP {status} from {self.host}: {message}", _retry_after(headers))
        if status in _FATAL_STATUS:
            what = _FATAL_STATUS[status]
            return JudgeRequestRejected(
                f"The judge endpoint {self.host} {what} (HTTP {status}: {message}). Model: {model!r}; "
                f"key from ${self.config.api_key_env}. Check the key variable ({how_to_set('api_key_env', 'NAME')}), "
                f"the model ({how_to_set('model', 'MODEL')}) and the base URL ({how_to_set('base_url', 'URL')}; it "
                "must be the API root, e.g. https://api.openai.com/v1)."
            )
        return ItemRejected(f"HTTP {status} from {self.host}: {message}")


def _error_message(body: bytes) -> str:
    """The ``error.message`` of an OpenAI-style error body, else the start of the body as text."""
    try:
        error = json.loads(body).get("error")
        message = error.get("message") if isinstance(error, dict) else error
        if isinstance(message, str) and message:
            return message
    except (ValueError, AttributeError):
        pass
    return body[:300].decode("utf-8", "replace") or "no message"


def reply_text(reply) -> str | None:
    """The assistant text of a chat completion (parsed JSON); None if ``reply`` is not one."""
    choices = reply.get("choices") if isinstance(reply, dict) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return None
    message = choices[0].get("message")
    if not isinstance(message, dict):
        return None
    content = message.get("content")
    if content is None:
        return ""
    return content if isinstance(content, str) else None
