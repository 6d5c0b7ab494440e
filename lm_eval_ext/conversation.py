"""Dependent multi-turn conversations: what a turn request holds, how a turn is rendered, and the runner.

The harness builds every request before it calls the model, so a request cannot hold the
model's own earlier answers. A multi-turn task therefore sends one request per turn of request
type ``ext_conversation`` (:mod:`lm_eval_ext.boundary` gives every harness model that method),
whose arguments are ``(turn, gen_kwargs)`` with ``turn`` the JSON text of :meth:`Turn.to_request`
(the harness hashes and logs a request's first argument as text): the user messages of turns 1..k. :func:`run_conversations` answers them with the model's own
``generate_until`` (and its chat template), which the boundary hands it:

1. requests are grouped by conversation; the turn with the most user messages gives the
   conversation's questions (every other turn must repeat them as a prefix);
2. turn 1 of every conversation is generated in **one** ``generate_until`` call, then turn 2
   (each prompt now holding that conversation's own answer to turn 1), and so on: turn k sees the
   answers to turns 1..k-1, in order, and generation is batched across conversations (the model
   batches each call as usual: ``--batch_size``, API concurrency);
3. each turn's messages are rendered with the model's chat template when the task asked for it
   (``--apply_chat_template``; chat-completion APIs receive the message list), else concatenated
   with nothing in between (the ELITR-Bench authors' raw format); an answer goes back into the
   conversation stripped of surrounding whitespace, as the authors' code does;
4. when the turn carries a length budget (:mod:`lm_eval_ext.prompt_length`), its prompt is
   measured before it is generated: a prompt that does not fit stops the run, or has the middle
   of its document shortened if the turn asks for truncation.

Each request gets back the JSON text of a record (:func:`result_record` reads it): ``text`` (the
answer), ``turn``, ``messages`` (what it answered) and ``truncated_lines`` (document lines dropped
so that the prompt fit). JSON, because the harness writes responses to its samples files as text. Turns nobody asked for
(``--limit``, ``--samples``, another rank's documents) are generated when a later turn needs them.
"""
from __future__ import annotations

import copy
import dataclasses
import json
import logging
import sys
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from tqdm import tqdm

from .errors import UserError
from .prompt_length import PromptTooLongError, budget_from_settings, lines_lost, shorten_middle

log = logging.getLogger(__name__)

OVERFLOW_POLICIES = ("error", "truncate")


class ConversationError(UserError):
    """Conversation requests that cannot be run (malformed, inconsistent, or too long)."""


@dataclass(frozen=True)
class Turn:
    """Turn ``turn`` (1-based) of conversation ``conversation``.

    ``user`` holds the user messages of turns 1..turn. ``chat``: render with the model's chat
    template. ``length``: the metadata entries of a length budget (``prompt_length``), or empty
    for no check. ``overflow``: ``error`` or ``truncate`` (shorten ``user[0][document[0]:document[1]]``
    from its middle). ``too_long_help``: the sentence a too-long error ends with (what to do).
    """

    conversation: str
    turn: int
    user: tuple[str, ...]
    system: str | None = None
    chat: bool = False
    overflow: str = "error"
    document: tuple[int, int] | None = None
    length: tuple[tuple[str, object], ...] = ()
    too_long_help: str = ""

    def __post_init__(self) -> None:
        if self.turn < 1 or len(self.user) != self.turn:
            raise ConversationError(f"turn {self.turn} of {self.conversation!r} has {len(self.user)} user messages")
        if self.overflow not in OVERFLOW_POLICIES:
            raise ConversationError(f"unknown overflow policy {self.overflow!r}: use {' or '.join(OVERFLOW_POLICIES)}")

    def to_request(self) -> str:
        """The request argument: this turn as JSON text (logged with the samples, cacheable by the harness)."""
        return json.dumps({"conversation": self.conversation, "turn": self.turn, "user": list(self.user),
                           "system": self.system, "chat": self.chat, "overflow": self.overflow,
                           "document": list(self.document) if self.document else None,
                           "length": [list(item) for item in self.length], "too_long_help": self.too_long_help},
                          ensure_ascii=False)

    @classmethod
    def from_request(cls, text: str) -> Turn:
        """Inverse of :meth:`to_request`."""
        try:
            data = json.loads(text)
            return cls(conversation=data["conversation"], turn=int(data["turn"]), user=tuple(data["user"]),
                       system=data["system"], chat=bool(data["chat"]), overflow=data["overflow"],
                       document=tuple(data["document"]) if data["document"] else None,
                       length=tuple(tuple(item) for item in data["length"]), too_long_help=data["too_long_help"])
        except (KeyError, TypeError, ValueError) as err:
            raise ConversationError(f"malformed conversation request: {err!r}") from None

    def settings(self) -> tuple:
        """Everything but the turn and its messages: the same for all turns of one conversation."""
        return (self.system, self.chat, self.overflow, self.document, self.length, self.too_long_help)


