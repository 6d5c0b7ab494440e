"""Stopping a LIEDER run whose log-probabilities came from a completions server that cannot give them.

The harness's ``local-completions`` adapter scores a (context, continuation) pair with one
``/v1/completions`` request (``echo: true``, ``logprobs: 1``, ``max_tokens: 1``) and sums
``token_logprobs[ctxlen:-1]``: it takes the returned list to be the prompt's tokens followed by one
generated token, and checks no length. Two kinds of server break this without any error:

- a server that ignores ``echo`` returns the generated token's log-prob only: the slice is empty, every
  sentence gets exactly 0, every comparison is a tie and every LIEDER accuracy 0;
- a server that honours ``echo`` but generates no token returns the prompt's log-probs only: the slice
  drops the continuation's final token, and every sentence silently loses that token's log-prob.

The adapter hands a task only the sum (and whether every kept token was the greedy one), so the task
sees the first case directly and the second only through a request made for it:

1. every row: a continuation log-prob of exactly 0 means the prompt's log-probs never arrived (a
   non-empty sentence never has probability 1) -> :class:`PromptLogprobsMissing`;
2. when the run's model arguments name a ``base_url`` (a model behind a server; the harness puts
   ``--model_args`` into every task's metadata), each document gets one more request, not scored: its
   first row's context with the continuation ``" The"``, one token for the usual tokenizers (every LIEDER
   continuation starts with "The" or "It"). A correct server gives it a negative log-prob; one that
   generates no token leaves an empty slice, exactly 0 -> :class:`GeneratedTokenMissing`. The dropped
   token of a longer continuation leaves no trace in the sum, hence the one-token request; with a
   tokenizer that splits ``" The"``, the check cannot see this fault.
"""
from __future__ import annotations

from ..errors import UserError

CHECK_CONTINUATION = " The"
_WHAT_TO_DO = ("Use a server that returns the prompt's log-probabilities on /v1/completions (`echo: true` with "
               "`logprobs`) and generates the requested token (`max_tokens: 1`), e.g. vLLM's OpenAI-compatible "
               "server (docs/lieder.md has the tested command), or run the model with `--model hf` or "
               "`--model vllm`. If the run used --use_cache, delete that cache file: it holds these values.")


class ServerLogprobsError(UserError):
    """A model server's log-probabilities cannot score LIEDER."""


class PromptLogprobsMissing(ServerLogprobsError):
    """A sentence got a log-probability of exactly 0: the prompt's log-probabilities never arrived."""


class GeneratedTokenMissing(ServerLogprobsError):
    """The server returned the prompt's log-probabilities without the generated token."""


def server_url(metadata: dict) -> str | None:
    """The ``base_url`` among the run's model arguments (a model behind a server), or None."""
    url = metadata.get("base_url")
    return str(url) if url else None


def check_arguments(doc: dict) -> tuple[str, str]:
    """The check request of a document: its first row's context and the one-token continuation."""
    return doc["rows"][0]["context"], CHECK_CONTINUATION


def check_logprobs(task: str, doc: dict, row_logprobs: list[float], check: list[float], server: str | None) -> None:
    """Raise when the log-probabilities of one document show a broken server (module docstring)."""
    source = f"the completions server at {server}" if server else "the model"
    for row, logprob in zip(doc["rows"], row_logprobs, strict=True):
        if logprob == 0:
            raise PromptLogprobsMissing(
                f"{task}: {source} gave the sentence {row['continuation']!r} after {row['context']!r} a "
                "log-probability of exactly 0, which no model gives a whole sentence: the prompt's log-probabilities "
                "did not arrive (a server that ignores `echo` returns only the generated token's, and the harness's "
                "local-completions adapter then sums an empty list), so every LIEDER comparison would be a tie and "
                f"every accuracy 0. {_WHAT_TO_DO}")
    if check and check[0] == 0:
        context, continuation = check_arguments(doc)
        raise GeneratedTokenMissing(
            f"{task}: {source} returned the prompt's log-probabilities but no generated token: the check request "
            f"(the one-token continuation {continuation!r} after {context!r}) got a log-probability of exactly 0. "
            "The harness's local-completions adapter drops the last log-probability it gets, taking it for the "
            "generated token, so every LIEDER sentence would silently lose its final token's log-probability. "
            f"{_WHAT_TO_DO}")
