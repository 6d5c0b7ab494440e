"""Does a prompt fit the model's context window? The one prompt-length module of the plugin.

Lost in the Middle, MAGNIFICo and ELITR-Bench (single- and multi-turn) all measure their prompts
here, and report per document ``prompts_skipped`` / ``prompts_truncated`` with the budget's
:meth:`LengthBudget.describe` in their results' metadata (why).

The harness builds the model before the tasks and never shows it to them, and its adapters
cut over-long prompts on the left with at most a warning (hf, vLLM, tokenized API
completions), which removes the first documents and bends the position curve. So the task
measures each final prompt (after any chat template) itself, with the model's tokenizer and
context length taken from the task metadata, which the harness fills with the run's
``--model_args`` plus ``--metadata``:

- context length: ``max_length`` (the hf, vLLM and API adapters' own argument of that name,
  so the limit checked is the limit they apply), else ``max_model_len`` (vLLM), else, when
  ``pretrained`` names a model (hf, vLLM), the length the hf adapter derives from its config
  (:func:`resolve_max_length`, default 2048; the config in the GGUF file ``gguf_file`` names, as the hf
  adapter reads it), else, for an API model whose ``base_url`` names a
  server, the ``max_model_len`` that server lists for ``model`` (vLLM's ``GET /v1/models``;
  :mod:`lm_eval_ext.served_model`). An adapter that tokenizes the prompts itself
  (``local-completions`` with a tokenizer and tokenized requests, the harness's default) cuts them
  at its own ``max_length``, 2048 when none is given: the lower of the two is then the limit. A
  ``max_length`` or ``max_model_len`` above the positions of ``pretrained``'s config is used as given, with a
  warning (not when the config scales its rotary positions);
- tokenizer: ``tokenizer``, else ``pretrained`` (with ``gguf_file``: the tokenizer in that GGUF file, as the hf
  adapter loads it), else ``model`` (a Hugging Face tokenizer, or a tiktoken encoding for OpenAI model names),
  when it loads here; else, for an API model with a
  ``base_url``, the server's ``POST /tokenize`` (vLLM), which counts a prompt as its completions
  endpoint does and a chat's messages through its own chat template. A ``tokenizer`` the user
  named must load. The server counts one prompt a request, several requests at a time; the log
  says so.

A prompt fits when its tokens plus the request's ``max_gen_toks`` (256 when unset, the
adapters' default) are at most the context length: the hf and vLLM adapters keep
``max_length - max_gen_toks`` prompt tokens. Tokens are counted with the tokenizer's special
tokens (a BOS) unless the prompt already starts with the BOS text, so a prompt is never
judged to fit when an adapter that adds a BOS would cut it.

Chat API models (``local-chat-completions``, ``openai-chat-completions``) get the messages, not a
string; they are measured as the tokenizer's chat template renders them (with the generation
prompt), or as their contents joined by newlines when it has none (tiktoken); the server's
``/tokenize`` is sent the messages themselves.

With no context length (scripted models; API models without ``max_length`` whose server lists
no ``max_model_len`` or cannot be reached), or with only the server's length and no way to count
tokens, prompts are not checked: :func:`resolve_budget` returns None and the task says so in the
log, with :func:`not_checked_reason`. A context length the run named with no tokenizer that loads
here or on the server is an error (:class:`LengthCheckError`).

Speed: tokenizing every whole prompt of a long-context sweep is slow (8,820 Lost in the Middle
prompts of ~13k characters), and its prompts are the same few thousand documents in different
orders. A task may therefore give, per prompt, the *pieces* it was assembled from: each distinct
piece is tokenized once, a prompt's size is estimated as the sum of its pieces; a prompt whose
estimate lies within a few tokens per join of the limit (:data:`JOIN_SLACK`, one where a word starts)
is corrected by what each of its joins changes, counted on a few words either side of the join
(:data:`JOIN_WINDOW`), and only one still within :data:`CORRECTED_SLACK` tokens of the limit is
tokenized whole. Decisions are the same as tokenizing every prompt (tests/test_prompt_length.py checks it
prompt by prompt); bench/litm_prompt_throughput.py measures the speed. A server counts whole prompts only.

Over-long prompts that a task may shorten (ELITR-Bench's transcripts) are cut with
:func:`shorten_middle`: the fewest whole lines from the middle, so the instructions, the start
and the end stay.
"""
from __future__ import annotations

