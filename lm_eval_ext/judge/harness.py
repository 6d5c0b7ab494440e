"""The judge inside lm-evaluation-harness: a filter that judges all responses of a task at once.

A task YAML uses it like this (docs/judge.md has the full example)::

    class: !function lm_eval_ext.judge.harness.JudgedTask   # --metadata judge_* options, run seed, record
    filter_list:
      - name: judge
        filter:
          - function: take_first
          - function: !function lm_eval_ext.judge.harness.JudgeFilter
            question_field: question
            reference_field: answer
    metric_list:
      - {metric: score, aggregation: mean, higher_is_better: true}
      - {metric: judge_failures, aggregation: !function lm_eval_ext.metrics.aggregations.count, higher_is_better: false}

The harness calls ``Filter.apply(resps, docs)`` once per task with every response, so the
judge runs as its own stage after generation, concurrently and cached, not one call per
document inside ``process_results``. Each response becomes the JSON text of its judge result
(:meth:`JudgeResult.to_dict`): what ``--log_samples`` shows as ``filtered_resps`` (the harness writes
filtered responses as text) and what the W&B logger puts in its table.

The filter needs the run's options (``--metadata judge_*``, the seed), which the harness gives
to tasks, not filters: a :class:`JudgedTask` (or any ``ExtTask``) hands them over; used in
another task the filter stops with an error that says so. A judge that failed on an answer
gives it a NaN score (judging is incomplete: the task's mean is NaN until the failures are
judged again) and ``judge_failures`` 1.
"""
from __future__ import annotations

import dataclasses
import json
import logging
import math
from collections import Counter
from collections.abc import Callable
from typing import Any

from ..boundary import filter_step_options
from ..interrupts import during_scoring
from ..task_base import ExtTask, RunAwareFilter
from .config import JudgeConfig, how_to_set, resolve_config
from .errors import JudgeConfigError, JudgeError
from .records import FAILED, SCORED, JudgeItem, JudgeResult
from .templates import config_record, judge_setup

log = logging.getLogger(__name__)

FieldRef = str | Callable[[dict], str]
GENERATION_KEY = "generation"  # where a judge result keeps the generation record's other fields
_CHECKED: set[JudgeConfig] = set()  # judges probed in this process


class JudgingStopped(JudgeError):
    """Judging stopped after the answers were generated and saved."""


def _outputs(filtered) -> list:
    return [] if filtered is None else [filtered] if isinstance(filtered, str) else list(filtered)


def _field(doc: dict, ref: FieldRef, what: str) -> str:
    if callable(ref):
        return str(ref(doc))
    if ref not in doc:
        raise JudgeConfigError(f"The judge filter's {what} field {ref!r} is not a field of the task's documents "
                               f"(fields: {', '.join(map(str, doc))}); set {what}_field in the task YAML.")
    return str(doc[ref])


def _text_and_info(response, conversation: bool) -> tuple[str, dict]:
    """The text to judge, and what else a conversation record says (the answer's turn, truncation)."""
    if conversation:
        from ..conversation import result_record

        record = result_record(response)
        return str(record["text"]), {k: v for k, v in record.items() if k not in ("text", "messages")}
    return str(response), {}


def judge_config(run, judge_options: dict) -> JudgeConfig:
    """The effective judge configuration of a task: its YAML defaults, then env, then ``--metadata``."""
    return resolve_config(metadata=run.metadata, task_defaults=judge_options, run_seed=run.seed)


