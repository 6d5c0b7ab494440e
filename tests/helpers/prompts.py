"""The authors' example prompts (tests/fixtures/*_prompts.jsonl) and comparing a prompt with one of them."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def read_fixture_jsonl(name: str) -> list[dict]:
    """The records of ``tests/fixtures/<name>`` (JSON lines)."""
    text = (FIXTURES / name).read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def sha256_text(text: str) -> str:
    """Hex sha256 of a text's UTF-8 bytes."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def prompt_mismatch(actual: str, record: dict) -> str | None:
    """None when ``actual`` is the record's prompt, else where they differ.

    A record holds the whole ``prompt``, or (long prompts) its ``prompt_sha256``,
    ``prompt_chars`` and last characters ``prompt_end`` (tests/fixtures/README.md).
    """
    if "prompt" in record:
        expected = record["prompt"]
        if actual == expected:
            return None
        at = next((i for i, (a, b) in enumerate(zip(actual, expected)) if a != b), min(len(actual), len(expected)))
        return f"first difference at {at}: {actual[max(at - 20, 0):at + 20]!r} vs {expected[max(at - 20, 0):at + 20]!r}"
    if sha256_text(actual) == record["prompt_sha256"]:
        return None
    ending = "same" if actual.endswith(record["prompt_end"]) else f"{actual[-60:]!r} vs {record['prompt_end'][-60:]!r}"
    return f"sha256 differs ({len(actual)} vs {record['prompt_chars']} characters; ending: {ending})"
