"""A toy judged task (three capital-city questions) for tests of the judge inside harness runs.

``write_task_dir`` writes the task YAMLs; the stub server answers with :func:`judge_or_answer` (the judge and, for
plain ``lm_eval``, the answering model) or :func:`judge_scoring_all`.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

from .judge import is_probe

DOCS = [
    {"question": "Capital of France?", "answer": "Paris"},
    {"question": "Capital of Italy?", "answer": "Rome"},
    {"question": "Capital of Spain?", "answer": "Madrid"},
]
ANSWERS = {"France": "Paris", "Italy": "Milan", "Spain": "no idea"}
VERDICTS = {"Paris": "Right city. \\boxed{9}", "Milan": "Wrong city. \\boxed{2}", "no idea": "I cannot tell."}

TASK_YAML = """\
task: {name}
{class_line}
dataset_path: json
dataset_kwargs:
  data_files: {{test: {data}}}
test_split: test
output_type: generate_until
doc_to_text: "Q: {{{{question}}}}\\nA:"
doc_to_target: "{{{{answer}}}}"
generation_kwargs: {{until: ["\\n"], max_gen_toks: 16}}
filter_list:
  - name: judge
    filter:
      - function: take_first
      - function: !function lm_eval_ext.judge.harness.JudgeFilter
        question_field: question
        reference_field: answer
        model: yaml-judge-model
metric_list:
  - {{metric: score, aggregation: mean, higher_is_better: true}}
  - {{metric: judge_failures, aggregation: !function lm_eval_ext.metrics.aggregations.count, higher_is_better: false}}
metadata:
  version: 1.0
"""


def judge_or_answer(request: dict, verdicts: dict = VERDICTS) -> str:
    """The stub plays both roles: the judge (rubric prompt) and, for plain lm_eval, the answering model."""
    if is_probe(request):  # the judge check before generation (lm_eval_ext/judge/probe.py)
        return "Right. \\boxed{10}"
    prompt = request["messages"][-1]["content"]
    if prompt.startswith("### Task description:"):
        response = re.search(r"### Response to evaluate:\n(.*?)\n\n###", prompt, re.S).group(1)
        return verdicts[response]
    return next(answer for country, answer in ANSWERS.items() if country in prompt)


def judge_scoring_all(request: dict) -> str:
    """A judge that scores every answer ("no idea" gets 1)."""
    return judge_or_answer(request, {**VERDICTS, "no idea": "Not an answer. \\boxed{1}"})


def write_task_dir(tmp_path: Path) -> Path:
    """The toy tasks `judged_toy` (judged) and `judged_toy_plain` in ``tmp_path/tasks``, their documents, and the
    scripted model's answers (``tmp_path/responses.json``); returns the tasks folder."""
    folder = tmp_path / "tasks"
    folder.mkdir()
    data = tmp_path / "docs.jsonl"
    data.write_text("".join(json.dumps(d) + "\n" for d in DOCS), encoding="utf-8")
    judged = "class: !function lm_eval_ext.judge.harness.JudgedTask"
    (folder / "judged_toy.yaml").write_text(TASK_YAML.format(name="judged_toy", class_line=judged, data=data))
    (folder / "judged_toy_plain.yaml").write_text(TASK_YAML.format(name="judged_toy_plain", class_line="", data=data))
    rules = {"rules": [{"contains": c, "response": a} for c, a in ANSWERS.items()], "default": None}
    (tmp_path / "responses.json").write_text(json.dumps(rules), encoding="utf-8")
    return folder


def results_and_samples(out: Path, task: str) -> tuple[dict, list[dict]]:
    """The one results file under ``out`` and the samples of ``task``."""
    (results_file,) = out.rglob("results_*.json")
    (samples_file,) = out.rglob(f"samples_{task}_*.jsonl")
    return json.loads(results_file.read_text()), [json.loads(line) for line in samples_file.read_text().splitlines()]
