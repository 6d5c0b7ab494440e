"""A local OpenAI-compatible HTTP server for tests (judge, ``local-chat-completions``, ``local-completions``).

It is a real server (``ThreadingHTTPServer`` on 127.0.0.1, ephemeral port,
daemon thread), so the real ``openai`` client and the harness's real HTTP path
are exercised, not a mock object::

    with StubOpenAIServer(responder=lambda req: "Score: 4") as srv:
        client = openai.OpenAI(base_url=srv.base_url, api_key="sk-test")
        ...
        assert srv.call_count == 1

Endpoints: ``POST /v1/chat/completions``, ``POST /v1/completions`` (a list
``prompt`` gives one choice per prompt and per ``n``; a prompt may be text or a
list of token ids, as the harness's ``local-completions`` sends), ``GET /v1/models``,
and, with ``tokenize=True``, vLLM's ``POST /tokenize``.

**vLLM's model list and tokenizer** (built from the replies of a real ``vllm serve`` of
SmolLM2-135M-Instruct, ``tests/fixtures/real/served/``): with ``max_model_len=N`` each entry of
``GET /v1/models`` is a vLLM entry carrying ``max_model_len`` N, and a completion whose prompt has
more than N tokens gets vLLM's HTTP 400 (``too_long_completion.json``, its numbers for N). With
``tokenize=True``, ``POST /tokenize`` answers as vLLM does (``count``, ``max_model_len``, ``tokens``,
``token_strs``; ``GET /tokenize`` is a 405), with :func:`vllm_tokens`: a prompt's tokens are its words
(each with the blanks before it, as the log-prob tokens below; no special token, as SmolLM2's
tokenizer adds none), a chat's are SmolLM2's chat template around each message's words, with the
default system message when the chat has none and the generation prompt unless
``add_generation_prompt`` is false. "Hello world" and a one-message "Hello" chat give exactly the
captured replies (``tests/test_stub_openai.py``).

**Latency**: every POST waits ``delay_s`` plus a uniform draw in ``[0, jitter_s]``
(its own RNG seeded with ``seed``, so jitter does not change which faults are drawn),
e.g. ``delay_s=0.5, jitter_s=1.5`` for 0.5-2 s per call like a loaded local vLLM
server. ``max_in_flight`` is the most POST requests the server was handling at once
(what a test asserts instead of wall-clock time to check a client's concurrency).

**Usage**: every completion reports ``usage``, counting ~4 characters per token (the message
contents of a chat request, each prompt of a completions request, the reply texts).

**Log-probabilities** (legacy completions format, what ``local-completions`` uses for
log-likelihood requests): a ``/v1/completions`` request with ``logprobs=k`` gets, per
choice, ``logprobs = {"tokens", "token_logprobs", "top_logprobs", "text_offset"}``.
The generated tokens are the responder's text cut into tokens, at most ``max_tokens``
of them (the text is then their concatenation); with ``echo=true`` the prompt's tokens
come first and ``text`` starts with the prompt. Tokens:

- a prompt given as token ids: one token per id, shown as ``"<id>"``;
- text (prompt or generation): each word with the blanks before it (``" the"``).

The log-prob of every token is :func:`scripted_logprob` ``(previous tokens, token)``
(or the ``logprob_fn`` given): for token ids, ``-(1 + (3 * prev + token) % 10) / 10``
with ``prev`` the id before it (0 for the first), so it depends on the context and
lies in -0.1..-1.0; text tokens use the CRC-32 of their UTF-8 bytes as the id. As in
OpenAI's and vLLM's replies, the first echoed token has ``None`` for its log-prob
and its top log-probs. ``top_logprobs[i]`` holds up to ``k`` entries, most likely
first: the token itself, and ``"<other>"`` carrying the rest of the probability
(``log(1 - p)``); so the token is the greedy choice exactly when its probability is at
least one half (log-prob >= log 0.5, i.e. -0.1..-0.6 with the default function).

**Stop sequences** are ignored unless ``honour_stop=True``: then a reply (chat or completion) is cut
before the first occurrence of any string of the request's ``stop`` (a string or a list), as OpenAI's
and vLLM's servers do, the stop string itself left out.

Two broken servers, with ``logprobs_fault``: ``"no_echo"`` ignores ``echo`` (log-probs
and text of the generated tokens only), ``"no_generated"`` honours ``echo`` but
generates no token (log-probs of the prompt only).

**Faults** are drawn per POST request from a seeded RNG
(``faults={"429": 0.1, "500": 0.1, "timeout": 0.05, "drop": 0.05, "garbage": 0.1}``),
or forced for the first requests with ``fault_sequence=["429", None, ...]``:

- ``"429"``: status 429 with a ``Retry-After: <retry_after>`` header.
- ``"500"``, ``"503"``: that status with an OpenAI-style error body, and a ``Retry-After: <error_retry_after>``
  header when that is given.
- ``"timeout"``: waits ``timeout_s`` (longer than the client's timeout),
  then answers normally if the client is still there.
- ``"drop"``: closes the connection without any response.
- ``"garbage"``: status 200 with, chosen by the RNG, either ``"nonjson"`` or
  ``"noscore"``; these two can also be asked for directly:
  ``"nonjson"`` is a body that is not JSON (``text/plain``), ``"noscore"`` a
  well-formed completion whose text is ``noscore_text`` (a reply with no score in it).
- ``"outofrange"``: a well-formed completion whose text is ``outofrange_text`` (a score outside the rubric's
  range: ``\\boxed{11}``).
- ``"empty"``: status 200, ``Content-Type: application/json`` and an empty body.
- ``"badjson"``: status 200, ``Content-Type: application/json``, and the body
  ``badjson_body`` (default: a chat completion cut off in the middle, as a proxy
  that drops the connection mid-body would deliver; give e.g. ``b"null"``,
  ``b"[]"`` or invalid UTF-8 for other malformed bodies).

- ``"trickle"``: status 200 with a chunked body that never ends: ``trickle_bytes`` bytes every
  ``trickle_interval_s`` seconds until the client hangs up (or ``trickle_max_s`` has passed).
- ``"huge"``: status 200 and a well-formed chat completion of ``huge_bytes`` bytes (its text
  padded with spaces, then the responder's reply), sent in pieces as it is made.

For each of these two the request's entry records ``sent`` (body bytes written) and ``cut``
(True when the client hung up before the end). ``models_fault="trickle"`` or ``"huge"`` makes
``GET /v1/models`` misbehave the same way.

``fail_status=401`` (any 4xx/5xx) makes every POST fail with that status.

In its own process (benchmarks, so that its CPU time is not the client's):
``python -m doubles.stub_openai --delay 0.5 --jitter 1.5 [--faults 500=0.04,drop=0.03]`` prints the
base URL, serves until its stdin closes, then prints :meth:`StubOpenAIServer.summary` as JSON.
"""

