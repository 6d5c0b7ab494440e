"""The harness task for Lost in the Middle: one generation request per (example, gold position).

Used from the task YAMLs as ``class: !function lm_eval_ext.litm.task.LitmTask``; the YAML's
``dataset_kwargs`` and the run's ``--metadata`` give the settings (options.py).

Position coverage (a sweep): after the harness has built the requests, the documents the run takes at
each gold position are counted and recorded in the task's results metadata (``documents_by_position``,
1-based positions); when ``--limit`` or ``--samples`` leaves them uneven, a warning says so
(lm_eval_ext/sweeps.py).

Over-long prompts (lm_eval_ext/prompt_length.py): after the harness has built every request
(chat template and ``--gen_kwargs`` applied), each prompt is measured. Under
``litm_too_long=skip`` (the default) a prompt that does not fit is withheld: it is never sent to
the model, and its document is scored with ``prompts_skipped`` = 1 and no accuracy (and logged
with its prompt). Under ``truncate`` it is sent and the model adapter cuts it; the document is
scored and counted in ``prompts_truncated``.
"""
from __future__ import annotations

import logging
from collections import Counter

import datasets
from lm_eval.api.metrics import mean

from .. import sweeps
from ..errors import metadata_arg
from ..prompt_length import LengthBudget, Verdict, nothing_fits, require_prompts_left, resolve_budget
from ..task_base import ExtTask
from .contexts import kv_context, qa_context
from .docs import LitmData, load
from .options import METADATA_KEYS, MIN_KV_PAIRS, LitmSetup, setup_from
from .prompts import closedbook_prompt, kv_prompt_pieces, qa_prompt_pieces
from .scoring import best_subspan_em, first_line, kv_correct

log = logging.getLogger(__name__)

LENGTH_METRICS = ("prompts_skipped", "prompts_truncated")
EARLY_BATCH = 64  # prompts measured at a time before the model loads: where some fit, the first batch tells
QA_DOCS, KV_PAIRS = (10, 20, 30), (75, 140, 300)  # the published tasks' sizes (litm_qa_<n>docs, litm_kv_<n>keys)
SWEEP_METRICS = ("acc_gap", "acc_middle_drop")


def shorter_tasks(setup: LitmSetup) -> str:
    """The tasks of ``setup``'s kind with shorter prompts, as a phrase ("" for the oracle and closed-book tasks,
    whose prompts are the shortest, and for the fewest pairs there are): the published tasks with fewer documents
    (and the oracle) or fewer pairs, the query-aware ones for a query-aware task, and the generated key-value task
    with half the pairs."""
    qac = "_qac" if setup.query_aware else ""
    if setup.setting == "qa":
        names = [f"litm_qa_{n}docs{qac}" for n in reversed(QA_DOCS) if n < setup.k] + ["litm_qa_oracle"]
        return f"fewer documents: {', '.join(names)}"
    if setup.setting == "kv":
        names = [f"litm_kv_{n}keys{qac}" for n in reversed(KV_PAIRS) if n < setup.k]
        if setup.k // 2 >= MIN_KV_PAIRS:
            names.append(f"litm_kv_generated{qac} with {metadata_arg(litm_kv_pairs=setup.k // 2)}")
        return f"fewer key-value pairs: {', '.join(names)}" if names else ""
    return ""


def remedies(setup: LitmSetup) -> str:
    """What helps when none of a task's prompts fits the model's window (:func:`require_prompts_left`)."""
    shorter = shorter_tasks(setup)
    return ("What would help: a model with a longer context (and max_length=N in --model_args, up to what the model "
            f"supports), {f'a task with shorter prompts ({shorter}), ' if shorter else ''}"
            f"or {metadata_arg(litm_too_long='truncate')} to send them anyway, cut at the start by the model adapter "
            "(scored and counted in prompts_truncated: not the published prompts).")