import json
import logging
import urllib.parse
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

from . import served_model
from .errors import UserError, metadata_arg

log = logging.getLogger(__name__)

# The harness adapters' defaults, which a run that sets none gets (tests/test_harness_versions.py checks them on
# each supported version):
DEFAULT_MAX_GEN_TOKS = 256  # what the hf and API adapters generate when a request sets no max_gen_toks
DEFAULT_MAX_LENGTH = 2048  # the hf adapter's fallback when a model config names no length
API_DEFAULT_MAX_LENGTH = 2048  # the harness's API adapters' max_length when none is given (TemplateAPI)
TOKENIZER_KEYS = ("tokenizer", "pretrained", "model")
# an API model's server, and whether its adapter tokenizes the prompts itself (served_model)
SERVER_KEYS = ("base_url", "tokenizer_backend", "tokenized_requests")
SETTING_KEYS = ("max_length", "max_model_len", *TOKENIZER_KEYS, "gguf_file", "trust_remote_code", *SERVER_KEYS)
NO_LENGTH = "no context length in --model_args/--metadata"
SERVER_TOKENIZER = "the server's /tokenize"
COUNT_CHUNK_CHARS = 1_000_000  # text tokenized per batch (the Rust encodings of a batch are held at once)
# Tokens by which joining two pieces may change the sum of their separate counts (a merge across the
# join, a word-start marker): prompts estimated within this many tokens per join of the limit are
# tokenized whole. A join next to white space (where a word starts) moves the count by at most one.
JOIN_SLACK, WORD_JOIN_SLACK = 4, 1
# A prompt still undecided is measured again, join by join: what joining changes is counted on the
# JOIN_WINDOW characters either side of each join (a tokenizer's merges stay within words), and only a
# prompt whose corrected size lies within CORRECTED_SLACK tokens of the limit is tokenized whole.
JOIN_WINDOW, CORRECTED_SLACK = 32, 2


class LengthCheckError(UserError):
    """The prompt-length check was asked for but cannot be set up."""


class PromptTooLongError(UserError):
    """A prompt does not fit the model's context and cannot be made to fit."""


class NothingToScoreError(UserError):
    """Every prompt of a task is too long for the model: none of its documents could be scored."""


def require_prompts_left(task: str, skipped: int, total: int, budget: LengthBudget, remedies: str) -> None:
    """Stop before anything is generated when all ``total`` prompts of ``task`` are skipped as too long.

    A run in which nothing is scored would end in a table of zeros and NaNs and exit 0; this is one
    paragraph instead (:func:`nothing_fits`).
    """
    if total and skipped == total:
        raise NothingToScoreError(nothing_fits(task, total, budget, remedies))


def nothing_fits(task: str, total: int, budget: LengthBudget, remedies: str) -> str:
    """The paragraph for a task none of whose ``total`` prompts fits: the task, the count, the model's context and
    ``remedies`` (the options that help)."""
    return (f"Task {task}: none of its {total} prompts fits the model's {budget.describe()} (with the tokens "
            f"reserved for the answer), so none of its documents could be scored; nothing was generated. {remedies}")


def max_gen_toks(gen_kwargs: dict | None) -> int:
    """Tokens a request reserves for its answer (the adapters' default when it sets none)."""
    return int((gen_kwargs or {}).get("max_gen_toks") or DEFAULT_MAX_GEN_TOKS)


@dataclass(frozen=True)
class Verdict:
    """One prompt's size against the window: prompt tokens + tokens to generate <= context length.

    ``exact`` is False when ``prompt_tokens`` is the sum of the prompt's pieces (the decision is
    certain either way; the count may be off by a few tokens).
    """

    prompt_tokens: int
    max_gen_toks: int
    max_length: int
    exact: bool = True

    @property
    def fits(self) -> bool:
        """True when the adapters would keep the whole prompt."""
        return self.prompt_tokens + self.max_gen_toks <= self.max_length


