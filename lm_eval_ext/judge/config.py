"""The judge's configuration: every option, its default, and where it can be set (one place).

Each option of :class:`JudgeConfig` can be given, from the strongest to the weakest:

1. explicitly (``lm-eval-ext judge validate --judge-model X`` or ``resolve_config(explicit=...)``),
2. as harness metadata (``--metadata '{"judge_model": "X"}'``; reaches tasks whose class is
   :class:`lm_eval_ext.judge.harness.JudgedTask`),
3. as an environment variable (``LM_EVAL_EXT_JUDGE_MODEL=X``),
4. in the task YAML (the judge filter's keyword arguments, e.g. ``language: cs``),
5. by the judge's own defaults (the paper's settings), then the defaults below.

The option ``judge`` itself is spelled ``--judge``, ``judge`` and ``LM_EVAL_EXT_JUDGE``;
``dry_run`` is ``--dry-run`` on the command line. docs/judge.md has the table.
The API key is not an option: only the *name* of the variable that holds it is. Errors advise the
way to set an option on the command the user ran (:func:`how_to_set`).
"""
from __future__ import annotations

import dataclasses
import difflib
import json
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ..errors import metadata_arg, truth_value
from .definitions import JUDGES
from .errors import JudgeConfigError

ENV_PREFIX = "LM_EVAL_EXT_JUDGE"
METADATA_PREFIX = "judge"
# The authors' judging scripts (eval/eval_gpt.py, eval/eval_prometheus.py) default to this
# seed; used when no run seed is known (score-only mode, judge validation).
DEFAULT_SEED = 2023

_NONE = {"", "none", "null"}


def _option(default, help: str, kind: type, optional: bool = False):
    return field(default=default, metadata={"help": help, "kind": kind, "optional": optional})