from __future__ import annotations

import json
import math
import random
import re
import socket
import sys
import threading
import time
import urllib.parse
import zlib
from collections import Counter
from collections.abc import Callable, Sequence
from functools import lru_cache
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

_clock = time.monotonic  # when requests arrive and are answered (a test gives a clock of its own)
FAULT_KINDS = ("429", "500", "503", "timeout", "drop", "garbage", "nonjson", "noscore", "outofrange", "empty", "badjson",
               "trickle", "huge")
BODY_FAULTS = ("trickle", "huge")
LOGPROBS_FAULTS = ("no_echo", "no_generated")
# A chat completion cut off mid-body: valid JSON up to the cut, then nothing.
TRUNCATED_COMPLETION = b'{"id": "stub-cut", "object": "chat.completion", "choices": [{"index": 0, "message": {"role": "assi'
_TEXT_TOKEN = re.compile(r"\s*\S+|\s+$")
_HALF = math.log(0.5)


def _count_tokens(text: str) -> int:
    # ~4 characters per token, OpenAI's rule of thumb for English (what the judge's cost estimates assume)
    return math.ceil(len(str(text)) / 4)


def _prompt_text(body: dict) -> str:
    if "messages" in body:
        return " ".join(str(m.get("content", "")) for m in body["messages"] if isinstance(m, dict))
    return str(body.get("prompt", ""))


def _token_code(token: int | str) -> int:
    return token if isinstance(token, int) else zlib.crc32(token.encode("utf-8"))


def scripted_logprob(previous: Sequence[int | str], token: int | str) -> float:
    """The stub's log-prob of ``token`` after ``previous``: ``-(1 + (3 * prev + token) % 10) / 10``.

    ``prev`` is the token before (0 for the first); a text token counts as the CRC-32 of its
    UTF-8 bytes. Deterministic, context-dependent, in -0.1..-1.0.
    """
    prev = _token_code(previous[-1]) if previous else 0
    return -(1 + (3 * prev + _token_code(token)) % 10) / 10


def _split_prompts(prompt) -> list:
    """The prompts of a completions request: text, a list of texts, token ids, or a list of token-id lists."""
    if isinstance(prompt, list) and prompt and all(isinstance(t, int) for t in prompt):
        return [prompt]
    return prompt if isinstance(prompt, list) else [prompt]


def _tokens(prompt: str | list[int]) -> tuple[list[int | str], list[str]]:
    """(token values for the log-prob function, token strings) of a text or a token-id list."""
    if isinstance(prompt, list):
        return list(prompt), [f"<{t}>" for t in prompt]
    pieces = _TEXT_TOKEN.findall(str(prompt))
    return list(pieces), list(pieces)


CAPTURED = Path(__file__).resolve().parents[1] / "fixtures" / "real" / "served"


@lru_cache(maxsize=1)
def _smollm2() -> dict:
    """SmolLM2's chat-template tokens and two word ids, taken apart from the captured /tokenize replies."""
    def tokens(name: str) -> list[int]:
        return json.loads((CAPTURED / name).read_text())["tokens"]

    prompt, chat, chat_nogen = (tokens(f"tokenize_{n}.json") for n in ("prompt", "messages", "messages_nogen"))
    generation = chat[len(chat_nogen):]  # <|im_start|> assistant \n
    start, newline = generation[0], generation[-1]
    hello = chat_nogen.index(prompt[0])  # the one user message, "Hello"
    user_at = max(i for i in range(hello) if chat_nogen[i] == start)
    system = chat_nogen[:user_at]  # <|im_start|> system \n <default system message> <|im_end|> \n
    return {"start": start, "newline": newline, "end": chat_nogen[hello + 1:],  # <|im_end|> \n
            "roles": {"system": system[1:system.index(newline)], "user": chat_nogen[user_at + 1:hello - 1],
                      "assistant": generation[1:-1]},
            "default_system": system, "generation": generation, "words": {"Hello": prompt[0], " world": prompt[1]}}