def turn_messages(system: str | None, user: Sequence[str], answers: Sequence[str]) -> list[dict[str, str]]:
    """``[system] + user_1, assistant_1, ..., user_k`` for ``k = len(user)`` and ``k - 1`` answers."""
    if len(answers) != len(user) - 1:
        raise ValueError(f"{len(user)} user messages need {len(user) - 1} answers, got {len(answers)}")
    messages = [{"role": "system", "content": system}] if system else []
    for i, text in enumerate(user):
        messages.append({"role": "user", "content": text})
        if i < len(answers):
            messages.append({"role": "assistant", "content": answers[i]})
    return messages


def render(messages: list[dict[str, str]], chat_template: Callable | None):
    """The prompt for ``messages``: ``chat_template(messages)`` (generation prompt added), or the raw concatenation."""
    if chat_template is not None:
        return chat_template(messages, add_generation_prompt=True)
    return "".join(message["content"] for message in messages)


def result_record(response: str) -> dict:
    """The record (``text``, ``turn``, ``messages``, ``truncated_lines``) of a conversation request's response."""
    try:
        record = json.loads(response)
    except (TypeError, ValueError):
        record = None
    if not isinstance(record, dict) or "text" not in record:
        raise ConversationError(f"not the response of a conversation request: {str(response)[:200]!r}")
    return record


def run_conversations(requests, generate: Callable[[list], list[str]], chat_template: Callable | None) -> list[str]:
    """Answer conversation-turn requests turn by turn (module docstring).

    ``generate`` is the model's ``generate_until`` (a list of ``generate_until`` Instances -> their
    texts); ``chat_template`` its ``apply_chat_template``, used by turns that ask for it. Progress is one bar
    over every turn generated (turns done of all, conversations finished), as the harness shows its own.
    """
    turns = [Turn.from_request(request.args[0]) for request in requests]
    longest: dict[str, Turn] = {}
    asked: dict[str, dict[int, object]] = defaultdict(dict)
    for request, turn in zip(requests, turns):
        if turn.conversation not in longest or turn.turn > longest[turn.conversation].turn:
            longest[turn.conversation] = turn
        asked[turn.conversation].setdefault(turn.turn, request)
    for turn in turns:
        full = longest[turn.conversation]
        if full.user[: turn.turn] != turn.user or full.settings() != turn.settings():
            raise ConversationError(f"The turns of conversation {turn.conversation!r} disagree on its earlier "
                                    "messages or settings; each turn must repeat the conversation's start.")
    answers: dict[str, list[str]] = {cid: [] for cid in longest}
    results: dict[tuple[str, int], str] = {}
    last = max((turn.turn for turn in longest.values()), default=0)
    # one bar for the whole conversation stage (the model's own bar per turn batch is turned off by the caller)
    with tqdm(total=sum(turn.turn for turn in longest.values()), desc="Conversation turns", unit="turn") as bar:
        bar.set_postfix_str(f"0 of {len(longest)} conversations done")
        for t in range(1, last + 1):
            _generate_turn(t, longest, asked, answers, results, generate, chat_template)
            bar.update(sum(turn.turn >= t for turn in longest.values()))
            done = sum(turn.turn <= t for turn in longest.values())
            bar.set_postfix_str(f"{done} of {len(longest)} conversations done")
    return [results[turn.conversation, turn.turn] for turn in turns]


