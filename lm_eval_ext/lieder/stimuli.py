"""Reading LIEDER stimuli files and grouping their rows into harness documents.

A document is one noun x one sentence family: the 12 rows that the comparisons of
that group need (lieder.md, "Data").
"""
from __future__ import annotations

import json
import re
from pathlib import Path

from ..errors import UserError

# Clause words in the ids, by what the clause does to the discourse entity.
CLAUSE_TYPES = {
    "affirmative": "pos", "know": "pos", "managed": "pos",
    "negation": "neg", "doubt": "neg", "failed": "neg",
    "two": "two",
}
# A family is named by its pos and neg clause words, as in the human baseline file.
FAMILY_OF = {
    "affirmative": "affirmative_negation", "negation": "affirmative_negation",
    "know": "know_doubt", "doubt": "know_doubt",
    "managed": "managed_failed", "failed": "managed_failed",
}
FAMILIES = ("affirmative_negation", "know_doubt", "managed_failed")
CONTINUATION_KINDS = {"sref": "sg", "pref": "pl", "nonref": "nonref"}

# The continuation is the final sentence: it starts after the last sentence
# boundary that precedes "The"/"It".
_LAST_SENTENCE = re.compile(r"^(?P<context>.*[.!?]) (?P<continuation>(?:The|It)\b[^.!?]*[.!?])$", re.S)


class StimulusError(UserError):
    """A stimuli file does not follow the LIEDER format."""


def split_sentence(sent: str) -> tuple[str, str]:
    """Split a stimulus into (context, continuation) at the last sentence boundary."""
    match = _LAST_SENTENCE.match(sent)
    if not match:
        raise StimulusError(f"cannot find the continuation sentence (starting with 'The' or 'It') in {sent!r}")
    return match["context"], match["continuation"]


def parse_row(record: dict) -> dict:
    """One JSONL record -> a row with its group key, context type and continuation kind."""
    parts = record["id"].split("_")
    if len(parts) != 5 or parts[2] not in CLAUSE_TYPES or parts[3] not in CLAUSE_TYPES or parts[4] not in CONTINUATION_KINDS:
        raise StimulusError(
            f"stimulus id {record['id']!r} is not '<n>_<noun>_<first>_<second>_<sref|pref|nonref>' "
            f"with clause words from {sorted(CLAUSE_TYPES)}"
        )
    item, noun, first, second, continuation_kind = parts
    family = FAMILY_OF.get(first if first != "two" else second)
    if family is None:
        raise StimulusError(f"stimulus id {record['id']!r}: at most one of its two clause words may be 'two' (the "
                            "other names the clause family)")
    context, continuation = split_sentence(record["sent"])
    return {
        "id": record["id"],
        "group": f"{item}_{noun}_{family}",
        "item": int(item),
        "noun": noun,
        "family": family,
        "context_type": f"{CLAUSE_TYPES[first]}_{CLAUSE_TYPES[second]}",
        "kind": CONTINUATION_KINDS[continuation_kind],
        "context": context,
        "continuation": continuation,
        "expected": int(record["expected"]),
    }


def read_groups(path: str | Path) -> list[dict]:
    """Read a stimuli JSONL file into documents (one per noun x family), in file order."""
    groups: dict[str, dict] = {}
    with open(path, encoding="utf-8") as handle:
        for line_no, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                row = parse_row(json.loads(line))
            except (json.JSONDecodeError, KeyError, StimulusError) as err:
                raise StimulusError(f"{path}, line {line_no}: {err}") from None
            doc = groups.setdefault(
                row["group"],
                {"group": row["group"], "item": row["item"], "noun": row["noun"], "family": row["family"], "rows": []},
            )
            doc["rows"].append({k: row[k] for k in ("id", "context_type", "kind", "context", "continuation", "expected")})
    return list(groups.values())
