"""One judge request over the OpenAI chat-completions API, on the ``openai`` client, bounded in time and size.

``openai.AsyncOpenAI`` sends each request and retries what it retries, ``retries`` times: HTTP 408, 409,
429 and 5xx, timeouts and connection errors, after its exponential backoff (0.5 s doubling up to 8 s, with
jitter) or what the server's ``retry-after-ms`` / ``Retry-After`` says. Its HTTP client (``httpx2``) takes
the proxies (``HTTPS_PROXY``, ``NO_PROXY``, ...) and the certificates (``SSL_CERT_FILE``, ``SSL_CERT_DIR``)
from the environment. The reply's body is read here, in pieces as it arrives, so that the judge adds:

- **a deadline** for each try: the whole reply within ``timeout`` seconds of the request's start (each wait
  for the server is bounded by ``timeout`` too); a reply still arriving then is cut, not only a silent one;
- **a size cap**: a body larger than ``max_reply_bytes`` is cut when the cap is passed
  (``Accept-Encoding: identity``, so the cap counts the bytes that reach memory);
- **replies asked again at once**: a body cut at the deadline or the cap, dropped mid-way, or that is not a
  chat completion (not JSON, empty, another shape) says nothing about the server's load: it is asked again
  without a wait. Every try counts against the request's ``retries + 1``, openai's retries included;
- **slots**: at most ``concurrency`` requests in flight. A request takes a slot before its first try and keeps it
  until it ends, a re-ask at once included, but not while it waits out the client's backoff (after a status the
  client retries, or a failed connection): the other requests keep the connections busy meanwhile;
- **the counts of a run**, from the HTTP client's event hooks, which see every try of openai's retries: the
  HTTP requests against ``max_calls``, the retries by kind, and **the circuit breaker**: ``stop_after_timeouts``
  tries in a row, across every request in flight, that brought no reply (timed out, or no connection) while
  nothing has come back from the judge for ``timeout`` seconds stop the run (:class:`JudgeGone`);
- what a refusal means: HTTP 401, 403, 404 stop the run (every request would fail the same way), any other
  4xx fails this item only (e.g. a prompt too long for the judge).

The hooks raise the judge's own stops (:class:`CallCapReached`, :class:`Aborted`, :class:`JudgeGone`) as
``openai.OpenAIError`` subclasses, which the client passes on unretried.

The API key is read from the environment variable named in the configuration, sent by the client as the
``Authorization`` header and kept only to scrub it from any text passed on (server errors, replies).
"""
from __future__ import annotations

import asyncio
import contextvars
import json
import logging
import os
import threading
import time
from collections import Counter

import httpx2
import openai

from .config import JudgeConfig, env_name, how_to_set
from .errors import JudgeConfigError, JudgeRequestRejected
from .usage import reply_usage

log = logging.getLogger(__name__)

_MIN_SECRET_LENGTH = 8  # shorter "keys" are placeholders, not secrets
_FATAL_STATUS = {401: "rejected the API key", 403: "refused access with this API key",
                 404: "does not know this model or path"}


