"""From a model's reply to the query that is executed, on the completion path and on the chat path.

**Completion path** (the paper's, Patel et al., EMNLP 2023): the prompt ends with ``SELECT``, generation
stops at ``;``, a blank line, ``--`` or ``#``, and the query is ``"SELECT " + reply.strip()``
(:func:`prediction_sql`). Nothing else is done to the reply.

**Chat path** (this plugin's, for runs with a chat template; docs/magnifico.md): the prompt does not end
with ``SELECT`` (:mod:`lm_eval_ext.magnifico.chat`): the model is asked for the whole query, gets no stop
sequences, and answers as chat models do (a code fence, a sentence before or after the query). The query
is the one a reader sees in the reply (:func:`chat_query`), looked for in this order, the first found
counting:

1. in a fenced code block (```` ```sql ... ``` ```` or ```` ``` ... ``` ````; a block left open runs to
   the end of the reply), block by block;
2. in an inline code span (```` `...` ````), span by span;
3. in the reply's text outside the code blocks.

A query starts with ``SELECT`` or a common table expression (``WITH name AS (``, ``WITH RECURSIVE``):

- at the start of a line: in code in any case; in text in capitals or in lower case (``SELECT``,
  ``select``), not in the sentence case of prose ("Select the rows ...");
- inside a line of text, after a space: in capitals only; a ``SELECT`` there only after a colon ("The
  query is: SELECT ...") or when a ``FROM`` follows it ("You get them with SELECT name FROM t"), so that
  "The SELECT above" starts none;

never inside a parenthesis opened before it (a subquery of a fragment is not a query). It ends at the
first ``;`` that ends a complete statement (:func:`sqlite3.complete_statement`: not one inside a string
literal or a comment), at the end of its code span, and, outside a code block, at the first blank line;
then it is stripped. A start with nothing after its keyword (a model echoing ``SELECT``, then a blank
line) is not a query: the next start is tried. Prose is never prefixed to SQL, and ``SELECT`` is never
supplied: a reply that only continues a query (``name FROM t``) holds none.

A reply in which no query is found holds **no query** (:attr:`Query.sql` is None): nothing is executed,
and the item scores 0 with the error :data:`NO_QUERY` in its execution record.

A query counts as *normalised* when it differs from the whole reply (stripped, one final ``;`` dropped):
i.e. when a fence, a code span, prose or a second statement had to be removed. A reply that is a bare
query is executed exactly as the completion path would execute the same query.
"""
from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass

NO_QUERY = ("no query: the reply holds no SQL query (no code block, inline code or statement that starts with "
            "SELECT or WITH); nothing was executed")

_FENCE = re.compile(r"```(?:[\w+-]*[ \t]*\n)?(.*?)(?:```|\Z)", re.S)
_SPAN = re.compile(r"`([^`]+)`")
_CTE = r"with\s+(?:recursive\s+)?\w+\s*(?:\([^()]*\)\s*)?as\s*\("
# where a query may start: at the start of a line, or inside a line after a space (the case is checked apart)
_LINE_START = re.compile(r"^[ \t]*(select\b|" + _CTE + ")", re.I | re.M)
_IN_LINE = re.compile(r"(?<=[ \t])(select\b|" + _CTE + ")", re.I)
_FROM = re.compile(r"\bfrom\b", re.I)
_BLANK_LINE = re.compile(r"\n[ \t]*\n")


@dataclass(frozen=True)
class Query:
    """The query executed for one reply (None: the reply holds no query), and whether the reply had to be
    normalised to get it."""

    sql: str | None
    normalized: bool = False


def prediction_sql(generation: str) -> str:
    """The predicted query: the prompt ends with ``SELECT``, so ``"SELECT " + generation.strip()``."""
    return "SELECT " + generation.strip()


def completion_query(reply: str) -> Query:
    """The completion path's query (the paper's): :func:`prediction_sql`, never normalised."""
    return Query(prediction_sql(reply))


def chat_query(reply: str) -> Query:
    """The chat path's query: the one a reader sees in the reply (module docstring), or none."""
    fences = list(_FENCE.finditer(reply))
    text = _FENCE.sub("\n\n", reply)  # a code block ends what precedes it
    regions = [(fence.group(1), True, False) for fence in fences]
    regions += [(span.group(1), True, True) for span in _SPAN.finditer(text)]
    regions.append((text, False, True))
    for region, code, cut_at_blank_line in regions:
        sql = _query_in(region, code, cut_at_blank_line)
        if sql is not None:
            return Query(sql, normalized=sql != _whole(reply))
    return Query(None)


def reply_query(reply: str, chat: bool) -> Query:
    """The query of one reply on the chat path (``chat``) or on the completion path."""
    return chat_query(reply) if chat else completion_query(reply)


def _query_in(text: str, code: bool, cut_at_blank_line: bool) -> str | None:
    """The first query of ``text`` (``code``: a block's or a span's content), or None."""
    starts = {m.start(1): False for m in _IN_LINE.finditer(text)} if not code else {}
    starts |= {m.start(1): True for m in _LINE_START.finditer(text)}
    for start, line_start in sorted(starts.items()):
        keyword = re.match(r"[a-z]+", text[start:], re.I).group(0)
        if not _may_start(text[:start], keyword, code, line_start):
            continue
        sql = _first_statement(text[start:], cut_at_blank_line).strip()
        if re.fullmatch(r"select", sql, re.I):  # the keyword alone: the model echoed the prompt's SELECT
            continue
        if not line_start and keyword.upper() == "SELECT" and not _before_colon(text[:start]) and not _FROM.search(sql):
            continue
        return sql
    return None


def _before_colon(before: str) -> bool:
    """Whether the text before a keyword ends with a colon ("The query is: SELECT ...")."""
    return before.rstrip(" \t").endswith(":")


def _may_start(before: str, keyword: str, code: bool, line_start: bool) -> bool:
    """Whether ``keyword`` (``SELECT`` or ``WITH`` as written) after ``before`` may begin a query: written in a
    case SQL is written in (module docstring), and outside any parenthesis opened before it."""
    if before.count("(") > before.count(")"):
        return False
    if code:
        return True
    return keyword.isupper() or (line_start and keyword.islower())


def _first_statement(text: str, cut_at_blank_line: bool) -> str:
    """``text`` up to the end of its first statement (module docstring)."""
    if cut_at_blank_line and (blank := _BLANK_LINE.search(text)):
        text = text[: blank.start()]
    for semicolon in re.finditer(";", text):
        if sqlite3.complete_statement(text[: semicolon.end()]):
            return text[: semicolon.start()]
    return text


def _whole(reply: str) -> str:
    """The whole reply read as a query: stripped, one final ``;`` dropped."""
    text = reply.strip()
    return text[:-1].rstrip() if text.endswith(";") else text