@dataclass(frozen=True)
class JudgeConfig:
    """Everything that decides what the judge is asked and how it is called (no secret in here)."""

    judge: str = _option("rubric10", "judge definition: rubric10 (GPT-4 rubric, \\boxed{N}, 1-10) or "
                         "prometheus5 (Prometheus rubric, [RESULT] N, 1-5, doubled)", str)
    language: str = _option("en", "language of the built-in template: en, or cs (Czech questions and "
                            "references; a score of 0 means the answer is not in Czech)", str)
    template: str | None = _option(None, "a template file of your own with the fields {question}, {response} "
                                   "and {reference}; replaces the judge's built-in template", str, optional=True)
    parser: str | None = _option(None, "score parser: boxed (\\boxed{N}) or result ([RESULT] N); default: "
                                 "the judge's", str, optional=True)
    score_range: str | None = _option(None, "allowed raw scores LOW-HIGH (e.g. 1-10); default: the judge's for "
                                      "the language", str, optional=True)
    score_scale: int | None = _option(None, "factor from the raw score to the reported one (prometheus5: 2, "
                                      "to sit on the 10-point scale); default: the judge's", int, optional=True)
    system_message: str | None = _option(None, "system message sent before the prompt; default: the judge's "
                                         "(rubric10: 'You are a helpful assistant.', as the authors' code sent; "
                                         "prometheus5: none); 'none' sends none", str)
    model: str | None = _option(None, "judge model name at the endpoint; default: the judge's (rubric10: "
                                "gpt-4-0613, prometheus5: prometheus-eval/prometheus-13b-v1.0)", str, optional=True)
    base_url: str = _option("https://api.openai.com/v1", "OpenAI-compatible API base URL (e.g. "
                            "http://localhost:8000/v1 for a local vLLM server)", str)
    api_key_env: str = _option("OPENAI_API_KEY", "NAME of the environment variable holding the API key "
                               "(the key itself is never an option)", str)
    temperature: float = _option(0.6, "sampling temperature (paper: 0.6)", float)
    top_p: float = _option(0.9, "nucleus sampling top-p (paper: 0.9)", float)
    max_tokens: int = _option(1024, "maximum tokens of a judge reply (paper: 1024)", int)
    seed: int | None = _option(None, f"sampling seed of the first ask (re-ask k uses seed+k); default: the "
                               f"run's seed (harness --seed), else {DEFAULT_SEED}", int, optional=True)
    reasks: int = _option(2, "how many times to ask again (with another seed) when a reply has no valid score", int)
    concurrency: int = _option(8, "judge calls in flight at once", int)
    timeout: float = _option(120.0, "deadline of one try of a judge request in seconds: connecting, sending and the "
                             "whole reply (a reply still arriving then is cut)", float)
    max_reply_bytes: int = _option(262144, "largest judge reply body, in bytes; a bigger one is cut there and "
                                   "asked again", int)
    stop_after_timeouts: int = _option(3, "stop the run when this many judge calls in a row (across all in flight) "
                                       "time out or cannot connect and nothing has come back from the judge for "
                                       "'timeout' seconds; 0 = never", int)
    retries: int = _option(6, "retries of a judge request: the openai client's (timeouts, connection errors, HTTP 408, "
                           "409, 429, 5xx; with its backoff, or the server's Retry-After), and replies that are not a "
                           "chat completion or are cut, asked again at once", int)
    cache: str | None = _option("default", "SQLite file caching every judge reply; 'default' = "
                                "$LM_EVAL_EXT_CACHE_DIR/judge/judge_cache.sqlite (else ~/.cache/lm_eval_ext/...), "
                                "'none' disables", str, optional=True)
    max_calls: int | None = _option(None, "spending cap: most judge calls (HTTP requests) one run may make; "
                                    "'none' = no cap", int, optional=True)
    price_input: float | None = _option(None, "price of the judge model's input (prompt) tokens, in dollars per "
                                        "million (e.g. 2.5); with price_output, results state dollars", float,
                                        optional=True)
    price_output: float | None = _option(None, "price of the judge model's output (reply) tokens, in dollars per "
                                         "million (e.g. 10)", float, optional=True)
    batch_discount: float = _option(0.5, "fraction of the price the batch API takes off (OpenAI: 0.5)", float)
    cost_limit: float | None = _option(None, "spending limit in dollars for the judge of one run (needs the "
                                       "prices): judging stops before a request could pass it; 'none' = no limit",
                                       float, optional=True)
    batch: bool = _option(False, "send the judge requests through the OpenAI Batch API (half the price, replies "
                          "within 24 h) instead of one call each", bool)
    batch_detach: bool = _option(False, "with batch: submit the batches, save their ids and stop; `lm-eval-ext "
                                 "resume DIR` collects them later", bool)
    batch_poll: float = _option(30.0, "seconds between two looks at a submitted batch", float)
    batch_max_requests: int = _option(50000, "most requests in one batch (the API's limit: 50,000)", int)
    batch_max_bytes: int = _option(200_000_000, "largest batch request file, in bytes (the API's limit: 200 MB)", int)
    dry_run: bool = _option(False, "only report how many judge calls the run needs (after the cache), call nothing",
                            bool)
    check: bool = _option(True, "before anything is generated, check the judge: key, endpoint, model, one tiny "
                          "request whose reply must parse (lm_eval_ext/judge/probe.py); false for a rerun whose "
                          "verdicts are all cached, or a judge whose replies may lack a score", bool)

    # -- derived values -------------------------------------------------------

    def cache_path(self) -> Path | None:
        """The cache file, or None when caching is off."""
        if self.cache is None:
            return None
        if self.cache == "default":
            from ..data.config import cache_dir

            return cache_dir() / "judge" / "judge_cache.sqlite"
        return Path(self.cache).expanduser()

    def base_url_host(self) -> str:
        """Host (and port) of the endpoint, for results; never credentials or query strings."""
        parts = urlsplit(self.base_url)
        host = parts.hostname or ""
        return f"{host}:{parts.port}" if parts.port else host

    def endpoint_id(self) -> str:
        """Host, port and path of the endpoint: part of the cache key (a different server, another cache entry)."""
        parts = urlsplit(self.base_url)
        return f"{self.base_url_host()}{parts.path.rstrip('/')}"