@dataclass(frozen=True)
class LengthBudget:
    """A context length and a token counter for one model.

    ``count_tokens`` counts whole prompts (or chats) as the adapters would; ``count_pieces``, when
    given, counts text without special tokens and ``special_tokens`` is what the tokenizer adds to
    a prompt (a BOS): together they allow the estimate from pieces. ``settings`` are the metadata
    that rebuild this budget (:func:`budget_from_settings`), e.g. in the multi-turn runner.
    ``counted_by_server``: the tokens are counted by the API model's server (``tokenizer_name`` says which).
    """

    max_length: int
    length_source: str
    tokenizer_name: str
    count_tokens: Callable[[list[str | list[dict]]], list[int]]
    count_pieces: Callable[[list[str]], list[int]] | None = None
    special_tokens: int = 0
    bos_text: str | None = None
    settings: tuple[tuple[str, object], ...] = field(default=())
    counted_by_server: bool = False

    def verdicts(self, requests: Sequence[tuple[object, dict | None]],
                 pieces: Sequence[Sequence[str] | None] | None = None) -> list[Verdict]:
        """Measure each (context, generation kwargs) against the window, reserving its ``max_gen_toks``.

        A context is the prompt string, or for chat API models the harness's ``JsonChatStr`` (the
        messages as JSON), which is measured as the tokenizer's chat template renders it.
        ``pieces[i]``, when given, are strings whose concatenation occurs in prompt i (the prompt
        before a chat template wrapped it): the fast path of the module docstring.
        """
        verdicts: list[Verdict | None] = [None] * len(requests)
        if pieces is not None and self.count_pieces is not None:
            self._estimate(requests, pieces, verdicts)
        todo = [i for i, verdict in enumerate(verdicts) if verdict is None]
        counts = self.count_tokens([_prompt_or_messages(requests[i][0]) for i in todo])
        for i, n in zip(todo, counts, strict=True):
            verdicts[i] = Verdict(n, max_gen_toks(requests[i][1]), self.max_length)
        return verdicts

    def _estimate(self, requests, pieces, verdicts: list) -> None:
        """Decide, from the sums of their pieces, the prompts that are clearly in or clearly out."""
        layouts = {}
        for i, ((context, _), parts) in enumerate(zip(requests, pieces, strict=True)):
            if parts and isinstance(context, str) and (start := context.find(body := "".join(parts))) >= 0:
                layouts[i] = [context[:start], *parts, context[start + len(body):]]
        undecided: dict[int, tuple[int, int, list[tuple[str, str]]]] = {}
        distinct = list(dict.fromkeys(piece for layout in layouts.values() for piece in layout if piece))
        sizes = dict(zip(distinct, self.count_pieces(distinct), strict=True))
        for i, layout in layouts.items():
            used = [piece for piece in layout if piece]
            context, gen_kwargs = requests[i]
            special = 0 if self.bos_text and context.startswith(self.bos_text) else self.special_tokens
            estimate = special + sum(sizes[piece] for piece in used)
            slack = sum(WORD_JOIN_SLACK if left[-1].isspace() or right[0].isspace() else JOIN_SLACK
                        for left, right in zip(used, used[1:]))
            room = self.max_length - max_gen_toks(gen_kwargs)
            if estimate + slack <= room or estimate - slack > room:
                verdicts[i] = Verdict(estimate, max_gen_toks(gen_kwargs), self.max_length, exact=False)
            else:
                undecided[i] = (estimate, room, list(zip(used, used[1:])))
        self._correct_at_joins(requests, undecided, verdicts)

    def _correct_at_joins(self, requests, undecided: dict, verdicts: list) -> None:
        """Decide the prompts near the limit from their estimate plus what each join changes, measured on
        the join's window; those still within CORRECTED_SLACK of the limit are left for whole tokenization."""
        windows = {(left[-JOIN_WINDOW:], right[:JOIN_WINDOW])
                   for _, _, joins in undecided.values() for left, right in joins}
        texts = list(dict.fromkeys(t for pair in windows for t in (pair[0] + pair[1], *pair)))
        sizes = dict(zip(texts, self.count_pieces(texts), strict=True)) if texts else {}
        for i, (estimate, room, joins) in undecided.items():
            corrected = estimate + sum(sizes[a + b] - sizes[a] - sizes[b]
                                       for a, b in ((left[-JOIN_WINDOW:], right[:JOIN_WINDOW]) for left, right in joins))
            if abs(corrected - room) > CORRECTED_SLACK:
                verdicts[i] = Verdict(corrected, max_gen_toks(requests[i][1]), self.max_length, exact=False)

    def describe(self) -> str:
        """One line for logs and reports."""
        counted = "by" if self.counted_by_server else "with"
        return f"context length {self.max_length} ({self.length_source}), tokens counted {counted} {self.tokenizer_name}"