def _generate_turn(t: int, longest: dict, asked: dict, answers: dict, results: dict, generate: Callable,
                   chat_template: Callable | None) -> None:
    """Generate turn ``t`` of every conversation that has it, in one batch; record the answers."""
    active = [cid for cid, turn in longest.items() if turn.turn >= t]
    log.info("conversations: turn %d, %d conversation(s) in one batch", t, len(active))
    batch, prepared, too_long = [], [], []
    for cid in active:
        # a turn nobody asked for (--limit, --samples, another rank) takes the settings of the next asked turn
        request = asked[cid].get(t) or asked[cid][min(k for k in asked[cid] if k > t)]
        gen_kwargs = copy.deepcopy(request.args[1])
        chat = chat_template if longest[cid].chat else None
        messages, dropped = _fit(longest[cid], t, answers[cid], gen_kwargs, chat, too_long)
        prepared.append((cid, messages, dropped))
        # the turn request as a generate_until request (same document and identity, no responses yet)
        batch.append(dataclasses.replace(request, request_type="generate_until",
                                         arguments=(render(messages, chat), gen_kwargs), resps=[], filtered_resps={}))
    if too_long:
        _raise_too_long(too_long, t)
    if truncated := {cid: dropped for cid, _, dropped in prepared if dropped}:
        # one line per turn, not per conversation: with a short context nearly every turn of a run is truncated
        most = max(truncated, key=lambda cid: (truncated[cid], cid))
        with tqdm.external_write_mode(file=sys.stderr):  # on a line of its own, not after the open bar
            log.warning("Turn %d: %d of %d conversation(s) did not fit the %s; %s (the most: %s), each counted in "
                        "prompts_truncated", t, len(truncated), len(active),
                        budget_from_settings(longest[most].length).describe(), lines_lost(list(truncated.values())),
                        most)
    for (cid, messages, dropped), output in zip(prepared, generate(batch), strict=True):
        results[cid, t] = json.dumps({"text": output, "turn": t, "messages": messages, "truncated_lines": dropped},
                                     ensure_ascii=False)
        answers[cid].append(str(output).strip())


def _fit(turn: Turn, t: int, answers: list[str], gen_kwargs: dict, chat: Callable | None,
         too_long: list) -> tuple[list[dict], int]:
    """The messages of turn ``t`` (shortened to fit when the turn allows it) and the document lines dropped.

    A turn that does not fit and may not be shortened is added to ``too_long`` as (turn, verdict, budget).
    """
    user = list(turn.user[:t])
    messages = turn_messages(turn.system, user, answers)
    budget = budget_from_settings(turn.length) if turn.length else None
    if budget is None:
        return messages, 0

    def fits(candidate: list[dict]) -> bool:
        return budget.verdicts([(render(candidate, chat), gen_kwargs)])[0].fits

    if fits(messages):
        return messages, 0
    where = f"Turn {t} of {turn.conversation}"
    if turn.overflow != "truncate" or turn.document is None:
        too_long.append((turn, budget.verdicts([(render(messages, chat), gen_kwargs)])[0], budget))
        return messages, 0
    start, end = turn.document

    def with_document(text: str) -> list[dict]:
        return turn_messages(turn.system, [user[0][:start] + text + user[0][end:], *user[1:]], answers)

    try:
        text, dropped = shorten_middle(user[0][start:end], lambda text: fits(with_document(text)), what=where)
    except PromptTooLongError as err:
        raise PromptTooLongError(f"{err} {turn.too_long_help}") from None
    return with_document(text), dropped


def _raise_too_long(too_long: list, t: int) -> None:
    turn, verdict, budget = max(too_long, key=lambda item: item[1].prompt_tokens)
    raise PromptTooLongError(
        f"{len(too_long)} prompt(s) of turn {t} do not fit the {budget.describe()}: at most "
        f"{verdict.max_length - verdict.max_gen_toks} prompt tokens leave room for max_gen_toks={verdict.max_gen_toks}, "
        f"and the longest, turn {t} of {turn.conversation}, has {verdict.prompt_tokens}. Nothing of this turn was "
        f"generated. {turn.too_long_help}")