OPTIONS: tuple[dataclasses.Field, ...] = dataclasses.fields(JudgeConfig)
OPTION_NAMES = tuple(f.name for f in OPTIONS)
# Options that are no longer read, and what to do instead: given anywhere, they are an error that says so.
_BACKOFF = ("the openai client waits between retries itself (0.5 s doubling up to 8 s, or what the server's "
            "Retry-After says), and asks again at once after a reply that is not a chat completion")
REMOVED = {
    "retry_wait": f"{_BACKOFF}; remove it (the number of retries is 'retries')",
    "retry_max_wait": f"{_BACKOFF}; remove it (the number of retries is 'retries')",
    "retry_budget": f"{_BACKOFF}; remove it (the number of retries is 'retries')",
}


def env_name(option: str) -> str:
    """``model`` -> ``LM_EVAL_EXT_JUDGE_MODEL``; ``judge`` -> ``LM_EVAL_EXT_JUDGE``."""
    return ENV_PREFIX if option == "judge" else f"{ENV_PREFIX}_{option.upper()}"


def metadata_name(option: str) -> str:
    """``model`` -> ``judge_model`` (the ``--metadata`` key); ``judge`` -> ``judge``."""
    return METADATA_PREFIX if option == "judge" else f"{METADATA_PREFIX}_{option}"


def cli_flag(option: str) -> str:
    """``model`` -> ``--judge-model``; ``judge`` -> ``--judge``; ``dry_run`` -> ``--dry-run``."""
    if option == "judge":
        return "--judge"
    if option == "dry_run":
        return "--dry-run"
    return f"--judge-{option.replace('_', '-')}"


# Only `lm-eval-ext check`, `judge validate` and `elitr score` take the --judge-* flags; `lm_eval run`,
# `lm-eval-ext run` / `resume` and the Python API set a judge option through --metadata. A process-wide
# setting, not a context variable: the judge's worker threads word errors too.
_JUDGE_FLAGS = False


@contextmanager
def judge_flags_in_advice() -> Iterator[None]:
    """While it lasts (a command that takes the ``--judge-*`` flags), errors name those flags."""
    global _JUDGE_FLAGS
    before, _JUDGE_FLAGS = _JUDGE_FLAGS, True
    try:
        yield
    finally:
        _JUDGE_FLAGS = before


def how_to_set(option: str, value: str = "...") -> str:
    """How the user sets ``option`` to ``value`` on the command they ran: ``--judge-model VALUE`` on a command
    with the judge flags, else ``--metadata '{"judge_model": "VALUE"}'`` (the JSON form every harness version
    reads; lm-eval 0.5 reads no other)."""
    if _JUDGE_FLAGS:
        flag = cli_flag(option)
        if value in ("true", "false"):  # a switch: --judge-check, --no-judge-check
            return flag if value == "true" else f"--no-{flag[2:]}"
        return f"{flag} {value}"
    # true/false and numbers as JSON, like the harness's own parsing; other values (placeholders) stay text
    try:
        given: object = json.loads(value)
    except ValueError:
        given = value
    return metadata_arg(**{metadata_name(option): given})


_EXAMPLE = {bool: True, int: 4, float: 30.0, str: "NAME"}  # a value of each kind, for the advice