def shorten_middle(text: str, fits: Callable[[str], bool], what: str = "the prompt") -> tuple[str, int]:
    """``text`` without the fewest whole lines from its middle such that ``fits(result)``; (result, lines dropped).

    Lines are dropped around the middle (the first half of the kept lines, then the second
    half), found by bisection, so the prompt is measured about log2(lines) times. Raises
    PromptTooLongError when even dropping every line does not make it fit.
    """
    if fits(text):
        return text, 0
    lines = text.splitlines(keepends=True)

    def without(n: int) -> str:
        keep = len(lines) - n
        head = (keep + 1) // 2
        return "".join(lines[:head] + lines[len(lines) - (keep - head):]) if keep else ""

    if not fits(without(len(lines))):
        raise PromptTooLongError(f"{what} does not fit the model's context even with the text to shorten left out.")
    low, high = 1, len(lines)  # fits(without(high)) holds; find the smallest such n
    while low < high:
        mid = (low + high) // 2
        if fits(without(mid)):
            high = mid
        else:
            low = mid + 1
    return without(low), low


def lines_lost(dropped: list[int]) -> str:
    """What :func:`shorten_middle` took from several texts, for the log: "their transcripts lost 3 to 696 lines
    from the middle" (one number when all lost as many)."""
    fewest, most = min(dropped), max(dropped)
    return f"their transcripts lost {most if fewest == most else f'{fewest} to {most}'} lines from the middle"


def _prompt_or_messages(context) -> str | list[dict]:
    # The harness hands chat API models a JsonChatStr (a NamedTuple whose `prompt` is the messages as JSON).
    if isinstance(context, str):
        return context
    if isinstance(context, list):  # messages (the multi-turn runner measures a chat before rendering it)
        return context
    return json.loads(context.prompt)


def _chat_text(messages: list[dict], tokenizer=None) -> str:
    """A chat as the model's template renders it (with the generation prompt); else its contents joined."""
    if tokenizer is not None and getattr(tokenizer, "chat_template", None):
        return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    return "\n".join(str(m.get("content", "")) for m in messages)


def _positive_int(value, key: str) -> int:
    number = value if isinstance(value, int) and not isinstance(value, bool) else None
    if isinstance(value, str) and value.strip().isdigit():
        number = int(value)
    if number is None or number <= 0:
        raise LengthCheckError(f"Prompt-length check: {key}={value!r} is not a positive number of tokens; "
                               f"give the model's context length as an integer (e.g. {key}=4096).")
    return int(number)


@lru_cache(maxsize=8)
def _hf_tokenizer(name: str, trust_remote_code: bool, gguf_file: str | None = None):
    try:
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(name, trust_remote_code=trust_remote_code, **_gguf(gguf_file))
    except Exception as err:  # noqa: BLE001 -- any loading failure means "not a usable HF tokenizer"
        log.debug("no Hugging Face tokenizer %r: %s", name, err)
        return None


@dataclass(frozen=True)
class _Counters:
    count_tokens: Callable
    count_pieces: Callable | None = None
    special_tokens: int = 0
    bos_text: str | None = None


