"""The judge probe (lm_eval_ext/judge/probe.py) in stub servers' replies and in counts of judge calls.

A judged task probes its judge once before anything is generated: one request grading
``PROBE_ITEM``. A stub that plays the judge answers it with :func:`answering_the_probe`; a test that
counts judge calls leaves it out with :func:`judge_calls`.
"""
from __future__ import annotations

from lm_eval_ext.judge.probe import PROBE_ITEM

_MARK = f"### Response to evaluate:\n{PROBE_ITEM.response}\n"


def is_probe(body) -> bool:
    """True for the body of a probe request."""
    return isinstance(body, dict) and any(_MARK in str(m.get("content", "")) for m in body.get("messages", []))


def answering_the_probe(responder, reply: str = "The answer is right.\n\\boxed{10}"):
    """``responder``, except that the probe gets ``reply`` (a score the rubric parser reads)."""
    return lambda request: reply if is_probe(request) else responder(request)


def judge_calls(srv) -> list[dict]:
    """The bodies of the judge requests ``srv`` received, probes left out."""
    return [r["body"] for r in srv.requests if r["method"] == "POST" and not is_probe(r["body"])]
