"""What an OpenAI-compatible server says about the model it serves: its context length and its token counts.

vLLM's server (``vllm serve``) lists each model it serves with its ``max_model_len`` (``GET /v1/models``)
and counts tokens as its completion endpoints do (``POST /tokenize``): a prompt with the tokenizer's
special tokens, a chat's messages through the server's own chat template with the generation prompt.
The prompt-length check (:mod:`lm_eval_ext.prompt_length`) asks for them when the run's model arguments
name a server (``base_url``) and leave out the context length or a tokenizer that loads here. Other
servers (OpenAI's, most proxies) offer neither: :class:`ServerUnavailable` says what was missing.

The harness's API adapters take ``base_url`` as the endpoint itself (``.../v1/chat/completions``,
``.../v1/completions``): the model list is beside it (``.../v1/models``), vLLM's ``/tokenize`` at the
server's root. Requests carry ``OPENAI_API_KEY`` as a bearer token when it is set, as the harness's
``local-completions`` and ``local-chat-completions`` requests do.
"""
from __future__ import annotations

import logging
import os
import threading
import urllib.parse
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import requests
from requests.adapters import HTTPAdapter
from tqdm.auto import tqdm
from urllib3.util.retry import Retry

log = logging.getLogger(__name__)

# (connect, read) seconds: a local server answers in milliseconds; a long prompt tokenizes in well under a second
MODELS_TIMEOUT = (10, 60)
TOKENIZE_TIMEOUT = (10, 120)
REACH_TIMEOUT = (10, 10)  # whether the server is there: vLLM answers GET /v1/models from its event loop, busy or not
WORKERS = 4  # /tokenize requests in flight at once: one prompt a request, few enough not to load the server
PROBE_PROMPT = "Hello world"


class ServerUnavailable(Exception):
    """The server cannot say what was asked (unreachable, no such route or model, an unexpected reply); the
    message says why, as a clause that follows "the server ..."."""


@dataclass(frozen=True)
class Endpoints:
    """The server's URLs derived from an adapter's ``base_url``; ``where`` names the server in messages
    (scheme, host, port and path prefix; never credentials)."""

    models: str
    tokenize: str
    where: str


def endpoints(base_url: str) -> Endpoints:
    """The model list and ``/tokenize`` of the server behind ``base_url`` (an endpoint or the API root)."""
    parts = urllib.parse.urlsplit(base_url)
    path = parts.path.rstrip("/")
    for endpoint in ("/chat/completions", "/completions"):
        if path.endswith(endpoint):
            path = path[: -len(endpoint)]
            break
    root = path[: -len("/v1")] if path.endswith("/v1") else path
    host = parts.hostname or ""
    where = f"{parts.scheme}://{host}{f':{parts.port}' if parts.port else ''}{root}"
    origin = f"{parts.scheme}://{parts.netloc}"
    return Endpoints(models=f"{origin}{path}/models", tokenize=f"{origin}{root}/tokenize", where=where)


def _session() -> requests.Session:
    session = requests.Session()
    # a dropped connection or a busy proxy (502-504) is tried twice more; a slow reply is not sent again
    retry = Retry(total=2, read=0, backoff_factor=0.5, status_forcelist=(502, 503, 504), allowed_methods=None,
                  raise_on_status=False)
    for scheme in ("http://", "https://"):
        session.mount(scheme, HTTPAdapter(max_retries=retry))
    key = os.environ.get("OPENAI_API_KEY")
    if key:
        session.headers["Authorization"] = f"Bearer {key}"
    return session


def _json(session: requests.Session, method: str, url: str, timeout, body: dict | None = None):
    """The JSON reply of one request; ServerUnavailable saying why when there is none."""
    request = f"{method} {urllib.parse.urlsplit(url).path}"
    try:
        response = session.request(method, url, json=body, timeout=timeout)
    except requests.RequestException as err:
        raise ServerUnavailable(f"cannot be reached ({request}: {type(err).__name__})") from None
    if response.status_code != 200:
        raise ServerUnavailable(f"answered {request} with HTTP {response.status_code}")
    try:
        return response.json()
    except ValueError:
        raise ServerUnavailable(f"answered {request} with a body that is not JSON") from None


