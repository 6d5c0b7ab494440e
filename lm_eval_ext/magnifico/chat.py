"""MAGNIFICo's chat path: what a chat model is told, and how long it may answer.

The paper prompts completion models: the prompt ends with ``SELECT`` and generation stops at ``;``,
a blank line, ``--`` or ``#`` (Patel et al., EMNLP 2023). A chat model answers in its own way
("Here is the query:", a code fence, an explanation), and a server that honours those stops cuts such
a reply back to its preamble; a chat model also echoes a prompt's final ``SELECT`` instead of continuing
it. So, when a run applies a chat template, the task (this plugin's addition, not the paper's):

- sends the authors' prompt without its completion cue (the final ``SELECT``, or ``User2: SELECT`` in
  a dialogue: :meth:`~lm_eval_ext.magnifico.prompts.PromptBuilder.build` with ``cue=False``), followed by
  one instruction to answer with one complete SQLite query starting with SELECT
  (``templates/magnifico_chat.txt``), as a single user message (after the run's
  ``--system_instruction``, if any, as the harness places it);
- sends no stop sequences and allows :data:`CHAT_MAX_GEN_TOKS` new tokens (the model ends its reply);
- executes the query a reader sees in each reply, or none when the reply holds no query
  (:mod:`lm_eval_ext.magnifico.replies`).
"""
from __future__ import annotations

from functools import lru_cache

from ..paths import templates_dir

CHAT_TEMPLATE = "magnifico_chat.txt"
# The longest gold query of the data is 387 characters (about 100-130 tokens for common BPE
# tokenizers on SQL: the paper's 128-token budget). A chat reply adds a fence and often a sentence or
# two before the query; 512 leaves room for a short explanation first and still bounds a reply that
# never ends. Tokens are only spent up to where the model stops.
CHAT_MAX_GEN_TOKS = 512
CHAT_GENERATION = {"until": [], "max_gen_toks": CHAT_MAX_GEN_TOKS}


@lru_cache(maxsize=None)
def _template() -> str:
    return (templates_dir() / CHAT_TEMPLATE).read_text(encoding="utf-8").rstrip("\n")


def chat_prompt(prompt: str) -> str:
    """The chat prompt: ``prompt`` (the authors' prompt without its completion cue) followed by the chat
    instruction (``templates/magnifico_chat.txt``)."""
    return _template().format(prompt=prompt)


def chat_messages(prompt: str, system_instruction: str | None = None) -> list[dict]:
    """The messages of one item (``prompt``: the authors' prompt without its completion cue): the run's system
    instruction (if any), then the chat prompt as the user turn."""
    system = [{"role": "system", "content": system_instruction}] if system_instruction else []
    return [*system, {"role": "user", "content": chat_prompt(prompt)}]


def chat_generation_kwargs(current: dict, yaml: dict) -> dict:
    """Generation settings of the chat path: :data:`CHAT_GENERATION` in place of the YAML's completion
    stops and length; every other setting, and any value given with ``--gen_kwargs`` (one that differs from
    the YAML's ``yaml``), kept as it is in ``current``."""
    given = {key: value for key, value in current.items() if key not in yaml or yaml[key] != value}
    return {**current, **CHAT_GENERATION, **given}