class JudgeFilter(RunAwareFilter):
    """Replaces each response (a string, or a list of them) with its judge result(s) as JSON text.

    In a task of conversation turns, a response is the turn's record and its ``text`` is judged;
    the result keeps the record's ``turn`` and ``truncated_lines`` under ``generation``.

    Args (the filter's YAML keys):
        question_field / reference_field: the document field (or a ``!function`` of the
            document) holding the question and the reference answer.
        any judge option (``judge``, ``language``, ``model``, ...): the task's defaults for
            it; the user's ``--metadata judge_*`` and ``LM_EVAL_EXT_JUDGE_*`` settings win.
    """

    def __init__(self, question_field: FieldRef = "question", reference_field: FieldRef = "reference",
                 run=None, **judge_options: Any) -> None:
        super().__init__(run=run)
        self.question_field = question_field
        self.reference_field = reference_field
        self.judge_options = judge_options

    def apply(self, resps, docs):
        """Judge every response of the task in one concurrent batch."""
        from .runner import Judge  # the runner imports openai: only when a task is judged

        resps, docs = list(resps), list(docs)
        items, infos, shapes = [], [], []
        for resp, doc in zip(resps, docs, strict=True):
            question = _field(doc, self.question_field, "question")
            reference = _field(doc, self.reference_field, "reference")
            single = isinstance(resp, str)
            shapes.append(single)
            for response in [resp] if single else list(resp):
                text, info = _text_and_info(response, self.run.conversation)
                items.append(JudgeItem(question, text, reference))
                infos.append(info)
        from .. import answers

        # batches are saved with the run's answers; a resumed run finds them in the answers folder it resumes
        root = answers.answers_root(self.run.metadata)
        judge = Judge(judge_config(self.run, self.judge_options), batch_dir=answers.run_dir(self.run.metadata),
                      batch_lookup=sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else [])
        try:
            results = list(judge.run(items, label=self.run.task))
            log.info("%s: judge %s", self.run.task, judge.stats.to_dict())
        finally:
            judge.close()
        out, position = [], 0
        for resp, single in zip(resps, shapes):
            n = 1 if single else len(resp)
            judged = [json.dumps({**result.to_dict(), **({GENERATION_KEY: info} if info else {})}, ensure_ascii=False)
                      for result, info in zip(results[position:position + n], infos[position:position + n])]
            position += n
            out.append(judged[0] if single else judged)
        return out


class JudgedTask(ExtTask):
    """An ``ExtTask`` whose judge filters get ``--metadata judge_*`` options and the run's seed.

    It records the judge's configuration (model, endpoint host, template name and hash, sampling
    parameters, seed), how its answers were judged (``run``) and what that cost (``usage``: tokens,
    dollars with prices) under ``metadata.judge`` of the task's config, which the harness writes into
    the results file (``configs.<task>.metadata.judge``). Benchmark task classes can subclass it.
    A task with a single judged response per document needs no subclass: its scores are
    :func:`judge_metrics`.
    """

    def _judge_step(self) -> tuple[str | None, dict]:
        """The name of the filter_list entry holding the JudgeFilter, and the judge options the YAML gives it."""
        for entry in self.config.filter_list or []:
            for step in entry["filter"]:
                if step.get("function") is JudgeFilter:
                    skip = ("question_field", "reference_field")
                    return entry["name"], {k: v for k, v in filter_step_options(step).items() if k not in skip}
        return None, {}

    def judge_options(self) -> dict:
        """The judge options the task YAML gives its JudgeFilter (empty when it has none)."""
        return self._judge_step()[1]

    def judge_config(self) -> JudgeConfig:
        """This task's judge configuration for this run."""
        return judge_config(self.run_context(), self.judge_options())

    def judge_requests_estimate(self, limit: float | None = None) -> list[dict]:
        """The judge requests this task's run would send, as far as they can be built before generation: one
        per document (``limit`` as the harness reads it), the answer, not known yet, as long as the reference."""
        config = self.judge_config()
        fields = next(filter_step_options(step) for entry in self.config.filter_list for step in entry["filter"]
                      if step.get("function") is JudgeFilter)
        from .runner import Judge

        judge = Judge(dataclasses.replace(config, cache=None), progress=False)
        docs = list(self.eval_docs)
        if limit is not None:
            docs = docs[:int(math.ceil(len(docs) * limit)) if limit < 1 else int(limit)]
        requests = []
        for doc in docs:
            question = _field(doc, fields.get("question_field", "question"), "question")
            reference = _field(doc, fields.get("reference_field", "reference"), "reference")
            requests.append(judge.request(judge.messages(JudgeItem(question, reference, reference)), 0))
        return requests

    def check_judge(self) -> None:
        """Probe the judge (lm_eval_ext.judge.probe) unless ``--predict_only``, a dry run or ``judge_check=false``.

        Each judge configuration is probed once per process.
        """
        config = self.judge_config()
        key = dataclasses.replace(config, seed=0)  # the seed changes the probe's request, not the judge
        if self.predict_only or config.dry_run or not config.check or key in _CHECKED:
            return
        from .probe import probe

        probe(config)
        _CHECKED.add(key)

    def build_all_requests(self, **kwargs) -> None:
        """Check the judge before anything is generated, then build the requests."""
        self.check_judge()
        super().build_all_requests(**kwargs)

    def apply_filters(self):
        """Save the answers and judge them (unless --predict_only), then record the judge's configuration.

        If judging stops, the error names the saved answers and the command that finishes the judging.
        """
        if self.predict_only:
            return super().apply_filters()
        config = self.judge_config()
        resume = f"lm-eval-ext resume {self.answers_dir()}"
        log.warning("%s: the answers are saved in %s before judging; if judging fails or is interrupted, finish "
                    "it with `%s` (verdicts already given come from the judge's cache)", self.config.task,
                    self.answers_dir(), resume)
        try:
            with during_scoring():  # Ctrl-C and SIGTERM while judging: one paragraph naming the saved answers
                instances = super().apply_filters()
        except JudgeError as err:
            raise JudgingStopped(f"{err} The answers were saved before judging: once the judge works, `{resume}` "
                                 "finishes the judging (verdicts already given come from the judge's cache) and "
                                 "writes the run's results.") from None
        name = self._judge_step()[0]
        results = [json.loads(output) for i in instances for output in _outputs(i.filtered_resps.get(name))]
        failures = Counter(result["failure"] for result in results if result.get("status") == FAILED)
        if failures:
            # an unreadable reply is cached like any other: asking again needs more re-asks
            again = (f"`{resume}` judges them again and reuses every verdict already given" if "unparseable" not in
                     failures else f"`{resume} {how_to_set('reasks', 'N')}` asks again (N above {config.reasks}) and "
                     "reuses every verdict already given")
            log.warning("%s: the judge could not score %d of %d answers (%s); the task's score is undefined (NaN) "
                        "until they are judged: %s", self.config.task, sum(failures.values()), len(instances),
                        ", ".join(f"{n} {kind}" for kind, n in failures.items()), again)
        # after judging: `judge` in the metadata is also the judge option's name
        everyone = self.of_every_process(results)  # the counts and costs of the whole run, not one process's share
        self.record_run_info(judge={**config_record(config, judge_setup(config)).to_dict(),
                                    "run": judged_counts(everyone), "usage": judged_usage(everyone, config)})
        return instances

    def document_metrics(self, doc: dict, results: list) -> dict:
        """``score`` and ``judge_failures`` of the document's one judged response."""
        (result,) = results
        return judge_metrics(result)


