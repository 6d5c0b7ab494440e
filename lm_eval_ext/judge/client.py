"""One judge call over the OpenAI chat-completions API, with the retry policy of judge.md.

The official ``openai`` client makes the HTTP call with its own retries off
(``max_retries=0``), through its generic ``post`` with our request body as it is and the
reply's bytes read with ``json``: the typed ``chat.completions.create`` re-validates every
request and builds a typed object of every reply, which cost more CPU than the rest of a
call (docs/judge.md, Throughput). The policy is ours, with ``tenacity``:

- retried with exponential backoff and full jitter (``retry_wait`` * 2^k, at most
  ``retry_max_wait``), or exactly as long as a ``Retry-After`` header says: timeouts,
  connection errors, HTTP 408/409/429/5xx, and 200 replies that are not a chat completion;
- fatal for the whole run (every call would fail the same way): HTTP 401, 403, 404;
- failed at once for this item only: any other 4xx (e.g. a prompt too long for the judge).

The API key is read from the environment variable named in the configuration when the
client is built, handed to ``openai.OpenAI`` and kept only to scrub it from any text we pass
on (server error messages, replies).
"""
from __future__ import annotations

import email.utils
import json
import logging
import os
import threading
import time
from collections import Counter

import openai
import tenacity

from .config import JudgeConfig, cli_flag, env_name, metadata_name
from .errors import JudgeConfigError, JudgeRequestRejected
from .usage import reply_usage

log = logging.getLogger(__name__)

_MIN_SECRET_LENGTH = 8  # shorter "keys" are placeholders, not secrets
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