def _word_ids(text: str) -> list[int]:
    words = _smollm2()["words"]
    # SmolLM2's vocabulary has 49,152 entries; the ids above 1000 stand for the words the capture does not show
    return [words.get(w, 1000 + zlib.crc32(w.encode("utf-8")) % 48000) for w in _TEXT_TOKEN.findall(text)]


def vllm_tokens(body: dict) -> list[int]:
    """The token ids the stub's ``/tokenize`` gives a ``prompt`` (text) or ``messages`` (module docstring)."""
    if "messages" not in body:
        prompt = body.get("prompt", "")
        return list(prompt) if isinstance(prompt, list) else _word_ids(str(prompt))
    template = _smollm2()
    messages = body["messages"]
    tokens = [] if messages and messages[0].get("role") == "system" else list(template["default_system"])
    for message in messages:
        tokens += [template["start"], *template["roles"][message["role"]], template["newline"],
                   *_word_ids(str(message.get("content", ""))), *template["end"]]
    return tokens + (list(template["generation"]) if body.get("add_generation_prompt", True) else [])


def vllm_model_entry(model: str, max_model_len: int) -> dict:
    """One entry of vLLM's ``GET /v1/models`` (the fields of ``models.json``)."""
    return {"id": model, "object": "model", "created": 0, "owned_by": "vllm", "root": model, "parent": None,
            "max_model_len": max_model_len, "permission": [{
                "id": f"modelperm-{model}", "object": "model_permission", "created": 0, "allow_create_engine": False,
                "allow_sampling": True, "allow_logprobs": True, "allow_search_indices": False, "allow_view": True,
                "allow_fine_tuning": False, "organization": "*", "group": None, "is_blocking": False}]}


def vllm_too_long(body: dict, max_model_len: int) -> dict | None:
    """vLLM's 400 body for a completion request whose prompt has more than ``max_model_len`` tokens (it counts
    up to one past the limit: "at least"), or None when the prompt is within it."""
    if "messages" in body:
        count = len(vllm_tokens({"messages": body["messages"]}))
    else:
        count = max(len(vllm_tokens({"prompt": p})) for p in _split_prompts(body.get("prompt", "")))
    if count <= max_model_len:
        return None
    over = max_model_len + 1
    return {"error": {"message": f"This model's maximum context length is {max_model_len} tokens. However, your prompt "
                                 f"contains at least {over} input tokens, which exceeds this limit even without any "
                                 "output tokens. Please reduce the length of the input prompt. "
                                 f"(parameter=input_tokens, value={over})",
                      "type": "BadRequestError", "param": "input_tokens", "code": 400}}


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    # Many clients connect at once in concurrency tests; a backlog of 5 would stall them.
    request_queue_size = 128

    def handle_error(self, request, client_address) -> None:
        # A client that resets its connection (one kept alive, or a reply it stopped reading) has gone away, as a
        # served API sees it: not an error of the stub. Anything else is, and is shown.
        if not isinstance(sys.exc_info()[1], (ConnectionResetError, BrokenPipeError)):
            super().handle_error(request, client_address)