def _hf_counters(tokenizer) -> _Counters:
    bos = getattr(tokenizer, "bos_token", None)

    backend = getattr(tokenizer, "backend_tokenizer", None)
    # the Rust tokenizer's batch encoding without offsets, when there is one; it counts what the slow path does
    fast = getattr(backend, "encode_batch_fast", None)

    def encode(texts: list[str], with_special: bool) -> list[int]:
        counts: list[int] = []
        # in chunks: the token ids of thousands of long prompts at once would take gigabytes
        for chunk in _chunks(texts, COUNT_CHUNK_CHARS):
            if fast is not None:
                counts.extend(len(encoding.ids) for encoding in fast(chunk, add_special_tokens=with_special))
            else:  # verbose=False: a prompt longer than the tokenizer's nominal maximum is what we measure
                counts.extend(map(len, tokenizer(chunk, add_special_tokens=with_special, verbose=False,
                                                 return_attention_mask=False, return_token_type_ids=False)["input_ids"]))
        return counts

    def count_tokens(contexts: list[str | list[dict]]) -> list[int]:
        prompts = [c if isinstance(c, str) else _chat_text(c, tokenizer) for c in contexts]
        counts: list[int] = [0] * len(prompts)
        for with_special in (True, False):
            # a prompt that already starts with the BOS text gets no second one
            chosen = [i for i, p in enumerate(prompts) if with_special != bool(bos and p.startswith(bos))]
            for i, n in zip(chosen, encode([prompts[i] for i in chosen], with_special)):
                counts[i] = n
        return counts

    special = len(tokenizer("", add_special_tokens=True)["input_ids"])
    return _Counters(count_tokens, lambda pieces: encode(list(pieces), False), special, bos)


def _chunks(texts: list[str], chars: int):
    """Consecutive runs of ``texts`` of about ``chars`` characters each (at least one text per run)."""
    start, size = 0, 0
    for end, text in enumerate(texts):
        if size and size + len(text) > chars:
            yield texts[start:end]
            start, size = end, 0
        size += len(text)
    if start < len(texts):
        yield texts[start:]


# A tokenizer's model_max_length when it sets none (transformers' marker, the harness's TOKENIZER_INFINITY).
TOKENIZER_INFINITY = 1000000000000000019884624838656


def resolve_max_length(config, tokenizer, default: int = DEFAULT_MAX_LENGTH) -> int:
    """The context length the hf adapter gives a model: its (text) config's n_positions, max_position_embeddings
    or n_ctx, else the tokenizer's model_max_length when set, else ``default`` (the order of lm-eval 0.4.13's
    ``lm_eval.models.utils.resolve_max_length``; 0.4.12 and 0.5 have no such function, their HFLM the same order)."""
    if (positions := _config_positions(config)) is not None:
        return positions
    length = getattr(tokenizer, "model_max_length", None)
    return int(length) if length is not None and length != TOKENIZER_INFINITY else default


def _config_positions(config) -> int | None:
    """The positions a model (text) config gives: n_positions, max_position_embeddings or n_ctx (None if none)."""
    config = getattr(config, "text_config", None) or config
    return next((int(value) for attribute in ("n_positions", "max_position_embeddings", "n_ctx")
                 if (value := getattr(config, attribute, None)) is not None), None)


def _warn_past_positions(key: str, max_length: int, metadata: dict) -> None:
    """Warn when the run's context length ``key`` is above the positions of the config of ``pretrained``: prompts
    that long count as fitting, and the model gets positions it was not built for (an error with learned position
    embeddings, worse answers with rotary ones), unless the config scales its rotary positions."""
    pretrained = metadata.get("pretrained")
    if not isinstance(pretrained, str) or not pretrained:
        return
    try:
        config = _model_config(pretrained, metadata)
    except Exception:  # noqa: BLE001 -- only a warning: the length the run named is used either way
        return
    positions = _config_positions(config)
    config = getattr(config, "text_config", None) or config
    rope = getattr(config, "rope_parameters", None) or getattr(config, "rope_scaling", None) or {}
    scaled = isinstance(rope, dict) and rope.get("rope_type", rope.get("type", "default")) != "default"
    if positions is not None and max_length > positions and not scaled:
        log.warning("%s=%d is above the %d positions of the model config of %s: prompts of up to %d tokens count as "
                    "fitting and are sent whole, past the positions the model was built for. Give %s=%d or less, "
                    "unless the model is meant to run longer.", key, max_length, positions, pretrained, max_length,
                    key, positions)


def _gguf(gguf_file: str | None) -> dict:
    """The keyword that makes transformers read a config or tokenizer from a GGUF file (none without one)."""
    return {"gguf_file": gguf_file} if gguf_file else {}


def _model_config(pretrained: str, metadata: dict):
    """The model config of ``pretrained``, loaded as the run's ``trust_remote_code`` and ``gguf_file`` say."""
    from transformers import AutoConfig

    return AutoConfig.from_pretrained(pretrained, trust_remote_code=bool(metadata.get("trust_remote_code", False)),
                                      **_gguf(metadata.get("gguf_file")))