class LitmTask(ExtTask):
    """Lost in the Middle multi-document QA, oracle, closed-book and key-value retrieval (Liu et al., TACL 2024)."""

    BENCHMARK, OPTIONS, PREFIX = "Lost in the Middle", METADATA_KEYS, "litm_"

    def __init__(self, config: dict | None = None, **kwargs) -> None:
        self._verdicts: dict[str, Verdict] = {}
        super().__init__(config=config, **kwargs)
        self.budget: LengthBudget | None = resolve_budget(self.config.metadata or {})
        positions = self.setup.positions
        # a sweep narrowed by --metadata litm_positions reports no gap (< 2 positions) or middle drop (< 3)
        reported = set(sweeps.metric_names(positions)) if self.setup.swept else {"acc"}
        self.set_config(key="metric_list", value=[m for m in self.config.metric_list or []
                                                  if m["metric"] not in SWEEP_METRICS or m["metric"] in reported])

    def download(self, dataset_kwargs: dict | None = None, **kwargs) -> None:
        """Read the data through the data layer and build the documents (docs.py)."""
        self.setup: LitmSetup = setup_from(self.config.task, self.config.dataset_kwargs or {}, self.config.metadata or {})
        self.data: LitmData = load(self.setup)
        self.dataset = {"test": datasets.Dataset.from_list(self.data.docs)}

    def subset_metrics(self) -> dict:
        """Accuracy and the length counts at each gold position (that position's documents only)."""
        if not self.setup.swept:
            return {}
        metrics = {f"acc_{sweeps.position_name(p)}": (mean, True) for p in self.setup.positions}
        for name in LENGTH_METRICS:
            metrics |= {f"{name}_{sweeps.position_name(p)}": (sum, False) for p in self.setup.positions}
        return metrics

    # -- prompts ------------------------------------------------------------------------------

    def prompt_pieces(self, doc: dict) -> list[str]:
        """The document's prompt as the pieces it is made of (joined: :meth:`doc_to_text`)."""
        setup = self.setup
        if setup.setting == "closedbook":
            return [closedbook_prompt(doc["question"])]
        example = self.data.examples[doc["example"]]
        if setup.setting == "oracle":
            return qa_prompt_pieces(example.question, [example.gold])
        if setup.setting == "qa":
            order = self.data.orders[doc["example"]] if setup.random_order else None
            variant = "random_order" if setup.random_order else "query_aware" if setup.query_aware else "plain"
            return qa_prompt_pieces(example.question, qa_context(example, setup.k, doc["gold_index"], order), variant)
        return kv_prompt_pieces(kv_context(example, doc["gold_index"]), example.key, setup.query_aware)

    def doc_to_text(self, doc: dict, doc_to_text=None) -> str:
        """The document's prompt, built from its example at its gold position."""
        return "".join(self.prompt_pieces(doc))

    def doc_to_target(self, doc: dict, doc_to_target=None):
        """The accepted answers (QA) or the value (KV)."""
        return doc["value"] if self.setup.setting == "kv" else doc["answers"]

    def length_problem(self, docs: list[dict], gen_kwargs: dict) -> str | None:
        """Under ``skip``: the paragraph of :func:`require_prompts_left` when no prompt of ``docs`` fits (measured a
        batch at a time, up to the first that holds one that does)."""
        if self.budget is None or self.setup.too_long != "skip" or not docs:
            return None
        for start in range(0, len(docs), EARLY_BATCH):
            pieces = [self.prompt_pieces(doc) for doc in docs[start:start + EARLY_BATCH]]
            if any(v.fits for v in self.budget.verdicts([("".join(p), gen_kwargs) for p in pieces], pieces=pieces)):
                return None
        return nothing_fits(self.setup.task, len(docs), self.budget, remedies(self.setup))

    def review_requests(self, instances, chat_template=None, system_instruction=None) -> None:
        """Count the documents at each gold position (a sweep); measure every prompt; withhold the over-long ones
        under the ``skip`` policy (module docstring)."""
        if self.setup.swept:
            self._record_coverage(instances)
        self._verdicts = {}
        if self.budget is None:
            reason = self.record_lengths_unchecked()
            log.warning("%s: prompt lengths are NOT checked (%s); if the model's window is smaller than a prompt, "
                        "its adapter may cut the prompt's start. Give max_length=N (and tokenizer=NAME if the model "
                        "arguments name none) to check them.", self.setup.task, reason)
            return
        verdicts = self.budget.verdicts([(i.args[0], i.args[1]) for i in instances],
                                        pieces=[self.prompt_pieces(i.doc) for i in instances])
        for instance, verdict in zip(instances, verdicts, strict=True):
            self._verdicts[instance.doc["doc_key"]] = verdict
            if not verdict.fits and self.setup.too_long == "skip":
                self.withhold(instance)
        self.record_run_info(prompt_length=f"{self.budget.describe()}; too long: {self.setup.too_long}")
        too_long = [i.doc for i, v in zip(instances, verdicts) if not v.fits]
        log.info("%s: %d of %d prompts fit the %s", self.setup.task, len(instances) - len(too_long), len(instances),
                 self.budget.describe())
        if self.setup.too_long == "skip":
            require_prompts_left(self.setup.task, len(too_long), len(instances), self.budget, remedies(self.setup))
        if too_long:
            by_position = Counter(doc.get("gold_position") for doc in too_long)
            where = ", ".join(f"position {p}: {n}" for p, n in sorted(by_position.items()) if p is not None)
            action = ("skipped (prompts_skipped)" if self.setup.too_long == "skip"
                      else "left to the model adapter to cut (prompts_truncated)")
            log.warning("%s: %d of %d prompts do not fit the %s; they are %s%s", self.setup.task, len(too_long),
                        len(instances), self.budget.describe(), action, f" [{where}]" if where else "")

    def _record_coverage(self, instances) -> None:
        """Record how many documents the run takes at each gold position, and say so when they differ."""
        mine = {instance.doc_id: instance.doc["gold_index"] for instance in instances}
        coverage = sweeps.coverage_of(self.of_every_process(list(mine.values())), self.setup.positions)
        self.record_run_info(documents_by_position=coverage)
        if sweeps.uneven(coverage):
            log.warning("%s: the gold positions are covered unevenly: %s. Documents go example by example and "
                        "--limit N takes the first N (--samples the ones it names), so the positions' accuracies are "
                        "over different questions; a --limit that is a multiple of %d (the number of positions) "
                        "takes whole examples. Recorded as documents_by_position in the task's results metadata.",
                        self.setup.task, sweeps.coverage_text(coverage), len(self.setup.positions))

    # -- scoring ------------------------------------------------------------------------------

    def document_metrics(self, doc: dict, results: list) -> dict:
        """Accuracy (overall and at the document's position) and the length counts, per document."""
        position = doc.get("gold_index")
        verdict = self._verdicts.get(doc["doc_key"])
        over = int(verdict is not None and not verdict.fits)
        skipped = over if self.setup.too_long == "skip" else 0
        values = {"prompts_skipped": skipped, "prompts_truncated": over - skipped}
        if position is not None:
            suffix = sweeps.position_name(position)
            values |= {f"{name}_{suffix}": values[name] for name in LENGTH_METRICS}
        if skipped:
            return values
        (response,) = results
        if self.setup.setting == "kv":
            correct = kv_correct(response, doc["value"])
        else:
            correct = best_subspan_em(first_line(response), doc["answers"])
        if self.setup.swept:
            return values | sweeps.sweep_metrics(position, correct, self.setup.positions)
        return values | {"acc": correct}