class TransientError(Exception):
    """A request that brought no usable reply in its tries; ``kind``: timeout, connection, too_large,
    malformed, or the HTTP status of the last try; ``sent``: time.monotonic() when its first try was sent (None
    if none was)."""

    def __init__(self, kind: str, message: str, sent: float | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.sent = sent


class ItemRejected(Exception):
    """The endpoint refused this one request (a 4xx other than 401/403/404/408/409/429)."""


class CallCapReached(openai.OpenAIError):
    """The run has used all the judge calls ``max_calls`` allows."""


class Aborted(openai.OpenAIError):
    """The run is stopping (a fatal error, the circuit breaker); no more requests are sent."""


class JudgeGone(openai.OpenAIError):
    """The circuit breaker: ``stop_after_timeouts`` tries in a row brought no reply."""

    def __init__(self, message: str, last: TransientError) -> None:
        super().__init__(message)
        self.last = last


class CallBudget:
    """A count of HTTP requests against the optional cap."""

    def __init__(self, max_calls: int | None) -> None:
        self.max_calls = max_calls
        self.used = 0

    def take(self) -> None:
        """Count one request; raise :class:`CallCapReached` when the cap is used up."""
        if self.max_calls is not None and self.used >= self.max_calls:
            raise CallCapReached(f"the cap of {self.max_calls} judge calls is reached")
        self.used += 1


def api_key(config: JudgeConfig) -> str:
    """The judge's API key, from the variable the configuration names; a :class:`JudgeConfigError` if unset."""
    secret = os.environ.get(config.api_key_env, "")
    if not secret:
        raise JudgeConfigError(
            f"The judge needs an API key in the environment variable {config.api_key_env}, which is not set. "
            f"Export it (for a local server without authentication any value works, e.g. "
            f"{config.api_key_env}=EMPTY), or name another variable with {how_to_set('api_key_env', 'NAME')} "
            f"or {env_name('api_key_env')}=NAME."
        )
    return secret


def run(call):
    """Run the coroutine ``call`` to its end and return its result, from a caller with or without an event
    loop of its own (a notebook has one: the call then runs in a thread of its own)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(call)
    outcome: list = []

    def target() -> None:
        try:
            outcome.append((True, asyncio.run(call)))
        except BaseException as exc:  # handed to the caller
            outcome.append((False, exc))

    thread = threading.Thread(target=target, name="judge")
    thread.start()
    thread.join()
    ok, value = outcome[0]
    if not ok:
        raise value
    return value


class _Tries:
    """The tries of one request, as the HTTP client's hooks see them (one per request, in a context variable:
    the hooks run in the task of the request that sent them)."""

    __slots__ = ("client", "timeout", "limit", "count", "first", "started", "status", "error", "held")

    def __init__(self, client: JudgeClient, timeout: float, limit: int, before: _Tries | None = None) -> None:
        self.client = client
        self.timeout = timeout
        self.limit = limit  # the most tries openai makes of this request
        self.count = 0
        # time.monotonic() when the request's first try was sent (its tries before a re-ask included)
        self.first: float | None = before.first if before is not None else None
        self.started = 0.0  # time.monotonic() when the latest try was sent
        self.status: int | None = None  # the latest try's HTTP status
        self.error: Exception | None = None  # why the latest try brought no reply (connect, send, receive)
        # the latest try holds one of the client's slots; a request asked again at once (``before``: its tries
        # until now) keeps the slot it held
        self.held = before is not None and before.held
        if before is not None:
            before.held = False

    async def trace(self, event: str, info: dict) -> None:
        """httpcore's ``trace`` extension reports each step of a request, a failed one with its exception: a try
        that fails before any reply counts for the circuit breaker when it fails (a retry comes only after the
        client's backoff)."""
        error = info.get("exception")
        if event.endswith(".failed") and self.status is None and self.error is None and isinstance(error, Exception):
            self.error = error
            if self.count < self.limit:  # openai tries again after its backoff (else the caller frees the slot)
                self.client.free(self)
            self.client.silent(self.client.no_reply(error, self.timeout))


_TRIES: contextvars.ContextVar[_Tries] = contextvars.ContextVar("judge_tries")


class _Fault(Exception):
    """A try whose reply was unusable (read here); ``kind`` as :class:`TransientError`'s."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


class JudgeClient:
    """Sends chat-completion requests to the judge endpoint (module docstring); use within one event loop, and
    :meth:`close` it there.

    ``budget`` counts every HTTP request against the spending cap; :meth:`abort` stops the run's requests.
    ``connections`` (default: the configuration's ``concurrency``): the kept-alive connections, and the slots.
    """

    def __init__(self, config: JudgeConfig, *, budget: CallBudget, connections: int | None = None) -> None:
        self._secret = api_key(config)
        self.config = config
        self.host = config.base_url_host()
        self._budget = budget
        connections = connections or config.concurrency
        self._openai = openai.AsyncOpenAI(
            api_key=self._secret, base_url=config.base_url, max_retries=config.retries, timeout=config.timeout,
            default_headers={"Accept-Encoding": "identity"},
            # as many kept-alive connections as requests in flight (openai's default keeps 100)
            http_client=openai.DefaultAsyncHttpxClient(
                timeout=config.timeout,
                limits=httpx2.Limits(max_connections=connections, max_keepalive_connections=connections),
                event_hooks={"request": [self._on_request], "response": [self._on_response]}))
        self.stopped = False
        self.reached = False  # a well-formed reply came back in this run
        self.last_reply = float("-inf")  # time.monotonic() of the latest well-formed reply
        self.retries: Counter[str] = Counter()
        self.gone: JudgeGone | None = None  # set when the circuit breaker stopped the run
        self._silent_in_a_row = 0
        self._last_answer = float("-inf")  # time.monotonic() of the latest whole answer of any kind
        self._slots = asyncio.Semaphore(connections)

    def abort(self) -> None:
        """Stop the run's requests: no new request or retry is sent (they raise :class:`Aborted`)."""
        self.stopped = True

    async def close(self) -> None:
        """Close the connections."""
        await self._openai.close()

    def redact(self, text: str) -> str:
        """``text`` with the API key replaced by ``***``.

        Keys shorter than ``_MIN_SECRET_LENGTH`` are placeholders for keyless local servers
        ("x", "EMPTY"): replacing them would mangle replies (``\\boxed`` with key "x").
        """
        if len(self._secret) >= _MIN_SECRET_LENGTH:
            return text.replace(self._secret, "***")
        return text

    # -- the HTTP client's hooks: every try ------------------------------------------------------

    async def _on_request(self, request) -> None:
        tries = _TRIES.get(None)
        if tries is None:
            return
        if self.stopped:
            raise Aborted()
        if tries.count:  # openai retries: the try before failed
            self.free(tries)  # if it ended unseen by the hooks (e.g. no connection free in time)
            self._retried(str(tries.status) if tries.status is not None else self.no_reply(tries.error).kind)
        if not tries.held:  # a retry, after the client's backoff (a first try has its slot from _send)
            await self._slots.acquire()
            tries.held = True
        if self.stopped:
            raise Aborted()
        self._budget.take()
        tries.count += 1
        tries.started = time.monotonic()
        if tries.first is None:
            tries.first = tries.started
        tries.status = tries.error = None
        request.extensions["trace"] = tries.trace

    async def _on_response(self, response) -> None:
        tries = _TRIES.get(None)
        if tries is not None:
            tries.status = response.status_code
            if response.status_code != 200:  # a whole answer (a 200's body is read and counted below)
                if tries.count < tries.limit and _retried_status(response.status_code):  # openai tries again later
                    self.free(tries)
                self._answered()

    def free(self, tries: _Tries) -> None:
        """Give back the slot of the latest try of ``tries``, if it holds one."""
        if tries.held:
            tries.held = False
            self._slots.release()

    def no_reply(self, cause: BaseException | None, timeout: float | None = None) -> TransientError:
        """A try that brought no reply: it timed out, or it could not connect (or the connection dropped)."""
        if cause is not None and "Timeout" in type(cause).__name__:
            return TransientError("timeout", f"no reply from {self.host} within {timeout or self.config.timeout:g} s")
        why = str(cause) or type(cause).__name__ if cause is not None else "no reply"
        return TransientError("connection", self.redact(f"cannot connect to {self.host}: {why}"))

    def _retried(self, kind: str) -> None:
        self.retries[kind] += 1
        log.debug("judge request to %s failed (%s); retried", self.host, kind)

    def _answered(self) -> None:
        self._silent_in_a_row, self._last_answer = 0, time.monotonic()

    def silent(self, err: TransientError) -> None:
        """The circuit breaker: count tries in a row that brought no reply (timeout, no connection).

        It trips when there are ``stop_after_timeouts`` of them and nothing at all has come back for
        ``timeout`` seconds: occasional timeouts among the replies of a busy judge never trip it.
        """
        self._silent_in_a_row += 1
        limit = self.config.stop_after_timeouts
        if (not limit or self._silent_in_a_row < limit or self.gone is not None
                or time.monotonic() - self._last_answer < self.config.timeout):
            return
        self.gone = JudgeGone(str(err), err)
        self.abort()
        raise self.gone

    # -- requests ----------------------------------------------------------------------------

    async def complete(self, request: dict, *, timeout: float | None = None, tries: int | None = None,
                       on_usage=None) -> str:
        """The reply text for one request body.

        ``timeout`` (the deadline of each try, in seconds) and ``tries`` (1 = no retry) replace the
        configuration's ``timeout`` and ``retries + 1`` for this request: ``complete(request, timeout=10,
        tries=1)`` is a probe that tells a judge that hangs within 10 s. Raises :class:`TransientError` when
        the tries are used up, :class:`ItemRejected`, :class:`JudgeRequestRejected` (fatal),
        :class:`JudgeGone` (the circuit breaker), :class:`CallCapReached` or :class:`Aborted`. ``on_usage`` is
        called with the tokens the reply reports (:func:`lm_eval_ext.judge.usage.reply_usage`).
        """
        timeout = timeout or self.config.timeout
        left = tries or self.config.retries + 1
        seen = None
        try:
            while True:
                if self.stopped:
                    raise Aborted()
                seen = _Tries(self, timeout, left, seen)
                try:
                    try:
                        body = await self._send("POST", "chat/completions", request, seen)
                    except openai.APIStatusError as err:
                        error = self._status_error(err, request.get("model"))
                        if isinstance(error, JudgeRequestRejected):
                            self.abort()  # at once, so that no other request is sent bound to fail the same way
                        raise error from None
                    reply = _chat_completion(body, self.host)
                except TransientError as err:
                    err.sent = seen.first
                    raise
                except _Fault as fault:
                    left -= seen.count
                    if left <= 0:
                        raise TransientError(fault.kind, self.redact(str(fault)), seen.first) from None
                    # asked again at once, in the same slot: a bad reply says nothing about the server's load
                    self._retried(fault.kind)
                    continue
                if on_usage is not None:
                    on_usage(reply_usage(reply))
                self.reached, self.last_reply = True, time.monotonic()
                return self.redact(reply_text(reply))
        finally:
            if seen is not None:
                self.free(seen)

    async def list_models(self, timeout: float) -> set[str] | None:
        """The model ids of the endpoint's list (``GET /models``), one try within ``timeout`` seconds.

        None when the endpoint lists none (no such route, an error, a list that is not one or is over the
        size cap: not every server has it). Raises :class:`TransientError` (timeout, connection) or
        :class:`JudgeRequestRejected` (HTTP 401/403: the key).
        """
        seen = _Tries(self, timeout, 1)
        try:
            body = await self._send("GET", "models", None, seen)
            listed = json.loads(body).get("data")
            return {entry["id"] for entry in listed} if isinstance(listed, list) else None
        except openai.APIStatusError as err:
            if err.status_code in (401, 403):
                raise self._status_error(err, None) from None
            return None
        except _Fault as fault:
            if fault.kind == "too_large":
                return None
            raise TransientError(fault.kind, self.redact(str(fault))) from None
        except (ValueError, AttributeError, KeyError, TypeError):
            return None
        finally:
            self.free(seen)

    async def _send(self, method: str, path: str, body: dict | None, seen: _Tries) -> bytes:
        """The body of a 200 reply to one request (with openai's retries, at most ``seen.limit`` tries, which
        ``seen`` records; the caller gives back the slot it holds), read within the deadline (``seen.timeout``)
        and the size cap. Raises :class:`_Fault` for a try cut or dropped while its body arrived,
        :class:`TransientError` when openai's retries of a timeout or a connection error are used up,
        ``openai.APIStatusError`` for an HTTP error, and the hooks' stops."""
        timeout = seen.timeout
        options = {}  # the client's own unless this request sets others (a probe, a retry after a bad reply)
        if seen.limit != self.config.retries + 1:
            options["max_retries"] = seen.limit - 1
        if timeout != self.config.timeout:
            options["timeout"] = timeout
        if not seen.held:  # taken here, before the client's own work, so that requests go in the order they come
            await self._slots.acquire()  # given back by the hooks, or by the caller when the request ends
            seen.held = True
        _TRIES.set(seen)
        try:
            if method == "GET":
                response = await self._openai.get(path, cast_to=httpx2.Response, stream=True, options=options)
            else:
                response = await self._openai.post(path, cast_to=httpx2.Response, body=body, stream=True,
                                                   options=options)
        except openai.APIConnectionError as exc:  # APITimeoutError included
            err = self.no_reply(exc.__cause__, timeout)
            if seen.error is None:  # a failure the trace did not report (e.g. no connection free in time)
                self.silent(err)
            raise err from None
        try:
            data = await self._read(response, seen.started + timeout, timeout)
        finally:
            await response.aclose()
        self._answered()
        return data

    async def _read(self, response, deadline: float, timeout: float) -> bytes:
        """The body of ``response`` in pieces, cut at ``deadline`` (time.monotonic()) or past the size cap; a body
        whose announced length has all arrived is whole, even if its last piece came after the deadline."""
        cap, data = self.config.max_reply_bytes, bytearray()
        length = response.headers.get("content-length")
        whole = int(length) if length and length.isdigit() else None
        try:
            async for chunk in response.aiter_bytes():
                data += chunk
                if len(data) > cap:
                    raise _Fault("too_large", f"{self.host} sent a reply of more than {cap} bytes (judge option "
                                              "max_reply_bytes); it was cut there")
                if time.monotonic() > deadline and len(data) != whole:
                    break
            else:
                return bytes(data)
        except httpx2.TimeoutException:
            pass
        except httpx2.TransportError as err:  # the connection dropped mid-reply
            fault = _Fault("connection", f"{self.host} dropped the connection mid-reply ({err})")
            self.silent(TransientError(fault.kind, str(fault)))
            raise fault from None
        fault = _Fault("timeout", f"no whole reply from {self.host} within {timeout:g} s (it was still arriving: "
                                  f"{len(data)} bytes so far)")
        self.silent(TransientError(fault.kind, str(fault)))
        raise fault

    def _status_error(self, err: openai.APIStatusError, model: str | None) -> Exception:
        status = err.status_code
        message = self.redact(_error_message(err.response.content))
        if _retried_status(status):
            return TransientError(str(status), f"HTTP {status} from {self.host}: {message}")
        if status in _FATAL_STATUS:
            return JudgeRequestRejected(
                f"The judge endpoint {self.host} {_FATAL_STATUS[status]} (HTTP {status}: {message}). Model: "
                f"{model!r}; key from ${self.config.api_key_env}. Check the key variable "
                f"({how_to_set('api_key_env', 'NAME')}), the model ({how_to_set('model', 'MODEL')}) and the base URL "
                f"({how_to_set('base_url', 'URL')}; it must be the API root, e.g. https://api.openai.com/v1)."
            )
        return ItemRejected(f"HTTP {status} from {self.host}: {message}")


def _retried_status(status: int) -> bool:
    """A status openai retries (HTTP 408, 409, 429, 5xx): the server's load, not the request."""
    return status in (408, 409, 429) or status >= 500


def _chat_completion(body: bytes, host: str) -> dict:
    """The chat completion in a 200 reply's body; a :class:`_Fault` (malformed) if it is none."""
    try:
        reply = json.loads(body)
    except ValueError:  # an HTML page, cut off, empty, not UTF-8
        raise _Fault("malformed", f"{host} answered with a body that is not valid JSON, not a chat completion"
                     ) from None
    if reply_text(reply) is None:
        raise _Fault("malformed", f"{host} answered with something that is not a chat completion")
    return reply


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