def _window_from_config(pretrained: str, metadata: dict) -> int:
    trust, gguf_file = bool(metadata.get("trust_remote_code", False)), metadata.get("gguf_file")
    try:
        config = _model_config(pretrained, metadata)
    except Exception as err:  # noqa: BLE001 -- reported as a user error with the fix
        raise LengthCheckError(
            f"Prompt-length check: cannot read the model config of {pretrained!r} to find its context length ({err}). "
            f"Give it explicitly with max_length=N in --model_args (or {metadata_arg(max_length='N')})."
        ) from None
    return resolve_max_length(config, _hf_tokenizer(pretrained, trust, gguf_file), default=DEFAULT_MAX_LENGTH)


def _local_counters(name: str, trust_remote_code: bool, gguf_file: str | None = None) -> _Counters | None:
    """Counters of the Hugging Face tokenizer ``name`` (the one in ``gguf_file`` when given), else of the tiktoken
    encoding of the OpenAI model ``name``; None when neither loads here."""
    tokenizer = _hf_tokenizer(name, trust_remote_code, gguf_file)
    if tokenizer is not None:
        return _hf_counters(tokenizer)
    try:
        import tiktoken

        encoding = tiktoken.encoding_for_model(name)
    except Exception:  # noqa: BLE001 -- unknown to tiktoken as well
        return None

    def count(texts: list) -> list[int]:
        return [len(tokens) for tokens in encoding.encode_batch(
            [t if isinstance(t, str) else _chat_text(t) for t in texts], disallowed_special=())]

    return _Counters(count, count)


def _server_counters(counter: served_model.TokenCounter) -> Callable[[list], list[int]]:
    """``counter``, with a server that stops answering in the middle of a run made a user error."""
    def count_tokens(contexts: list) -> list[int]:
        try:
            return counter(list(contexts))
        except served_model.ServerUnavailable as why:
            raise LengthCheckError(
                f"Prompt-length check: the server at {counter.urls.where} {why} while the prompts' tokens were "
                f"being counted. Check that the server is up, or give a tokenizer that loads here with "
                f"{metadata_arg(tokenizer='NAME')} (a local directory or a cached Hugging Face name).") from None
    return count_tokens


def resolve_budget(metadata: dict) -> LengthBudget | None:
    """The length budget described by the task metadata, or None when no context length is known
    (:func:`not_checked_reason` says why)."""
    found = _resolved(_settings(metadata))
    return found if isinstance(found, LengthBudget) else None


def not_checked_reason(metadata: dict) -> str:
    """Why :func:`resolve_budget` gives no budget for ``metadata`` (a clause for the log and the results'
    metadata); empty when it gives one."""
    found = _resolved(_settings(metadata))
    return "" if isinstance(found, LengthBudget) else found


def budget_from_settings(settings: tuple[tuple[str, object], ...]) -> LengthBudget | None:
    """The budget of :func:`resolve_budget` from the metadata entries that decide it (``LengthBudget.settings``)."""
    found = _resolved(settings)
    return found if isinstance(found, LengthBudget) else None


def _settings(metadata: dict) -> tuple[tuple[str, object], ...]:
    settings = {key: _hashable(metadata[key]) for key in SETTING_KEYS if metadata.get(key) is not None}
    if "tokenizer_backend" in metadata and metadata["tokenizer_backend"] is None:
        settings["tokenizer_backend"] = "none"  # the adapters read None as no tokenizer (and untokenized requests)
    return tuple(settings.items())


def _hashable(value):
    return value if isinstance(value, (str, int, float, bool)) else str(value)


def _served(metadata: dict) -> tuple[str, str] | None:
    """(base_url, model) of an API model's server, when the model arguments name both."""
    base_url, model = metadata.get("base_url"), metadata.get("model")
    if isinstance(base_url, str) and base_url and isinstance(model, str) and model:
        return base_url, model
    return None


def _adapter_tokenizes(base_url: str, metadata: dict) -> bool:
    """True when the API adapter tokenizes the prompts itself and cuts them at its own ``max_length``: a
    completions endpoint (chat endpoints are sent messages), with a tokenizer backend and tokenized requests
    (the harness's defaults for ``local-completions``)."""
    path = urllib.parse.urlsplit(base_url).path.rstrip("/")
    if not path.endswith("/completions") or path.endswith("/chat/completions"):
        return False
    if str(metadata.get("tokenizer_backend", "")).lower() == "none":
        return False
    return str(metadata.get("tokenized_requests", True)).lower() != "false"


