"""The LLM judge: grade responses against reference answers with a rubric, via any OpenAI-compatible endpoint.

Python API (docs/judge.md has the harness integration and every option)::

    from lm_eval_ext.judge import JudgeItem, judge_many, resolve_config

    config = resolve_config(explicit={"judge": "rubric10", "model": "gpt-4-0613"})
    results = judge_many([JudgeItem(question, response, reference)], config)
    results[0].score        # 1..10, or None with results[0].failure set

Modules, one job each: ``config`` (options and their sources), ``templates`` (the judges' definitions and
prompt filling), ``parser`` (scores from replies), ``client`` (one request on the ``openai`` client, bounded in
time and size), ``cache`` (replies on disk), ``runner`` (the ask loop of every prompt, concurrently),
``usage`` (tokens, prices, the cost limit), ``batch`` (the OpenAI Batch API), ``probe`` (the check before a
run), ``harness`` (the filter, task class and metric helpers for task YAMLs), ``validation_data``, ``validate``
and ``plot``; the command (``lm-eval-ext judge validate`` and ``collect``) is :mod:`lm_eval_ext.commands.judge`.
"""
from .config import JudgeConfig, resolve_config
from .records import JudgeItem, JudgeResult

__all__ = ["Judge", "JudgeConfig", "JudgeItem", "JudgeResult", "judge_many", "resolve_config"]


def __getattr__(name: str):
    # The runner imports openai; load it only when judging, so `lm-eval-ext --help` stays fast.
    if name in ("Judge", "judge_many"):
        from . import runner

        return getattr(runner, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
