"""From a model's reply to the query that is executed, on the completion path and on the chat path.

**Completion path** (the paper's, Patel et al., EMNLP 2023): the prompt ends with ``SELECT``, generation
stops at ``;``, a blank line, ``--`` or ``#``, and the query is ``"SELECT " + reply.strip()``
(:func:`prediction_sql`). Nothing else is done to the reply.

**Chat path** (this plugin's, for runs with a chat template; docs/magnifico.md): a chat model is asked
for the whole query, gets no stop sequences, and answers as chat models do (a code fence, a sentence
before or after the query). Its reply is normalised once, by :func:`chat_query`, in this order:

1. code fence: when the reply holds a fenced block (```` ```sql ... ``` ```` or ```` ``` ... ``` ````),
   only the content of the first one is kept (a block left open runs to the end of the reply);
2. prose before the query: the query starts at the first line that begins with ``SELECT`` or with a
   common table expression (``WITH name AS (``), any case, outside parentheses opened before it;
   what precedes that line is dropped. When no line begins so, the text continues the prompt's final
   ``SELECT`` and the query is ``"SELECT " + text`` as on the completion path: a leading ``SELECT`` is
   never doubled, a missing one is supplied;
3. the first statement only: the text is cut at the first ``;`` that ends a complete statement
   (:func:`sqlite3.complete_statement`: a ``;`` inside a string literal or a comment does not count)
   and, outside a code fence, at the first blank line (prose after the query); then stripped.

A reply counts as *normalised* when the query differs from what the reply gives read as a bare query
(stripped, one final ``;`` dropped, ``"SELECT "`` supplied when it does not start with one): i.e. when
a fence, prose or a second statement had to be removed. A bare query, whole or continuing the prompt's
``SELECT``, is executed exactly as the completion path would execute the same query.
"""
from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass

_FENCE = re.compile(r"```(?:[\w+-]*[ \t]*\n)?(.*?)(?:```|\Z)", re.S)
_QUERY_START = r"(?:select\b|with\s+(?:recursive\s+)?\w+\s*(?:\([^()]*\)\s*)?as\s*\()"
_QUERY_LINE = re.compile(r"^[ \t]*" + _QUERY_START, re.I | re.M)
_STARTS_QUERY = re.compile(_QUERY_START, re.I)
_BLANK_LINE = re.compile(r"\n[ \t]*\n")


@dataclass(frozen=True)
class Query:
    """The query executed for one reply, and whether the reply had to be normalised to get it."""

    sql: str
    normalized: bool = False


def prediction_sql(generation: str) -> str:
    """The predicted query: the prompt ends with ``SELECT``, so ``"SELECT " + generation.strip()``."""
    return "SELECT " + generation.strip()


def completion_query(reply: str) -> Query:
    """The completion path's query (the paper's): :func:`prediction_sql`, never normalised."""
    return Query(prediction_sql(reply))


def chat_query(reply: str) -> Query:
    """The chat path's query: the reply normalised as the module docstring says."""
    fence = _FENCE.search(reply)
    text = fence.group(1) if fence else reply
    start = _query_line(text)
    if start is not None:
        text = text[start:]
    text = _first_statement(text.lstrip(), cut_at_blank_line=fence is None).strip()
    sql = text if start is not None else prediction_sql(text)
    return Query(sql, normalized=sql != _bare_query(reply))


def reply_query(reply: str, chat: bool) -> Query:
    """The query of one reply on the chat path (``chat``) or on the completion path."""
    return chat_query(reply) if chat else completion_query(reply)


def _query_line(text: str) -> int | None:
    """Where the first line that begins a query starts, not counting lines inside open parentheses."""
    for match in _QUERY_LINE.finditer(text):
        before = text[: match.start()]
        # a SELECT line inside an open parenthesis is a subquery of a reply that continues the prompt
        if before.count("(") <= before.count(")"):
            return match.start()
    return None


def _first_statement(text: str, cut_at_blank_line: bool) -> str:
    """``text`` up to the end of its first statement (module docstring, step 3)."""
    if cut_at_blank_line and (blank := _BLANK_LINE.search(text)):
        text = text[: blank.start()]
    for semicolon in re.finditer(";", text):
        if sqlite3.complete_statement(text[: semicolon.end()]):
            return text[: semicolon.start()]
    return text


def _bare_query(reply: str) -> str:
    """The reply read as a bare query: stripped, one final ``;`` dropped, ``SELECT`` supplied when missing."""
    text = reply.strip()
    if text.endswith(";"):
        text = text[:-1].rstrip()
    return text if _STARTS_QUERY.match(text) else prediction_sql(text)