@lru_cache(maxsize=16)
def _resolved(settings: tuple[tuple[str, object], ...]) -> LengthBudget | str:
    """The budget the metadata entries ``settings`` describe, or why there is none (cached per process, so
    that a server is asked once)."""
    metadata = dict(settings)
    served = _served(metadata)
    where = served_model.endpoints(served[0]).where if served else ""
    asked = True  # the run named a context length (or a model whose config has one): the check must run
    for key in ("max_length", "max_model_len"):
        if metadata.get(key) is not None:
            max_length, source = _positive_int(metadata[key], key), f"{key}={metadata[key]}"
            _warn_past_positions(key, max_length, metadata)
            break
    else:
        pretrained = metadata.get("pretrained")
        if isinstance(pretrained, str) and pretrained:
            max_length, source = _window_from_config(pretrained, metadata), f"the model config of {pretrained}"
            if metadata.get("gguf_file"):
                source += f" in its GGUF file {metadata['gguf_file']}"
        elif served is None:
            return NO_LENGTH
        else:
            try:
                max_length, source = served_model.max_model_len(*served), "the server's max_model_len"
            except served_model.ServerUnavailable as why:
                return f"{NO_LENGTH}, and the server at {where} {why}"
            asked = False
            if _adapter_tokenizes(served[0], metadata) and max_length > API_DEFAULT_MAX_LENGTH:
                source = (f"the API adapter's default max_length, where it cuts the prompts it tokenizes; the "
                          f"server's max_model_len is {max_length}: give max_length={max_length} to use it")
                max_length = API_DEFAULT_MAX_LENGTH
    name = _tokenizer_name(metadata)
    if name is None:
        raise LengthCheckError(
            f"Prompt-length check: the context length is {max_length} ({source}) but no tokenizer is named, so prompt "
            f"lengths cannot be checked. Give one with {metadata_arg(tokenizer='NAME')}."
        )
    # the hf adapter reads the tokenizer from the GGUF file unless the run names a tokenizer of its own
    from_gguf = not metadata.get("tokenizer") and name == metadata.get("pretrained")
    gguf_file = metadata.get("gguf_file") if from_gguf else None
    counters = _local_counters(name, bool(metadata.get("trust_remote_code", False)), gguf_file)
    if counters is not None:
        return LengthBudget(max_length=max_length, length_source=source,
                            tokenizer_name=f"{name} (its GGUF file {gguf_file})" if gguf_file else name,
                            count_tokens=counters.count_tokens, count_pieces=counters.count_pieces,
                            special_tokens=counters.special_tokens, bos_text=counters.bos_text, settings=settings)
    server_refused = ""
    if served is not None and not metadata.get("tokenizer"):  # a tokenizer the user named must load
        counter = served_model.TokenCounter(*served)
        try:
            counter.probe()
        except served_model.ServerUnavailable as why:
            server_refused = f"the server at {where} {why}"
        else:
            return LengthBudget(max_length=max_length, length_source=source, tokenizer_name=SERVER_TOKENIZER,
                                count_tokens=_server_counters(counter), settings=settings, counted_by_server=True)
    if not asked and not metadata.get("tokenizer"):
        return (f"the context length is {max_length} ({source}), but no tokenizer for {name!r} loads here and "
                f"{server_refused}; give one with tokenizer=NAME to check them")
    raise LengthCheckError(
        f"Prompt-length check: cannot load a tokenizer for {name!r} (neither a Hugging Face tokenizer available "
        f"here nor an OpenAI model known to tiktoken{f', and {server_refused}' if server_refused else ''}), so "
        f"prompt lengths cannot be checked against the context length. Give one with "
        f"{metadata_arg(tokenizer='NAME')} (a local directory or a cached Hugging Face name), or drop max_length "
        "to run without the check."
    )


def _tokenizer_name(metadata: dict) -> str | None:
    for key in TOKENIZER_KEYS:
        value = metadata.get(key)
        if isinstance(value, str) and value:
            return value
    return None