class _WaitRetryAfter(tenacity.wait.wait_base):
    """Wait what the server's Retry-After says; otherwise the fallback (exponential with jitter)."""

    def __init__(self, fallback: tenacity.wait.wait_base, max_wait: float) -> None:
        self.fallback = fallback
        self.max_wait = max_wait

    def __call__(self, retry_state: tenacity.RetryCallState) -> float:
        exc = retry_state.outcome.exception() if retry_state.outcome else None
        if isinstance(exc, TransientError) and exc.retry_after is not None:
            return min(exc.retry_after, self.max_wait)
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
                f"{config.api_key_env}=EMPTY), or name another variable with {cli_flag('api_key_env')}, "
                f"--metadata {metadata_name('api_key_env')}=NAME or {env_name('api_key_env')}=NAME."
            )
        self._secret = secret
        self.config = config
        self.host = config.base_url_host()
        self._stop = stop
        self._budget = budget
        self._client = openai.OpenAI(api_key=secret, base_url=config.base_url, max_retries=0, timeout=config.timeout)
        self.reached = threading.Event()  # set by the first well-formed reply of this run
        self.last_reply = float("-inf")  # time.monotonic() of the latest well-formed reply
        self.retries: Counter[str] = Counter()
        self._stats_lock = threading.Lock()

    def abort(self) -> None:
        """Stop the run's calls: waits end, no new call starts (others raise :class:`Aborted`)."""
        self._stop.set()

    def redact(self, text: str) -> str:
        """``text`` with the API key replaced by ``***``.

        Keys shorter than ``_MIN_SECRET_LENGTH`` are placeholders for keyless local servers
        ("x", "EMPTY"): replacing them would mangle replies (``\\boxed`` with key "x").
        """
        if self._secret and len(self._secret) >= _MIN_SECRET_LENGTH:
            return text.replace(self._secret, "***")
        return text

    def list_models(self, timeout: float) -> list:
        """The endpoint's model list (``GET /models``), one try within ``timeout`` seconds; openai errors propagate."""
        self._budget.take()
        return list(self._client.with_options(timeout=timeout).models.list().data)

    def complete(self, request: dict, *, timeout: float | None = None, tries: int | None = None,
                 on_usage=None) -> str:
        """The reply text for one request body, retrying transient failures.

        ``timeout`` (seconds per try) and ``tries`` (1 = no retry) replace the configuration's
        ``timeout`` and ``retries + 1`` for this call: ``complete(request, timeout=10, tries=1)``
        is a probe that tells a judge that hangs within 10 s. Raises the last :class:`TransientError`
        when the tries are used up, :class:`ItemRejected`, :class:`JudgeRequestRejected` (fatal),
        :class:`CallCapReached` or :class:`Aborted`. ``on_usage`` is called with the tokens the reply
        reports (:func:`lm_eval_ext.judge.usage.reply_usage`).
        """
        retrying = tenacity.Retrying(
            retry=tenacity.retry_if_exception_type(TransientError),
            stop=tenacity.stop_after_attempt(tries or self.config.retries + 1) | (lambda _state: self._stop.is_set()),
            wait=_WaitRetryAfter(
                tenacity.wait_random_exponential(multiplier=self.config.retry_wait, max=self.config.retry_max_wait),
                self.config.retry_max_wait,
            ),
            sleep=self._stop.wait,  # an abort ends the wait at once
            before_sleep=self._note_retry,
            reraise=True,
        )
        for attempt in retrying:
            with attempt:
                return self._call_once(request, timeout, on_usage)
        raise AssertionError("unreachable: tenacity either returns or reraises")

    def _note_retry(self, state: tenacity.RetryCallState) -> None:
        exc = state.outcome.exception()
        with self._stats_lock:
            self.retries[exc.kind] += 1
        log.debug("judge call failed (%s: %s); retry %d in %.2f s", exc.kind, exc, state.attempt_number,
                  state.next_action.sleep if state.next_action else 0.0)

    def _call_once(self, request: dict, timeout: float | None, on_usage=None) -> str:
        if self._stop.is_set():
            raise Aborted()
        self._budget.take()
        try:
            body = self._client.post("/chat/completions", body=request, cast_to=bytes,
                                     options={"timeout": timeout} if timeout else {})
            reply = json.loads(body)
        except openai.APITimeoutError:
            raise TransientError("timeout", f"no reply from {self.host} within {timeout or self.config.timeout:g} s"
                                 ) from None
        except openai.APIConnectionError as exc:
            cause = exc.__cause__ or exc
            raise TransientError("connection", self.redact(f"cannot connect to {self.host}: {cause}")) from None
        except openai.APIStatusError as exc:
            error = self._status_error(exc, request.get("model"))
            if isinstance(error, JudgeRequestRejected):
                self.abort()  # at once, so that no other worker starts a call bound to fail the same way
            raise error from None
        except ValueError:  # a 200 whose body is not JSON (an HTML page, cut off, not UTF-8)
            raise TransientError("malformed", f"{self.host} answered with a body that is not valid JSON, "
                                              "not a chat completion") from None
        text = _reply_text(reply)
        if text is None:
            raise TransientError("malformed", f"{self.host} answered with something that is not a chat completion")
        if on_usage is not None:
            on_usage(reply_usage(reply))
        self.reached.set()
        self.last_reply = time.monotonic()
        return self.redact(text)

    def _status_error(self, exc: openai.APIStatusError, model: str | None) -> Exception:
        status = exc.status_code
        message = self.redact(str(exc.message))
        if status in _RETRIED_STATUS or status >= 500:
            return TransientError(str(status), f"HTTP {status} from {self.host}: {message}",
                                  _retry_after(getattr(exc.response, "headers", None)))
        if status in _FATAL_STATUS:
            what = _FATAL_STATUS[status]
            return JudgeRequestRejected(
                f"The judge endpoint {self.host} {what} (HTTP {status}: {message}). Model: {model!r}; "
                f"key from ${self.config.api_key_env}. Check the key variable ({cli_flag('api_key_env')}), the model "
                f"({cli_flag('model')} / --metadata {metadata_name('model')}=...) and the base URL "
                f"({cli_flag('base_url')}; it must be the API root, e.g. https://api.openai.com/v1)."
            )
        return ItemRejected(f"HTTP {status} from {self.host}: {message}")


def _reply_text(reply) -> str | None:
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