def _coerce(option: dataclasses.Field, value: Any, source: str) -> Any:
    kind, optional = option.metadata["kind"], option.metadata["optional"]
    where = f"judge option {option.name!r} (from {source})"
    if isinstance(value, str):
        text = value.strip()
        if optional and text.lower() in _NONE:
            return None
        if kind is bool:
            if (truth := truth_value(text)) is not None:
                return truth
            raise JudgeConfigError(f"The {where} must be true or false, not {value!r}.")
        try:
            return kind(text)
        except ValueError:
            raise JudgeConfigError(f"The {where} must be {'an integer' if kind is int else 'a number'}, "
                                   f"not {value!r}.") from None
    if value is None and optional:
        return None
    if kind is float and isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if kind is int and isinstance(value, int) and not isinstance(value, bool):
        return value
    if kind is bool and isinstance(value, bool):
        return value
    if kind is str and value is not None and not isinstance(value, (dict, list)):
        return str(value)
    wanted = {bool: "true or false", int: "an integer", float: "a number", str: "a text"}[kind]
    raise JudgeConfigError(f"The {where} must be {wanted}{' or null' if optional else ''}, not {value!r}; e.g. "
                           f"{metadata_arg(**{metadata_name(option.name): _EXAMPLE[kind]})}.")


def removed_option(name: str, given_as: str, source: str) -> JudgeConfigError:
    """The error for the removed option ``name``, given as ``given_as`` (a flag, key or variable) from ``source``."""
    return JudgeConfigError(f"The judge option {given_as!r} (from {source}) is no longer an option: {REMOVED[name]}.")


def _from_metadata(metadata: Mapping[str, Any] | None) -> dict[str, tuple[Any, str]]:
    found = {}
    known = {metadata_name(name): name for name in OPTION_NAMES}
    for key, value in (metadata or {}).items():
        if key in known:
            found[known[key]] = (value, f"--metadata {key}")
        elif key.startswith(METADATA_PREFIX + "_") and key[len(METADATA_PREFIX) + 1:] in REMOVED:
            raise removed_option(key[len(METADATA_PREFIX) + 1:], key, "--metadata")
        elif key.startswith(METADATA_PREFIX + "_"):
            close = difflib.get_close_matches(key, known, n=1)
            hint = f"Did you mean {close[0]!r}? " if close else ""
            raise JudgeConfigError(
                f"Unknown judge option {key!r} in --metadata. {hint}Known judge options: {', '.join(sorted(known))} "
                "(see docs/judge.md)."
            )
    return found


def _from_env(environ: Mapping[str, str]) -> dict[str, tuple[Any, str]]:
    for name in REMOVED:
        if env_name(name) in environ:
            raise removed_option(name, env_name(name), "the environment")
    found = {}
    for name in OPTION_NAMES:
        value = environ.get(env_name(name))
        if value is not None:
            found[name] = (value, f"environment variable {env_name(name)}")
    return found


def resolve_config(
    *,
    explicit: Mapping[str, Any] | None = None,
    metadata: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
    task_defaults: Mapping[str, Any] | None = None,
    run_seed: int | None = None,
) -> JudgeConfig:
    """Build the effective :class:`JudgeConfig` from every source (precedence in the module docstring).

    ``explicit`` and ``task_defaults`` use option names (``model``); ``metadata`` uses harness
    metadata names (``judge_model``; other keys are ignored); ``environ`` defaults to
    ``os.environ``. Values may be strings (coerced) or already typed. ``run_seed`` is the
    harness run's seed, used when no ``seed`` option is given.
    """
    environ = os.environ if environ is None else environ
    layers = [
        {k: (v, "the task YAML") for k, v in (task_defaults or {}).items()},
        _from_env(environ),
        _from_metadata(metadata),
        {k: (v, "the command line") for k, v in (explicit or {}).items() if v is not None},
    ]
    by_name = {f.name: f for f in OPTIONS}
    values: dict[str, Any] = {}
    for layer in layers:
        for name, (value, source) in layer.items():
            if name in REMOVED:
                raise removed_option(name, cli_flag(name) if source == "the command line" else name, source)
            if name not in by_name:
                raise JudgeConfigError(f"Unknown judge option {name!r} (from {source}). Known options: "
                                       f"{', '.join(OPTION_NAMES)} (see docs/judge.md).")
            values[name] = _coerce(by_name[name], value, source)
    if values.get("seed") is None:
        values["seed"] = DEFAULT_SEED if run_seed is None else int(run_seed)
    config = JudgeConfig(**values)
    _check_env_names(environ, config.api_key_env)
    _check(config)
    return config


