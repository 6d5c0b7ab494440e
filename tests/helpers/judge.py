"""The judge probe (lm_eval_ext/judge/probe.py) in stub servers' replies and in counts of judge calls; a judge
configuration, items and a scripted judge for the judge's own tests.

A judged task probes its judge once before anything is generated: one request grading
``PROBE_ITEM``. A stub that plays the judge answers it with :func:`answering_the_probe`; a test that
counts judge calls leaves it out with :func:`judge_calls`.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

from lm_eval_ext.judge import JudgeItem, resolve_config
from lm_eval_ext.judge.probe import PROBE_ITEM

# the judge's API key in the judge's own tests: a variable and a value that must never be written anywhere
KEY_ENV = "LMX_TEST_JUDGE_KEY"
FAKE_KEY = "sk-lmx-FAKE-7c1e9a55d2b84f0e-DO-NOT-LEAK"

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


def config(srv_or_url, tmp_path: Path, **options):
    """A judge configuration for the stub ``srv_or_url`` (or a URL), with a cache in ``tmp_path``."""
    base_url = srv_or_url if isinstance(srv_or_url, str) else srv_or_url.base_url
    explicit = {"base_url": base_url, "api_key_env": KEY_ENV, "model": "stub-judge",
                "cache": str(tmp_path / "judge_cache.sqlite"), **options}
    return resolve_config(explicit=explicit, environ={})


def items(n: int, prefix: str = "r") -> list[JudgeItem]:
    """``n`` judge items whose responses are ``<prefix><i>``."""
    return [JudgeItem(f"question {i}?", f"{prefix}{i}", f"reference {i}") for i in range(n)]


def response_of(request: dict) -> str:
    """The response under evaluation in a judge request."""
    prompt = request["messages"][-1]["content"]
    return re.search(r"### Response to evaluate:\n(.*?)\n\n### Reference", prompt, re.S).group(1)


def score_by_index(request: dict) -> str:
    """r<i> gets \\boxed{i % 10 + 1}; bad<i> gets a reply without a score."""
    response = response_of(request)
    if response.startswith("bad"):
        return "I cannot grade this."
    return f"Feedback: fine. \\boxed{{{int(response[1:]) % 10 + 1}}}"


def scoring_the_answer(request: dict, feedback: str = "Fine. ") -> str:
    """A judge's reply that scores an answer "A<n>" with n (any other answer, e.g. the probe's, with 10)."""
    answer = response_of(request)
    return f"{feedback}\\boxed{{{answer[1:] if answer.startswith('A') else 10}}}"


def write_elitr_answers(path: Path, n: int) -> Path:
    """Rules for the scripted model (``ext-canned-gen``): question k (0-based) of ELITR-Bench's QA dev set, of the
    first ``n``, is answered "A<k+3>" (the judge of :func:`scoring_the_answer` scores it k + 3)."""
    from lm_eval_ext.elitr.data import build_documents

    docs, _ = build_documents("qa", "dev", "en")
    rules = [{"contains": doc["question"].strip(), "response": f"A{k + 3}"} for k, doc in enumerate(docs[:n])]
    path.write_text(json.dumps({"rules": rules, "default": None}))
    return path