def check_reachable(base_url: str) -> None:
    """ServerUnavailable when nothing answers at the server behind ``base_url`` within :data:`REACH_TIMEOUT`; any HTTP
    reply to ``GET /v1/models`` counts (not every server lists its models)."""
    url = endpoints(base_url).models
    try:
        with _session() as session:
            session.get(url, timeout=REACH_TIMEOUT)
    except requests.RequestException as err:
        raise ServerUnavailable(f"cannot be reached (GET {urllib.parse.urlsplit(url).path}: {type(err).__name__})") from None


def max_model_len(base_url: str, model: str) -> int:
    """The context length the server gives ``model``: the ``max_model_len`` of the entry of ``GET /v1/models``
    whose ``id`` is ``model``."""
    urls = endpoints(base_url)
    with _session() as session:
        reply = _json(session, "GET", urls.models, MODELS_TIMEOUT)
    path = urllib.parse.urlsplit(urls.models).path
    entries = reply.get("data") if isinstance(reply, dict) else None
    if not isinstance(entries, list):
        raise ServerUnavailable(f"answered GET {path} with no model list")
    entry = next((e for e in entries if isinstance(e, dict) and e.get("id") == model), None)
    if entry is None:
        listed = ", ".join(repr(e.get("id")) for e in entries if isinstance(e, dict)) or "none"
        raise ServerUnavailable(f"serves no model {model!r} (GET {path} lists {listed})")
    length = entry.get("max_model_len")
    if not isinstance(length, int) or isinstance(length, bool) or length <= 0:
        raise ServerUnavailable(f"lists no max_model_len for {model!r} (GET {path})")
    return length


class TokenCounter:
    """Counts tokens with the server's ``POST /tokenize``: one request a prompt, :data:`WORKERS` at a time.

    A prompt (text) is counted as the completions endpoint tokenizes it, a chat (a list of messages) as the
    chat endpoint renders it (the server's chat template, with the generation prompt).
    """

    def __init__(self, base_url: str, model: str) -> None:
        self.model = model
        self.urls = endpoints(base_url)
        self._local = threading.local()  # a session per thread: requests' sessions are not thread-safe

    def probe(self) -> None:
        """Count one short prompt: ServerUnavailable when the server does not tokenize."""
        self.count_one(PROBE_PROMPT)

    def count_one(self, context: str | list[dict]) -> int:
        """The tokens of one prompt or chat."""
        body = ({"model": self.model, "prompt": context} if isinstance(context, str) else
                {"model": self.model, "messages": context, "add_generation_prompt": True})
        session = getattr(self._local, "session", None)
        if session is None:
            session = self._local.session = _session()
        reply = _json(session, "POST", self.urls.tokenize, TOKENIZE_TIMEOUT, body)
        count = reply.get("count") if isinstance(reply, dict) else None
        if count is None and isinstance(reply, dict) and isinstance(reply.get("tokens"), list):
            count = len(reply["tokens"])
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            raise ServerUnavailable(f"answered POST {urllib.parse.urlsplit(self.urls.tokenize).path} with no token count")
        return count

    def __call__(self, contexts: list[str | list[dict]]) -> list[int]:
        """The tokens of each context, in order."""
        if len(contexts) <= 1:
            return [self.count_one(c) for c in contexts]
        what = f"the server's /tokenize at {self.urls.where}"
        log.info("Counting the tokens of %d prompts with %s (%d requests at a time)", len(contexts), what, WORKERS)
        with ThreadPoolExecutor(WORKERS, thread_name_prefix="tokenize") as pool:
            counts = pool.map(self.count_one, contexts)
            # the bar is the line a plain `lm_eval` run shows (it prints only the harness's own log records)
            return list(tqdm(counts, total=len(contexts), desc=f"Prompt tokens counted by {what}", unit="prompt"))
