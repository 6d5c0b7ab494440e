"""The published judges: template per language, score parser, raw score range, scale, system message, model.

Kept apart from the configuration (config.py checks judge names against it) and from the
templates (templates.py resolves a configuration with it), so neither imports the other.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class JudgeDefinition:
    """A published judge: its template per language, parser, raw score range per language, scale."""

    name: str
    templates: dict[str, str]
    parser: str
    ranges: dict[str, tuple[int, int]]
    scale: int
    system_message: str | None
    default_model: str


JUDGES: dict[str, JudgeDefinition] = {
    # The paper's GPT-4 judge (eval/eval_gpt.py): FastChat's "chatgpt" conversation, i.e. this
    # system message, then the filled template as the user message.
    "rubric10": JudgeDefinition(
        name="rubric10",
        templates={"en": "judge_gpt4_rubric_en.txt", "cs": "judge_gpt4_rubric_cs.txt"},
        parser="boxed",
        ranges={"en": (1, 10), "cs": (0, 10)},
        scale=1,
        system_message="You are a helpful assistant.",
        default_model="gpt-4-0613",
    ),
    # The paper's Prometheus judge (eval/eval_prometheus.py): FastChat's "llama-2" conversation
    # with no system message; the 1-5 score is doubled to sit on the 10-point scale.
    "prometheus5": JudgeDefinition(
        name="prometheus5",
        templates={"en": "judge_prometheus_en.txt", "cs": "judge_prometheus_cs.txt"},
        parser="result",
        ranges={"en": (1, 5), "cs": (0, 5)},
        scale=2,
        system_message=None,
        default_model="prometheus-eval/prometheus-13b-v1.0",
    ),
}
