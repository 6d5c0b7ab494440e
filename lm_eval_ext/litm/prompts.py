"""The Lost in the Middle prompts, filled exactly as the authors' ``prompting.py`` does.

The templates are byte copies of the benchmark's prompt files (``templates/litm_*.txt``); like
the authors we drop trailing newlines from a template and fill it with ``str.format``.

Each QA and KV prompt is built as the list of its *pieces* (``*_pieces``; joined, they are the
prompt byte for byte): the template around the documents, then one piece per document or
key-value line. The prompt-length check tokenizes each distinct piece once
(:mod:`lm_eval_ext.prompt_length`), since a sweep's prompts are the same pieces in other orders.
"""
from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

from ..paths import templates_dir

QA_TEMPLATES = {
    "plain": "litm_qa.txt",
    "query_aware": "litm_qa_with_query_aware_contextualization.txt",
    "random_order": "litm_qa_ordered_randomly.txt",
}
CLOSEDBOOK_TEMPLATE = "litm_closedbook_qa.txt"
KV_TEMPLATES = {
    "plain": "litm_kv_retrieval.txt",
    "query_aware": "litm_kv_retrieval_with_query_aware_contextualization.txt",
}


@lru_cache(maxsize=None)
def template(name: str) -> str:
    """The text of ``templates/<name>`` without trailing newlines."""
    return (templates_dir() / name).read_text(encoding="utf-8").rstrip("\n")


def _around(name: str, field: str, **values) -> tuple[str, str]:
    """The filled template before and after its ``{field}`` (which occurs once)."""
    head, tail = template(name).split("{" + field + "}")
    return head.format(**values), tail.format(**values)


def document_pieces(passages: Sequence[dict]) -> list[str]:
    """``Document [n](Title: <title>) <text>`` per passage, n from 1, separated by newlines, as pieces that
    recur across prompts, each cut where a word starts: the numbered opening (``"\nDocument [n](Title:"``,
    no newline before the first), ``" <title>)"`` and ``" <text>"``."""
    return [piece for n, p in enumerate(passages, 1)
            for piece in (("\n" if n > 1 else "") + f"Document [{n}](Title:", f" {p['title']})", " " + p["text"])]


def qa_prompt_pieces(question: str, passages: Sequence[dict], variant: str = "plain") -> list[str]:
    """The multi-document (or oracle, with one passage) QA prompt as pieces; ``variant`` picks the template."""
    head, tail = _around(QA_TEMPLATES[variant], "search_results", question=question)
    return [head, *document_pieces(passages), tail]


def closedbook_prompt(question: str) -> str:
    """The closed-book QA prompt (no passages)."""
    return template(CLOSEDBOOK_TEMPLATE).format(question=question)


def kv_record_pieces(pairs: Sequence[tuple[str, str]]) -> list[str]:
    """The pairs as one JSON object, one pair per line (piece).

    The first line starts with ``{``, the others with a space; each pair is
    ``"<key>": "<value>"``; every line but the last ends with ``,`` and a newline, the last
    with ``}``.
    """
    last = len(pairs) - 1
    return [("{" if i == 0 else " ") + f'"{key}": "{value}"' + (",\n" if i != last else "}")
            for i, (key, value) in enumerate(pairs)]


def kv_prompt_pieces(pairs: Sequence[tuple[str, str]], key: str, query_aware: bool = False) -> list[str]:
    """The key-value retrieval prompt as pieces (query-aware: the key is asked before and after the data)."""
    head, tail = _around(KV_TEMPLATES["query_aware" if query_aware else "plain"], "formatted_kv_records", key=key)
    return [head, *kv_record_pieces(pairs), tail]