def judged_counts(results: list[dict]) -> dict[str, int]:
    """How a task's answers were judged (recorded as ``metadata.judge.run``): ``answers``, ``scored``,
    ``from_cache``, the answers judged with no call of their own (the judge's cache answered, e.g. a resumed
    run's verdicts given before it stopped, or the prompt repeats another answer's), and ``calls``, the asks
    sent to the judge for them (the sum of their JudgeResult.calls: re-asks included, transport retries not)."""
    return {"answers": len(results), "scored": sum(r.get("status") == SCORED for r in results),
            "from_cache": sum(r.get("status") in (SCORED, FAILED) and not r.get("calls") for r in results),
            "calls": sum(r.get("calls", 0) for r in results)}


def judged_usage(results: list[dict], config: JudgeConfig) -> dict:
    """What judging a task's answers cost (recorded as ``metadata.judge.usage``): the sum of the results'
    ``usage`` (lm_eval_ext.judge.usage.summarize), answers judged from the cache counted at nothing."""
    from .usage import priced, summarize

    cached = sum(r.get("status") in (SCORED, FAILED) and not r.get("calls") for r in results)
    return summarize([r.get("usage") for r in results], cached, priced(config))


def judge_output(filtered: str) -> dict:
    """A judge filter's output (JSON text) as a dict: the judge result, and ``generation`` when it has one."""
    return json.loads(filtered)


def judge_result(filtered: str | JudgeResult) -> JudgeResult:
    """The :class:`JudgeResult` in a judge filter's output (without the generation record's fields)."""
    if isinstance(filtered, JudgeResult):
        return filtered
    return JudgeResult.from_dict({k: v for k, v in judge_output(filtered).items() if k != GENERATION_KEY})


def judge_metrics(result: str | JudgeResult, name: str = "score") -> dict[str, float]:
    """Per-document metrics of one judge result: ``{name: score, "judge_failures": 0}`` when scored,
    ``{name: NaN, "judge_failures": 1}`` when the judge failed (the task's mean is NaN until the
    failure is judged again), and ``{name: NaN, "judge_failures": 0}`` for a dry run (nothing judged)."""
    result = judge_result(result)
    if result.status == SCORED:
        return {name: result.score, "judge_failures": 0}
    return {name: math.nan, "judge_failures": int(result.status == FAILED)}