def _check_env_names(environ: Mapping[str, str], key_variable: str) -> None:
    """A variable ``LM_EVAL_EXT_JUDGE_*`` that names no option is an error, as an unknown ``--metadata`` key is
    (a misspelled one would be ignored); the variable holding the API key may have any name. Only names are shown:
    a value may be a secret."""
    known = {env_name(name) for name in OPTION_NAMES} | {key_variable}
    unknown = sorted(name for name in environ if name.startswith(ENV_PREFIX + "_") and name not in known)
    if unknown:
        close = difflib.get_close_matches(unknown[0], sorted(known - {key_variable}), n=1)
        hint = f" Did you mean {close[0]}?" if close else ""
        raise JudgeConfigError(
            f"The environment variable {unknown[0]} names no judge option.{hint} Judge options in the environment "
            f"are {ENV_PREFIX} and {ENV_PREFIX}_<OPTION> for the options of docs/judge.md: rename or unset it.")


def _check(config: JudgeConfig) -> None:
    if config.judge not in JUDGES:
        custom = (f" A template of your own ({config.template}) takes its score parser, range and scale from the "
                  "judge it names, so that name must be one of those too." if config.template else "")
        raise JudgeConfigError(f"Unknown judge {config.judge!r}: use one of {', '.join(JUDGES)} "
                               f"({how_to_set('judge', next(iter(JUDGES)))}).{custom}")
    if config.language not in ("en", "cs"):
        raise JudgeConfigError(f"Unknown judge language {config.language!r}: use en or cs.")
    for name in ("concurrency", "max_tokens", "max_reply_bytes"):
        if getattr(config, name) < 1:
            raise JudgeConfigError(f"The judge option {name!r} must be at least 1, not {getattr(config, name)}.")
    if config.timeout <= 0:
        raise JudgeConfigError(f"The judge option 'timeout' must be more than 0 seconds, not {config.timeout:g}.")
    for name in ("reasks", "retries", "stop_after_timeouts"):
        if getattr(config, name) < 0:
            raise JudgeConfigError(f"The judge option {name!r} cannot be negative ({getattr(config, name)}).")
    if config.max_calls is not None and config.max_calls < 0:
        raise JudgeConfigError(f"The judge option 'max_calls' cannot be negative ({config.max_calls}).")
    for name in ("price_input", "price_output", "cost_limit"):
        if getattr(config, name) is not None and getattr(config, name) < 0:
            raise JudgeConfigError(f"The judge option {name!r} cannot be negative ({getattr(config, name)}).")
    if config.cost_limit is not None and (config.price_input is None or config.price_output is None):
        raise JudgeConfigError(
            f"The judge's cost limit (${config.cost_limit:g}) needs the judge model's prices: give "
            f"{how_to_set('price_input', 'DOLLARS')} and {how_to_set('price_output', 'DOLLARS')} (dollars per million "
            "tokens), or drop the limit.")
    if not 0 <= config.batch_discount < 1:
        raise JudgeConfigError(f"The judge option 'batch_discount' is a fraction of the price from 0 to below 1 "
                               f"(OpenAI's batch API: 0.5), not {config.batch_discount}.")
    for name in ("batch_poll", "batch_max_requests", "batch_max_bytes"):
        if getattr(config, name) <= 0:
            raise JudgeConfigError(f"The judge option {name!r} must be above 0, not {getattr(config, name)}.")
    if config.batch_detach and not config.batch:
        raise JudgeConfigError(f"The judge option 'batch_detach' only applies to batch judging: add "
                               f"{how_to_set('batch', 'true')}.")
    parts = urlsplit(config.base_url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise JudgeConfigError(f"The judge base URL {config.base_url!r} is not an http(s) URL; give the API root, "
                               "e.g. https://api.openai.com/v1 or http://localhost:8000/v1.")