class StubOpenAIServer:
    """An OpenAI-compatible server on 127.0.0.1; use as a context manager (or ``start()``/``stop()``).

    Args:
        responder: ``callable(request_json) -> str`` giving the reply text. For
            ``/v1/completions`` with a list ``prompt`` it is called once per
            prompt, with ``prompt`` set to that single prompt. Default: ``text``.
        text: the fixed reply of the default responder.
        delay_s: seconds to wait before answering each POST request.
        jitter_s: up to this many more seconds, drawn uniformly per POST request.
        faults: ``{kind: probability}``; kinds in :data:`FAULT_KINDS`, sum <= 1.
        fault_sequence: faults (or ``None`` for a normal answer) forced on the
            first POST requests, in arrival order, before ``faults`` applies.
        seed: seed of the fault RNG.
        retry_after: value of the ``Retry-After`` header of a 429 (seconds,
            may be fractional, e.g. ``"0.05"``).
        error_retry_after: value of the ``Retry-After`` header of a 500 or 503 (None: no header).
        timeout_s: how long a ``"timeout"`` fault waits before answering.
        fail_status: if set, every POST request gets this status (e.g. 401).
        noscore_text: reply text of a ``"noscore"`` fault.
        outofrange_text: reply text of an ``"outofrange"`` fault.
        badjson_body: the body (bytes) of a ``"badjson"`` fault.
        logprob_fn: ``callable(previous_tokens, token) -> float``, the log-prob of each
            token in a completions reply with ``logprobs``; default :func:`scripted_logprob`.
        logprobs_fault: ``None``, ``"no_echo"`` or ``"no_generated"`` (module docstring).
        honour_stop: cut each reply at the first of the request's ``stop`` strings (module docstring).
        model: the model id of the replies (when the request names none) and, unless ``models`` is
            given, the one model ``GET /v1/models`` lists.
        models: the model ids ``GET /v1/models`` lists; ``()`` answers that route with 404, as a
            server without a model list does.
        trickle_bytes / trickle_interval_s / trickle_max_s: the ``"trickle"`` fault's pace and safety stop.
        huge_bytes: the size of a ``"huge"`` reply.
        models_fault: ``None``, ``"trickle"`` or ``"huge"`` for ``GET /v1/models``.
        max_model_len: list the models as vLLM does, with this context length, and refuse a longer
            prompt with vLLM's 400 (module docstring).
        tokenize: serve vLLM's ``POST /tokenize`` (module docstring).
        batch: keyword arguments of :class:`BatchAPI` (how batches end).

    Attributes:
        base_url: ``"http://127.0.0.1:PORT/v1"`` (for ``openai.OpenAI(base_url=...)``).
        chat_url / completions_url: full endpoint URLs (for the harness's
            ``local-*`` models, whose ``base_url`` is the endpoint itself).
        requests: every request received, in arrival order, as dicts with
            ``method``, ``path``, ``headers`` (lower-case names), ``body``
            (parsed JSON, or the raw text if not JSON) and ``fault``.
        call_count: number of requests received.
        max_in_flight: the most POST requests handled at the same time so far.
    """

    def __init__(
        self,
        responder: Callable[[dict], str] | None = None,
        *,
        text: str = "stub reply",
        delay_s: float = 0.0,
        jitter_s: float = 0.0,
        faults: dict[str, float] | None = None,
        fault_sequence: list[str | None] | None = None,
        seed: int = 0,
        retry_after: str | float = "0.05",
        error_retry_after: str | float | None = None,
        timeout_s: float = 5.0,
        fail_status: int | None = None,
        noscore_text: str = "I am not able to grade this answer.",
        outofrange_text: str = "Feedback. \\boxed{11}",
        badjson_body: bytes = TRUNCATED_COMPLETION,
        logprob_fn: Callable[[Sequence[int | str], int | str], float] = scripted_logprob,
        logprobs_fault: str | None = None,
        honour_stop: bool = False,
        model: str = "stub",
        models: Sequence[str] | None = None,
        trickle_bytes: int = 1024,
        trickle_interval_s: float = 0.01,
        trickle_max_s: float = 60.0,
        huge_bytes: int = 100 * 2**20,
        models_fault: str | None = None,
        max_model_len: int | None = None,
        tokenize: bool = False,
        batch: dict | None = None,
    ) -> None:
        faults = dict(faults or {})
        unknown = (set(faults) | {f for f in fault_sequence or [] if f is not None}) - set(FAULT_KINDS)
        if unknown:
            raise ValueError(f"unknown fault kinds {sorted(unknown)}; known: {FAULT_KINDS}")
        if sum(faults.values()) > 1:
            raise ValueError(f"fault probabilities sum to more than 1: {faults}")
        if logprobs_fault not in (None, *LOGPROBS_FAULTS):
            raise ValueError(f"unknown logprobs_fault {logprobs_fault!r}; known: {LOGPROBS_FAULTS}")
        self.responder = responder or (lambda _request: text)
        self.delay_s = delay_s
        self.jitter_s = jitter_s
        self.faults = faults
        self.fault_sequence = list(fault_sequence or [])
        self.retry_after = str(retry_after)
        self.error_retry_after = None if error_retry_after is None else str(error_retry_after)
        self.timeout_s = timeout_s
        self.fail_status = fail_status
        self.noscore_text = noscore_text
        self.outofrange_text = outofrange_text
        self.badjson_body = bytes(badjson_body)
        self.logprob_fn = logprob_fn
        self.logprobs_fault = logprobs_fault
        self.honour_stop = honour_stop
        self.model = model
        self.models = (model,) if models is None else tuple(models)
        if models_fault not in (None, *BODY_FAULTS):
            raise ValueError(f"unknown models_fault {models_fault!r}; known: {BODY_FAULTS}")
        self.trickle_bytes = trickle_bytes
        self.trickle_interval_s = trickle_interval_s
        self.trickle_max_s = trickle_max_s
        self.huge_bytes = huge_bytes
        self.models_fault = models_fault
        self.max_model_len = max_model_len
        self.tokenize = tokenize
        self.requests: list[dict] = []
        self.max_in_flight = 0
        self._in_flight = 0
        self._rng = random.Random(seed)
        self._jitter_rng = random.Random(seed)
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._connections: set[socket.socket] = set()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._posts = 0
        self.batch_api = BatchAPI(self, **(batch or {}))

    # -- lifecycle ---------------------------------------------------------

    def start(self) -> StubOpenAIServer:
        """Bind 127.0.0.1 on an ephemeral port and serve in a daemon thread."""
        self._server = _Server(("127.0.0.1", 0), self._handler_class())
        # A short poll interval makes stop() quick (shutdown() waits for one poll).
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, name="stub-openai", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving, wake sleeping handlers, close open connections."""
        if self._server is None:
            return
        self._stopping.set()
        self._server.shutdown()
        self._server.server_close()
        with self._lock:
            for conn in list(self._connections):
                try:
                    conn.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
        self._thread.join(timeout=5)
        self._server = None

    def __enter__(self) -> StubOpenAIServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def port(self) -> int:
        return self._server.server_address[1]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def chat_url(self) -> str:
        return f"{self.base_url}/chat/completions"

    @property
    def completions_url(self) -> str:
        return f"{self.base_url}/completions"

    @property
    def call_count(self) -> int:
        with self._lock:
            return len(self.requests)

    def summary(self) -> dict:
        """``calls``, ``max_in_flight``, ``faults`` (count per kind), ``paid_twice`` (:meth:`paid_twice`), and
        ``answered_by``: the seconds from the first POST until 50%, 99% and 100% of the completions were sent
        (what shows whether a run's end waited on a few late requests)."""
        with self._lock:
            faults = Counter(e["fault"] for e in self.requests if e["fault"])
            posts = [e for e in self.requests if e["method"] == "POST"]
            sent = sorted(e["answered_at"] for e in posts if e.get("answered"))
        answered_by = {f"{share}%": round(sent[math.ceil(share / 100 * len(sent)) - 1] - posts[0]["received"], 3)
                       for share in (50, 99, 100)} if sent else {}
        return {"calls": self.call_count, "max_in_flight": self.max_in_flight, "faults": dict(faults),
                "paid_twice": self.paid_twice(), "answered_by": answered_by}

    def paid_twice(self) -> int:
        """How many distinct request bodies were answered with a completion more than once (a client that
        pays for the same request twice); faults (429, 500, drops, ...) answer nothing and do not count."""
        with self._lock:
            answered = Counter(json.dumps(e["body"], sort_keys=True) for e in self.requests if e.get("answered"))
        return sum(1 for n in answered.values() if n > 1)

    # -- request handling --------------------------------------------------

    def _record(self, method: str, path: str, headers, body, faulty: bool = True) -> dict:
        """Store the request and pick its fault and delay (under the lock, so the RNG sequences are reproducible);
        ``faulty=False``: no fault (a ``/tokenize`` request, which takes no part in the fault sequences)."""
        entry = {"method": method, "path": path, "headers": {k.lower(): v for k, v in headers.items()}, "body": body,
                 "fault": None, "delay": 0.0, "received": _clock()}
        with self._lock:
            if method == "POST":
                entry["delay"] = self.delay_s + (self._jitter_rng.uniform(0, self.jitter_s) if self.jitter_s else 0.0)
            if method == "POST" and faulty:
                if self._posts < len(self.fault_sequence):
                    entry["fault"] = self.fault_sequence[self._posts]
                elif self.faults:
                    draw, edge = self._rng.random(), 0.0
                    for kind, prob in self.faults.items():
                        edge += prob
                        if draw < edge:
                            entry["fault"] = kind
                            break
                if entry["fault"] == "garbage":
                    entry["fault"] = self._rng.choice(["nonjson", "noscore"])
                self._posts += 1
            self.requests.append(entry)
        return entry

    def _logprobs(self, prompt: str | list[int], generated: str, body: dict) -> tuple[str, dict | None]:
        """The choice text and ``logprobs`` object of one prompt (module docstring: tokens, values, faults)."""
        top_k = body.get("logprobs")
        echo = bool(body.get("echo")) and self.logprobs_fault != "no_echo"
        gen_values, gen_strings = _tokens(generated)
        max_tokens = body.get("max_tokens")
        if isinstance(max_tokens, int):
            gen_values, gen_strings = gen_values[:max_tokens], gen_strings[:max_tokens]
        if self.logprobs_fault == "no_generated":
            gen_values, gen_strings = [], []
        generated = "".join(gen_strings) if top_k is not None else generated
        values, strings, text = gen_values, gen_strings, generated
        if echo:
            prompt_values, prompt_strings = _tokens(prompt)
            values, strings = prompt_values + gen_values, prompt_strings + gen_strings
            text = "".join(prompt_strings) + generated
        if top_k is None:
            return text, None
        token_logprobs, top_logprobs, offsets, offset = [], [], [], 0
        for i, (value, string) in enumerate(zip(values, strings)):
            offsets.append(offset)
            offset += len(string)
            if echo and i == 0:  # nothing to condition the first prompt token on
                token_logprobs.append(None)
                top_logprobs.append(None)
                continue
            logprob = float(self.logprob_fn(values[:i], value))
            p = math.exp(logprob)
            ranked = [(string, logprob), ("<other>", math.log1p(-p) if p < 1 else -math.inf)]
            ranked.sort(key=lambda entry: -entry[1])
            token_logprobs.append(logprob)
            top_logprobs.append(dict(ranked[:max(1, int(top_k))]))
        return text, {"tokens": strings, "token_logprobs": token_logprobs, "top_logprobs": top_logprobs,
                      "text_offset": offsets}

    def _reply(self, body: dict, text_for: Callable[[dict], str]) -> str:
        """The reply text for ``body``, cut at its first stop string when ``honour_stop`` is set."""
        text = text_for(body)
        stops = body.get("stop") if self.honour_stop else None
        for stop in [stops] if isinstance(stops, str) else stops or []:
            if stop:
                text = text.split(stop, 1)[0]
        return text

    def _completion(self, path: str, body: dict, text_for: Callable[[dict], str]) -> dict:
        """An OpenAI-shaped response for ``body`` (chat or text completion)."""
        n = int(body.get("n") or 1)
        created = int(time.time())
        if path.endswith("/chat/completions"):
            texts = [self._reply(body, text_for) for _ in range(n)]
            choices = [
                {"index": i, "message": {"role": "assistant", "content": t}, "finish_reason": "stop", "logprobs": None}
                for i, t in enumerate(texts)
            ]
            kind, prompt_tokens = "chat.completion", _count_tokens(_prompt_text(body))
        else:
            prompts = _split_prompts(body.get("prompt", ""))
            choices, texts = [], []
            for prompt in prompts:
                for _ in range(n):
                    generated = self._reply({**body, "prompt": prompt}, text_for)
                    text, logprobs = self._logprobs(prompt, generated, body)
                    texts.append(text)
                    choices.append({"index": len(choices), "text": text, "finish_reason": "stop", "logprobs": logprobs})
            kind = "text_completion"
            prompt_tokens = sum(len(p) if isinstance(p, list) else _count_tokens(p) for p in prompts)
        completion_tokens = sum(_count_tokens(t) for t in texts)
        return {
            "id": f"stub-{created}-{self.call_count}",
            "object": kind,
            "created": created,
            "model": body.get("model", self.model),
            "choices": choices,
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }

    def _handler_class(self):
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as real servers do
            timeout = 30  # idle keep-alive connections end on their own

            def setup(self):
                super().setup()
                # Headers and body go out in separate writes; without this, Nagle's
                # algorithm plus delayed ACKs add ~40 ms to every response.
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                with stub._lock:
                    stub._connections.add(self.connection)

            def finish(self):
                with stub._lock:
                    stub._connections.discard(self.connection)
                try:
                    super().finish()
                except OSError:  # the client went away (timeout and drop faults)
                    pass

            def log_message(self, *args):  # keep test output clean
                pass

            def _send_json(self, status: int, payload, headers: dict | None = None, raw: bytes | None = None,
                           content_type: str | None = None):
                data = raw if raw is not None else json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", content_type or ("application/json" if raw is None else "text/plain"))
                    self.send_header("Content-Length", str(len(data)))
                    for key, value in (headers or {}).items():
                        self.send_header(key, value)
                    self._done()
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:
                    self.close_connection = True

            def _error(self, status: int, message: str, code: str, headers: dict | None = None):
                error = {"message": message, "type": code, "param": None, "code": code}
                self._send_json(status, {"error": error}, headers)

            def _send_body(self, entry: dict, pieces, length: int | None = None):
                """Status 200 with the body ``pieces`` (bytes, in order): chunked unless ``length`` is given."""
                entry["sent"], entry["cut"] = 0, False
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    if length is None:
                        self.send_header("Transfer-Encoding", "chunked")
                    else:
                        self.send_header("Content-Length", str(length))
                    self.end_headers()
                    for piece in pieces:
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece) if length is None else piece)
                        entry["sent"] += len(piece)
                    if length is None:
                        self.wfile.write(b"0\r\n\r\n")
                except OSError:
                    entry["cut"] = True
                    self.close_connection = True

            def _trickle(self):
                end = time.monotonic() + stub.trickle_max_s
                while time.monotonic() < end and not stub._stopping.wait(stub.trickle_interval_s):
                    yield b" " * stub.trickle_bytes

            def _huge(self, payload: dict) -> tuple[list, int]:
                """The pieces and length of ``payload`` with ``huge_bytes`` of spaces before its first text."""
                marker = "\x00PAD\x00"
                if payload.get("choices"):
                    payload["choices"][0]["message"]["content"] = marker + payload["choices"][0]["message"]["content"]
                else:
                    payload["pad"] = marker
                head, tail = (part.encode() for part in json.dumps(payload).split(json.dumps(marker)[1:-1], 1))
                pad = max(0, stub.huge_bytes - len(head) - len(tail))
                step = 2**16

                def pieces():
                    yield head
                    for start in range(0, pad, step):
                        yield b" " * min(step, pad - start)
                    yield tail
                return pieces(), len(head) + pad + len(tail)

            def _body_fault(self, entry: dict, fault: str, payload: dict):
                if fault == "trickle":
                    return self._send_body(entry, self._trickle())
                pieces, length = self._huge(payload)
                return self._send_body(entry, pieces, length)

            def do_GET(self):
                if self.path.startswith(("/v1/files", "/v1/batches")):
                    return self._send_json(*stub.batch_api.handle("GET", self.path, self.headers, b""))
                entry = stub._record("GET", self.path, self.headers, None)
                if self.path.rstrip("/") == "/tokenize" and stub.tokenize:
                    return self._error(405, "Method Not Allowed", "method_not_allowed")
                if self.path.rstrip("/") == "/v1/models" and stub.models:
                    listed = [{"id": m, "object": "model", "created": 0, "owned_by": "stub"} if stub.max_model_len is None
                              else vllm_model_entry(m, stub.max_model_len) for m in stub.models]
                    if stub.models_fault:
                        entry["fault"] = stub.models_fault
                        return self._body_fault(entry, stub.models_fault, {"object": "list", "data": listed})
                    self._send_json(200, {"object": "list", "data": listed})
                else:
                    self._error(404, f"no route GET {self.path}", "not_found")

            def _tokenize(self, body):
                if not isinstance(body, dict) or not isinstance(body.get("prompt", body.get("messages")), (str, list)):
                    return self._error(400, "give a prompt or messages", "BadRequestError")
                tokens = vllm_tokens(body)
                self._send_json(200, {"count": len(tokens), "max_model_len": stub.max_model_len or 4096,
                                      "tokens": tokens, "token_strs": None})

            def do_POST(self):
                with stub._lock:
                    stub._in_flight += 1
                    stub.max_in_flight = max(stub.max_in_flight, stub._in_flight)
                self._handling = True
                try:
                    self._post()
                finally:
                    self._done()

            def _done(self):
                """The request stops counting as in flight: before the first bytes of a whole reply go out (a
                client may send its next request as soon as it has the status line), or when the handler ends."""
                if getattr(self, "_handling", False):
                    self._handling = False
                    with stub._lock:
                        stub._in_flight -= 1

            def _post(self):
                data = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.path.startswith(("/v1/files", "/v1/batches")):
                    return self._send_json(*stub.batch_api.handle("POST", self.path, self.headers, data))
                raw = data.decode("utf-8", "replace")
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = None
                # the path of an origin-form target, or of the absolute URL a forward proxy is sent (the stub then
                # stands for the proxy and the judge behind it)
                path = urllib.parse.urlsplit(self.path).path.rstrip("/")
                tokenizing = path == "/tokenize" and stub.tokenize
                entry = stub._record("POST", self.path, self.headers, body if body is not None else raw,
                                     faulty=not tokenizing)
                if tokenizing:
                    if entry["delay"] and stub._stopping.wait(entry["delay"]):
                        return
                    return self._tokenize(body)
                if path not in ("/v1/chat/completions", "/v1/completions"):
                    return self._error(404, f"no route POST {self.path}", "not_found")
                if not isinstance(body, dict):
                    return self._error(400, "request body is not a JSON object", "invalid_request_error")
                if stub.max_model_len is not None and (refusal := vllm_too_long(body, stub.max_model_len)):
                    return self._send_json(400, refusal)
                if entry["delay"] and stub._stopping.wait(entry["delay"]):
                    return
                if stub.fail_status:
                    return self._error(stub.fail_status, f"stub configured to fail with {stub.fail_status}", "stub_error")
                fault = entry["fault"]
                if fault == "429":
                    return self._error(429, "rate limited (stub)", "rate_limit_exceeded", {"Retry-After": stub.retry_after})
                if fault in ("500", "503"):
                    wait = {} if stub.error_retry_after is None else {"Retry-After": stub.error_retry_after}
                    return self._error(int(fault), "internal error (stub)", "server_error", wait)
                if fault == "drop":
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                if fault == "nonjson":
                    return self._send_json(200, None, raw=b"<html>upstream proxy error: not JSON</html>")
                if fault == "badjson":
                    return self._send_json(200, None, raw=stub.badjson_body, content_type="application/json")
                if fault == "empty":
                    return self._send_json(200, None, raw=b"", content_type="application/json")
                if fault == "timeout" and stub._stopping.wait(stub.timeout_s):
                    return
                fixed = {"noscore": stub.noscore_text, "outofrange": stub.outofrange_text}.get(fault)
                text_for = stub.responder if fixed is None else (lambda _b: fixed)
                try:
                    payload = stub._completion(path, body, text_for)
                except Exception as exc:  # a broken responder shows up in the test as a 500 naming it
                    return self._error(500, f"stub responder raised {exc!r}", "stub_responder_error")
                entry["answered"] = True  # a completion is sent: what a paid API would charge for
                entry["answered_at"] = _clock()
                if fault in BODY_FAULTS:
                    return self._body_fault(entry, fault, payload)
                self._send_json(200, payload)

        return Handler


class BatchAPI:
    """The stub's Files and Batches API (``/v1/files``, ``/v1/batches``), as the ``openai`` client uses it.

    A batch is ``validating``, then ``in_progress`` with one more ``polls_to_finish``-th of its requests
    completed at each ``GET /v1/batches/ID``, then ends: ``completed`` (its output file holds a reply
    per request, made by the stub's responder with ``usage``; the requests ``fail(custom_id, body)`` is
    true for are in its error file instead), or ``expired`` when ``expire`` is set (the first half
    answered, the rest in the error file as ``batch_expired``). ``creations`` counts ``POST /v1/batches``;
    ``answered`` lists every custom_id answered, in order (a request paid twice shows up twice).
    """

    def __init__(self, stub: StubOpenAIServer, polls_to_finish: int = 2, fail=None, expire: bool = False) -> None:
        self.stub = stub
        self.polls_to_finish = polls_to_finish
        self.fail = fail or (lambda _custom_id, _body: False)
        self.expire = expire
        self.files: dict[str, bytes] = {}
        self.batches: dict[str, dict] = {}
        self.creations = 0
        self.answered: list[str] = []
        self.retrievals = 0
        self._lock = threading.Lock()

    def handle(self, method: str, path: str, headers, data: bytes) -> tuple[int, dict | None, dict | None, bytes | None]:
        """(status, JSON payload, headers, raw body) of one request."""
        with self.stub._lock:
            self.stub.requests.append({"method": method, "path": path, "headers": dict(headers), "body": None,
                                       "fault": None, "delay": 0.0})
        with self._lock:
            parts = path.split("?")[0].strip("/").split("/")[1:]
            if method == "POST" and parts == ["files"]:
                return self._upload(headers, data)
            if method == "GET" and len(parts) == 3 and parts[0] == "files" and parts[2] == "content":
                return 200, None, None, self.files[parts[1]]
            if method == "POST" and parts == ["batches"]:
                return self._create(json.loads(data))
            if method == "GET" and parts == ["batches"]:
                return 200, {"object": "list", "data": [self._public(b) for b in self.batches.values()],
                             "has_more": False}, None, None
            if method == "GET" and len(parts) == 2 and parts[0] == "batches" and parts[1] in self.batches:
                return 200, self._poll(self.batches[parts[1]]), None, None
        return 404, {"error": {"message": f"no route {method} {path}", "type": "not_found"}}, None, None

    def _upload(self, headers, data: bytes):
        from email.parser import BytesParser
        from email.policy import default

        message = BytesParser(policy=default).parsebytes(
            f"Content-Type: {headers.get('Content-Type')}\r\n\r\n".encode() + data)
        content = next(part.get_payload(decode=True) for part in message.iter_parts()
                       if part.get_param("name", header="content-disposition") == "file")
        file_id = f"file-{len(self.files) + 1}"
        self.files[file_id] = content
        return 200, {"id": file_id, "object": "file", "bytes": len(content), "created_at": 0, "filename": "input.jsonl",
                     "purpose": "batch", "status": "processed"}, None, None

    def _create(self, body: dict):
        self.creations += 1
        batch_id = f"batch-{len(self.batches) + 1}"
        lines = [json.loads(line) for line in self.files[body["input_file_id"]].decode("utf-8").splitlines() if line]
        self.batches[batch_id] = {"id": batch_id, "input_file_id": body["input_file_id"], "lines": lines, "polls": 0,
                                  "status": "validating", "output_file_id": None, "error_file_id": None}
        return 200, self._public(self.batches[batch_id]), None, None

    def _poll(self, batch: dict) -> dict:
        self.retrievals += 1
        if batch["status"] not in ("completed", "expired"):
            batch["polls"] += 1
            batch["status"] = "in_progress"
            if batch["polls"] >= self.polls_to_finish:
                self._finish(batch)
        return self._public(batch)

    def _finish(self, batch: dict) -> None:
        output, errors = [], []
        cut = len(batch["lines"]) // 2 if self.expire else len(batch["lines"])
        for index, line in enumerate(batch["lines"]):
            key, body = line["custom_id"], line["body"]
            if index >= cut:
                errors.append({"id": f"req-{key[:8]}", "custom_id": key, "response": None,
                               "error": {"code": "batch_expired", "message": "not done within the window"}})
            elif self.fail(key, body):
                errors.append({"id": f"req-{key[:8]}", "custom_id": key,
                               "response": {"status_code": 500, "body": {"error": {"message": "server error (stub)"}}},
                               "error": None})
            else:
                self.answered.append(key)
                output.append({"id": f"req-{key[:8]}", "custom_id": key, "error": None, "response": {
                    "status_code": 200, "request_id": key[:8],
                    "body": self.stub._completion("/v1/chat/completions", body, self.stub.responder)}})
        for name, records in (("output_file_id", output), ("error_file_id", errors)):
            if records:
                file_id = f"file-{len(self.files) + 1}"
                self.files[file_id] = "".join(json.dumps(r) + "\n" for r in records).encode("utf-8")
                batch[name] = file_id
        batch["status"] = "expired" if self.expire else "completed"
        batch["done"] = len(output)
        batch["failed"] = len(errors)

    @staticmethod
    def _public(batch: dict) -> dict:
        total = len(batch["lines"])
        ended = batch["status"] in ("completed", "expired")
        done = batch.get("done", 0) if ended else min(total, total * batch["polls"] // 4)
        return {"id": batch["id"], "object": "batch", "endpoint": "/v1/chat/completions", "errors": None,
                "input_file_id": batch["input_file_id"], "completion_window": "24h", "status": batch["status"],
                "output_file_id": batch["output_file_id"], "error_file_id": batch["error_file_id"], "created_at": 0,
                "request_counts": {"total": total, "completed": done, "failed": batch.get("failed", 0)}}


def main(argv: list[str] | None = None) -> None:
    """``python -m doubles.stub_openai [--delay S] [--jitter S] [--text T] [--faults KIND=P,...]``: serve until
    stdin closes.

    Prints the base URL on the first line of stdout, and when stdin closes :meth:`StubOpenAIServer.summary`
    as one JSON line. Benchmarks run the stub in its own process
    this way, so that its CPU time is not counted as the client's.
    """
    import argparse
    import sys

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--delay", type=float, default=0.0, help="seconds before each reply (delay_s)")
    parser.add_argument("--jitter", type=float, default=0.0, help="up to this many more seconds (jitter_s)")
    parser.add_argument("--text", default="stub reply", help="the reply text")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--faults", default="", metavar="KIND=P,...",
                        help="faults drawn per POST request, e.g. 500=0.04,429=0.03,drop=0.03 (faults)")
    parser.add_argument("--retry-after", default="0.05", help="the Retry-After header of a 429, in seconds")
    args = parser.parse_args(argv)
    faults = {kind: float(p) for kind, p in (part.split("=", 1) for part in args.faults.split(",") if part)}
    with StubOpenAIServer(text=args.text, delay_s=args.delay, jitter_s=args.jitter, seed=args.seed, faults=faults,
                          retry_after=args.retry_after) as srv:
        print(srv.base_url, flush=True)
        sys.stdin.read()  # until the parent closes the pipe
        print(json.dumps(srv.summary()), flush=True)


if __name__ == "__main__":
    main()
